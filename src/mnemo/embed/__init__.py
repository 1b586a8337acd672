"""Embedders turn text into unit-length vectors; one small Protocol, several implementations.

- ``local``: all-MiniLM-L6-v2 run by onnxruntime on the CPU (the default; no network).
- ``http``: any OpenAI-compatible ``/v1/embeddings`` endpoint (Ollama, OpenAI, vLLM).
- ``fake``: a deterministic hashing embedder for fast tests.

Every implementation returns float32 vectors of length ``dimension`` with L2 norm 1, so a dot
product is the cosine similarity. Failures raise ``mnemo.errors.EmbeddingError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Vectors: TypeAlias = "npt.NDArray[np.float32]"  # named in annotations only: importing this needs no numpy

# How many texts a bulk job (an import, a reindex) gives the model at once. The local model sorts
# them by length into its runs (embed.local.TOKENS_PER_RUN), so the more it gets the less it pads:
# with 64 at once (and runs of 64 texts whatever their length) LoCoMo's 4,000 first turns imported
# at 191-192 memories/s and 5,000 short notes at 408-412; with 512 (and the runs' token budget)
# 247-264 and 438-442 (benchmarks/import_speed.py, the two alternately).
BULK_TEXTS = 512


class Embedder(Protocol):
    @property
    def name(self) -> str:
        """Identifies the model and its variant; vectors of two names are never mixed."""
        ...

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One row per text, shape (len(texts), dimension)."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Shape (dimension,)."""
        ...
