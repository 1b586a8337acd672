"""SQLite's full-text search (FTS5) of memories: the queries that find and rank a search's matches."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from mnemo.model import READABLE_BY_ALL
from mnemo.query import Filters, TextHit
from mnemo.storage import sql

TOP_FIRST_FACTOR = 3  # how many more best text hits than asked for are checked against filters

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


def search(db: sqlite3.Connection, terms: Sequence[str], filters: Filters, limit: int, cap: int) -> list[TextHit]:
    """The best ``limit`` matches that pass the filters, best first, of the matches ``ranked_matches``
    ranks (``cap`` of common terms' newest).

    Fast path, when only status and expiry filter: rank the matches alone, then check the
    filters on just the best ``TOP_FIRST_FACTOR * limit``. Filters on attributes (a user,
    tags, dates...) may reject most of those, so they, and a fast path that came up short,
    join every ranked match with its memory and filter.
    """
    where, params = sql.where(filters)
    window = TOP_FIRST_FACTOR * limit
    ranked, ranked_params = ranked_matches(db, terms, max(cap, window), scope_of(filters))
    if not filters.selects_by_attribute:
        hits = _best_then_filter(db, ranked, ranked_params, where, params, limit, window)
        if hits is not None:
            return hits
    rows = db.execute(
        f"SELECT m.id, m.rowid, r.score, length(m.content) FROM ({ranked}) AS r JOIN memories m ON m.rowid = r.rowid"
        f" WHERE {where} ORDER BY r.score DESC LIMIT ?",
        [*ranked_params, *params, limit],
    ).fetchall()
    return [TextHit(memory_id, key, score, length) for memory_id, key, score, length in rows]


def _best_then_filter(
    db: sqlite3.Connection,
    ranked: str,
    ranked_params: list[Any],
    where: str,
    params: list[Any],
    limit: int,
    window: int,
) -> list[TextHit] | None:
    """The top ranked matches that pass the filters, or None if too few of the best passed."""
    best = db.execute(
        f"SELECT rowid, score FROM ({ranked}) ORDER BY score DESC LIMIT ?", [*ranked_params, window]
    ).fetchall()
    scores = dict(best)
    found = passing(db, list(scores), where, params, "m.rowid, m.id, length(m.content)")
    if len(found) < limit and len(best) == window:
        return None
    ranked_hits = sorted(((scores[key], key, memory_id, length) for key, memory_id, length in found), reverse=True)
    return [TextHit(memory_id, key, score, length) for score, key, memory_id, length in ranked_hits[:limit]]


def passing(
    db: sqlite3.Connection, keys: Sequence[int], where: str, params: list[Any], columns: str = "m.rowid, m.id"
) -> list[Any]:
    """Which of these memory keys pass the filters, with these columns of theirs (memories as m)."""
    # CROSS JOIN fixes the loop order: look up each key by rowid (a plain IN let the planner
    # walk the status index through every active memory instead).
    return db.execute(
        f"SELECT {columns} FROM json_each(?) AS k CROSS JOIN memories m ON m.rowid = k.value WHERE {where}",
        [json.dumps(list(keys)), *params],
    ).fetchall()
