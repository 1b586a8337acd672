"""The embedded backend: one SQLite database per store, in the store's folder.

Concurrency policy: every thread gets its own connection (sqlite3 connections must stay on the
thread that made them); WAL lets readers run beside one writer; every write is a
``BEGIN IMMEDIATE`` transaction (in ``batch()``, a savepoint of one), so two processes never both
read-then-upgrade and deadlock; ``busy_timeout`` makes a writer wait for another instead of
failing, and if the store stays busy past it the caller gets ``Locked``, never a raw "database is
locked". ``close()`` may come from any thread while others still read: it interrupts the statements
in flight and waits for them to leave before it closes a connection (closing one under a running
statement crashed the interpreter), and any use after it is a ``StorageError``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from mnemo.errors import CorruptedData, Locked, MnemoError, StorageError
from mnemo.model import (
    Change,
    Memory,
    to_iso,
)
from mnemo.query import Filters, StoredText, TextHit, fold_case
from mnemo.storage import (
    EventPattern,
    StoredVector,
    StoreFile,
    Totals,
    sql,
    sqlite_files,
    sqlite_jobs,
    sqlite_plans,
    sqlite_requests,
    sqlite_stats,
    sqlite_text,
    sqlite_vectors,
)
from mnemo.storage.sql_store import SQLStore
from mnemo.storage.sqlite_files import DB_FILENAME
from mnemo.storage.sqlite_schema import CHANGE_COUNTER, CHANGE_NUMBERING, ENTRY_COUNTER, MIGRATIONS

CLOSE_WAIT_S = 5.0  # how long close() waits for the statements it interrupted to stop
INTERRUPT_EVERY_S = 0.01  # while it waits, interrupted again: a statement started since is stopped too
RANKED_MATCHES = 500  # matches of a search's common words that are ranked, the newest (see sqlite_text.ranked_matches)
_BUSY_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_CORRUPT_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


class SQLiteStorage(SQLStore):
    """A store kept in ``<folder>/memory.db``."""

    _dialect = sql.SQLITE
    _unique_violation = sqlite3.IntegrityError
    _bucket_expr = sqlite_stats.BUCKET_EXPR
    _jobs: ClassVar[Any] = sqlite_jobs
    _requests: ClassVar[Any] = sqlite_requests

    def __init__(self, folder: Path, name: str = "default", busy_timeout_s: float = 30.0) -> None:
        self.name = name
        self.folder = folder
        self.path = folder / DB_FILENAME
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._in_use: dict[sqlite3.Connection, int] = {}  # connection -> its thread's blocks in flight
        self._left = threading.Condition(self._lock)  # notified when a connection's last block ends
        self._closed = False
        self._refusal: MnemoError | None = None
        folder.mkdir(parents=True, exist_ok=True)
        try:
            self._open_checked()
        except (CorruptedData, StorageError) as refusal:
            # The store still opens, and every operation reports why it cannot be used (damaged, or
            # from a newer mnemo): a server starts and tells each caller, and the file is left as it
            # is, for `mnemo stores restore` or for the user to inspect.
            self.close()
            self._refusal = refusal
        except BaseException:
            self.close()  # a refused store keeps no handle on its file
            raise

    def _open_checked(self) -> None:
        """Refuse a damaged or newer database before anything is written to it, back up one that
        is about to be migrated, then migrate."""
        empty = sqlite_files.empty_file_problem(self.path)
        if empty is not None:
            raise CorruptedData(f"store {self.name!r} is damaged: {empty}", store=self.name)
        existed = self.path.is_file()
        with self._translated():
            sqlite_files.create(self.path)
        with self._held() as db, self._translated():
            (version,) = db.execute("PRAGMA user_version").fetchone()
        if version > len(MIGRATIONS):
            raise StorageError(
                f"store {self.name!r} has schema version {version}, newer than this mnemo understands "
                f"({len(MIGRATIONS)}); upgrade mnemo to open it",
                store=self.name,
                schema_version=version,
                supported=len(MIGRATIONS),
            )
        if existed:
            with self._held() as db:
                self._raise_if_damaged(db, version, thorough=False)
                if version < len(MIGRATIONS):
                    self._write_backup(db, f"before-migration-{version + 1}")
        self._migrate()

    # -- connections and transactions -----------------------------------------------
    @contextmanager
    def _held(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, held until the block ends (see ``_take``)."""
        db = self._take()
        try:
            yield db
        finally:
            self._give_back(db)

    def _take(self) -> sqlite3.Connection:
        """This thread's connection, counted in use until ``_give_back`` (uses nest): ``close()``
        interrupts what runs on it and waits for it to be given back before it closes it. Every
        statement runs between the two (``_read``, ``_write``, ``_held``)."""
        db = self._connection()
        with self._lock:
            if self._closed:  # closed since the connection was taken
                raise self._closed_error()
            self._in_use[db] = self._in_use.get(db, 0) + 1
        return db

    def _give_back(self, db: sqlite3.Connection) -> None:
        with self._lock:
            self._in_use[db] -= 1
            if not self._in_use[db]:
                del self._in_use[db]
                if self._closed:  # only close() waits (it set this under the lock first)
                    self._left.notify_all()
                    if db in self._connections:  # close() stopped waiting for it
                        self._connections.remove(db)
                        with suppress(sqlite3.Error):
                            db.close()

    def _closed_error(self) -> StorageError:
        return StorageError(f"store {self.name!r} is closed", store=self.name)

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection, made at its first use; run statements on it in ``_held()``."""
        if self._refusal is not None:
            raise type(self._refusal)(self._refusal.message, **self._refusal.details)
        if self._closed:
            raise self._closed_error()
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            with self._translated():
                # Each thread uses only its own connection; close() may close them all from any thread.
                db = sqlite3.connect(
                    self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
                )
                try:
                    # Switching a new file to WAL takes an exclusive lock and SQLite does not wait for it.
                    self._execute_when_free(db, "PRAGMA journal_mode=WAL")
                    db.execute("PRAGMA synchronous=NORMAL")
                    db.execute("PRAGMA mmap_size=268435456")  # reads from the OS page cache
                    db.execute("PRAGMA foreign_keys=ON")
                    # Deleted content is overwritten, so a hard delete leaves nothing in free pages.
                    db.execute("PRAGMA secure_delete=ON")
                    db.create_function("mnemo_fold", 1, fold_case, deterministic=True)
                except sqlite3.Error:
                    db.close()  # e.g. not a database: keep no handle on the file
                    raise
            with self._lock:
                if self._closed:  # closed while this one was being made: it must not outlive the store
                    db.close()
                    raise self._closed_error()
                self._connections.append(db)
            self._local.db = db
        return db

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Map the driver's errors onto mnemo's, by error code, never by message text."""
        try:
            yield
        except MnemoError:
            raise
        except sqlite3.Error as exc:
            if self._closed:  # interrupted by close() (SQLITE_INTERRUPT, or a step of it failing)
                raise self._closed_error() from exc
            code = getattr(exc, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in _BUSY_CODES:
                raise Locked(f"store {self.name!r} stayed busy for {self._busy_timeout_s:g}s") from exc
            if code is not None and code & 0xFF in _CORRUPT_CODES:
                # From now on every call is refused: nothing more is read from or written into it.
                self._refusal = CorruptedData(f"store {self.name!r} is damaged: {exc}", store=self.name)
                raise CorruptedData(self._refusal.message, store=self.name) from exc
            raise StorageError(f"store {self.name!r} failed: {exc}", store=self.name) from exc

    @contextmanager
    def batch(self) -> Iterator[None]:
        """This thread's writes in the block as one transaction, each a savepoint in it (a write that
        fails undoes only itself); its reads see them. Other writers wait for the block's end."""
        if getattr(self._local, "batched", False):
            yield
            return
        with self._write():
            self._local.batched = True
            try:
                yield
            finally:
                self._local.batched = False

    def batching(self) -> bool:
        return bool(getattr(self._local, "batched", False))

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._take()
        try:
            with self._translated():
                batched = getattr(self._local, "batched", False)  # inside batch(): a savepoint of its transaction
                self._execute_when_free(db, "SAVEPOINT mnemo_write" if batched else "BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    db.execute("ROLLBACK TO mnemo_write" if batched else "ROLLBACK")
                    if batched:
                        db.execute("RELEASE mnemo_write")
                    raise
                db.execute("RELEASE mnemo_write" if batched else "COMMIT")
        finally:
            self._give_back(db)

    def _execute_when_free(self, db: sqlite3.Connection, statement: str) -> None:
        """Run a statement, retrying while another process holds the lock, up to the busy timeout.

        busy_timeout already waits in most cases; this covers the SQLITE_BUSY that SQLite returns
        at once (a journal-mode switch, or while another process recovers the WAL index).
        """
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                db.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorcode", 0) & 0xFF in _BUSY_CODES
                if not busy or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        db = self._take()
        try:
            with self._translated():
                if getattr(self._local, "batched", False):  # already in batch()'s transaction
                    yield db
                    return
                db.execute("BEGIN")
                try:
                    yield db
                finally:
                    db.execute("COMMIT")
        finally:
            self._give_back(db)

    def _migrate(self) -> None:
        started = time.monotonic()
        with self._write() as db:
            (current,) = db.execute("PRAGMA user_version").fetchone()
            if current > len(MIGRATIONS):  # another process upgraded it since the check at open
                raise StorageError(f"store {self.name!r} has a schema newer than this mnemo", store=self.name)
            if current == 0:
                db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
            for number, migration in enumerate(MIGRATIONS[current:], start=current + 1):
                migration(db)
                db.execute(
                    "INSERT INTO migrations VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                    (migration.__name__,),
                )
                db.execute(f"PRAGMA user_version = {number}")
        self._migrated([migration.__name__ for migration in MIGRATIONS[current:]], time.monotonic() - started)

    def applied_migrations(self) -> list[str]:
        with self._read() as db:
            return [name for (name,) in db.execute("SELECT name FROM migrations ORDER BY rowid")]

    def close(self) -> None:
        """Close every connection, from any thread; a second call does nothing.

        A statement still running on a connection (another thread's search) is interrupted, and
        that thread gets a ``StorageError``; the connection is closed once its block ended, waited
        for ``CLOSE_WAIT_S`` at most (past that, or when it is this thread's own, its thread closes
        it as the block ends). A use after this is a ``StorageError``.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            own = getattr(self._local, "db", None)  # busy here only if close() is called inside a block
            deadline = time.monotonic() + CLOSE_WAIT_S
            while busy := [db for db in self._in_use if db is not own]:
                for db in busy:
                    db.interrupt()
                if time.monotonic() >= deadline:
                    break
                self._left.wait(min(INTERRUPT_EVERY_S, max(0.0, deadline - time.monotonic())))
            for db in [db for db in self._connections if db not in self._in_use]:
                with suppress(sqlite3.Error):
                    db.close()
                self._connections.remove(db)
        self._local = threading.local()

    # -- single memories (the rest in SQLStore) ---------------------------------------------
    def _same_contents(self, db: sqlite3.Connection, new: Sequence[tuple[Memory, datetime]]) -> list[str | None]:
        # Checked inside the write transaction (BEGIN IMMEDIATE), so two processes cannot both store it.
        # The index is named: without statistics SQLite may pick another one that matches more of
        # the conditions (subject and status) and scan a whole store of unnamed subjects.
        rows = (
            db.execute(
                "SELECT id FROM memories INDEXED BY memories_signature"
                " WHERE signature = ? AND user_id IS ? AND subject_key IS ?"
                " AND status IN ('active', 'archived') AND (expires_at IS NULL OR expires_at > ?)"
                " ORDER BY created_at LIMIT 1",
                (memory.signature, memory.context.user_id, memory.subject_key, to_iso(at)),
            ).fetchone()
            for memory, at in new
        )
        return [None if row is None else str(row[0]) for row in rows]

    def _next_entry_number(self, db: sqlite3.Connection) -> int:
        """Counted in the settings table: unique across processes, never reused after deletes."""
        (number,) = db.execute(
            "INSERT INTO settings VALUES (?, '1') ON CONFLICT(key) DO UPDATE"
            " SET value = CAST(value AS INTEGER) + 1 RETURNING CAST(value AS INTEGER)",
            (ENTRY_COUNTER,),
        ).fetchone()
        return int(number)

    def _next_change_number(self, db: sqlite3.Connection) -> int:
        """Counted in the settings table: one writer at a time, so numbers grow in commit order."""
        (number,) = db.execute(
            "UPDATE settings SET value = CAST(value AS INTEGER) + 1 WHERE key = ? RETURNING CAST(value AS INTEGER)",
            (CHANGE_COUNTER,),
        ).fetchone()
        return int(number)

    def change_horizon(self) -> tuple[str, int]:
        query = "SELECT key, value FROM settings WHERE key IN (?, ?)"
        found = dict(self._rows(query, [CHANGE_NUMBERING, CHANGE_COUNTER]))
        return str(found[CHANGE_NUMBERING]), int(found[CHANGE_COUNTER]) + 1

    def purge(self, memory_ids: Sequence[str], changes: Sequence[Change]) -> None:
        """Remove memories for good: rows, index entries, links, backups and old content."""
        marks = self._marks(len(memory_ids))
        ids = list(memory_ids)
        with self._write() as db:
            for table, condition in (
                ("memories", f"id IN ({marks})"),
                ("backups", f"memory_id IN ({marks})"),
                ("links", f"source_id IN ({marks}) OR target_id IN ({marks})"),
            ):
                db.execute(f"DELETE FROM {table} WHERE {condition}", ids * condition.count("IN"))
            # History keeps who did what and when, but no longer what the memory said.
            db.execute(f"UPDATE versions SET previous = NULL WHERE memory_id IN ({marks})", ids)
            # FTS5 deletes only add tombstones; the old segments keep the words until merged.
            db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
            for change in changes:
                self._write_change(db, change, None)
        # The write-ahead log still holds the deleted pages until a checkpoint copies it back and
        # truncates it. Best effort: a reader in another process may hold the log, and then the
        # next automatic checkpoint overwrites it.
        with self._held() as db, self._translated():
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- paths (spec 002) ------------------------------------------------------------------
    def path_level(self, prefix: str, filters: Filters) -> tuple[list[Memory], dict[str, int]]:
        """The memories whose path is ``prefix`` + one segment, by path; and each next segment
        that has memories further down, with how many.

        The unique index on path serves the range ``prefix <= path < prefix-with-'/'-bumped``
        (the paths that start with the prefix); the root ("") is every path.
        """
        where, params = sql.where(filters)
        start = len(prefix) + 1
        in_range = "m.path >= ?" + (" AND m.path < ?" if prefix else "")
        bounds = [prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)] if prefix else [prefix]
        with self._read() as db:
            rows = db.execute(
                f"{sql.SELECT} WHERE {in_range} AND instr(substr(m.path, ?), '/') = 0 AND {where} ORDER BY m.path",
                [*bounds, start, *params],
            ).fetchall()
            groups = db.execute(
                "SELECT substr(rest, 1, instr(rest, '/') - 1) AS segment, COUNT(*) FROM"
                f" (SELECT substr(m.path, ?) AS rest FROM memories m WHERE {in_range} AND {where})"
                " WHERE instr(rest, '/') > 0 GROUP BY segment ORDER BY segment",
                [start, *bounds, *params],
            ).fetchall()
        return [sql.memory(row, self.name) for row in rows], dict(groups)

    # -- finding -----------------------------------------------------------------------
    def search_text(self, terms: Sequence[str], filters: Filters, limit: int) -> list[TextHit]:
        """The best ``limit`` matches that pass the filters, best first (see ``sqlite_text.search``)."""
        if not terms:
            return []
        with self._read() as db:
            return sqlite_text.search(db, terms, filters, limit, RANKED_MATCHES)

    # -- vectors -----------------------------------------------------------------------
    def packed_bytes(self) -> int:
        with self._read() as db:
            return int(db.execute("SELECT COALESCE(SUM(length(content_packed)), 0) FROM memories").fetchone()[0])

    def reset_vectors(self, model: str) -> None:
        """Forget every vector and record which model the next ones come from."""
        with self._write() as db:
            db.execute("DELETE FROM vectors")
            db.execute("INSERT OR REPLACE INTO settings VALUES ('vector_model', ?)", (model,))

    def put_vectors(self, vectors: Sequence[tuple[str, bytes]]) -> None:
        with self._write() as db:
            sqlite_vectors.put(db, vectors)

    def vectors_after(self, seq: int, limit: int) -> list[StoredVector]:
        with self._read() as db:
            return sqlite_vectors.after(db, seq, limit)

    def vectors_of(self, memory_ids: Sequence[str]) -> dict[str, bytes]:
        with self._read() as db:
            return sqlite_vectors.of(db, memory_ids)

    def keys_matching(self, filters: Filters) -> list[int]:
        # As one row, a JSON array: each row of a result is a step that lets go of the GIL and takes
        # it back, beside a recall's word search. A user's ~10,000 keys of 1,000,000 memories took
        # 3.3-3.8 ms read a row each, 1.6 ms as one array.
        where, params = sql.where(filters)
        with self._read() as db:
            (keys,) = db.execute(f"SELECT json_group_array(m.rowid) FROM memories m WHERE {where}", params).fetchone()
        return list(json.loads(keys))

    def keys_passing(self, keys: Sequence[int], filters: Filters) -> dict[int, str]:
        where, params = sql.where(filters)
        with self._read() as db:
            return dict(sqlite_text.passing(db, keys, where, params))

    def texts_passing(self, keys: Sequence[int], filters: Filters) -> dict[int, StoredText]:
        where, params = sql.where(filters)
        with self._read() as db:
            return sql.stored_texts(sqlite_text.passing(db, keys, where, params, sql.STORED_TEXT_COLUMNS))

    def keys_holding(self, keys: Sequence[int], terms: Sequence[str]) -> set[int]:
        """Which of these memories hold any of the terms in their words, as the word search matches them."""
        if not keys or not terms:
            return set()
        with self._read() as db:
            rows = db.execute(
                f"SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? AND rowid IN ({self._marks(len(keys))})",
                [sqlite_text.any_of(terms), *keys],
            )
            return {key for (key,) in rows}

    def keys_mentioning(self, keys: Sequence[int], subject: str) -> set[int]:
        """Which of these memories are about the subject, or name it in their content or tags."""
        if not keys:
            return set()
        marks = self._marks(len(keys))
        with self._read() as db:
            rows = db.execute(
                f"SELECT rowid FROM memories WHERE rowid IN ({marks}) AND subject_key = ?"
                f" UNION SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? AND rowid IN ({marks})",
                [*keys, subject, sqlite_text.any_of([subject]), *keys],
            )
            return {key for (key,) in rows}

    def refresh_statistics(self) -> None:
        """Nothing: SQLite keeps no statistics here (no ANALYZE); the plans that depend on counts
        count for themselves (``sqlite_plans``)."""

    def index_folder(self) -> Path:
        """Beside the database: the index's snapshot files (see mnemo.search.vector_graph)."""
        return self.path.parent / sqlite_files.INDEX_FOLDER

    def vector_bytes(self, filters: Filters | None = None) -> int:
        """Bytes of the vectors of the memories the filters keep (of every memory without filters)."""
        where, params = sql.where(filters) if filters is not None else ("1", [])
        with self._read() as db:
            (size,) = db.execute(
                f"SELECT COALESCE(SUM(length(v.vector)), 0) FROM vectors v JOIN memories m ON m.rowid = v.memory_rowid"
                f" WHERE {where}",
                params,
            ).fetchone()
        return size

    # -- statistics (SQL in sqlite_stats) ----------------------------------------------------
    def totals(self, filters: Filters) -> Totals:
        with self._read() as db:
            return sqlite_stats.totals(db, *sql.where(filters))

    def event_pattern(self, kind: str, start: datetime, end: datetime) -> EventPattern:
        with self._read() as db:
            return sqlite_stats.event_pattern(db, kind, start, end)

    def size_bytes(self) -> int:
        """Bytes on disk: the database with its write-ahead log."""
        return sum(p.stat().st_size for p in self.folder.glob(f"{DB_FILENAME}*") if p.is_file())

    # -- health ------------------------------------------------------------------------
    def store_file(self) -> StoreFile:
        return StoreFile(DB_FILENAME, self.path.is_file(), self.size_bytes())

    def check_write_lock(self, timeout_s: float) -> None:
        """Take the store's write lock and let it go at once; ``Locked`` if it stays held past the timeout.

        Waits at most ``timeout_s``, and never longer than the store's own busy timeout.
        """
        wait_ms = int(min(timeout_s, self._busy_timeout_s) * 1000)
        with self._held() as db, self._translated():
            db.execute(f"PRAGMA busy_timeout = {wait_ms}")
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("ROLLBACK")
            finally:
                db.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")

    def check_integrity(self) -> list[str]:
        """The problems of the database: missing tables, indexes or triggers of its schema, and
        what SQLite's ``PRAGMA quick_check`` finds, whatever the file's size."""
        with self._read() as db:
            (version,) = db.execute("PRAGMA user_version").fetchone()
            return sqlite_files.problems(db, self.size_bytes(), self._expected(version), thorough=True)

    def _page_where(self, filters: Filters, wanted: int | None) -> tuple[str, list[Any], bool]:
        if wanted is not None and (filters.tags_any or filters.tags_all):  # else no count decides: no read
            with self._read() as db:
                keyed = sqlite_plans.page_through_tags(db, filters, wanted)
            if keyed is not None:
                return (*sql.where(keyed, by_key=True), True)
        # Walking an order, each memory's tags are looked up as it comes: a list of the 202,902 with
        # a tag built first took 28 ms of a page at 1,000,000 memories (0.1 ms looked up).
        return (*sql.where(filters, tags_probed=True), False)

    def _sort_key(self, column: str, filters: Filters, where: str, params: list[Any], wanted: int | None) -> str:
        with self._read() as db:
            return sqlite_plans.sort_key(db, column, filters, where, params, wanted)

    def _count_matching(self, filters: Filters) -> int:
        with self._read() as db:
            return sqlite_plans.count(db, filters)

    def back_up(self, reason: str, min_interval_s: float = 0.0) -> str | None:
        """Copy the store, checked whole first, into its backups; the backup's file name, or None
        when the newest backup is younger than ``min_interval_s`` (one another process wrote
        meanwhile included)."""
        with sqlite_files.backups_locked(self.folder):
            newest = sqlite_files.backups(self.folder)[-1:]
            if newest and min_interval_s and time.time() - newest[0].stat().st_mtime < min_interval_s:
                return None
            with self._held() as db:
                with self._translated():
                    (version,) = db.execute("PRAGMA user_version").fetchone()
                self._raise_if_damaged(db, version, thorough=False)
                return self._write_backup(db, reason).name

    def _write_backup(self, db: sqlite3.Connection, reason: str) -> Path:
        with self._translated():
            return sqlite_files.write_backup(db, self.folder, reason, datetime.now(UTC))

    def _raise_if_damaged(self, db: sqlite3.Connection, version: int, *, thorough: bool) -> None:
        with self._translated():
            found = sqlite_files.problems(db, self.size_bytes(), self._expected(version), thorough=thorough)
        if found:
            self._refusal = CorruptedData(
                f"store {self.name!r} is damaged: {'; '.join(found[:3])}", store=self.name, problems=found
            )
            raise CorruptedData(self._refusal.message, **self._refusal.details)

    @staticmethod
    def _expected(version: int) -> frozenset[str]:
        made = sqlite_files.expected_objects(version, tuple(MIGRATIONS))
        return made | {"table migrations"} if version else made

    def __repr__(self) -> str:
        return f"SQLiteStorage({self.name!r}, {str(self.path)!r})"
