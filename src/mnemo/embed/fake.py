"""A deterministic embedder for tests: hashed words and character trigrams, no model.

Texts that share words get similar vectors, so search logic can be tested in milliseconds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from mnemo.embed import Vectors
from mnemo.lazy import numpy as np
from mnemo.search.words import words


class FakeEmbedder:
    def __init__(self, dimension: int = 64) -> None:
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"fake-hash-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def _features(self, text: str) -> list[str]:
        tokens = words(text)
        grams = [t[i : i + 3] for t in tokens for i in range(max(1, len(t) - 2))]
        return tokens + grams

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % self._dimension
                out[row, index] += 1.0 if digest[4] & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            out[row] = out[row] / norm if norm else out[row]
        return out

    def embed_query(self, text: str) -> Vectors:
        return self.embed_documents([text])[0]
