"""Word search on PostgreSQL: the tsvector/GIN index finds the matches, and a BM25 computed here
ranks them, so scores read like FTS5's ``bm25()`` (the engine's calibration was fitted on those).

PostgreSQL's own ``ts_rank_cd`` knows no document frequencies: a word that half the store holds
weighs as much as a name only one memory holds. So this is FTS5's formula: each query term (each
lexeme of the store's configuration) is weighed by ``idf = max(ln((N - df + 0.5) / (df + 0.5)), 1e-6)``,
and a memory's score is the sum over the terms it holds of
``idf · tf·(k1 + 1) / (tf + k1·(1 - b + b·dl/avgdl))``, k1 = 1.2, b = 0.75, where ``dl`` is how many
words the memory's tsvector was made of (its positions). On the dev sets recall's R@5 is within
0.01 of SQLite's (README, "PostgreSQL"). What still differs from FTS5: English stems come from
Snowball rather than Porter, and its three columns (content, tags, automatic tags) are one
document. ``N`` and ``avgdl`` come from totals that triggers keep as memories are written
(postgres_schema.m003_word_totals), so a new process's first search costs no pass over the store;
document frequencies are counted afresh for each search of a store under 10,000 memories; in a
larger one a word's count is kept by the process and counted again at most once a minute, in the
background, while searches go on with the last count (a common word it has not met yet, by its share
in the planner's statistics until then). They are counted exactly up to COUNT_UP_TO
and estimated from the newest memories beyond (BM25 needs their order of magnitude, not their last
digit). The totals too are read again at most once a minute in such a store, and a term's lexemes,
which the store's configuration makes the same way for good, are asked of PostgreSQL once.

Like the SQLite backend, when a term is common only the newest ``cap`` memories holding common
terms alone are ranked (``sql.rare_and_common``); in a search of one user's memories, or of those a
member may read, the newest of those (the words' index holds each memory's readers:
postgres_schema.m008_words_index_knows_readers).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from mnemo.model import READABLE_BY_ALL
from mnemo.query import Filters, TextHit
from mnemo.storage import sql
from mnemo.storage.postgres_schema import READERS, TOKENS, WORDS_CONFIG

log = logging.getLogger(__name__)

K1 = 1.2
B = 0.75
# How old a word's count may be before it is counted again. The new count is made in the background
# and the search that finds the old one uses it: a common word's count took 40-180 ms at 200,000
# memories (a query's words at once), and every minute one search in a stream of them paid it.
STATS_TTL_S = 60.0
EXACT_BELOW = 10_000  # in a store of fewer memories document frequencies are counted afresh for every search
# A lexeme held by more memories than this is counted in the newest SAMPLE instead: at N = 1,000,000
# its idf is at most ln(50) = 3.9 and a 2% share of the sample is some 400 hits, so the estimate's
# error (about 5%) moves idf by about 0.05. Counting it exactly took a pass over all its memories.
COUNT_UP_TO = 20_000
SAMPLE = 20_000


# Walking the memories from the newest, checking each one's words, costs about an eighth of what
# fetching a memory the GIN index found does (0.5-0.6 against 3-4.5 µs a row, at 200,000 and
# 1,000,000 memories, the server's caches warm).
WALK_TO_FETCH = 8


def fetch_every_match(matches: int, n: int, cap: int) -> bool:
    """Whether the newest ``cap`` of about ``matches`` memories (of ``n``) are found sooner by
    fetching every match and keeping the newest than by walking the memories from the newest.

    The walk reads about cap·n/matches memories, the fetch all the matches. PostgreSQL walks as
    soon as there are more matches than ``cap``, as it underrates checking a memory's words: for a
    name held by 0.5% of 1,000,000 memories it walked 98,000 of them (59 ms) where fetching its
    4,921 matches took 17.
    """
    return WALK_TO_FETCH * matches * matches < cap * n


def scope_of(filters: Filters) -> tuple[str, list[Any]] | None:
    """A condition (and its parameters) on a memory's readers, which the words' index holds, for the
    filters' user and the memories their viewer may read; None when the filters name neither."""
    parts, params = [], []
    if filters.user_id is not None:
        parts.append(f"{READERS} @> %s::text[]")
        params.append(["u" + filters.user_id])
    if filters.visible_to is not None:
        parts.append(f"{READERS} && %s::text[]")
        params.append(["o" + filters.visible_to, *("l" + level for level in READABLE_BY_ALL)])
    return (" AND ".join(parts), params) if parts else None


