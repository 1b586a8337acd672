"""HttpEmbedder against a real OpenAI-style /v1/embeddings server on 127.0.0.1, run in a thread."""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from local_api import Behaviour, Route, serving
from mnemo.embed.http import HttpEmbedder, embeddings_url
from mnemo.errors import EmbeddingError

DIMENSION = 8


def raw_vector(text: str, dimension: int = DIMENSION) -> list[float]:
    """Deterministic, not normalised, so the test sees that the client normalises."""
    digest = hashlib.sha256(text.encode()).digest()
    return [float(b) - 100.0 for b in digest[:dimension]]


def embeddings(behaviour: EmbeddingBehaviour) -> Route:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        rows = [
            {"object": "embedding", "index": i, "embedding": raw_vector(text, behaviour.dimension)}
            for i, text in enumerate(body["input"])
        ]
        rows.reverse()  # servers may answer out of order; the index says where each row goes
        return {"object": "list", "model": body["model"], "data": rows}

    return answer


@dataclass
class EmbeddingBehaviour(Behaviour):
    dimension: int = DIMENSION


@pytest.fixture
def behaviour() -> EmbeddingBehaviour:
    return EmbeddingBehaviour()


@pytest.fixture
def base_url(behaviour: EmbeddingBehaviour) -> Iterator[str]:
    with serving({"/v1/embeddings": embeddings(behaviour)}, behaviour) as url:
        yield url


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago: bound, then closed, so nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def expected(text: str) -> np.ndarray:
    vector = np.array(raw_vector(text), dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_vectors_come_back_in_input_order_and_unit_length(base_url: str) -> None:
    embedder = HttpEmbedder(base_url, "test-model", DIMENSION)
    texts = ["alpha", "beta", "gamma"]

    vectors = embedder.embed_documents(texts)

    assert vectors.shape == (3, DIMENSION)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    for row, text in zip(vectors, texts, strict=True):
        np.testing.assert_allclose(row, expected(text), rtol=1e-6)


def test_the_request_names_the_model_and_sends_the_api_key_as_a_bearer_token(
    base_url: str, behaviour: Behaviour
) -> None:
    embedder = HttpEmbedder(base_url, "nomic-embed-text", DIMENSION, api_key="sk-test")

    query = embedder.embed_query("what did emma say?")

    assert query.shape == (DIMENSION,)
    (request,) = behaviour.requests
    assert request["path"] == "/v1/embeddings"
    assert request["body"] == {"model": "nomic-embed-text", "input": ["what did emma say?"]}
    assert request["headers"]["Authorization"] == "Bearer sk-test"


def test_without_an_api_key_no_authorization_header_is_sent(base_url: str, behaviour: Behaviour) -> None:
    HttpEmbedder(base_url, "m", DIMENSION).embed_query("x")

    assert "Authorization" not in behaviour.requests[0]["headers"]


def test_many_texts_are_sent_in_batches_and_reassembled_in_order(base_url: str, behaviour: Behaviour) -> None:
    embedder = HttpEmbedder(base_url, "m", DIMENSION, batch_size=4)
    texts = [f"text number {i}" for i in range(10)]

    vectors = embedder.embed_documents(texts)

    assert [len(r["body"]["input"]) for r in behaviour.requests] == [4, 4, 2]
    np.testing.assert_allclose(vectors[7], expected("text number 7"), rtol=1e-6)


def test_no_texts_make_no_request(base_url: str, behaviour: Behaviour) -> None:
    vectors = HttpEmbedder(base_url, "m", DIMENSION).embed_documents([])

    assert vectors.shape == (0, DIMENSION)
    assert behaviour.requests == []


def test_a_server_error_is_an_embedding_error_that_quotes_the_status_and_body(
    base_url: str, behaviour: Behaviour
) -> None:
    behaviour.status = 500

    with pytest.raises(EmbeddingError) as raised:
        HttpEmbedder(base_url, "m", DIMENSION).embed_query("x")

    assert raised.value.details["status"] == 500
    assert "500" in raised.value.message
    assert "model overloaded" in raised.value.message


def test_vectors_of_the_wrong_dimension_are_an_embedding_error(base_url: str, behaviour: Behaviour) -> None:
    behaviour.dimension = DIMENSION + 1

    with pytest.raises(EmbeddingError, match="length 9"):
        HttpEmbedder(base_url, "m", DIMENSION).embed_documents(["a", "b"])


@pytest.mark.parametrize(
    "body",
    [b"<html>proxy error</html>", b'{"data": "nope"}', b'{"data": [{"index": 0}]}', b'{"data": []}'],
    ids=["not-json", "data-not-a-list", "row-without-embedding", "too-few-rows"],
)
def test_an_answer_of_the_wrong_shape_is_an_embedding_error(base_url: str, behaviour: Behaviour, body: bytes) -> None:
    behaviour.body = body

    with pytest.raises(EmbeddingError):
        HttpEmbedder(base_url, "m", DIMENSION).embed_query("x")


def test_a_server_slower_than_the_timeout_is_an_embedding_error(base_url: str, behaviour: Behaviour) -> None:
    behaviour.delay_s = 1.0

    started = time.perf_counter()
    with pytest.raises(EmbeddingError, match="could not be reached"):
        HttpEmbedder(base_url, "m", DIMENSION, timeout_s=0.2).embed_query("x")

    assert time.perf_counter() - started < 0.9


def test_an_unreachable_server_is_an_embedding_error() -> None:
    embedder = HttpEmbedder(f"http://127.0.0.1:{free_port()}", "m", DIMENSION, timeout_s=2)

    with pytest.raises(EmbeddingError, match="could not be reached"):
        embedder.embed_query("x")


def test_the_name_says_http_and_the_model() -> None:
    assert HttpEmbedder("http://localhost:11434", "nomic-embed-text", 768).name == "http/nomic-embed-text"


@pytest.mark.parametrize(
    "base",
    ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"],
)
def test_the_endpoint_is_v1_embeddings_whether_or_not_the_base_url_ends_in_v1(base: str) -> None:
    assert embeddings_url(base) == "http://h:1/v1/embeddings"


def test_settings_for_an_http_embedder_need_its_url_model_and_dimension(tmp_path: Path) -> None:
    from mnemo.app import make_embedder
    from mnemo.config import Settings
    from mnemo.embed.http import HttpEmbedder
    from mnemo.errors import InvalidInput

    base = {"home": tmp_path, "embedder": "http", "embedding_url": "http://127.0.0.1:9", "embedding_model": "m"}
    with pytest.raises(InvalidInput):
        make_embedder(Settings(**base))
    embedder = make_embedder(Settings(**base, embedding_dimension=8))
    assert isinstance(embedder, HttpEmbedder)
    assert embedder.dimension == 8
