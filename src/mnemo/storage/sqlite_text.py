"""SQLite's full-text search (FTS5) of memories: the queries that find and rank a search's matches."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from mnemo.storage import sql

_RANKED = "SELECT rowid, -bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ?"


def any_of(terms: Sequence[str]) -> str:
    """An FTS5 query that matches any of the terms; each is quoted, so none is read as syntax."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def ranked_matches(db: sqlite3.Connection, terms: Sequence[str], cap: int) -> tuple[str, list[Any]]:
    """SQL (and its parameters) for the ``(rowid, score)`` of the matches a search ranks.

    A score is the memory's BM25 against all the terms: a sum over the terms it contains. FTS5
    scores every match of a query before it sorts, so an OR of words that each match a large
    share of the store scores most of it (16 ms and more at 100,000 memories). Here the rarest
    terms, while together they match at most ``cap`` memories, are the rare ones: every memory
    that contains one is ranked, with its full score (a second query, rare AND common, adds the
    common terms' share). Of the memories that contain only common terms, the newest ``cap``
    are ranked. When no term is common, as in any store of up to ``cap`` memories, that is every
    match, scored exactly as one OR query of the terms scores it.
    """
    rare, common = sql.rare_and_common({term: count_up_to(db, any_of([term]), cap + 1) for term in terms}, cap)
    if not common:
        return _RANKED, [any_of(terms)]
    newest = f"SELECT * FROM ({_RANKED} ORDER BY rowid DESC LIMIT ?)"
    if not rare:
        return newest, [any_of(common), cap]
    # A memory found by several of these keeps its best score: the one from the most terms.
    return (
        f"SELECT rowid, MAX(score) AS score FROM ({newest} UNION ALL {_RANKED} UNION ALL {_RANKED}) GROUP BY rowid",
        [any_of(common), cap, any_of(rare), f"({any_of(common)}) AND ({any_of(rare)})"],
    )


def count_up_to(db: sqlite3.Connection, expression: str, most: int) -> int:
    """How many memories match, counted no further than ``most`` (so it costs at most that)."""
    (count,) = db.execute(
        "SELECT count(*) FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)", [expression, most]
    ).fetchone()
    return int(count)
