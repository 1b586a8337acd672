"""Damaged database files on disk: noticed at open, refused by every profile, never rewritten, restorable."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters

from mnemo.app import open_service
from mnemo.cli import cli
from mnemo.config import Settings
from mnemo.serve.server import build_server
from mnemo.storage.sqlite import DB_FILENAME, SQLiteStorage
from mnemo.storage.sqlite_files import backups
from mnemo.storage.sqlite_schema import MIGRATIONS

PAGE = 4096
# Per profile: a read and a write, and the word its spec's error uses for a damaged store.
CALLS: dict[str, tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]], str]] = {
    "full": (("list_memories", {}), ("store_memory", {"content": "a new fact"}), "STORAGE_ERROR"),
    "agent": (("query_memories", {}), ("store_memory", {"content": "a new fact", "type": "core"}), "CORRUPTED_DATA"),
    "memento": (
        ("list_recent_memories", {}),
        ("store_memory", {"content": "a new fact", "subject": "Emma", "category": "fact"}),
        "STORAGE_ERROR",
    ),
    "stores": (
        ("list_memories", {"store": "default"}),
        ("add_memory", {"store": "default", "path": "a/b", "content": "a new fact"}),
        "CORRUPTED_DATA",
    ),
    "shared": (("read_memory", {}), ("add_memory", {"agent_name": "a", "content": "a new fact"}), "damaged"),
}


def _fill(settings: Settings, count: int = 60) -> None:
    service = open_service(settings)
    try:
        for n in range(count):
            service.store(f"fact number {n}: " + "the quick brown fox jumps over the lazy dog " * 8)
        assert service.storage.back_up("test") is not None
    finally:
        service.storage.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def _error_text(client: Client, tool: str, args: dict[str, Any]) -> str:
    try:
        result = await client.call_tool(tool, args)
    except MCPError as exc:  # spec 002 answers with protocol errors
        return json.dumps({"message": exc.error.message, "data": exc.error.data})
    assert result.is_error or '"success": false' in result.content[0].text, result.content
    return result.content[0].text


async def _every_profile_refuses(settings: Settings) -> None:
    for profile, (read, write, word) in CALLS.items():
        server = build_server(settings, profile)
        try:
            async with Client(server) as client:
                for tool, args in (read, write):
                    text = await _error_text(client, tool, args)
                    assert word in text, (profile, tool, text)
                    assert str(settings.home) not in text, (profile, tool, text)  # the store is named, not its path
        finally:
            server.close()


async def _health(settings: Settings) -> dict[str, Any]:
    server = build_server(settings, "shared")
    try:
        async with Client(server) as client:
            result = await client.call_tool("health_check", {})
            return json.loads(result.content[0].text)
    finally:
        server.close()


def _truncate(path: Path) -> None:
    path.write_bytes(b"")


def _overwrite_a_page(path: Path) -> None:
    with path.open("r+b") as f:
        f.seek(5 * PAGE)
        f.write(b"\xab" * PAGE)


def _drop_a_table(path: Path) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("DROP TABLE links")


@pytest.mark.parametrize("damage", [_truncate, _overwrite_a_page, _drop_a_table], ids=lambda d: d.__name__)
async def test_a_damaged_file_is_refused_by_every_profile_left_as_it_is_and_restored_from_its_backup(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Callable[[Path], None]
):
    _fill(settings)
    database = settings.store_folder() / DB_FILENAME
    damage(database)
    before = _digest(database)

    await _every_profile_refuses(settings)
    health = await _health(settings)
    assert health["success"] is False
    assert health["checks"]["json_parsing"]["status"] != "ok"
    assert _digest(database) == before  # nothing was written into the damaged file

    monkeypatch.setenv("MNEMO_HOME", str(settings.home))
    monkeypatch.setenv("MNEMO_EMBEDDER", "none")
    restored = CliRunner().invoke(cli, ["stores", "restore", "--json"])
    assert restored.exit_code == 0, restored.output
    report = json.loads(restored.stdout)
    assert report["backup"] == backups(database.parent)[-1].name
    aside = database.parent / report["set_aside"][0]
    assert _digest(aside) == before  # kept beside it, never deleted
    service = open_service(settings)
    try:
        assert service.list(limit=100).total == 60
        assert service.storage.check_integrity() == []
    finally:
        service.storage.close()


def test_a_zero_length_file_is_not_set_up_as_a_new_store(settings: Settings):
    database = settings.store_folder() / DB_FILENAME
    database.parent.mkdir(parents=True)
    database.write_bytes(b"")
    service = open_service(settings)
    try:
        with pytest.raises(Exception, match="empty"):
            service.list()
    finally:
        service.storage.close()
    assert database.stat().st_size == 0
    assert not backups(database.parent)


async def test_serve_on_a_store_from_a_newer_mnemo_starts_and_answers_each_call_with_why(tmp_path: Path):
    home = tmp_path / "home"
    database = home / "stores" / "default" / DB_FILENAME
    database.parent.mkdir(parents=True)
    with closing(sqlite3.connect(database, isolation_level=None)) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnemo", "serve", "--profile", "full"],
        env={"MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(tmp_path / "config"), "MNEMO_EMBEDDER": "none"},
        cwd=tmp_path,
    )
    async with Client(params) as client:
        result = await client.call_tool("list_memories", {})
    assert result.is_error
    assert "newer than this mnemo understands" in result.content[0].text
    assert str(home) not in result.content[0].text


def test_servers_started_together_make_one_daily_backup(settings: Settings):
    from mnemo.serve.server import DAILY_BACKUP_S

    service = open_service(settings)
    for n in range(300):
        service.store(f"fact number {n}: " + "the quick brown fox jumps over the lazy dog " * 8)
    service.storage.close()
    starting = [open_service(settings).storage for _ in range(4)]
    together = threading.Barrier(len(starting))

    def start(storage: SQLiteStorage) -> str | None:
        together.wait()
        return storage.back_up("at-start", min_interval_s=DAILY_BACKUP_S)

    try:
        with ThreadPoolExecutor(len(starting)) as servers:
            written = list(servers.map(start, starting))
    finally:
        for storage in starting:
            storage.close()
    assert sum(name is not None for name in written) == 1
    assert len(backups(settings.store_folder())) == 1
