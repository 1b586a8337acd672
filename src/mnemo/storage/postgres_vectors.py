"""Vectors on PostgreSQL: pgvector rows, fed to each server's in-memory index in commit order.

A server searches the vectors in its own memory and, past ``GRAPH_FROM`` of them, in a snapshot
graph on its disk (``mnemo.search.vector_layers``, as for SQLite), and takes in what any server
wrote by reading the vectors after the last ``seq`` it saw. ``seq`` lives in ``vector_feed`` and is
given at commit time in commit order (postgres_schema.m014), so that reading misses nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import psycopg
from pgvector import Vector

from mnemo.storage import StoredVector
from mnemo.storage.postgres_schema import fix_dimension


def put(db: psycopg.Connection, vectors: Sequence[tuple[str, bytes]]) -> list[StoredVector]:
    """Store each memory's vector (replacing its old one; its place in the feed comes at commit);
    deleted memories are skipped. The vectors written, under their keys, with no place yet (0)."""
    if not vectors:
        return []
    fix_dimension(db, len(vectors[0][1]) // 4)
    written = []
    with db.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO vectors (memory_rowid, embedding) SELECT rowid, %(v)s FROM memories WHERE id = %(id)s"
            " ON CONFLICT (memory_rowid) DO UPDATE SET embedding = excluded.embedding RETURNING memory_rowid",
            [{"v": Vector(np.frombuffer(vector, dtype="<f4")), "id": memory_id} for memory_id, vector in vectors],
            returning=True,
        )
        for _, vector in vectors:  # one result a vector: its key, or none for a deleted memory
            if (row := cursor.fetchone()) is not None:
                written.append(StoredVector(0, int(row[0]), vector))
            cursor.nextset()
    return written


def after(db: psycopg.Connection, seq: int, limit: int) -> list[StoredVector]:
    # Each vector found by its key (the LIMIT keeps the planner from making the join a hash join,
    # which scans every vector: it did while vector_feed had no statistics, 3.6 ms instead of 0.6 at
    # 4,000). In binary: a server's first search reads every vector, 5,000 took 0.59 s as text, 0.08 so.
    with db.cursor(binary=True) as cursor:
        rows = cursor.execute(
            "SELECT f.seq, f.memory_rowid, v.embedding"
            " FROM (SELECT seq, memory_rowid FROM vector_feed WHERE seq > %s ORDER BY seq LIMIT %s) f"
            " CROSS JOIN LATERAL (SELECT embedding FROM vectors WHERE memory_rowid = f.memory_rowid LIMIT 1) v"
            " ORDER BY f.seq",
            (seq, limit),
        ).fetchall()
    return [StoredVector(s, key, _bytes(embedding)) for s, key, embedding in rows]


def last_seq(db: psycopg.Connection) -> int:
    row = db.execute("SELECT COALESCE(MAX(seq), 0) FROM vector_feed").fetchone()
    return int(row[0]) if row else 0


def of(db: psycopg.Connection, memory_ids: Sequence[str]) -> dict[str, bytes]:
    with db.cursor(binary=True) as cursor:
        rows = cursor.execute(
            "SELECT m.id, v.embedding FROM memories m JOIN vectors v ON v.memory_rowid = m.rowid WHERE m.id = ANY(%s)",
            (list(memory_ids),),
        ).fetchall()
    return {memory_id: _bytes(embedding) for memory_id, embedding in rows}


def _bytes(embedding: Vector | np.ndarray) -> bytes:
    values = embedding.to_numpy() if isinstance(embedding, Vector) else embedding
    return np.asarray(values, dtype="<f4").tobytes()
