"""Multi-factor ranking of recalled memories (spec 004's ``ranking`` object).

combined = w_sem * semantic_similarity + w_rec * recency + w_imp * importance + w_acc * access_frequency

- semantic_similarity: the calibrated relevance of the memory to the query, in [0, 1] (see search/searcher.py).
- recency: how fresh the memory is (its last update) beside the freshest candidate, by the chosen
  decay. Age is counted from the newest candidate's last update, not from now: an agent that
  comes back after a month asks about the same facts, and "now"-relative recency would score
  every one of them near 0 and could no longer tell the current fact from the one it replaced.
  All three decays give 1.0 for the freshest candidate and 0.5 at the half-life (``MNEMO_RECENCY_HALF_LIFE_DAYS``,
  default 30 days): exponential halves every half-life; linear falls to 0 at twice the half-life;
  logarithmic 1 / (1 + log2(1 + age / half_life)) has the longest tail.
- importance: the memory's own 0-1 importance; a memory that updates another (superseded.py)
  carries the higher importance and access count of the two, as they belong to the fact.
- access_frequency: log(1 + n) / log(1 + n_max), n the memory's access count and n_max the
  highest among the store's active memories, so the most recalled memory scores 1 and one never
  recalled 0.

Recency, importance and access frequency say nothing about whether a memory answers the question:
they are priors that should choose among memories that answer it about equally well (the newer of
two facts, the more important of two rules), not lift a fresh or important memory that does not
answer over one that does. Taken at face value they did: at the default weights half of the
combined score came from them, and recall at 5 fell from 0.84 to 0.73 on agent-memory's dev set
(0.61 to 0.49 on LoCoMo's). So each is counted in proportion to the memory's ``closeness``: 1 for
a memory as relevant as the best candidate, falling linearly to 0 at a band below it. The band is
RELEVANCE_BAND times the weight the caller gives the priors over the weight it gives relevance:
0.05 at spec 004's default (half and half), narrower as relevance weighs more, and no band at all
when relevance weighs nothing (a caller who ranks by importance alone gets exactly that). The
reported factor is the counted one, so ``combined`` stays the weighted sum of the four scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from mnemo.errors import InvalidInput

WEIGHT_TOLERANCE = 1e-6
# At equal weight on relevance and the priors: how far below the best they still count. In a long
# chat about one project many messages are within 0.1 of the best, and the priors chose among them:
# at 0.1, by default weights against relevance alone (recall_quality.py, R@5), BEAM 100K 0.499
# against 0.506 and BEAM 500K 0.316 against 0.347. At 0.05: 0.506 and 0.325, LoCoMo 0.633 to 0.635,
# R@1 up 0.005-0.013 on the prose and terse sets, R@5 and the newest fact first unchanged on the
# sets of notes (BEAM's newest first 0.425 to 0.450).
RELEVANCE_BAND = 0.05


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


def closeness(weights: Weights, relevance: float, best: float) -> float:
    """How nearly a candidate is as relevant as the best one: 1 at ``best``, 0 at the band below it."""
    if weights.semantic_similarity <= 0.0:
        return 1.0
    band = RELEVANCE_BAND * (1.0 - weights.semantic_similarity) / weights.semantic_similarity
    if band <= 0.0:
        return 1.0 if relevance >= best else 0.0
    return min(1.0, max(0.0, 1.0 - (best - relevance) / band))


def score(
    weights: Weights, relevance: float, best: float, recency_score: float, importance: float, frequency: float
) -> Scores:
    """The four factors as counted (the priors scaled by ``closeness``) and their weighted sum."""
    near = closeness(weights, relevance, best)
    recency_score, importance, frequency = near * recency_score, near * importance, near * frequency
    combined = (
        weights.semantic_similarity * relevance
        + weights.recency * recency_score
        + weights.importance * importance
        + weights.access_frequency * frequency
    )
    return Scores(relevance, recency_score, importance, frequency, combined)
