"""The database file of a store: is it whole, its backups, and putting the last good one back.

A store is ``<folder>/memory.db``; its backups are whole SQLite databases, written with SQLite's
online backup API (a consistent copy while other connections read and write):

    backups/memory-<UTC time>-<reason>.db    the newest KEEP_BACKUPS kept

A missing file is a new store. A file that is there but empty, fails ``PRAGMA quick_check`` or
lacks a table or index its schema version has, is a damaged store: it is never written to, and
``restore`` sets it aside (renamed, never deleted) and copies the newest good backup in its place.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from mnemo.errors import CorruptedData, NotFound, StorageError, reason_of

DB_FILENAME = "memory.db"
BACKUP_DIR = "backups"
INDEX_FOLDER = "vector-index"  # the vector index's snapshots (mnemo.search.vector_graph), rebuilt at will
KEEP_BACKUPS = 10
QUICK_CHECK_MAX_BYTES = 256 * 1024 * 1024  # checked at open up to here (~0.3 s at 280 MB on 2 cores)
_SIDE_FILES = ("-wal", "-shm")
_BACKUP_NAME = re.compile(r"memory-\d{8}T\d{6}\d*Z-[a-z0-9-]+\.db")


@dataclass(frozen=True, slots=True)
class Restored:
    backup: str  # the backup's file name, in the store's backups folder or as given
    set_aside: list[str]  # the file names the damaged (or replaced) database now has, beside it


def empty_file_problem(path: Path) -> str | None:
    """A file of 0 bytes where a store is expected (and no write-ahead log holding its pages)."""
    wal = path.with_name(path.name + "-wal")
    if path.is_file() and path.stat().st_size == 0 and not (wal.is_file() and wal.stat().st_size > 0):
        return "its database file is empty (0 bytes); a new store has no file at all"
    return None


def create(path: Path) -> None:
    """Make a new, empty WAL database at ``path`` unless one is there, in one step: it is built
    under another name and linked into place, so no process ever sees a 0-byte ``memory.db`` of
    ours being born and an empty file can only be damage."""
    if path.exists():
        return
    try:
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.new-")
    except OSError as exc:
        raise StorageError(f"could not create the store's database: {reason_of(exc)}") from exc
    os.close(handle)
    try:
        db = sqlite3.connect(partial, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # writes the header page
        finally:
            db.close()
        with suppress(FileExistsError):  # another process made it first: theirs is as good
            os.link(partial, path)
    finally:
        for leftover in (partial, partial + "-wal", partial + "-shm"):
            with suppress(FileNotFoundError):
                os.unlink(leftover)


@cache
def expected_objects(version: int, migrations: tuple[Callable[[sqlite3.Connection], None], ...]) -> frozenset[str]:
    """The tables, indexes and triggers the first ``version`` migrations make, read from a scratch database."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for migration in migrations[:version]:
            migration(db)
        return frozenset(f"{kind} {name}" for kind, name in db.execute("SELECT type, name FROM sqlite_master"))
    finally:
        db.close()


def problems(db: sqlite3.Connection, size_bytes: int, expected: frozenset[str], *, thorough: bool) -> list[str]:
    """What is wrong with an open database: objects of its schema that are missing, and what
    ``PRAGMA quick_check`` finds (only up to ``QUICK_CHECK_MAX_BYTES`` unless ``thorough``)."""
    present = {f"{kind} {name}" for kind, name in db.execute("SELECT type, name FROM sqlite_master")}
    found = [f"{what} is missing" for what in sorted(expected - present)]
    if thorough or size_bytes <= QUICK_CHECK_MAX_BYTES:
        rows = [str(row[0]) for row in db.execute("PRAGMA quick_check")]
        found += [] if rows == ["ok"] else rows[:20]
    return found


def backup_dir(folder: Path) -> Path:
    return folder / BACKUP_DIR


def backups(folder: Path) -> list[Path]:
    """The store's database backups, oldest first (their names start with the time they were written)."""
    directory = backup_dir(folder)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("memory-*.db") if _BACKUP_NAME.fullmatch(p.name))


@contextmanager
def backups_locked(folder: Path) -> Iterator[None]:
    """Held while one process decides on and writes a backup: servers started together then make
    one daily copy, not one each (which would also push older backups out of the newest ten)."""
    directory = backup_dir(folder)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = open(directory / ".lock", "a+b")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise StorageError(f"could not write a backup of the store: {reason_of(exc)}") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def write_backup(source: sqlite3.Connection, folder: Path, reason: str, now: datetime) -> Path:
    """Copy the open database into a new backup, completely or not at all; keep the newest KEEP_BACKUPS."""
    directory = backup_dir(folder)
    path = directory / f"memory-{now.astimezone(UTC).strftime('%Y%m%dT%H%M%S%fZ')}-{reason}.db"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=directory, suffix=".tmp")
        os.close(handle)
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)
        finally:
            copy.close()
        os.replace(partial, path)  # a reader never sees half a backup
    except (OSError, sqlite3.Error) as exc:
        raise StorageError(f"could not write a backup of the store: {reason_of(exc)}") from exc
    for old in backups(folder)[:-KEEP_BACKUPS]:
        old.unlink(missing_ok=True)
    return path


def check_backup(path: Path) -> list[str]:
    """What is wrong with a backup file (read only); empty when it is a whole database."""
    if not path.is_file() or path.stat().st_size == 0:
        return ["the file is missing or empty"]
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = [str(row[0]) for row in db.execute("PRAGMA quick_check")]
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    except sqlite3.Error as exc:
        return [str(exc)]
    return ([] if rows == ["ok"] else rows[:5]) + ([] if "memories" in tables else ["it holds no memories table"])


def restore(folder: Path, store: str, backup: Path | None, now: datetime) -> Restored:
    """Put a backup (the newest whole one when none is named) in place of the store's database.

    The current database and its side files are renamed ``<name>.damaged-<time>``, never deleted.
    Servers using the store must be stopped first: they hold the old file open.
    """
    candidates: Sequence[Path] = [backup] if backup is not None else list(reversed(backups(folder)))
    chosen = next((c for c in candidates if not check_backup(c)), None)
    if chosen is None:
        if backup is not None:
            raise CorruptedData(f"{backup.name} is not a whole database: {'; '.join(check_backup(backup))}")
        raise NotFound(f"store {store!r} has no whole backup in its {BACKUP_DIR} folder", store=store)
    database = folder / DB_FILENAME
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    set_aside = []
    try:
        for suffix in ("", *_SIDE_FILES):
            current = folder / (DB_FILENAME + suffix)
            if current.exists():
                aside = current.with_name(f"{current.name}.damaged-{stamp}")
                os.replace(current, aside)
                set_aside.append(aside.name)
        handle, partial = tempfile.mkstemp(dir=folder, suffix=".tmp")
        os.close(handle)
        with open(chosen, "rb") as source, open(partial, "wb") as target:
            while block := source.read(1024 * 1024):
                target.write(block)
            target.flush()
            os.fsync(target.fileno())
        os.replace(partial, database)
        # The vector index's snapshots describe the database set aside: the next search rebuilds them.
        shutil.rmtree(folder / INDEX_FOLDER, ignore_errors=True)
    except OSError as exc:
        raise StorageError(f"could not restore store {store!r}: {reason_of(exc)}", store=store) from exc
    return Restored(chosen.name, set_aside)
