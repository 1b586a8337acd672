"""Finding the memories a query means: words (BM25 from FTS5) and meaning (vectors), fused.

Each candidate gets a calibrated ``relevance`` in [0, 1]: a logistic function of its cosine
similarity to the query, of how far that cosine stands out from the other candidates' (a z-score:
a memory that merely shares the query's topic does not stand out), and of its BM25 score relative
to the query's best. ``benchmarks/fit_relevance.py`` fits it on the dev sets; a relevance of 0.7
is meant to be read as "probably an answer".
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from mnemo.embed import Embedder, Vectors
from mnemo.errors import EmbeddingError
from mnemo.model import Status
from mnemo.query import Filters
from mnemo.storage import Storage
from mnemo.vector_index import VectorIndex

WINDOW_FACTOR = 3  # nearest neighbours checked against status/expiry filters per wanted result
# Cosine from which two memories of one user count as the same memory in other words. Measured by
# benchmarks/near_duplicates.py on the dev sets: light rewrites of a memory score 0.986 at the
# median and 0.964 at the 5th percentile; 0.32% of distinct memories (4,385) have a neighbour this close.
NEAR_DUPLICATE = 0.95


@dataclass(frozen=True, slots=True)
class Calibration:
    """relevance = 1 / (1 + exp(-(bias + cosine_weight·cosine + standout_weight·standout + text_weight·text)))."""

    bias: float
    cosine_weight: float
    standout_weight: float
    text_weight: float

    def relevance(self, cosine: float, standout: float, text: float) -> float:
        z = self.bias + self.cosine_weight * cosine + self.standout_weight * standout + self.text_weight * text
        return 1.0 / (1.0 + math.exp(-z))


# Fitted by benchmarks/fit_relevance.py on shared/eval/*-dev.json with all-MiniLM-L6-v2 (1,505
# queries, 404k candidates): 0.7 keeps the right answer of 87% of agent-memory's and 79% of
# LoCoMo's queries, but rejects none of agent-memory's 10 unanswerable ones, whose best candidate
# (same person, other attribute) looks as close as a right answer does to this model.
HYBRID = Calibration(bias=-2.344, cosine_weight=2.128, standout_weight=0.851, text_weight=4.256)
# The same fit over the candidates words find, by their BM25 alone (recall without a model).
WORDS_ONLY = Calibration(bias=-2.001, cosine_weight=0.0, standout_weight=0.0, text_weight=6.376)


@dataclass(frozen=True, slots=True)
class Candidate:
    memory_id: str
    key: int
    text: float  # BM25 relative to the query's best text hit, 0 if the words did not match
    cosine: float | None  # None when recall runs on words alone
    standout: float  # (cosine - mean) / std over the query's candidates
    relevance: float


@dataclass(frozen=True, slots=True)
class Found:
    candidates: list[Candidate]
    warnings: list[str] = field(default_factory=list)
    embedded: bool = False  # whether the query was embedded (meaning was used)


def numbers_in(text: str) -> list[str]:
    return sorted(re.findall(r"\d+(?:[.,:]\d+)*", text))


class Searcher:
    """Hybrid retrieval over one store; the embedder may be absent (words only)."""

    def __init__(self, storage: Storage, embedder: Embedder | None) -> None:
        self.storage = storage
        self.embedder = embedder
        self.index = VectorIndex(embedder.dimension) if embedder is not None else None
        self._embedding = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-embed-query")

    def vectors_state(self) -> str | None:
        """None when vectors can be used, else why not (for warnings and health)."""
        if self.embedder is None:
            return "no embedding model is configured: recall uses words only"
        model = self.storage.vector_model()
        if model is not None and model != self.embedder.name:
            return (
                f"this store's vectors were made by {model}, not {self.embedder.name}: recall uses words only "
                "until `mnemo reindex` re-embeds the store"
            )
        return None

    def find(self, query: str, terms: Sequence[str], filters: Filters, pool: int) -> Found:
        problem = self.vectors_state()
        # The model embeds the query on another thread while SQLite searches the words: both
        # release the GIL, so the two costs overlap instead of adding up.
        embedding = self._embedding.submit(self._embed_query, query) if problem is None else None
        text_hits = self.storage.search_text(terms, filters, pool)
        best_text = max((h.score for h in text_hits), default=0.0)
        text = {h.key: (h.memory_id, h.score / best_text if best_text > 0 else 0.0) for h in text_hits}
        if embedding is None or self.index is None:
            found = [
                Candidate(mid, key, t, None, 0.0, WORDS_ONLY.relevance(0.0, 0.0, t)) for key, (mid, t) in text.items()
            ]
            return Found(found, [problem] if problem else [])

        vector = embedding.result()
        self.index.refresh(self.storage)
        nearest = self._nearest(vector, filters, pool)
        cosines = dict(nearest)
        ids = {key: mid for key, (mid, _) in text.items()}
        missing = [key for key in cosines if key not in ids]
        ids.update(self.storage.keys_passing(missing, filters) if missing else {})
        cosines.update(self.index.similarity(vector, [k for k in text if k not in cosines]))
        values = [cosines.get(key, 0.0) for key in ids]
        mean = sum(values) / len(values) if values else 0.0
        spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if values else 0.0
        found = []
        for key, memory_id in ids.items():
            t = text[key][1] if key in text else 0.0
            cosine = cosines.get(key, 0.0)
            standout = (cosine - mean) / spread if spread > 1e-6 else 0.0
            found.append(Candidate(memory_id, key, t, cosine, standout, HYBRID.relevance(cosine, standout, t)))
        return Found(found, embedded=True)

    def _embed_query(self, query: str) -> Vectors:
        assert self.embedder is not None
        try:
            return self.embedder.embed_query(query)
        except EmbeddingError:
            raise
        except Exception as exc:  # a model's own failure reaches callers as mnemo's error
            raise EmbeddingError(f"the query could not be embedded: {exc}") from exc

    def near_duplicate(
        self, vector: Vectors, content: str, user_id: str | None, subject_key: str | None, now: datetime
    ) -> tuple[str, float] | None:
        """An active or archived memory of the same user and subject that says the same, with its cosine.

        The model barely sees numbers ("task 12 done" and "task 13 done" score above 0.95), so a
        memory whose numbers differ is a different fact, however close its vector.
        """
        if self.index is None:
            return None
        self.index.refresh(self.storage)
        close = [(key, cosine) for key, cosine in self.index.search(vector, 5) if cosine >= NEAR_DUPLICATE]
        if not close:
            return None
        filters = Filters(now=now, statuses=(Status.ACTIVE, Status.ARCHIVED), include_expired=False)
        passing = self.storage.keys_passing([key for key, _ in close], filters)
        found = {m.id: m for m in self.storage.get_many(list(passing.values()))}
        numbers = numbers_in(content)
        for key, cosine in close:
            twin = found.get(passing.get(key, ""))
            if (
                twin is not None
                and (twin.context.user_id, twin.subject_key) == (user_id, subject_key)
                and numbers_in(twin.content) == numbers
            ):
                return twin.id, cosine
        return None

    def _nearest(self, vector: Vectors, filters: Filters, pool: int) -> list[tuple[int, float]]:
        """The pool nearest memories that pass the filters: the true top-k among the matching."""
        assert self.index is not None
        if not filters.selects_by_attribute:
            window = WINDOW_FACTOR * pool
            hits = self.index.search(vector, window)
            passing = self.storage.keys_passing([k for k, _ in hits], filters)
            if len(passing) >= pool or len(hits) < window:
                return [(k, s) for k, s in hits if k in passing][:pool]
        # Filters may keep few memories: search among exactly those.
        allowed = self.storage.keys_matching(filters)
        return self.index.search(vector, pool, among=allowed)
