"""Sync between two real stores: ids kept, changes since the last sync, deletions, conflicts, a kill midway."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, closing
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client

from conftest import serve_env
from mcp_calls import answer
from mnemo.app import open_service
from mnemo.cli import cli
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed import Vectors
from mnemo.embed.fake import FakeEmbedder
from mnemo.engine.results import TagEdit
from mnemo.engine.service import MemoryService
from mnemo.errors import Conflict, InvalidInput, Locked
from mnemo.lifecycle import jobs
from mnemo.lifecycle.sync import STORE_ID, Syncer
from mnemo.model import Status, to_iso
from mnemo.serve.server import ProfileServer, build_server
from mnemo.storage import BULK_WRITE, Job
from mnemo.storage.sqlite_files import DB_FILENAME
from postgres_server import store_connection, undo_m012
from sqlite_schemas import undo_m017

pytestmark = pytest.mark.every_backend  # the storage contract: SQLite and PostgreSQL


@pytest.fixture
def pair(settings: Settings, clock: ManualClock) -> Iterator[tuple[MemoryService, MemoryService]]:
    laptop = open_service(settings, clock=clock)
    team = open_service(settings, "team", clock=clock, create=True)
    yield laptop, team
    laptop.storage.close()
    team.storage.close()


def contents(service: MemoryService) -> dict[str, tuple[str, str]]:
    rows = service.list(statuses=("active", "archived", "deleted"), limit=100).memories
    return {m.id: (m.content, m.status.value) for m in rows}


def test_a_push_copies_memories_with_their_ids_and_a_second_one_finds_nothing_to_do(pair, clock):
    laptop, team = pair
    made = [laptop.store(f"Fact {n} about the garden shed").memory for n in range(3)]
    report = Syncer(laptop, team, "local", "team").sync("push")
    assert (report.created, report.updated, report.errors) == (3, 0, 0)
    assert contents(team) == contents(laptop)
    assert {m.id for m in made} == set(contents(team))
    clock.advance(minutes=1)
    again = Syncer(laptop, team, "local", "team").sync("incremental")
    assert (again.checked, again.created, again.updated) == (0, 0, 0)


def test_changes_and_deletions_travel_since_the_last_sync(pair, clock):
    laptop, team = pair
    kept, dropped = laptop.store("The boiler is serviced in March").memory, laptop.store("Old wifi password").memory
    Syncer(laptop, team, "local", "team").sync("push")
    clock.advance(minutes=5)
    laptop.update(kept.id, content="The boiler is serviced in May")
    laptop.forget(dropped.id)
    report = Syncer(laptop, team, "local", "team").sync("push")
    assert (report.checked, report.updated, report.deleted) == (2, 1, 1)
    assert team.get(kept.id).content == "The boiler is serviced in May"
    assert team.get(dropped.id).status is Status.FORGOTTEN  # recoverable there too


class CountingEmbedder(FakeEmbedder):
    """The test embedder, counting the texts it embeds."""

    def __init__(self, dimension: int = 64) -> None:
        super().__init__(dimension)
        self.embedded = 0

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.embedded += len(texts)
        return super().embed_documents(texts)


@pytest.mark.parametrize("team_dimension", [64, 32], ids=["same model", "another model"])
def test_synced_memories_are_found_by_meaning_with_the_other_stores_vectors_or_their_own(
    settings: Settings, clock: ManualClock, team_dimension: int
):
    laptop = open_service(settings, clock=clock, embedder=FakeEmbedder())
    team_model = CountingEmbedder(team_dimension)
    team = open_service(settings, "team", clock=clock, create=True, embedder=team_model)
    try:
        boiler = laptop.store("The boiler is serviced in March").memory
        laptop.store("Liam collects vinyl records")
        Syncer(laptop, team, "local", "team").sync("push")
        clock.advance(minutes=5)
        laptop.update(boiler.id, content="Emma plays the cello on Tuesdays")  # its old vector no longer says it
        Syncer(laptop, team, "local", "team").sync("push")

        # the same model's vectors are carried, not made again; another model's are made there
        assert team_model.embedded == (0 if team_dimension == 64 else 3)
        (best, *_) = team.recall("Emma plays the cello on Tuesdays").hits
        assert best.memory.id == boiler.id and best.scores.semantic_similarity > 0.99
        assert team.recall("The boiler is serviced in March").hits[0].scores.semantic_similarity < 0.99
    finally:
        laptop.storage.close()
        team.storage.close()


def test_pull_and_bidirectional_bring_the_other_sides_changes(pair, clock):
    laptop, team = pair
    Syncer(laptop, team, "local", "team").sync("push")
    clock.advance(minutes=1)
    theirs = team.store("Standup moves to 10:00").memory
    report = Syncer(laptop, team, "local", "team").sync("pull")
    assert report.created == 1 and laptop.get(theirs.id).content == "Standup moves to 10:00"
    clock.advance(minutes=1)
    mine = laptop.store("Laptop-only note").memory
    other = team.store("Team-only note").memory
    both = Syncer(laptop, team, "local", "team").sync("bidirectional")
    assert both.created == 2
    assert contents(laptop) == contents(team) and {mine.id, other.id} <= set(contents(team))


def conflicted(pair: tuple[MemoryService, MemoryService], clock: ManualClock) -> str:
    laptop, team = pair
    memory = laptop.store("The offsite is in Porto", tags=["travel"]).memory
    Syncer(laptop, team, "local", "team").sync("push")
    clock.advance(minutes=1)
    team.update(memory.id, content="The offsite is in Lisbon", tags=TagEdit(replace=("team",)))
    clock.advance(minutes=1)
    laptop.update(memory.id, content="The offsite is in Faro")
    return memory.id


@pytest.mark.parametrize(("resolution", "laptop_has", "team_has"), [
    ("newest_wins", "Faro", "Faro"), ("source_wins", "Faro", "Faro"), ("destination_wins", "Lisbon", "Lisbon"),
])  # fmt: skip
def test_a_conflict_is_resolved_as_asked(pair, clock, resolution, laptop_has, team_has):
    laptop, team = pair
    memory_id = conflicted(pair, clock)
    report = Syncer(laptop, team, "local", "team").sync("bidirectional", conflict_resolution=resolution)
    assert (report.conflicts, report.conflicts_resolved) == (1, 1)
    assert laptop.get(memory_id).content.endswith(laptop_has) and team.get(memory_id).content.endswith(team_has)


def test_merge_keeps_the_newest_content_every_tag_and_the_other_content_in_history(pair, clock):
    laptop, team = pair
    memory_id = conflicted(pair, clock)
    Syncer(laptop, team, "local", "team").sync("bidirectional", conflict_resolution="merge")
    for side in (laptop, team):
        merged = side.get(memory_id)
        assert (merged.content, set(merged.tags)) == ("The offsite is in Faro", {"travel", "team"})
    assert any(c.previous is not None and c.previous.content.endswith("Lisbon") for c in team.history(memory_id))


def test_manual_resolution_lists_the_conflicts_and_applies_nothing(pair, clock):
    laptop, team = pair
    memory_id = conflicted(pair, clock)
    laptop.store("A new note that must not travel either")
    before = contents(laptop), contents(team)
    with pytest.raises(Conflict) as caught:
        Syncer(laptop, team, "local", "team").sync("bidirectional", conflict_resolution="manual")
    assert caught.value.details["conflicts"] == [memory_id]
    assert (contents(laptop), contents(team)) == before


def test_a_dry_run_plans_and_changes_nothing(pair):
    laptop, team = pair
    laptop.store("Plans only")
    report = Syncer(laptop, team, "local", "team").sync("push", dry_run=True)
    assert report.created == 0 and report.checked == 1 and contents(team) == {}


def test_the_same_store_twice_and_a_running_sync_are_refused(pair, clock):
    laptop, team = pair
    with pytest.raises(InvalidInput):
        Syncer(laptop, laptop, "local", "local")
    assert laptop.storage.read_setting(STORE_ID) is None  # refused before the store was given an id
    laptop.storage.put_job(Job("j1", "sync local <-> team", jobs.RUNNING, clock.now(), "h", os.getpid()))
    with pytest.raises(Locked):
        Syncer(laptop, team, "local", "team").sync("push")


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_large_sync_leaves_the_planner_of_the_side_it_filled_knowing_the_memories(pair, postgres_url: str):
    laptop, team = pair
    laptop.store_many([{"content": f"note {i} about the allotment"} for i in range(BULK_WRITE)])
    assert Syncer(laptop, team, "local", "team").sync("push").created == BULK_WRITE
    with store_connection(postgres_url, "team") as db:
        (planned,) = db.execute("SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass").fetchone()
    assert planned == BULK_WRITE  # refresh_statistics: until autovacuum, the planner saw it empty


def cli_env(home: Path) -> dict[str, str]:
    return {**os.environ, "MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(home / "config"), "MNEMO_EMBEDDER": "none"}


def exported(home: Path, store: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["export", "--store", store], env=cli_env(home))
    rows = [json.loads(line) for line in result.stdout.splitlines()[1:]]
    return sorted(({k: r[k] for k in ("id", "content", "tags", "context")} for r in rows), key=lambda r: r["id"])


def test_a_sync_killed_midway_and_run_again_ends_as_an_uninterrupted_one(tmp_path: Path):
    home = tmp_path / "home"
    runner = CliRunner()
    for name in ("cloud", "clean"):
        assert runner.invoke(cli, ["stores", "add", name], env=cli_env(home)).exit_code == 0
    notes = tmp_path / "notes.md"
    notes.write_text("\n\n".join(f"Note {n}: the shed key is in drawer {n % 7}" for n in range(3000)))
    assert runner.invoke(cli, ["import", str(notes)], env=cli_env(home)).exit_code == 0
    command = [sys.executable, "-m", "mnemo", "sync", "--type", "push", "--to", "cloud"]
    killed = subprocess.Popen(command, env=cli_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    service = open_service(Settings(home=home, config_dir=home / "config", embedder="none"), "cloud")
    deadline = time.monotonic() + 60
    while service.storage.count(service._filters(service.clock.now(), statuses=("active",))) < 300:
        assert time.monotonic() < deadline and killed.poll() is None, "the sync ended before it could be killed"
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    partial = service.storage.count(service._filters(service.clock.now(), statuses=("active",)))
    service.storage.close()
    assert 0 < partial < 3000
    subprocess.run(command, env=cli_env(home), check=True, capture_output=True)
    subprocess.run([*command[:-1], "clean"], env=cli_env(home), check=True, capture_output=True)
    assert len(exported(home, "cloud")) == 3000
    assert exported(home, "cloud") == exported(home, "clean")


def test_an_unmapped_cloud_is_not_found_with_how_to_map_it(tmp_path: Path):
    result = CliRunner().invoke(cli, ["sync"], env=cli_env(tmp_path / "home"))
    assert result.exit_code != 0 and "mnemo stores add cloud" in result.output


# -- sync_memories through MCP (full) ------------------------------------------------------------
@asynccontextmanager
async def full_with_cloud(
    settings: Settings, clock: ManualClock
) -> AsyncIterator[tuple[Client, ProfileServer, MemoryService]]:
    """A client of the full profile over the default store, beside a store named cloud to sync with."""
    cloud = open_service(settings, "cloud", create=True, clock=clock)
    server = build_server(settings, "full", clock=clock)
    try:
        async with Client(server) as client:
            yield client, server, cloud
    finally:
        server.close()
        cloud.storage.close()


async def test_the_specs_example_syncs_the_served_store_to_cloud(settings: Settings, clock: ManualClock):
    async with full_with_cloud(settings, clock) as (client, _, cloud):
        for n in range(3):
            await answer(client, "store_memory", content=f"User 123 fact {n}", context={"user_id": "user_123"})
        await answer(client, "store_memory", content="Someone else's note", context={"user_id": "user_9"})
        example = {"sync_type": "incremental", "source": "local", "destination": "cloud",
                   "filters": {"user_id": "user_123", "modified_since": "2025-12-05T00:00:00Z"},
                   "conflict_resolution": "newest_wins", "dry_run": False}  # fmt: skip
        done = await answer(client, "sync_memories", **example)
        assert done["success"] is True and done["summary"]["created"] == 3 and done["summary"]["synced"] == 3
        assert done["next_sync_recommended"] > done["completed_at"]
        assert len(contents(cloud)) == 3
        job = json.loads((await client.read_resource(f"mnemo://jobs/{done['sync_id']}")).contents[0].text)
        assert job["status"] == "succeeded"
        unmapped = await answer(client, "sync_memories", destination="elsewhere")
        assert (unmapped["error"]["status"], unmapped["error"]["code"]) == (404, "MEMORY_NOT_FOUND")
        same = await answer(client, "sync_memories", destination="local")
        assert same["error"]["status"] == 400
        started = await answer(client, "sync_memories", sync_type="full", background=True)
        assert started["completed_at"] is None
        deadline = time.monotonic() + 30
        while True:
            job = json.loads((await client.read_resource(f"mnemo://jobs/{started['sync_id']}")).contents[0].text)
            if job["status"] != "running" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert job["status"] == "succeeded"


async def test_manual_conflicts_are_409_and_a_running_sync_423_through_mcp(settings: Settings, clock: ManualClock):
    async with full_with_cloud(settings, clock) as (client, server, cloud):
        made = await answer(client, "store_memory", content="The offsite is in Porto")
        await answer(client, "sync_memories")
        clock.advance(minutes=1)
        cloud.update(made["memory_id"], content="The offsite is in Lisbon")
        clock.advance(minutes=1)
        await answer(client, "update_memory", memory_id=made["memory_id"], updates={"content": "In Faro"})
        manual = await answer(client, "sync_memories", sync_type="bidirectional", conflict_resolution="manual")
        assert (manual["error"]["status"], manual["error"]["code"]) == (409, "SYNC_CONFLICTS")
        assert manual["error"]["details"]["conflicts"] == [made["memory_id"]]
        server.service.storage.put_job(Job("s1", "sync local <-> cloud", jobs.RUNNING, clock.now(), "h",
                                           os.getpid()))  # fmt: skip
        busy = await answer(client, "sync_memories")
        assert (busy["error"]["status"], busy["error"]["code"]) == (423, "SYNC_IN_PROGRESS")


def test_a_folder_given_by_path_is_a_location_for_a_local_caller_only(settings: Settings, tmp_path: Path):
    from mnemo.access.caller import Caller, acting_as
    from mnemo.errors import Forbidden, NotFound
    from mnemo.lifecycle.sync import run_sync

    stick = tmp_path / "usb-stick"
    laptop = open_service(settings)
    try:
        laptop.store("Carried on a stick")
        with pytest.raises(NotFound):
            run_sync(laptop, "local", str(tmp_path / "missing"))
        stick.mkdir()
        assert run_sync(laptop, "local", str(stick)).created == 1
        assert run_sync(laptop, "local", str(stick / "memory.db")).checked == 0  # the same store, by its file
        with acting_as(Caller("bob")), pytest.raises(Forbidden):
            run_sync(laptop, "local", str(stick))
    finally:
        laptop.storage.close()
    from mnemo.app import open_location

    on_stick = open_location(settings, str(stick))
    try:
        assert [m.content for m in on_stick.list().memories] == ["Carried on a stick"]
    finally:
        on_stick.storage.close()


async def test_naming_another_users_memories_in_a_sync_is_403_through_mcp(settings: Settings, clock: ManualClock):
    from mnemo.access.caller import Caller, Role, acting_as

    async with full_with_cloud(settings, clock) as (client, _, _):
        with acting_as(Caller("bob")):  # as the HTTP transport sets it for bob's key
            refused = await answer(client, "sync_memories", filters={"user_id": "alice"})
        with acting_as(Caller("carol", Role.READER)):
            reader = await answer(client, "sync_memories")
    assert (refused["error"]["status"], refused["error"]["code"]) == (403, "PERMISSION_DENIED")
    assert reader["error"]["status"] == 403


# -- what enters a store after a sync, whatever its dates (issue 44) ----------------------------
def mnemo_cli(settings: Settings, *args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env=serve_env(settings))
    assert result.exit_code == 0, result.output
    return result.stdout


def export_file(folder: Path, content: str, at: str = "2025-03-01T09:00:00Z") -> Path:
    """A mnemo export of one memory written long ago, as another store would have exported it."""
    header = {"format": "mnemo-export", "version": 1, "store": "elsewhere", "exported_at": at, "count": 1}
    line = {"id": "5d0c7a5e-0000-4000-8000-000000002025", "content": content, "tags": [], "created_at": at,
            "updated_at": at, "context": {"user_id": None, "conversation_id": None, "session_id": None}}  # fmt: skip
    file = folder / "old.jsonl"
    file.write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n", encoding="utf-8")
    return file


def contents_of(settings: Settings, store: str) -> set[str]:
    rows = [json.loads(line) for line in mnemo_cli(settings, "export", "--store", store).splitlines()[1:]]
    return {row["content"] for row in rows}


@pytest.mark.parametrize(
    ("sync_type", "imported_into", "arrives_in"),
    [("incremental", "default", "cloud"), ("push", "default", "cloud"), ("pull", "cloud", "default"),
     ("bidirectional", "cloud", "default")],
)  # fmt: skip
def test_a_memory_imported_with_its_old_date_after_a_sync_travels_on_the_next(
    settings: Settings, tmp_path: Path, sync_type: str, imported_into: str, arrives_in: str
):
    mnemo_cli(settings, "stores", "add", "cloud", str(tmp_path / "cloud"))
    mnemo_cli(settings, "add", "Ann likes tea")
    mnemo_cli(settings, "sync")
    mnemo_cli(settings, "import", str(export_file(tmp_path, "Bob planted the apple tree")), "--store", imported_into)
    synced = mnemo_cli(settings, "sync", "--type", sync_type)
    assert "1 created" in synced
    assert contents_of(settings, arrives_in) == {"Ann likes tea", "Bob planted the apple tree"}
    assert "0 checked" in mnemo_cli(settings, "sync", "--type", sync_type)  # nor is it sent back


def test_a_memory_synced_in_and_then_forgotten_where_it_came_from_is_no_conflict_on_the_next_sync(
    settings: Settings, tmp_path: Path
):
    mnemo_cli(settings, "stores", "add", "cloud", str(tmp_path / "cloud"))
    added = json.loads(mnemo_cli(settings, "add", "Ann likes tea", "--json"))
    mnemo_cli(settings, "sync", "--type", "bidirectional", "--conflicts", "manual")
    mnemo_cli(settings, "forget", added["memory"]["id"])
    synced = mnemo_cli(settings, "sync", "--type", "bidirectional", "--conflicts", "manual")
    assert "1 checked, 0 created, 0 updated, 1 deleted, 0 conflicts" in synced
    assert contents_of(settings, "cloud") == set()


def test_a_pair_synced_before_changes_were_numbered_goes_on_from_its_last_sync(
    pair: tuple[MemoryService, MemoryService], settings: Settings, clock: ManualClock
):
    laptop, team = pair
    changed, kept = laptop.store("The boiler is serviced in March").memory, laptop.store("Old wifi password").memory
    synced_at = clock.now()
    Syncer(laptop, team, "local", "team").sync("push")
    clock.advance(minutes=5)
    laptop.update(changed.id, content="The boiler is serviced in May")
    ids = {service: service.storage.read_setting(STORE_ID) for service in pair}
    for service, other in (pair, pair[::-1]):
        service.storage.close()
        as_an_older_mnemo_left_it(settings, service.storage.name, f"sync-watermark:{ids[other]}", synced_at)
    laptop, team = open_service(settings, clock=clock), open_service(settings, "team", clock=clock)
    try:
        report = Syncer(laptop, team, "local", "team").sync("push")
        assert (report.checked, report.updated, report.conflicts) == (1, 1, 0)
        assert team.get(changed.id).content == "The boiler is serviced in May"
        assert team.get(kept.id).content == "Old wifi password"
        assert Syncer(laptop, team, "local", "team").sync("bidirectional").checked == 0
    finally:
        laptop.storage.close()
        team.storage.close()


def as_an_older_mnemo_left_it(settings: Settings, store: str, watermark_key: str, synced_at: datetime) -> None:
    """Put a store back as a mnemo before change numbers left it, the pair's watermark a time."""
    statements = ["DELETE FROM settings WHERE key LIKE 'sync-marks:%'",
                  f"INSERT INTO settings VALUES ('{watermark_key}', '{to_iso(synced_at)}')"]  # fmt: skip
    if settings.database_url is not None:
        with store_connection(settings.database_url, store) as db:
            undo_m012(db)
            for statement in statements:
                db.execute(statement)  # type: ignore[call-overload]  # a test's constants
        return
    with closing(sqlite3.connect(settings.store_folder(store) / DB_FILENAME)) as db, db:
        for statement in statements:
            db.execute(statement)
        undo_m017(db)