def estimated_rows(db: psycopg.Connection, query: str, params: Sequence[Any]) -> float:
    """How many rows the planner expects the query to return, from the statistics ANALYZE keeps (~1 ms
    to plan a word search: its estimates were within 3x of the counts at 1,000,000 memories)."""
    (plan,) = db.execute("EXPLAIN (FORMAT JSON) " + query, params).fetchone()  # type: ignore[misc]
    return float(plan[0]["Plan"]["Plan Rows"])


def tsquery_any(lexemes: Sequence[str]) -> str:
    """A tsquery (text) matching any of these lexemes, each quoted so none is read as syntax."""
    return " | ".join("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)


class WordStats:
    """The store's BM25 statistics: N and avgdl read from the totals the triggers keep (m003), and
    the document frequency of each lexeme, as this process last counted it."""

    def __init__(self, connect: Callable[[], AbstractContextManager[psycopg.Connection]]) -> None:
        self._connect = connect  # a connection for the counts made in the background
        self._lock = threading.Lock()
        self._df: dict[str, tuple[float, int]] = {}  # lexeme: counted at, df
        self._totals: tuple[float, int, float] | None = None  # read at, N, avgdl
        self._lexemes: dict[str, list[str]] = {}  # a term's lexemes (none: a stop word)
        self._shares: tuple[float, dict[str, float]] | None = None  # read at, planned_shares
        self._recounting: set[str] = set()
        self._recounts = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-word-counts")

    def totals(self, db: psycopg.Connection) -> tuple[int, float]:
        """N (memories with words) and avgdl (their mean length in words); in a store of EXACT_BELOW
        memories or more, as read in the last STATS_TTL_S (0.4-0.6 ms a search at 1,000,000)."""
        now = time.monotonic()
        last = self._totals
        if last is not None and last[1] >= EXACT_BELOW and now - last[0] < STATS_TTL_S:
            return last[1], last[2]
        n, avgdl = word_totals(db)
        self._totals = (now, n, avgdl)
        return n, avgdl

    def lexemes(self, db: psycopg.Connection, terms: Sequence[str]) -> list[str]:
        """The distinct lexemes the store's configuration makes of the terms, in order; each term's
        asked of PostgreSQL once (a round trip of 0.8-0.9 ms a search at 1,000,000)."""
        with self._lock:
            known = {term: self._lexemes[term] for term in terms if term in self._lexemes}
        if missing := [term for term in dict.fromkeys(terms) if term not in known]:
            made = lexemes_of(db, missing)
            with self._lock:
                if len(self._lexemes) > 10_000:  # a long-running server meets many words
                    self._lexemes.clear()
                self._lexemes.update(made)
            known |= made
        return list(dict.fromkeys(lexeme for term in terms for lexeme in known[term]))

    def document_frequencies(self, db: psycopg.Connection, lexemes: Sequence[str], n: int) -> dict[str, int]:
        """How many memories hold each lexeme: counted exactly up to COUNT_UP_TO, estimated beyond;
        in a store of EXACT_BELOW memories or more, as last counted (older than STATS_TTL_S: counted
        again in the background). There a lexeme this process has not met yet is counted before its
        first search, unless the planner's statistics (``planned_shares``) name it a common one: then
        its share of them serves that search and it is counted in the background (a query's common
        words took 110-280 ms to count at 1,000,000 memories, in their first search in a process)."""
        if n < EXACT_BELOW:
            return counted_frequencies(db, lexemes, n)
        now = time.monotonic()
        with self._lock:
            known = {lex: self._df[lex] for lex in lexemes if lex in self._df}
        self._recount_soon([lex for lex, (at, _) in known.items() if now - at >= STATS_TTL_S], n)
        frequencies = {lex: df for lex, (_, df) in known.items()}
        if missing := [lex for lex in lexemes if lex not in known]:
            shares = self._planned_shares(db, now)
            planned = {lex: max(1, round(shares[lex] * n)) for lex in missing if lex in shares}
            counted = counted_frequencies(db, [lex for lex in missing if lex not in planned], n)
            self._keep(counted, now)
            self._keep(planned, now - STATS_TTL_S)  # due: the next search finds its count if it is made by then
            self._recount_soon(list(planned), n)
            frequencies |= counted | planned
        return frequencies

    def _recount_soon(self, lexemes: list[str], n: int) -> None:
        """Count these lexemes again in the background, those not being counted already."""
        with self._lock:
            due = [lex for lex in lexemes if lex not in self._recounting]
            self._recounting.update(due)
        if due:
            try:
                self._recounts.submit(self._recount, due, n)
            except RuntimeError:  # closed: the last counts serve this search, the next fails on the pool
                with self._lock:
                    self._recounting.difference_update(due)

    def _planned_shares(self, db: psycopg.Connection, now: float) -> dict[str, float]:
        """The most common lexemes' shares of the memories, as the store's last ANALYZE sampled them
        (read again at most once every STATS_TTL_S)."""
        if self._shares is None or now - self._shares[0] >= STATS_TTL_S:
            self._shares = (now, planned_shares(db))
        return self._shares[1]

    def _recount(self, lexemes: list[str], n: int) -> None:
        try:
            with self._connect() as db:
                counted = counted_frequencies(db, lexemes, n)
            self._keep(counted, time.monotonic())
        except Exception:  # the last counts stay, and the next search asks again
            log.debug("recounting %s failed", lexemes, exc_info=True)
        finally:
            with self._lock:
                self._recounting.difference_update(lexemes)

    def _keep(self, counted: dict[str, int], at: float) -> None:
        with self._lock:
            self._df.update({lex: (at, df) for lex, df in counted.items()})
            if len(self._df) > 10_000:  # a long-running server meets many words: keep the recent
                self._df = dict(sorted(self._df.items(), key=lambda item: item[1][0])[-5_000:])

    def close(self) -> None:
        """Let a recount under way finish (before its connections go)."""
        self._recounts.shutdown(wait=True, cancel_futures=True)


def word_totals(db: psycopg.Connection) -> tuple[int, float]:
    """N and avgdl now, from the totals the triggers keep."""
    n, tokens = db.execute("SELECT COALESCE(sum(documents), 0), COALESCE(sum(tokens), 0) FROM word_totals").fetchone()  # type: ignore[misc]
    return int(n), (float(tokens) / int(n) if n else 0.0) or 1.0


def planned_shares(db: psycopg.Connection) -> dict[str, float]:
    """The share of the memories that holds each of the most common lexemes, from the statistics of
    the words column that ANALYZE keeps (a sample of 30,000 memories); empty before the first."""
    row = db.execute(
        "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats"
        " WHERE schemaname = current_schema() AND tablename = 'memories' AND attname = 'words'"
    ).fetchone()
    if row is None or row[0] is None:
        return {}
    lexemes, shares = row
    return dict(zip(lexemes, shares[: len(lexemes)], strict=True))  # the shares' min, max and nulls follow


def counted_frequencies(db: psycopg.Connection, lexemes: Sequence[str], n: int) -> dict[str, int]:
    """Each lexeme's document frequency now, counted up to COUNT_UP_TO and estimated past it (what
    WordStats keeps)."""
    rows = db.execute(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM memories WHERE words @@ q.lexeme::tsquery LIMIT %s) AS c)"
        " FROM unnest(%s::text[]) AS q(lexeme)",
        (COUNT_UP_TO, [tsquery_any([lex]) for lex in lexemes]),
    ).fetchall()
    counted = {lex: int(df) for lex, (df,) in zip(lexemes, rows, strict=True)}
    common = [lex for lex, df in counted.items() if df >= COUNT_UP_TO]
    return counted | {lex: max(COUNT_UP_TO, df) for lex, df in _estimated(db, common, n).items()}


