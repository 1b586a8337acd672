"""Spec 003's shared space beyond single calls: rotation into the archive, backups and their
restore, health checks that fail for real, lock timeouts and corruption, the 25,000-character cap,
meaning in search, the m003 migration, and entry numbers given out by several processes at once.
"""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client

from conftest import sqlite_only
from mnemo.app import open_service
from mnemo.cli import cli
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.local import LocalEmbedder
from mnemo.engine.service import MemoryService
from mnemo.engine.shared_space import SharedSpace
from mnemo.engine.space_files import KEEP_BACKUPS
from mnemo.errors import InvalidInput
from mnemo.model import Status, new_id
from mnemo.profiles import get_profile
from mnemo.profiles.shared import CHARACTER_LIMIT
from mnemo.serve.server import ProfileServer, build_server
from mnemo.storage.sqlite import SQLiteStorage
from mnemo.storage.sqlite_schema import MIGRATIONS
from spec003 import add, body, error, everything, text, words

pytestmark = pytest.mark.every_backend  # the storage contract: SQLite and PostgreSQL


@pytest.fixture
def server(settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    srv = build_server(settings, "shared", clock=clock)
    yield srv
    srv.service.storage.close()


@pytest.fixture
def small(tmp_path: Path, clock: ManualClock) -> Iterator[ProfileServer]:
    """A shared server whose space rotates past three entries and waits at most 0.3 s for the lock."""
    settings = Settings(home=tmp_path / "home", embedder="none", shared_max_entries=3, busy_timeout_s=0.3)
    srv = build_server(settings, "shared", clock=clock)
    yield srv
    srv.service.storage.close()


# -- rotation -----------------------------------------------------------------------------------
async def test_past_max_entries_the_oldest_are_rotated_into_the_archive_never_lost(small, clock):
    async with Client(small, raise_exceptions=True) as client:
        ids = []
        for i in range(5):
            ids.append((await add(client, f"entry {i}"))["entry_id"])
            clock.advance(minutes=1)
        answer = await body(client, "read_memory", response_format="json")
        assert [e["entry_id"] for e in answer["entries"]] == ids[2:]
        stats = await body(client, "get_memory_stats")
        assert (stats["total_entries"], stats["max_entries"], stats["entries_until_rotation"]) == (3, 3, 0)
        assert "rotated into the archive" in await error(client, "get_memory", entry_id=ids[0])

    storage = small.service.storage
    for rotated in ids[:2]:
        memory = small.service.get(rotated)
        assert (memory.status, memory.archive_tier) == (Status.ARCHIVED, "rotated")
    (archive,) = (storage.folder / "archive").glob("shared-*.jsonl")
    lines = [json.loads(line) for line in archive.read_text(encoding="utf-8").splitlines()]
    assert [line["entry"]["id"] for line in lines] == ids[:2]
    assert [line["entry"]["content"] for line in lines] == ["entry 0", "entry 1"]


async def test_entries_until_rotation_counts_down_as_the_space_fills(small):
    async with Client(small, raise_exceptions=True) as client:
        remaining = []
        for i in range(4):
            await add(client, f"entry {i}")
            remaining.append((await body(client, "get_memory_stats"))["entries_until_rotation"])
    assert remaining == [2, 1, 0, 0]


async def test_a_shared_client_never_rotates_memories_of_other_profiles(small):
    service = small.service
    others = [service.store(f"full profile memory number {i}").memory.id for i in range(5)]
    async with Client(small, raise_exceptions=True) as client:
        for i in range(3):
            await add(client, f"entry {i}")
        assert (await body(client, "get_memory_stats"))["entries_until_rotation"] == 0
    assert all(service.get(m).status is Status.ACTIVE for m in others)
    assert not (service.storage.folder / "archive").exists()


# -- backups ------------------------------------------------------------------------------------
def test_clear_keeps_the_ten_newest_backups(server, clock):
    space = SharedSpace(server.service)
    written = []
    for i in range(KEEP_BACKUPS + 2):
        space.add("bot", f"entry {i}")
        written.append(space.clear(True).backup)
        clock.advance(seconds=1)
    kept = sorted((server.service.shared_limits.folder / "backups").glob("*.json"))
    assert kept == written[2:]
    assert space.health().checks["backup_system"].facts["backup_count"] == KEEP_BACKUPS


def test_a_backup_restores_cleared_entries_as_they_were(server, clock):
    space = SharedSpace(server.service)
    first = space.add("claude-alpha", "first entry", tags=["a"], priority="high", metadata={"k": 1}).entry
    second = space.add("claude-beta", "second entry").entry
    cleared = space.clear(True)
    assert space.read().total == 0
    clock.advance(hours=1)

    result = space.restore_backup(cleared.backup)

    assert (result.restored, result.already_present) == (2, 0)
    back = space.read().entries
    assert [m.id for m in back] == [first.id, second.id]
    assert [(m.entry_number, m.content, m.tags, m.metadata) for m in back] == [
        (1, "first entry", ("a",), {"k": 1}),
        (2, "second entry", (), {}),
    ]
    assert space.restore_backup(cleared.backup).already_present == 2
    assert space.add("bot", "after restore").entry.entry_number == 3  # numbers are never handed out twice


def test_a_backup_brings_back_entries_even_after_they_were_purged(server):
    service = server.service
    entry = SharedSpace(service).add("bot", "purged soon").entry
    cleared = SharedSpace(service).clear(True)
    service.forget(entry.id, hard_delete=True)
    assert service.storage.get(entry.id) is None
    assert SharedSpace(service).restore_backup(cleared.backup).restored == 1
    assert SharedSpace(service).get(entry.id).content == "purged soon"


def test_a_file_that_is_not_a_backup_is_refused(server, tmp_path):
    stray = tmp_path / "notes.json"
    stray.write_text('{"entries": []}', encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a backup"):
        SharedSpace(server.service).restore_backup(stray)


def test_mnemo_restore_backup_puts_a_cleared_space_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings(home=tmp_path / "home", embedder="none")
    service = open_service(settings)
    try:
        SharedSpace(service).add("bot", "keep this entry")
        backup = SharedSpace(service).clear(True).backup
    finally:
        service.storage.close()
    env = {"MNEMO_HOME": str(settings.home), "MNEMO_EMBEDDER": "none"}

    result = CliRunner().invoke(cli, ["restore-backup", str(backup)], env=env)
    assert result.exit_code == 0, result.output
    assert "restored 1 entries" in result.output
    as_json = CliRunner().invoke(cli, ["restore-backup", str(backup), "--json"], env=env)
    assert json.loads(as_json.stdout) == {"restored": 0, "already_present": 1, "rotated": 0}

    service = open_service(settings)
    try:
        assert [m.content for m in SharedSpace(service).read().entries] == ["keep this entry"]
    finally:
        service.storage.close()


# -- health, locks, corruption ------------------------------------------------------------------
async def test_health_fails_naming_the_backup_system_when_backups_cannot_be_written(client, server):
    (server.service.shared_limits.folder / "backups").write_text("a file where the folder should be")
    health = await body(client, "health_check")
    assert health["success"] is False
    assert health["checks"]["backup_system"]["status"] == "error"
    assert health["message"] == "Health check failed: backup_system"


@sqlite_only  # the SQLite file itself
async def test_health_fails_when_the_store_file_is_gone(client, server):
    await add(client)
    server.service.storage.path.unlink()
    health = await body(client, "health_check")
    assert health["success"] is False
    assert health["checks"]["storage_file"]["status"] == "error"
    assert health["checks"]["storage_file"]["exists"] is False
    assert "storage_file" in health["message"]


def hold_write_lock(path: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


async def test_health_reports_the_write_lock_held_elsewhere_and_the_lock_is_really_taken(small):
    async with Client(small, raise_exceptions=True) as client:
        holder = hold_write_lock(small.service.storage.path)
        try:
            health = await body(client, "health_check")
        finally:
            holder.close()
        assert health["success"] is False
        assert health["checks"]["file_locking"]["status"] == "error"
        assert health["message"] == "Health check failed: file_locking"
        assert (await body(client, "health_check"))["success"] is True


async def test_a_write_lock_held_past_the_timeout_is_an_error_and_writes_nothing(small):
    async with Client(small, raise_exceptions=True) as client:
        holder = hold_write_lock(small.service.storage.path)
        try:
            message = await error(client, "add_memory", agent_name="a", content="blocked")
        finally:
            holder.close()
        assert "busy" in message
        assert everything(small) == []
        assert (await add(client, "after the lock"))["entry_number"] == 1


@sqlite_only  # the SQLite file itself
async def test_a_damaged_store_is_a_storage_corruption_error_and_fails_the_integrity_check(settings, clock):
    first = build_server(settings, "shared", clock=clock)
    async with Client(first, raise_exceptions=True) as client:
        for i in range(30):
            await add(client, f"entry {i} {words(150)}")
    path = first.service.storage.path
    first.service.storage.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    damaged = bytearray(path.read_bytes())
    for offset in range(2 * 4096, len(damaged) - 4096, 4096):  # every page but the header's
        damaged[offset : offset + 100] = b"\xff" * 100
    path.write_bytes(bytes(damaged))

    second = build_server(settings, "shared", clock=clock)
    try:
        async with Client(second, raise_exceptions=True) as client:
            assert "damaged" in await error(client, "read_memory")
            health = await body(client, "health_check")
        assert health["success"] is False
        assert health["checks"]["json_parsing"]["status"] == "error"
        assert "integrity check" in health["checks"]["json_parsing"]["message"]
    finally:
        second.service.storage.close()


# -- the 25,000-character cap ---------------------------------------------------------------------
def fill_long(server: ProfileServer, count: int) -> None:
    for i in range(count):
        SharedSpace(server.service).add(f"agent-{i % 3}", f"entry {i} " + words(190), tags=["long"])


async def test_a_long_markdown_read_ends_after_whole_entries_with_a_visible_notice(client, server):
    fill_long(server, 40)
    shown = await text(client, "read_memory")
    assert len(shown) <= CHARACTER_LIMIT
    assert shown.startswith("# Shared Memory\n\nTotal entries: 40\n")
    kept = shown.count("## Entry ")
    assert 0 < kept < 40
    assert shown.count("\n---\n") == kept  # no entry is cut in half
    notice = shown.splitlines()[-1]
    assert notice.startswith(f"> **Response truncated at 25,000 characters: {kept} of 40 entries shown")


async def test_a_long_json_read_stays_valid_json_dropping_entries_from_the_end_and_saying_so(client, server):
    fill_long(server, 40)
    raw = await text(client, "read_memory", response_format="json")
    assert len(raw) <= CHARACTER_LIMIT
    answer = json.loads(raw)
    assert answer["total_entries"] == 40
    assert answer["truncated"] is True
    kept = len(answer["entries"])
    assert 0 < kept < 40
    assert f"{kept} of 40 entries shown" in answer["truncation_message"]
    assert [e["content"].split()[1] for e in answer["entries"]] == [str(i) for i in range(kept)]


async def test_a_long_search_is_capped_too(client, server):
    fill_long(server, 40)
    for response_format in ("markdown", "json"):
        assert len(await text(client, "search_memory", query="entry", response_format=response_format)) <= 25_000


async def test_a_short_answer_carries_no_truncation_notice(client, server):
    fill_long(server, 3)
    assert "truncated" not in await body(client, "read_memory", response_format="json")
    assert "Response truncated" not in await text(client, "read_memory")


async def test_one_entry_longer_than_the_cap_is_cut_short_with_a_notice_in_both_formats(client, server):
    entry = SharedSpace(server.service).add("bot", "short at first").entry
    server.service.update(entry.id, content="x" * 40_000)  # the full profile accepts 50,000 characters
    raw = await text(client, "get_memory", entry_id=entry.id)
    assert len(raw) <= CHARACTER_LIMIT
    answer = json.loads(raw)
    assert answer["truncated"] is True and "1 of 1 entries shown" in answer["truncation_message"]
    assert answer["entry"]["content"].endswith(" [...]")
    assert answer["entry"]["word_count"] == 1
    shown = await text(client, "get_memory", entry_id=entry.id, response_format="markdown")
    assert len(shown) <= CHARACTER_LIMIT
    assert "[...]" in shown and "Response truncated" in shown


async def test_stats_with_thousands_of_tags_drop_the_least_used_from_tag_usage(client, server):
    for i in range(300):
        SharedSpace(server.service).add(
            "bot", f"entry {i}", tags=[f"a-rather-long-tag-name-{i}-{k}" for k in range(10)]
        )
    SharedSpace(server.service).add("bot", "popular", tags=["popular"])
    SharedSpace(server.service).add("bot", "popular again", tags=["popular"])
    raw = await text(client, "get_memory_stats")
    assert len(raw) <= CHARACTER_LIMIT
    answer = json.loads(raw)
    assert answer["truncated"] is True and "of 3001 tags shown" in answer["truncation_message"]
    assert next(iter(answer["tag_usage"])) == "popular"
    assert answer["top_tags"][0] == ["popular", 2]
    assert answer["total_entries"] == 302


# -- meaning ----------------------------------------------------------------------------------------
async def test_search_adds_entries_that_mean_the_query_after_the_literal_ones(settings, clock, installed_model):
    service = open_service(settings, clock=clock, embedder=LocalEmbedder(installed_model))
    server = ProfileServer(get_profile("shared"), service)
    try:
        async with Client(server, raise_exceptions=True) as client:
            blocked = await add(client, "The production deployment is blocked by a failing integration test")
            await add(client, "Lunch order: two pizzas for the team on Friday")
            checklist = await add(client, "Deployment checklist updated")
            query = "release halted because tests broke"
            meant = await body(client, "search_memory", query=query, response_format="json")
            assert [e["entry_id"] for e in meant["entries"]] == [blocked["entry_id"]]
            assert "1 of them found by meaning" in await text(client, "search_memory", query=query)
            literal = await body(client, "search_memory", query="deployment", response_format="json")
            assert [e["entry_id"] for e in literal["entries"]] == [blocked["entry_id"], checklist["entry_id"]]
            strict = await body(client, "search_memory", query=query, case_sensitive=True, response_format="json")
            assert strict["entries"] == []
            health = await body(client, "health_check")
            assert health["checks"]["embeddings"]["meaning_search"] is True
    finally:
        service.storage.close()


# -- schema ---------------------------------------------------------------------------------------
def test_m003_starts_the_entry_counter_after_numbers_already_given(tmp_path, monkeypatch, clock):
    folder = tmp_path / "store"
    monkeypatch.setattr("mnemo.storage.sqlite.MIGRATIONS", MIGRATIONS[:2])
    SQLiteStorage(folder).close()
    with sqlite3.connect(folder / "memory.db") as db:  # a row as an older mnemo wrote it, before m003
        db.execute(
            "INSERT INTO memories (id, content, content_length, signature, word_signature, importance,"
            " access_level, status, created_at, updated_at, accessed_at, version, agent_name, entry_number)"
            " VALUES (?, 'an entry numbered by an older mnemo', 34, 'sig', 'words', 0.5, 'private', 'active',"
            " '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', 1,"
            " 'bot', 41)",
            (new_id(),),
        )
    monkeypatch.setattr("mnemo.storage.sqlite.MIGRATIONS", MIGRATIONS)

    upgraded = SQLiteStorage(folder)
    try:
        assert "m003_shared_space" in upgraded.applied_migrations()
        assert SharedSpace(MemoryService(upgraded, clock)).add("bot", "next").entry.entry_number == 42
    finally:
        upgraded.close()


# -- several processes ------------------------------------------------------------------------------
PROCESSES = 4
ADDS_PER_PROCESS = 25


def _poster(home: str, index: int, start: Barrier, results: multiprocessing.Queue) -> None:
    numbers: list[int] = []
    problems: list[str] = []
    service = None
    try:
        start.wait(timeout=60)
        service = open_service(Settings(home=Path(home), embedder="none"))
        for j in range(ADDS_PER_PROCESS):
            numbers.append(
                SharedSpace(service).add(f"agent-{index}", f"status {j} from {index}").entry.entry_number or 0
            )
    except Exception as exc:
        problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        if service is not None:
            service.storage.close()
        results.put({"index": index, "numbers": numbers, "problems": problems})


def test_entry_numbers_from_several_processes_are_unique_and_consecutive(tmp_path):
    home = str(tmp_path / "home")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    children = [ctx.Process(target=_poster, args=(home, i, start, results)) for i in range(PROCESSES)]
    for child in children:
        child.start()
    reports: list[dict[str, Any]] = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert [child.exitcode for child in children] == [0] * PROCESSES
    assert [p for r in reports for p in r["problems"]] == []
    every = sorted(n for r in reports for n in r["numbers"])
    assert every == list(range(1, PROCESSES * ADDS_PER_PROCESS + 1))
    for report in reports:  # each process saw its own numbers grow
        assert report["numbers"] == sorted(report["numbers"])
    service = open_service(Settings(home=Path(home), embedder="none"))
    try:
        stored = sorted(m.entry_number or 0 for m in SharedSpace(service).read().entries)
        assert stored == every
    finally:
        service.storage.close()
