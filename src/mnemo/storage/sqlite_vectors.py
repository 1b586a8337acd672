"""SQL of a SQLite store's vectors table, over one connection. Each vector row has a ``seq`` that
grows with every write, which the engine's in-memory index tails (mnemo.search.vector_layers)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from mnemo.storage import StoredVector


def put(db: sqlite3.Connection, vectors: Sequence[tuple[str, bytes]]) -> None:
    for memory_id, vector in vectors:
        row = db.execute("SELECT rowid FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            continue  # deleted meanwhile: nothing to index
        # Delete then insert, so the row gets a new seq that readers will notice.
        db.execute("DELETE FROM vectors WHERE memory_rowid = ?", (row[0],))
        db.execute("INSERT INTO vectors (memory_rowid, vector) VALUES (?, ?)", (row[0], vector))


def after(db: sqlite3.Connection, seq: int, limit: int) -> list[StoredVector]:
    rows = db.execute(
        "SELECT seq, memory_rowid, vector FROM vectors WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
    ).fetchall()
    return [StoredVector(*row) for row in rows]


def of(db: sqlite3.Connection, memory_ids: Sequence[str]) -> dict[str, bytes]:
    if not memory_ids:
        return {}
    rows = db.execute(
        "SELECT m.id, v.vector FROM memories m JOIN vectors v ON v.memory_rowid = m.rowid"
        f" WHERE m.id IN ({', '.join('?' * len(memory_ids))})",
        list(memory_ids),
    ).fetchall()
    return dict(rows)