def _estimated(db: psycopg.Connection, lexemes: Sequence[str], n: int) -> dict[str, int]:
    """Common lexemes' document frequencies, from their shares of the newest SAMPLE memories with
    words (one pass over them for all the lexemes)."""
    if not lexemes:
        return {}
    rows = db.execute(
        "SELECT count(*) FILTER (WHERE newest.words @@ q.query::tsquery), count(*)"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS q(query, i)"
        " CROSS JOIN (SELECT words FROM memories WHERE words IS NOT NULL ORDER BY rowid DESC LIMIT %s) AS newest"
        " GROUP BY q.i ORDER BY q.i",
        ([tsquery_any([lex]) for lex in lexemes], SAMPLE),
    ).fetchall()
    shares = zip(lexemes, rows, strict=True)  # a common lexeme's memories are in the sample: no group is empty
    return {lex: round(n * hits / sampled) for lex, (hits, sampled) in shares}


def lexemes_of(db: psycopg.Connection, terms: Sequence[str]) -> dict[str, list[str]]:
    """The lexemes the store's configuration makes of each term."""
    rows = db.execute(
        f"SELECT tsvector_to_array(to_tsvector('{WORDS_CONFIG}', t.term)) FROM unnest(%s::text[]) WITH ORDINALITY"
        " AS t(term, i) ORDER BY t.i",
        (list(terms),),
    ).fetchall()
    return {term: list(lexemes) for term, (lexemes,) in zip(terms, rows, strict=True)}


