"""Near duplicates: the memory already stored (or about to be) that a new one says again.

A new memory is a near duplicate of a memory of the same user and subject whose vector is within
``NEAR_DUPLICATE`` of its own, active or archived and unexpired, when ``same_fact.difference`` finds
no word that makes them different facts. A batch (a bulk import) is checked as if its memories
were stored one after the other: each is compared with the store and with the batch's earlier
memories that were not duplicates themselves, with one refresh of the index and one read of the
candidates' texts for the whole batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from mnemo.embed import Vectors
from mnemo.lazy import numpy as np
from mnemo.model import Status
from mnemo.query import Filters
from mnemo.search import same_fact
from mnemo.storage import Storage, VectorSearch

# Cosine from which two memories of one user may be the same memory in other words, when
# same_fact.difference finds no word that tells them apart. Chosen on benchmarks/fact_pairs.py's dev
# pairs (benchmarks/near_duplicates.py): distinct facts that no rule separates reach 0.906 (a window
# or an aisle seat), light rewrites 0.970 at the median; at 0.92 98% of the rewrites are caught.
NEAR_DUPLICATE = 0.92
NEAR_DUPLICATE_POOL = 10  # nearest memories examined: templated facts crowd a rewrite's neighbours


@dataclass(frozen=True, slots=True)
class NewText:
    """What the check needs of a memory about to be stored."""

    vector: Vectors
    content: str
    user_id: str | None
    subject_key: str | None


@dataclass(frozen=True, slots=True)
class Twin:
    """What a new memory repeats: a stored memory (``memory_id``) or an earlier one of its batch
    (``earlier``: its position), and their cosine."""

    cosine: float
    memory_id: str | None = None
    earlier: int | None = None


def find(
    index: VectorSearch, storage: Storage, batch: Sequence[NewText], now: datetime, *, visible_to: str | None
) -> list[Twin | None]:
    """For each new memory in order, its twin, or None if it says something new; ``visible_to``: whose
    view the stored memories are compared in (``Filters.visible_to``: who is asking)."""
    if not batch:
        return []
    index.refresh(storage)
    close = index.close_many([new.vector for new in batch], NEAR_DUPLICATE_POOL, NEAR_DUPLICATE)
    filters = Filters(now=now, statuses=(Status.ACTIVE, Status.ARCHIVED), include_expired=False, visible_to=visible_to)
    stored = storage.texts_passing(sorted({key for found in close for key, _ in found}), filters)
    matrix = np.stack([new.vector for new in batch])
    within = matrix @ matrix.T  # cosines (unit vectors) between the batch's own memories
    kept = np.zeros(len(batch), dtype=bool)  # the earlier ones that were not duplicates: stored first
    twins: list[Twin | None] = []
    for position, (new, found) in enumerate(zip(batch, close, strict=True)):
        earlier = np.flatnonzero(kept[:position] & (within[position, :position] >= NEAR_DUPLICATE)).tolist()
        candidates = [
            *((Twin(float(within[position, j]), earlier=j), batch[j].user_id, batch[j].subject_key,
               batch[j].content) for j in earlier),
            *((Twin(cosine, memory_id=text.memory_id), text.user_id, text.subject_key, text.content)
              for key, cosine in found if (text := stored.get(key)) is not None),
        ]  # fmt: skip
        candidates.sort(key=lambda candidate: -candidate[0].cosine)
        twin = next(
            (
                twin
                for twin, user_id, subject_key, content in candidates[:NEAR_DUPLICATE_POOL]
                if (user_id, subject_key) == (new.user_id, new.subject_key)
                and same_fact.difference(content, new.content) is None
            ),
            None,
        )
        twins.append(twin)
        kept[position] = twin is None
    return twins
