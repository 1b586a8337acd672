"""Vectors on PostgreSQL: pgvector rows, searched in the database.

No index is kept in the process: every search reads the table as committed, so a memory another
server stored is found by the next search here (an in-memory index tailing a sequence could skip
a row: concurrent transactions commit sequence values out of order). Unfiltered searches use the
HNSW index (cosine); ``hnsw.ef_search`` is raised to the number of neighbours wanted, so the index
can return them all, and is at least SEARCH_BREADTH. A search among the memories that pass a
filter (one that keeps few memories) scores exactly the SHORTLIST of them whose vectors' signs are
closest to the query's: all of them when they are fewer, so its top k is the true one, and past
that the same as measured (see SHORTLIST).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import numpy as np
import psycopg
from pgvector import Vector

from mnemo.embed import Vectors
from mnemo.query import Filters
from mnemo.storage import Storage, StoredVector, sql
from mnemo.storage.postgres_schema import fix_dimension

MAX_EF_SEARCH = 1000  # pgvector's ceiling
# The HNSW walk's least breadth for a search. At 200,000 clustered notes
# (`python benchmarks/graph_recall.py --store-dir DIR --postgres --settings 16,128 --ef-search 0 100
# 200 400 1000`, 2026-11-28, a store of `latency.py --memories 200000`), the 10 nearest found held,
# for a note's own words / three random words: at pgvector's default 40, 0.911 / 0.452 (1.2 ms p50);
# at 100, 0.986 / 0.620 (2.0 ms); 200, 0.990 / 0.703 (3.1 ms); 400, 0.990 / 0.812 (4.5 ms); 1000,
# 1.000 / 0.940 (9.6 ms). 100 is where a question near the notes stops gaining, for under a
# millisecond; random words need the ceiling, which a walk gets when its best match is weak.
SEARCH_BREADTH = 100
# A walk for a query far from the stored vectors stops among the wrong ones. At 200,000 clustered
# notes (benchmarks/graph_recall.py's queries, binned by their true nearest cosine), one walk at 100
# found of the true top 10 0.53 / 0.64 / 0.78 / 0.80 under 0.4 / 0.4-0.5 / 0.5-0.6 / 0.6-0.7 and
# 0.93-0.98 above; at the ceiling 0.88 / 0.94 / 0.95 / 0.98 / 1.00 (~9 ms instead of ~2). Questions
# put to real conversations sit in that band (their nearest memory at 0.55-0.63 at the median in the
# evaluation sets). A walk whose best match is under WEAK_NEAREST is made again at the ceiling, in an
# index of WIDER_WALK_FROM vectors or more: of the first 20,000 / 30,000 / 50,000 of those notes a
# recall's walk (150) found 0.98 / 0.95 / 0.88 of three random words' top 10, and the ceiling's walk
# took 13-18 ms there. At 1,000,000 it found 0.12 / 0.24 more of the middle and random kinds' top 10
# for 3 ms more a recall at the median, with the graph in shared_buffers (docs/postgresql.md).
WEAK_NEAREST = 0.7
WIDER_WALK_FROM = 40_000
# Near-duplicate checks ask for what is nearest a new note's own words, which the default finds.
CHECK_BREADTH = 40


def ef_search(k: int, least: int = SEARCH_BREADTH) -> int:
    """The HNSW walk's breadth for the k nearest: k, within ``least`` and pgvector's ceiling."""
    return max(least, min(k, MAX_EF_SEARCH))


# A filtered search scores exactly the SHORTLIST memories (at least, SHORTLIST_PER_RESULT a result
# wanted) whose sign bits are nearest the query's. At 200,000 memories of 20 users (~10,000 each;
# python benchmarks/latency.py --memories 200000 --users 20 --backend postgres fills such a store),
# 120 searches for recall's 50 candidates: with 1,000 the top 10 were always the exact ones and the
# top 50 missed 2 of 6,000 (ranks 24 and 39); with 2,000 all were the exact ones.
SHORTLIST = 2_000
SHORTLIST_PER_RESULT = 40
Connect = Callable[[], AbstractContextManager[psycopg.Connection]]


def put(db: psycopg.Connection, vectors: Sequence[tuple[str, bytes]], index: bool = True) -> None:
    """Store each memory's vector (replacing its old one, with a new seq); deleted memories are
    skipped. The first vector builds the HNSW index, unless not ``index`` (built later)."""
    if not vectors:
        return
    fix_dimension(db, len(vectors[0][1]) // 4, index)
    with db.cursor() as cursor:
        # The vector's sign bits beside it, with the memory's user (see search_passing). The memory's
        # row is locked first, as an edit of it does (and its vector's foreign key would): a change of
        # its user waits, then carries over (postgres_schema.m006), or has been made and is read.
        cursor.executemany(
            "WITH m AS (SELECT rowid, user_id FROM memories WHERE id = %(id)s FOR SHARE),"
            " v AS (INSERT INTO vectors (memory_rowid, embedding) SELECT rowid, %(v)s FROM m"
            "  ON CONFLICT (memory_rowid) DO UPDATE SET embedding = excluded.embedding, seq = nextval('vector_seq')"
            "  RETURNING memory_rowid)"
            " INSERT INTO vector_signs SELECT m.rowid, m.user_id, sign_bits(%(v)s)"
            "  FROM v JOIN m ON m.rowid = v.memory_rowid"
            " ON CONFLICT (memory_rowid) DO UPDATE SET user_id = excluded.user_id, bits = excluded.bits",
            [{"v": Vector(np.frombuffer(vector, dtype="<f4")), "id": memory_id} for memory_id, vector in vectors],
        )


def after(db: psycopg.Connection, seq: int, limit: int) -> list[StoredVector]:
    rows = db.execute(
        "SELECT seq, memory_rowid, embedding FROM vectors WHERE seq > %s ORDER BY seq LIMIT %s", (seq, limit)
    ).fetchall()
    return [StoredVector(s, key, _bytes(embedding)) for s, key, embedding in rows]


def of(db: psycopg.Connection, memory_ids: Sequence[str]) -> dict[str, bytes]:
    rows = db.execute(
        "SELECT m.id, v.embedding FROM memories m JOIN vectors v ON v.memory_rowid = m.rowid WHERE m.id = ANY(%s)",
        (list(memory_ids),),
    ).fetchall()
    return {memory_id: _bytes(embedding) for memory_id, embedding in rows}


def _bytes(embedding: Vector | np.ndarray) -> bytes:
    values = embedding.to_numpy() if isinstance(embedding, Vector) else embedding
    return np.asarray(values, dtype="<f4").tobytes()


def nearest(db: psycopg.Connection, query: Vectors, k: int) -> list[tuple[int, float]]:
    """The HNSW index's k nearest keys and cosines, best first, in one transaction of ``db``: walked
    at ``ef_search(k)``, and again at the widest when the best found is weak in a large index."""
    breadth = ef_search(k)
    found = walk(db, query, k, breadth)
    if found and found[0][1] < WEAK_NEAREST and breadth < MAX_EF_SEARCH and _estimated(db) >= WIDER_WALK_FROM:
        return walk(db, query, k, MAX_EF_SEARCH)
    return found


def walk(db: psycopg.Connection, query: Vectors, k: int, breadth: int) -> list[tuple[int, float]]:
    """One walk of the HNSW index at ``hnsw.ef_search`` = breadth: its k nearest, best first."""
    db.execute(f"SET LOCAL hnsw.ef_search = {breadth}")
    rows = db.execute(
        "SELECT memory_rowid, 1 - (embedding <=> %s) FROM vectors ORDER BY embedding <=> %s LIMIT %s",
        (Vector(query), Vector(query), k),
    ).fetchall()
    return [(int(key), float(cosine)) for key, cosine in rows]


def _estimated(db: psycopg.Connection) -> float:
    """The vectors the planner's statistics count (ANALYZE's; -1 before the first), read only for a
    weak match: a catalog row, not a count."""
    row = db.execute("SELECT reltuples FROM pg_class WHERE oid = 'vectors'::regclass").fetchone()
    return float(row[0]) if row else 0.0


class PostgresVectorSearch:
    """``VectorSearch`` in SQL: nothing to refresh or discard, the table is the index."""

    def __init__(self, connect: Connect, dialect: sql.Dialect) -> None:
        self._connect = connect
        self._dialect = dialect

    def refresh(self, storage: Storage) -> None:
        return None

    def discard(self, keys: Sequence[int]) -> None:
        return None  # drop_vectors deleted their rows

    def search(self, query: Vectors, k: int) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        with self._connect() as db:
            return nearest(db, query, k)

    def close(self, query: Vectors, k: int, floor: float) -> list[tuple[int, float]]:
        return self.close_many([query], k, floor)[0]

    def close_many(self, queries: Sequence[Vectors], k: int, floor: float) -> list[list[tuple[int, float]]]:
        """``close`` for each query, in one statement (a bulk import's batch): the server walks the
        HNSW index once a query, without a round trip each."""
        found: list[list[tuple[int, float]]] = [[] for _ in queries]
        if not queries or k <= 0:
            return found
        with self._connect() as db:
            db.execute(f"SET LOCAL hnsw.ef_search = {ef_search(k, CHECK_BREADTH)}")
            # The array in binary (%b): psycopg sends a list as text by default, and writing 512
            # vectors as decimal text took ~180 ms a batch (~0.35 ms a memory of an import), 3 ms so.
            rows = db.execute(
                "SELECT q.i, n.memory_rowid, n.cosine FROM unnest(%b::vector[]) WITH ORDINALITY AS q(v, i)"
                " CROSS JOIN LATERAL (SELECT memory_rowid, 1 - (embedding <=> q.v) AS cosine FROM vectors"
                "  ORDER BY embedding <=> q.v LIMIT %s) n"
                " WHERE n.cosine >= %s ORDER BY q.i, n.cosine DESC",
                ([Vector(query) for query in queries], k, floor),
            ).fetchall()
        for position, key, cosine in rows:
            found[position - 1].append((int(key), float(cosine)))
        return found

    def search_passing(self, query: Vectors, k: int, filters: Filters, storage: Storage) -> list[tuple[int, float]]:
        """One statement: of the memories that pass, the SHORTLIST whose sign bits are closest to the
        query's are gathered into an array in the server and their vectors scored exactly. When the
        filter is a user's, the keys that pass come from the user index and the bits from the user's
        index on ``vector_signs`` (postgres_schema.m006), without reading a memory's row. The keys
        never travel to the process and back (a user's 10,000 took ~25 ms as a parameter), and only
        the shortlist's vectors are read: each is on a page of its own."""
        if k <= 0:
            return []
        where, params = sql.where(filters, self._dialect)
        # Said in the join, the user is the planner's to filter vector_signs by as well.
        same_user = " AND s.user_id = m.user_id" if filters.user_id is not None else ""
        shortlist = max(SHORTLIST, SHORTLIST_PER_RESULT * k)
        vector = Vector(query)
        with self._connect() as db:
            # Ordered by the cosine, not by the distance operator, so never by the (approximate)
            # HNSW index: an exact score of just these rows, found by their primary key. The query's
            # sign bits are an InitPlan: computed once, not once a row. A memory without sign bits
            # (no vector, or one an older mnemo still running wrote) sorts last.
            rows = db.execute(
                "SELECT memory_rowid, 1 - (embedding <=> %s) AS cosine FROM vectors"
                " WHERE memory_rowid = ANY(ARRAY(SELECT m.rowid FROM memories m"
                f"  LEFT JOIN vector_signs s ON s.memory_rowid = m.rowid{same_user} WHERE {where}"
                "  ORDER BY bit_count(s.bits # (SELECT sign_bits(%s))) LIMIT %s))"
                " ORDER BY cosine DESC LIMIT %s",
                [vector, *params, vector, shortlist, k],
            ).fetchall()
        return [(int(key), float(cosine)) for key, cosine in rows]

    def similarity(self, query: Vectors, keys: Sequence[int]) -> dict[int, float]:
        if not keys:
            return {}
        with self._connect() as db:
            rows = db.execute(
                "SELECT memory_rowid, 1 - (embedding <=> %s) FROM vectors WHERE memory_rowid = ANY(%s)",
                (Vector(query), list(keys)),
            ).fetchall()
        return {int(key): float(cosine) for key, cosine in rows}

    def vectors(self, keys: Sequence[int]) -> dict[int, Vectors]:
        if not keys:
            return {}
        with self._connect() as db:
            rows = db.execute(
                "SELECT memory_rowid, embedding FROM vectors WHERE memory_rowid = ANY(%s)", (list(keys),)
            ).fetchall()
        return {int(key): np.frombuffer(_bytes(embedding), dtype="<f4").copy() for key, embedding in rows}
