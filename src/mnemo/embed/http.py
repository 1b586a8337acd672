"""An embedder that asks an OpenAI-compatible server: ``POST {base_url}/v1/embeddings``.

Works with OpenAI, Ollama, vLLM, LM Studio, llama.cpp's server and the like. The request is
``{"model": ..., "input": [texts]}`` with an optional bearer key; the answer's ``data[i].embedding``
rows are put back in ``index`` order and L2-normalised here, since not every server normalises.

It uses the standard library's ``urllib``: httpx is not installed with mnemo, and one JSON POST
does not justify a dependency. Every failure (unreachable, timeout, an HTTP error status, a body
that is not the expected shape, a vector of the wrong length) raises ``EmbeddingError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mnemo.embed import Vectors
from mnemo.embed.http_json import api_url, post_json
from mnemo.errors import EmbeddingError
from mnemo.lazy import numpy as np

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_BATCH_SIZE = 128  # texts per request; servers cap it (OpenAI at 2048, some far lower)


class HttpEmbedder:
    """Vectors from ``model`` at ``base_url``; ``dimension`` is what the model returns, checked on
    every answer, so that a changed model is noticed instead of mixed into the store."""

    def __init__(
        self,
        base_url: str,
        model: str,
        dimension: int,
        *,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if dimension < 1:
            raise ValueError("dimension must be positive")
        self._url = embeddings_url(base_url)
        self._model = model
        self._dimension = dimension
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._batch_size = batch_size

    @property
    def name(self) -> str:
        return f"http/{self._model}"

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def url(self) -> str:
        return self._url

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            chunk = list(texts[start : start + self._batch_size])
            out[start : start + len(chunk)] = self._embed_chunk(chunk)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=out, where=norms > 0)  # a zero vector stays zero

    def embed_query(self, text: str) -> Vectors:
        return self.embed_documents([text])[0]

    def _embed_chunk(self, texts: list[str]) -> Vectors:
        payload = self._post({"model": self._model, "input": texts})
        return self._parse(payload, len(texts))

    def _post(self, body: dict[str, Any]) -> Any:
        return post_json(self._url, body, api_key=self._api_key, timeout_s=self._timeout_s, failure=_embedding_error)

    def _parse(self, payload: Any, count: int) -> Vectors:
        try:
            # Rows carry their index; a server that leaves it out is taken to keep input order.
            rows = sorted(enumerate(payload["data"]), key=lambda pair: pair[1].get("index", pair[0]))
            embeddings = [row["embedding"] for _, row in rows]
            lengths = {len(embedding) for embedding in embeddings}
            vectors = np.array(embeddings, dtype=np.float32) if lengths == {self._dimension} else None
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise self._error(f"answered without a list of data[].embedding numbers ({error!r})") from error
        if len(embeddings) != count:
            raise self._error(f"returned {len(embeddings)} vectors for {count} texts")
        if vectors is None:
            found = ", ".join(str(n) for n in sorted(lengths))
            raise self._error(f"returned vectors of length {found}; {self._model!r} was set up with {self._dimension}")
        return vectors

    def _error(self, what: str) -> EmbeddingError:
        return EmbeddingError(f"embedding server at {self._url} {what}", url=self._url)


def embeddings_url(base_url: str) -> str:
    """``{base_url}/v1/embeddings``, also when the base URL already ends in ``/v1``."""
    return api_url(base_url, "embeddings")


def _embedding_error(message: str, **details: Any) -> EmbeddingError:
    return EmbeddingError(f"embedding {message}", **details)
