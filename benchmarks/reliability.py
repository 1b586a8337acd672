"""How often a hit of a given relevance is a right answer: the reliability curve of recall's relevance.

``recall_quality.py`` prints it for the relevance-only ranking. Over the queries that have a right
answer, every returned hit (up to 10 a query) is put in a band of its relevance, and each band
reports how many hits fell in it and the share of them that are right answers. Relevance is fitted
so that 0.7 reads as "probably an answer" (search/searcher.py): on a set where that holds, the
bands from 0.7 up show a share of right answers near or above one half.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from recall_metrics import Outcome

BANDS = (0.0, 0.3, 0.5, 0.7, 0.9)  # lower edges; the last band runs to 1.0 inclusive


@dataclass(frozen=True, slots=True)
class Band:
    low: float
    high: float
    hits: int
    right: int

    @property
    def share_right(self) -> float | None:
        return self.right / self.hits if self.hits else None


def curve(outcomes: Sequence[Outcome]) -> list[Band]:
    """The returned hits of the queries with a right answer, by relevance band."""
    hits = [0] * len(BANDS)
    right = [0] * len(BANDS)
    for outcome in outcomes:
        if not outcome.relevant:
            continue
        for memory_id, relevance in zip(outcome.ranked, outcome.similarities, strict=False):
            band = max(bisect_right(BANDS, relevance) - 1, 0)
            hits[band] += 1
            right[band] += memory_id in outcome.relevant
    highs = (*BANDS[1:], 1.0)
    return [Band(low, high, n, r) for low, high, n, r in zip(BANDS, highs, hits, right, strict=True)]


def table(outcomes: Sequence[Outcome]) -> list[str]:
    """The curve as lines of text."""
    lines = ["Reliability of relevance (returned hits of answerable queries, by band)", "band          hits  right"]
    for band in curve(outcomes):
        share = "    -" if band.share_right is None else f"{band.share_right:.3f}"
        lines.append(f"{band.low:.1f}-{band.high:.1f}  {band.hits:>8}  {share}")
    return lines
