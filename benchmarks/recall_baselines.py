"""The two rankings every rule of mnemo's search is compared with, over the same stored memories.

- cosine only: the query's embedding against every memory's stored vector, by the same model,
  exactly, with no rule (no names taken out, no words, no calibration, no session or date);
- BM25 only: the store's own word search (FTS5 on SQLite, the tsvector BM25 on PostgreSQL) of the
  query's content words, by its score alone.

Used by ``recall_quality.py``, which prints them beside mnemo's figures per query kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import numpy as np

from mnemo.engine.service import MemoryService
from mnemo.query import Filters
from mnemo.search.words import search_terms

# A query's memory ids, best first, among those allowed (None: all) as the query's filters allow.
Ranking = Callable[[str, "set[str] | None"], tuple[str, ...]]


def cosine_only(service: MemoryService, memory_ids: Sequence[str], limit: int) -> Ranking | None:
    """Ranking by cosine alone; None when the store has no model (no vectors)."""
    embedder = service.searcher.embedder
    stored = service.storage.vectors_of(list(dict.fromkeys(memory_ids)))
    if embedder is None or not stored:
        return None
    ids = list(stored)
    matrix = np.vstack([np.frombuffer(stored[i], dtype="<f4") for i in ids])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)

    def rank(query: str, allowed: set[str] | None) -> tuple[str, ...]:
        vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
        scores = matrix @ (vector / np.linalg.norm(vector))
        ranked = (ids[i] for i in np.argsort(-scores))
        return tuple(i for i in ranked if allowed is None or i in allowed)[:limit]

    return rank


def bm25_only(service: MemoryService, now: Callable[[], datetime], limit: int) -> Ranking:
    """Ranking by the store's BM25 alone."""

    def rank(query: str, allowed: set[str] | None) -> tuple[str, ...]:
        hits = service.storage.search_text(search_terms(query), Filters(now=now()), limit if allowed is None else 10**6)
        ranked = (hit.memory_id for hit in sorted(hits, key=lambda hit: -hit.score))
        return tuple(i for i in ranked if allowed is None or i in allowed)[:limit]

    return rank
