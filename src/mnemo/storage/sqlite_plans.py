"""How a SQLite page of memories is best read, where SQLite's planner cannot tell by itself.

SQLite keeps no statistics on a store, so for a page sorted by a field with an index of its own
(``memories_status_<field>``) it walks that index in order, testing each memory against the
filters, even when a filter has an index of its own that holds few of them: at 1,000,000
memories, a list of the 282 of one category sorted by importance read 1.5 s, and one that
matched none read every memory (2.3 s), where the filter's index and a sort of what it holds
take about a millisecond. The matches are counted first, up to what walking the sort order would
cost, and that count picks the plan. A count of the memories with a tag had the same fault: it
walked the status index through every memory, testing each against the tag's list.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import replace
from typing import Any

from mnemo.query import Filters

# Filters whose column has an index of its own (sqlite_schema): categories, as the labels filed
# under them (memories_category) or as the category a label is filed under (memories_filed_under).
_INDEXED = (
    "labels",
    "categories",
    "types",
    "agent_names",
    "access_levels",
    "user_id",
    "conversation_id",
    "subject_key",
)


# Reading a memory by its key costs about as much as this many entries of an index walked in order:
# at 1,000,000 memories, counting the 28,850 with a tag by their keys took 48-146 ms, walking the
# status index through all of them 138-198 ms; the 96,058 of another, 127-203 ms against 165-173.
KEY_READ_COST = 15


def _held(db: sqlite3.Connection) -> int:
    """The memories the store holds, every status (the counts triggers keep: no memory is read)."""
    (held,) = db.execute("SELECT COALESCE(SUM(n), 0) FROM memory_counts").fetchone()
    return int(held)


def through_tags(db: sqlite3.Connection, filters: Filters) -> Filters | None:
    """The filters to count through the tags' list of memories (the tag most memories lack first),
    when that reads fewer of them than walking an index of every memory; else None."""
    tags = filters.tags_any or filters.tags_all
    if not tags:
        return None
    enough = _held(db) // KEY_READ_COST  # tagged memories past which the walk reads less
    counts = {
        tag: db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM memory_tags WHERE tag = ? LIMIT ?)", (tag, enough)
        ).fetchone()[0]
        for tag in set(tags)
    }
    tagged = sum(counts.values()) if filters.tags_any else min(counts.values())
    if tagged >= enough:
        return None
    return filters if filters.tags_any else replace(filters, tags_all=tuple(sorted(tags, key=counts.__getitem__)))


def sort_key(
    db: sqlite3.Connection, column: str, filters: Filters, where: str, params: list[Any], wanted: int | None
) -> str:
    """``m.<column>``, or ``+m.<column>`` (which no index serves) when few memories pass the filters."""
    indexed = any(getattr(filters, name) is not None for name in _INDEXED)
    if not indexed or wanted is None:
        return f"m.{column}"
    held = _held(db)
    # Walking the order reads about wanted * held / matches memories to find ``wanted``; reading
    # the matches from their index and sorting them reads ``matches``: equal at this many.
    even = math.isqrt(wanted * max(1, held)) + 1
    (matches,) = db.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where} LIMIT ?)", [*params, even]
    ).fetchone()
    return f"+m.{column}" if matches < even else f"m.{column}"
