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

from mnemo.model import Status
from mnemo.query import Filters
from mnemo.storage import sql

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


def count(db: sqlite3.Connection, filters: Filters) -> int:
    """How many memories pass filters that select by more than status and expiry.

    With tags, by the cheapest of three reads. Tags asked alone (with status and expiry): the tagged
    memories, read from the tags' lists, less those of them that fail status or expiry, found by
    the status index, when they are fewer (at 1,000,000: 10.5 ms for a tag of 109,573 memories,
    290-320 ms walked; 28,867 tagged 2 ms, 45 by key; two tags all required, 3,421 of 28,867 with
    the rarer, 13 ms). Else the tagged memories by their keys, when few have the tag; or else a
    walk of an index of every memory, testing each against the tag's list."""
    tags = filters.tags_any or filters.tags_all
    if not tags:
        return _count_where(db, filters)
    held = _held(db)
    enough = held // KEY_READ_COST  # tagged memories past which the walk reads less
    tagged, rarest_first = _tag_counts(db, filters, tags, enough)
    if _tags_alone(filters):
        counted = _tagged_less_failing(db, rarest_first, held, most_failing=min(tagged, enough))
        if counted is not None:
            return counted
    return _count_where(db, rarest_first, by_key=True) if tagged < enough else _count_where(db, filters)


def _count_where(db: sqlite3.Connection, filters: Filters, by_key: bool = False) -> int:
    where, params = sql.where(filters, by_key=by_key)
    return int(db.execute(f"SELECT COUNT(*) FROM memories m WHERE {where}", params).fetchone()[0])


def _tag_counts(db: sqlite3.Connection, filters: Filters, tags: tuple[str, ...], limit: int) -> tuple[int, Filters]:
    """How many memories the tags keep, each tag's counted up to ``limit`` from its list (any of
    them: the sum, at least as many; all: the rarest's), and the filters with the required tags
    rarest first, the order SQLite reads their lists in."""
    counts = {tag: _tagged(db, (tag,), limit) for tag in set(tags)}
    if filters.tags_any:
        return sum(counts.values()), filters
    return min(counts.values()), replace(filters, tags_all=tuple(sorted(tags, key=counts.__getitem__)))


def _tagged(db: sqlite3.Connection, tags: tuple[str, ...], limit: int, every: bool = False) -> int:
    """The memories with any of the tags (``every``: all of them, the rarest first), counted up to
    ``limit`` from the tags' lists alone: the first tag's list, each memory of it looked up in the
    others' (at 1,000,000: 28,867 and 96,144 tagged, 3,421 with both, 12.9 ms)."""
    if every:
        also = "".join(" AND " + sql.tag_lookup("?", "t.memory_rowid", f"t{i}") for i in range(1, len(tags)))
        rows = f"SELECT 1 FROM memory_tags t WHERE t.tag = ?{also} LIMIT ?"
    else:
        rows = f"SELECT DISTINCT memory_rowid FROM memory_tags WHERE tag IN ({sql.SQLITE.marks(len(tags))}) LIMIT ?"
    return int(db.execute(f"SELECT count(*) FROM ({rows})", [*tags, limit]).fetchone()[0])


def _tags_alone(filters: Filters) -> bool:
    """Whether filters ask tags and nothing else but status and expiry."""
    others = replace(filters, tags_any=None, tags_all=None)
    return bool(filters.tags_any or filters.tags_all) and filters.visible_to is None and not others.selects_by_attribute


def _tagged_less_failing(db: sqlite3.Connection, filters: Filters, held: int, most_failing: int) -> int | None:
    """The memories with the filters' tags (any, or all: the rarest first) less those of them that
    fail the filters' status or expiry, each found by the status index and tested against the tags'
    lists; None when more than ``most_failing`` memories of the store fail (reading each costs about
    as much as reading a tagged memory by its key: the other plans read fewer)."""
    passing = [s.value for s in (Status if filters.statuses is None else filters.statuses)]
    other = [s.value for s in Status if s.value not in passing]
    failing_statuses = f"SELECT COALESCE(SUM(n), 0) FROM memory_counts WHERE status IN ({sql.SQLITE.marks(len(other))})"
    (failing,) = db.execute(failing_statuses, other).fetchone()
    budget = most_failing - failing
    now = sql.SQLITE.time(filters.now)
    expired = f"m.status IN ({sql.SQLITE.marks(len(passing))}) AND m.expires_at <= ?"
    if not filters.include_expired:
        (soon,) = db.execute(f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {expired} LIMIT ?)",
                             [*passing, now, max(budget, 0)]).fetchone()  # fmt: skip
        budget -= soon
    if budget <= 0:
        return None
    if filters.tags_any:
        tags, tagged = filters.tags_any, sql.tag_lookup(sql.SQLITE.marks(len(filters.tags_any)))
    else:
        tags = filters.tags_all or ()
        tagged = " AND ".join(sql.tag_lookup("?", alias=f"t{i}") for i in range(len(tags)))
    failed = f"SELECT m.rowid FROM memories m WHERE m.status IN ({sql.SQLITE.marks(len(other))}) AND {tagged}"
    params: list[object] = [*other, *tags]
    if not filters.include_expired:
        failed += f" UNION ALL SELECT m.rowid FROM memories m WHERE {expired} AND {tagged}"
        params += [*passing, now, *tags]
    (failed_count,) = db.execute(f"SELECT count(*) FROM ({failed})", params).fetchone()
    return _tagged(db, tags, held, every=not filters.tags_any) - int(failed_count)


def sort_key(
    db: sqlite3.Connection, column: str, filters: Filters, where: str, params: list[Any], wanted: int | None
) -> str:
    """``m.<column>``, or ``+m.<column>`` (which no index serves) when few memories pass the filters."""
    indexed = any(getattr(filters, name) is not None for name in _INDEXED)
    if not indexed or wanted is None:
        return f"m.{column}"
    even = _even(wanted, _held(db))
    (matches,) = db.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where} LIMIT ?)", [*params, even]
    ).fetchone()
    return f"+m.{column}" if matches < even else f"m.{column}"


def page_through_tags(db: sqlite3.Connection, filters: Filters, wanted: int) -> Filters | None:
    """The filters to read a page of ``wanted`` memories through the tags' lists with (the tag most
    memories lack first), when fewer are tagged than walking the sort order would read to fill the
    page; else None (and without tags). At 1,000,000 memories a page of the one memory with a tag
    walked them all: 97 ms."""
    tags = filters.tags_any or filters.tags_all
    if not tags:
        return None
    even = _even(wanted, _held(db))
    tagged, rarest_first = _tag_counts(db, filters, tags, even)
    return rarest_first if tagged < even else None


def _even(wanted: int, held: int) -> int:
    """Matches at which a page's two reads cost alike: walking the sort order reads about
    wanted * held / matches memories to find ``wanted``; reading the matches by their key (or
    index) and sorting them reads ``matches``."""
    return math.isqrt(wanted * max(1, held)) + 1
