"""A memory found for a query, with what its relevance was computed from.

``searcher.py`` makes candidates (their relevance: its ``Calibration``) and ``superseded.py``
reorders them; both import it from here, so neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    memory_id: str
    key: int
    text: float  # BM25 relative to the query's best text hit, 0 if the words did not match
    cosine: float | None  # to the query without the subjects' names; None when recall runs on words alone
    elsewhere: float  # the share of the subjects the query names that this memory is not about (see Calibration)
    when: float  # 1 if the memory was made in the stretch of time the query names (see when.py); 0 on words alone
    relevance: float
    updates: int | None = None  # the key of an older candidate this one probably updates (see superseded.py)
