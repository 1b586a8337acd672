"""The files spec 003's shared space keeps beside its store: backups and the archive of rotated entries.

Both hold whole memory records as JSON, so nothing the store knew is lost and a backup can be put
back (``SharedSpace.restore_backup``). Layout inside the store's folder:

    backups/shared-<UTC time>-<id>[-<user>].json   one per clear_memory, each user's newest KEEP_BACKUPS kept
    archive/shared-<YYYY-MM>.jsonl                 one line per rotated entry: {"rotated_at", "entry"}

``<user>`` is a digest of the user who cleared (any text may be a user id), absent for the local
caller: one user's clears never push another's backups out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo.errors import InvalidInput, StorageError, reason_of
from mnemo.model import AccessLevel, Context, Memory, Status, from_iso, new_id, to_iso

BACKUP_DIR = "backups"
ARCHIVE_DIR = "archive"
KEEP_BACKUPS = 10
BACKUP_FORMAT = "mnemo-shared-backup"
BACKUP_VERSION = 1
_TIMES = ("created_at", "updated_at", "accessed_at", "expires_at", "forgotten_at", "recoverable_until")


def record(memory: Memory) -> dict[str, Any]:
    """A memory as plain JSON values, every field kept."""
    data = dataclasses.asdict(memory)
    for name in _TIMES:
        data[name] = None if data[name] is None else to_iso(data[name])
    return data


def from_record(data: dict[str, Any]) -> Memory:
    try:
        values = dict(data)
        for name in _TIMES:
            values[name] = None if values.get(name) is None else from_iso(values[name])
        values["tags"] = tuple(values.get("tags", ()))
        values["auto_tags"] = tuple(values.get("auto_tags", ()))
        values["context"] = Context(**values.get("context", {}))
        values["access_level"] = AccessLevel(values.get("access_level", AccessLevel.PRIVATE))
        values["status"] = Status(values.get("status", Status.ACTIVE))
        return Memory(**values)
    except (TypeError, ValueError, KeyError) as exc:
        raise InvalidInput(f"not a memory record: {exc}") from exc


def backup_dir(folder: Path) -> Path:
    return folder / BACKUP_DIR


def backups(folder: Path) -> list[Path]:
    """The backup files, oldest first (their names start with the time they were written)."""
    directory = backup_dir(folder)
    return sorted(directory.glob("shared-*.json")) if directory.is_dir() else []


def _writer_tag(user: str | None) -> str:
    return "" if user is None else "-" + hashlib.sha256(user.encode()).hexdigest()[:16]


def _writer_tag_of(backup: Path) -> str:
    """The writer's tag in a backup's name (after its time and id); "" for the local caller's."""
    parts = backup.stem.split("-", 3)
    return "-" + parts[3] if len(parts) > 3 else ""


def write_backup(folder: Path, store: str, memories: Sequence[Memory], now: datetime, user: str | None) -> Path:
    """Write the memories to a new backup file, completely or not at all; keep the user's newest KEEP_BACKUPS."""
    body = {
        "format": BACKUP_FORMAT,
        "version": BACKUP_VERSION,
        "store": store,
        "created_at": to_iso(now),
        "entries": [record(m) for m in memories],
    }
    directory = backup_dir(folder)
    tag = _writer_tag(user)
    path = directory / f"shared-{now.strftime('%Y%m%dT%H%M%S%fZ')}-{new_id()[:8]}{tag}.json"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # Written beside its final name and renamed: a reader never sees half a backup.
        with tempfile.NamedTemporaryFile("w", dir=directory, suffix=".tmp", delete=False, encoding="utf-8") as out:
            json.dump(body, out, ensure_ascii=False)
            out.flush()
            os.fsync(out.fileno())
        os.replace(out.name, path)
        for old in [b for b in backups(folder) if _writer_tag_of(b) == tag][:-KEEP_BACKUPS]:
            old.unlink(missing_ok=True)
    except OSError as exc:
        raise StorageError(f"could not write the backup: {reason_of(exc)}") from exc
    return path


def read_backup(path: Path) -> list[Memory]:
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"cannot read the backup file {path}: {reason_of(exc)}", path=str(path)) from exc
    except ValueError as exc:
        raise InvalidInput(f"{path} is not a JSON file: {exc}", path=str(path)) from exc
    if not isinstance(body, dict) or body.get("format") != BACKUP_FORMAT or body.get("version") != BACKUP_VERSION:
        raise InvalidInput(f"{path} is not a backup written by the shared space's clear_memory", path=str(path))
    return [from_record(entry) for entry in body.get("entries", [])]


def append_archive(folder: Path, memories: Sequence[Memory], now: datetime) -> Path:
    """Add rotated entries to this month's archive file, one JSON line each."""
    directory = folder / ARCHIVE_DIR
    path = directory / f"shared-{now.strftime('%Y-%m')}.jsonl"
    lines = "".join(
        json.dumps({"rotated_at": to_iso(now), "entry": record(m)}, ensure_ascii=False) + "\n" for m in memories
    )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # One unbuffered append, so the lines of two processes never interleave.
        with path.open("ab", buffering=0) as out:
            out.write(lines.encode())
    except OSError as exc:
        raise StorageError(f"could not write the archive {path.name}: {reason_of(exc)}") from exc
    return path
