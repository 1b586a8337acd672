"""How a SQLite page of memories is best read, where SQLite's planner cannot tell by itself.

SQLite keeps no statistics on a store, so for a page sorted by a field with an index of its own
(``memories_status_<field>``) it walks that index in order, testing each memory against the
filters, even when a filter has an index of its own that holds few of them: at 1,000,000
memories, a list of the 282 of one category sorted by importance read 1.5 s, and one that
matched none read every memory (2.3 s), where the filter's index and a sort of what it holds
take about a millisecond. The matches are counted first, up to what walking the sort order would
cost, and that count picks the plan.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

from mnemo.query import Filters
from mnemo.storage import sql

# Filters whose column has an index of its own (sqlite_schema); so has a list of categories that
# sql.where writes as the labels filed under them.
_INDEXED = ("labels", "types", "agent_names", "access_levels", "user_id", "conversation_id", "subject_key")


def sort_key(
    db: sqlite3.Connection, column: str, filters: Filters, where: str, params: list[Any], wanted: int | None
) -> str:
    """``m.<column>``, or ``+m.<column>`` (which no index serves) when few memories pass the filters."""
    indexed = any(getattr(filters, name) is not None for name in _INDEXED) or (
        filters.categories is not None and sql.labels_filed_under(filters.categories) is not None
    )
    if not indexed or wanted is None:
        return f"m.{column}"
    (held,) = db.execute("SELECT COALESCE(SUM(n), 0) FROM memory_counts").fetchone()
    # Walking the order reads about wanted * held / matches memories to find ``wanted``; reading
    # the matches from their index and sorting them reads ``matches``: equal at this many.
    even = math.isqrt(wanted * max(1, held)) + 1
    (matches,) = db.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where} LIMIT ?)", [*params, even]
    ).fetchone()
    return f"+m.{column}" if matches < even else f"m.{column}"
