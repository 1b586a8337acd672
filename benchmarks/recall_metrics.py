"""The search-quality metrics of the harness (recall_quality.py): one query's outcome, R@k, MRR,
nDCG@10, abstentions rejected and newest-first, per set and per kind of question."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

LIMIT = 10
CUTOFFS = (1, 5, 10)
NEGATIVE_THRESHOLD = 0.7  # memento's search_memories default threshold (spec 001)
NEGATIVE_KIND = "negative"


# -- metrics ---------------------------------------------------------------------------------
def recall_at(relevant: Sequence[str], ranked: Sequence[str], k: int) -> float:
    """The share of the relevant ids found in the first ``k`` of the ranking."""
    wanted = set(relevant)
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def reciprocal_rank(relevant: Sequence[str], ranked: Sequence[str]) -> float:
    wanted = set(relevant)
    return next((1.0 / rank for rank, memory_id in enumerate(ranked, 1) if memory_id in wanted), 0.0)


def ndcg_at(relevant: Sequence[str], ranked: Sequence[str], k: int) -> float:
    wanted = set(relevant)
    dcg = sum(1.0 / math.log2(rank + 1) for rank, memory_id in enumerate(ranked[:k], 1) if memory_id in wanted)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50 and p95 (nearest rank below), in the unit of the samples."""
    if not samples:
        return {"p50": 0.0, "p95": 0.0}
    ordered = sorted(samples)
    return {"p50": statistics.median(ordered), "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]}


@dataclass(frozen=True, slots=True)
class Outcome:
    """One query's answer: ids are mnemo ids, ``relevant`` best first, ``ranked`` as returned."""

    query_id: str
    kind: str
    relevant: tuple[str, ...]
    ranked: tuple[str, ...]
    similarities: tuple[float, ...]  # scores.semantic_similarity of each returned hit
    latency_ms: float
    prefer_newest: bool = False  # a current-state question: relevant[0] is the newest fact
    declines: bool = True  # False for a baseline: it has no threshold, never says "no answer"

    @property
    def newest_first(self) -> bool:
        """True if the newest fact is in the top 5 and ahead of every older relevant fact returned."""
        first = next((memory_id for memory_id in self.ranked[:5] if memory_id in self.relevant), None)
        return first == self.relevant[0]

    @property
    def rejected(self) -> bool:
        """True if nothing came back at or above the relevance threshold."""
        return all(s < NEGATIVE_THRESHOLD for s in self.similarities)


@dataclass(frozen=True, slots=True)
class Metrics:
    queries: int  # all queries of the group
    answered: int  # those with at least one relevant id: the R@k, MRR and nDCG denominators
    recall_at_1: float | None
    recall_at_5: float | None
    recall_at_10: float | None
    mrr: float | None
    ndcg_at_10: float | None
    negatives: int
    negatives_rejected: float | None
    current_state: int  # prefer_newest questions
    newest_first: float | None  # the share of them whose newest fact comes first, in the top 5


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def metrics(outcomes: Sequence[Outcome]) -> Metrics:
    answered = [o for o in outcomes if o.relevant]
    negatives = [o for o in outcomes if o.kind == NEGATIVE_KIND]
    current = [o for o in outcomes if o.prefer_newest and o.relevant]
    at = {k: _mean(recall_at(o.relevant, o.ranked, k) for o in answered) for k in CUTOFFS}
    return Metrics(
        queries=len(outcomes),
        answered=len(answered),
        recall_at_1=at[1],
        recall_at_5=at[5],
        recall_at_10=at[10],
        mrr=_mean(reciprocal_rank(o.relevant, o.ranked) for o in answered),
        ndcg_at_10=_mean(ndcg_at(o.relevant, o.ranked, LIMIT) for o in answered),
        negatives=len(negatives),
        negatives_rejected=_mean(1.0 if o.rejected else 0.0 for o in negatives if o.declines),
        current_state=len(current),
        newest_first=_mean(1.0 if o.newest_first else 0.0 for o in current),
    )


def by_kind(outcomes: Sequence[Outcome]) -> dict[str, Metrics]:
    kinds = sorted({o.kind for o in outcomes})
    return {kind: metrics([o for o in outcomes if o.kind == kind]) for kind in kinds}
