"""Multi-factor ranking of recalled memories (spec 004's ``ranking`` object).

combined = w_sem * semantic_similarity + w_rec * recency + w_imp * importance + w_acc * access_frequency

- semantic_similarity: the calibrated relevance of the memory to the query, in [0, 1] (see search.py).
- recency: how fresh the memory is (its last update), by the chosen decay. All three decays give
  1.0 for a memory changed just now and 0.5 at the half-life (``MNEMO_RECENCY_HALF_LIFE_DAYS``,
  default 30 days): exponential halves every half-life; linear falls to 0 at twice the half-life;
  logarithmic 1 / (1 + log2(1 + age / half_life)) has the longest tail.
- importance: the memory's own 0-1 importance.
- access_frequency: log(1 + n) / log(1 + n_max), n the memory's access count and n_max the
  highest among the store's active memories, so the most recalled memory scores 1 and one never
  recalled 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from mnemo.errors import InvalidInput

WEIGHT_TOLERANCE = 1e-6


class Decay(StrEnum):
    LINEAR = "linear"
    EXPONENTIAL = "exponential"
    LOGARITHMIC = "logarithmic"


@dataclass(frozen=True, slots=True)
class Weights:
    semantic_similarity: float = 0.5
    recency: float = 0.2
    importance: float = 0.2
    access_frequency: float = 0.1

    def __post_init__(self) -> None:
        total = self.semantic_similarity + self.recency + self.importance + self.access_frequency
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            raise InvalidInput(
                f"ranking weights must sum to 1.0, these sum to {total:.4g}",
                field="ranking.weights",
                sum=round(total, 6),
            )


@dataclass(frozen=True, slots=True)
class Scores:
    semantic_similarity: float
    recency: float
    importance: float
    access_frequency: float
    combined: float


def recency(age_days: float, half_life_days: float, decay: Decay) -> float:
    age = max(age_days, 0.0) / half_life_days
    match decay:
        case Decay.EXPONENTIAL:
            return 0.5**age
        case Decay.LINEAR:
            return max(0.0, 1.0 - age / 2.0)
        case Decay.LOGARITHMIC:
            return 1.0 / (1.0 + math.log2(1.0 + age))


def access_frequency(count: int, max_count: int) -> float:
    if max_count <= 0:
        return 0.0
    return math.log1p(count) / math.log1p(max_count)


def score(weights: Weights, relevance: float, recency_score: float, importance: float, frequency: float) -> Scores:
    combined = (
        weights.semantic_similarity * relevance
        + weights.recency * recency_score
        + weights.importance * importance
        + weights.access_frequency * frequency
    )
    return Scores(relevance, recency_score, importance, frequency, combined)