def search(
    db: psycopg.Connection,
    stats: WordStats,
    terms: Sequence[str],
    where: str,
    params: list[Any],
    limit: int,
    cap: int,
    scope: tuple[str, list[Any]] | None = None,
) -> list[TextHit]:
    """The best ``limit`` matches that pass the filters (``where`` over ``m``). With a
    ``scope`` (``scope_of`` the filters), the newest matches of common terms are the newest in it."""
    lexemes = stats.lexemes(db, terms)
    if not lexemes:
        return []
    n, avgdl = stats.totals(db)
    df = stats.document_frequencies(db, lexemes, n)
    rare, common = sql.rare_and_common({lex: min(df[lex], cap + 1) for lex in lexemes}, cap)
    # Each match is checked against the filters where it is fetched (its row is read anyway), and
    # brings along its id and length: a second statement checking the scored matches by their keys
    # read each row again (1.4 ms a search at 1,000,000 memories, 2.9 in one user's).
    fetched = f"SELECT m.rowid, m.words, m.id, length(m.content) AS length FROM memories m WHERE {where} AND"
    matches: list[str] = []
    match_params: list[Any] = []
    if rare:
        matches.append(f"{fetched} m.words @@ %s::tsquery")
        match_params += [*params, tsquery_any(rare)]
    if common:
        held, held_params = f"{fetched} m.words @@ %s::tsquery", [*params, tsquery_any(common)]
        fetch = fetch_every_match(sum(df[lex] for lex in common), n, cap)
        if scope is not None:  # the newest in the scope: the index finds the words among its memories
            held, held_params = f"{held} AND {scope[0]}", held_params + scope[1]
            # Where the words' matches are too many to fetch, the scope's share of them may not be.
            fetch = fetch or fetch_every_match(round(estimated_rows(db, held, held_params)), n, cap)
        if fetch:
            held = f"SELECT * FROM ({held} OFFSET 0) AS held"  # planned apart: no walk
        matches.append(f"({held} ORDER BY rowid DESC LIMIT %s)")
        match_params += [*held_params, cap]
    idf = [max(math.log((max(n, df[lex]) - df[lex] + 0.5) / (df[lex] + 0.5)), 1e-6) for lex in lexemes]
    # The matches bring their words along (no second visit to each row), and each match's length
    # is counted once (materialized), not once for each of its words the query holds.
    rows = db.execute(
        "WITH q(lexeme, idf) AS (SELECT * FROM unnest(%s::text[], %s::float8[])),"
        f" found AS ({' UNION ALL '.join(matches)}),"
        " docs AS MATERIALIZED (SELECT DISTINCT ON (f.rowid) f.rowid, f.words, f.id, f.length,"
        f"  {TOKENS.format(words='f.words')}::float8 AS dl FROM found f)"
        " SELECT d.rowid, d.id, d.length, SUM(q.idf * t.tf * %s / (t.tf + %s * (1 - %s + %s * d.dl / %s)))"
        " FROM docs d CROSS JOIN LATERAL"
        " (SELECT u.lexeme, COALESCE(array_length(u.positions, 1), 1)::float8 AS tf FROM unnest(d.words) AS u) AS t"
        " JOIN q ON q.lexeme = t.lexeme GROUP BY d.rowid, d.id, d.length",
        [lexemes, idf, *match_params, K1 + 1, K1, B, B, avgdl],
    ).fetchall()
    # Best first, then newest.
    ranked = sorted(((float(score), key, memory_id, length) for key, memory_id, length, score in rows), reverse=True)
    return [TextHit(memory_id, key, score, length) for score, key, memory_id, length in ranked[:limit]]
