"""Copying a whole store from one SQL backend to another (``mnemo migrate``), as it is.

Every memory whatever its status, with the same ids, times, versions (history), links, backups,
events, settings (the entry counter included), recorded jobs and vectors. Storage keys are the
target's own: tags and vectors follow their memory by id. The target must hold no memory yet.
Request ledgers (rate counts, idempotency keys) are minutes-long and are not copied.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mnemo.errors import Conflict
from mnemo.query import Filters
from mnemo.storage import sql
from mnemo.storage.sql_store import SQLStore

BATCH = 500
_TIMED_TABLES = {  # table: its columns in order, and which of them hold a time
    "versions": ("id, memory_id, version, action, actor, reason, changed_at, user_id, conversation_id, category,"
                 " previous", {6}),
    "links": ("source_id, target_id, created_at", {2}),
    "backups": ("id, memory_id, created_at, keep_until, snapshot", {2, 3}),
    "events": ("kind, at, count", {1}),
}  # fmt: skip
# what a backend sets for itself: a copy numbers its changes anew (its syncs then compare every memory)
# The target's own: its vectors' dimension, change numbering and instance id (postgres_schema.INSTANCE_ID).
_NOT_COPIED_SETTINGS = {"vector_dimension", "last_change_number", "change_numbers", "store_id"}


def every_memory() -> Filters:
    """Filters that keep every memory of a store, whatever its status or expiry, for anyone."""
    return Filters(now=datetime.now(UTC), statuses=None, include_expired=True, visible_to=None)


def copy_store(
    source: SQLStore, target: SQLStore, progress: Callable[[int, int], None] = lambda done, total: None
) -> int:
    """Copy every memory and what goes with it; the number of memories copied. ``progress(done, total)``."""
    if target.count(every_memory()) > 0:
        raise Conflict(f"store {target.name!r} already holds memories: migrate into an empty store")
    total = source.count(every_memory())
    ids = _copy_memories(source, target, total, progress)
    for table, (columns, timed) in _TIMED_TABLES.items():
        _copy_table(source, target, table, columns, timed)
    with target._write() as db:
        for key, value in source._rows("SELECT key, value FROM settings"):
            if key not in _NOT_COPIED_SETTINGS:
                target._put_setting(db, key, value)
    for job in source.recent_jobs(1_000_000):
        target.put_job(job)
    seq = 0
    while batch := source.vectors_after(seq, BATCH):
        target.put_vectors([(ids[v.key], v.vector) for v in batch if v.key in ids])
        seq = batch[-1].seq
    return len(ids)


def _copy_memories(
    source: SQLStore, target: SQLStore, total: int, progress: Callable[[int, int], None]
) -> dict[int, str]:
    """The memories with their tags, in batches; the source's storage keys mapped to ids."""
    ids: dict[int, str] = {}
    last = 0
    while rows := source._rows(f"{sql.SELECT} WHERE m.rowid > ? ORDER BY m.rowid LIMIT ?", [last, BATCH]):
        memories = [sql.memory(row, target.name, source._dialect) for row in rows]
        target.insert_batch(memories)
        ids.update((row[0], memory.id) for row, memory in zip(rows, memories, strict=True))
        last = rows[-1][0]
        progress(len(ids), total)
    return ids


def _copy_table(source: SQLStore, target: SQLStore, table: str, columns: str, timed: set[int]) -> None:
    count = len(columns.split(","))
    read, write = source._dialect.read_time, target._dialect.time

    def converted(row: Any) -> tuple[Any, ...]:
        return tuple(write(read(v)) if i in timed and v is not None else v for i, v in enumerate(row))

    offset = 0
    while rows := source._rows(f"SELECT {columns} FROM {table} ORDER BY 1, 2 LIMIT ? OFFSET ?", [BATCH, offset]):
        with target._write() as db:
            target._many(
                db,
                target._q(f"INSERT INTO {table} ({columns}) VALUES ({target._marks(count)})"),
                [converted(r) for r in rows],
            )
        offset += len(rows)
