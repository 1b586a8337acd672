"""SQLite's full-text search (FTS5) of memories: the queries that find and rank a search's matches."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from mnemo.model import READABLE_BY_ALL
from mnemo.query import Filters
from mnemo.storage import sql

# The readers' column (``scope``, sqlite_schema.m009) weighs 0: its tokens add nothing to a score,
# though FTS5 counts them in a memory's length (it sums every column's), which BM25 divides by.
_RANKED = "SELECT rowid, -bm25(memories_fts, 1, 1, 1, 0) AS score FROM memories_fts WHERE memories_fts MATCH ?"


def any_of(terms: Sequence[str]) -> str:
    """An FTS5 query that matches any of the terms in a memory's words, not its readers' tokens;
    each is quoted, so none is read as syntax."""
    either = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    if any(_may_be_a_reader(term) for term in terms):  # naming the columns costs ~20%: only when needed
        return "{content tags auto_tags} : (" + either + ")"
    return either


def _may_be_a_reader(term: str) -> bool:
    """Whether the term might fold and stem to a readers' token (a letter, hex digits, a 0: see
    _token); a letter with a diacritic may fold to a hex digit."""
    second = term[1:2]
    return len(term) >= 3 and "0" in term and (second.lower() in "0123456789abcdef" or not second.isascii())


def scope_of(filters: Filters) -> str | None:
    """An FTS5 query for the memories of the filters' user, and those their viewer may read (the
    readers' tokens of sqlite_schema._SCOPE); None when the filters name neither."""
    parts = []
    if filters.user_id is not None:
        parts.append(f"scope : {_token('u', filters.user_id)}")
    if filters.visible_to is not None:
        readable = " OR ".join(_token("l", level) for level in READABLE_BY_ALL)
        parts.append(f"scope : ({_token('o', filters.visible_to)} OR {readable})")
    return " AND ".join(parts) or None


def _token(kind: str, value: str) -> str:
    return f'"{kind}{value.encode().hex().upper()}0"'  # as SQLite's hex() spells the UTF-8 bytes


def ranked_matches(
    db: sqlite3.Connection, terms: Sequence[str], cap: int, scope: str | None = None
) -> tuple[str, list[Any]]:
    """SQL (and its parameters) for the ``(rowid, score)`` of the matches a search ranks.

    A score is the memory's BM25 against all the terms: a sum over the terms it contains. FTS5
    scores every match of a query before it sorts, so an OR of words that each match a large
    share of the store scores most of it (16 ms and more at 100,000 memories). Here the rarest
    terms, while together they match at most ``cap`` memories, are the rare ones: every memory
    that contains one is ranked, with its full score (a second query, rare AND common, adds the
    common terms' share). Of the memories that contain only common terms, the newest ``cap``
    are ranked. When no term is common, as in any store of up to ``cap`` memories, that is every
    match, scored exactly as one OR query of the terms scores it. With a ``scope`` (``scope_of``),
    the newest matches of common terms are the newest within it: in a store shared by many users,
    a user's, not the store's.
    """
    rare, common = sql.rare_and_common({term: count_up_to(db, any_of([term]), cap + 1) for term in terms}, cap)
    if not common:
        return _RANKED, [any_of(terms)]
    newest = f"SELECT * FROM ({_RANKED} ORDER BY rowid DESC LIMIT ?)"
    common_within = f"{scope} AND ({any_of(common)})" if scope else any_of(common)
    if not rare:
        return newest, [common_within, cap]
    # A memory found by several of these keeps its best score: the one from the most terms.
    return (
        f"SELECT rowid, MAX(score) AS score FROM ({newest} UNION ALL {_RANKED} UNION ALL {_RANKED}) GROUP BY rowid",
        [common_within, cap, any_of(rare), f"({any_of(common)}) AND ({any_of(rare)})"],
    )


def count_up_to(db: sqlite3.Connection, expression: str, most: int) -> int:
    """How many memories match, counted no further than ``most`` (so it costs at most that)."""
    (count,) = db.execute(
        "SELECT count(*) FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)", [expression, most]
    ).fetchone()
    return int(count)
