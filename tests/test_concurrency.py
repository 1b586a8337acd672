"""Several OS processes share one store: no write is lost and no caller sees the store busy.

Each child is a real process (multiprocessing, "spawn") with its own SQLite connections. Every
operation a child runs is wrapped so that any exception, a raw ``sqlite3`` error, ``Locked`` or
``StorageError``, is written down and sent back rather than killing the child; the parent then
checks the error lists are empty and counts what reached the database.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import queue
import threading
import traceback
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest
from mcp.types import CallToolResult

from attack_checks import FIGURES
from attack_live import WRITES
from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.engine.service import MemoryService
from mnemo.model import Context, Status
from mnemo.query import Filters, Sort
from mnemo.serve.server import build_server
from mnemo.storage.postgres_schema import MIGRATIONS as POSTGRES_MIGRATIONS
from mnemo.storage.sqlite_schema import MIGRATIONS

STORE = "default"
PROCESSES = 4
MEMORIES_PER_PROCESS = 50
UPDATES_PER_REVISED_MEMORY = 3
REVISE_EVERY = 5  # every fifth memory a process stores is then updated several times
UPDATES_PER_PROCESS_ON_ONE_MEMORY = 15
# A word per process that appears in no other process's content, so recall counts stay exact.
MARKERS = ("walrus", "pelican", "otter", "heron", "badger", "falcon")
CHILD_TIMEOUT_S = 120


def _open(home: str, actor: str) -> MemoryService:
    return open_service(Settings(home=Path(home)), STORE, actor=actor)


def _describe(exc: BaseException) -> str:
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}: {exc}\n{''.join(traceback.format_exception(exc)[-3:])}"


class _Recorder:
    """Runs one operation at a time and writes down whatever went wrong, without stopping."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def attempt(self, label: str, operation: Callable[[], Any]) -> Any:
        try:
            return operation()
        except Exception as exc:
            self.errors.append(f"{label}: {_describe(exc)}")
            return None

    def expect(self, label: str, condition: bool, detail: str) -> None:
        if not condition:
            self.errors.append(f"{label}: {detail}")


def _writer(home: str, index: int, start: Barrier, results: multiprocessing.Queue) -> None:
    """Store memories, recalling, listing and revising them between stores."""
    recorder = _Recorder()
    stored: list[str] = []
    updates: dict[str, int] = {}
    service: MemoryService | None = None
    user = f"user{index}"
    marker = MARKERS[index]
    try:
        start.wait(timeout=CHILD_TIMEOUT_S)
        # Opened after the barrier: the first process to arrive creates the schema while the
        # others wait for its migration and then find it done.
        service = recorder.attempt("open", lambda: _open(home, f"proc{index}"))
        if service is None:
            return
        svc = service
        for j in range(MEMORIES_PER_PROCESS):
            result = recorder.attempt(
                f"store {j}",
                lambda j=j: svc.store(
                    f"The {marker} logbook entry number {j} for {user}", context=Context(user_id=user)
                ),
            )
            if result is None:
                continue
            stored.append(result.memory.id)

            # Read your own writes: this process is the only one writing for this user.
            page = recorder.attempt(f"list {j}", lambda: svc.list(user_id=user, limit=5))
            if page is not None:
                recorder.expect(f"list {j}", page.total == len(stored), f"listed {page.total}, stored {len(stored)}")
            recall = recorder.attempt(f"recall {j}", lambda: svc.recall(marker, user_id=user, limit=5))
            if recall is not None:
                recorder.expect(
                    f"recall {j}", recall.total == len(stored), f"recalled {recall.total}, stored {len(stored)}"
                )

            if j % REVISE_EVERY == REVISE_EVERY - 1:
                target = stored[-REVISE_EVERY] if len(stored) >= REVISE_EVERY else stored[0]
                for k in range(UPDATES_PER_REVISED_MEMORY):
                    done = recorder.attempt(
                        f"update {target} #{k}",
                        lambda k=k, target=target: svc.update(
                            target, content=f"revision {k}", merge_strategy="append", reason=f"revise {k}"
                        ),
                    )
                    if done is not None:
                        updates[target] = updates.get(target, 0) + 1
                        recorder.expect(
                            f"update {target} #{k}",
                            done.memory.version == 1 + updates[target],
                            f"version {done.memory.version} after {updates[target]} updates",
                        )
    except Exception as exc:
        recorder.errors.append(f"worker: {_describe(exc)}")
    finally:
        if service is not None:
            service.storage.close()
        results.put({"index": index, "errors": recorder.errors, "stored": stored, "updates": updates})


def _appender(home: str, index: int, memory_id: str, start: Barrier, results: multiprocessing.Queue) -> None:
    """Append lines to one shared memory, never naming the version it read."""
    recorder = _Recorder()
    landed: list[str] = []
    service: MemoryService | None = None
    try:
        service = recorder.attempt("open", lambda: _open(home, f"proc{index}"))
        start.wait(timeout=CHILD_TIMEOUT_S)  # opened first, so the updates themselves collide
        if service is None:
            return
        svc = service
        for k in range(UPDATES_PER_PROCESS_ON_ONE_MEMORY):
            line = f"line p{index}u{k}"
            if recorder.attempt(line, lambda line=line: svc.update(memory_id, content=line, merge_strategy="append")):
                landed.append(line)
    except Exception as exc:
        recorder.errors.append(f"worker: {_describe(exc)}")
    finally:
        if service is not None:
            service.storage.close()
        results.put({"index": index, "errors": recorder.errors, "landed": landed})


def _run_children(target: Callable[..., None], args: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Start one spawned process per argument tuple (each gets the start barrier and the result queue)."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(len(args))
    results = ctx.Queue()
    children = [ctx.Process(target=target, args=(*a, start, results)) for a in args]
    for child in children:
        child.start()
    reports: list[dict[str, Any]] = []
    try:
        for _ in children:
            reports.append(results.get(timeout=CHILD_TIMEOUT_S))
    except queue.Empty:
        pass
    finally:
        for child in children:
            child.join(timeout=CHILD_TIMEOUT_S)
            if child.is_alive():
                child.kill()
                child.join()
    exit_codes = [child.exitcode for child in children]
    assert exit_codes == [0] * len(children), f"children exited with {exit_codes}; reports: {reports}"
    assert len(reports) == len(children), f"only {len(reports)} of {len(children)} children reported"
    return sorted(reports, key=lambda r: r["index"])


def _all_errors(reports: list[dict[str, Any]]) -> list[str]:
    return [f"process {r['index']}: {e}" for r in reports for e in r["errors"]]


@pytest.fixture
def database(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the children's stores are: on PostgreSQL, MNEMO_DATABASE_URL, which spawned processes inherit."""
    if settings.database_url:
        monkeypatch.setenv("MNEMO_DATABASE_URL", settings.database_url)
        return "postgres"
    return "sqlite"


@pytest.mark.every_backend
def test_four_processes_storing_recalling_and_updating_at_once_lose_no_write_and_see_no_error(
    tmp_path: Path, database: str
):
    home = str(tmp_path / "home")

    reports = _run_children(_writer, [(home, i) for i in range(PROCESSES)])

    assert _all_errors(reports) == []
    service = _open(home, "checker")
    try:
        everything = Filters(now=service.clock.now(), statuses=None, include_expired=True)
        assert service.storage.count(everything) == PROCESSES * MEMORIES_PER_PROCESS
        migrations = MIGRATIONS if database == "sqlite" else POSTGRES_MIGRATIONS
        assert service.storage.applied_migrations() == [m.__name__ for m in migrations]
        for report in reports:
            user = f"user{report['index']}"
            assert len(report["stored"]) == MEMORIES_PER_PROCESS
            assert service.list(user_id=user, limit=1).total == MEMORIES_PER_PROCESS
            assert report["updates"], "every process revised some of its memories"
            for memory_id, count in report["updates"].items():
                assert count == UPDATES_PER_REVISED_MEMORY
                memory = service.get(memory_id)
                assert memory.status is Status.ACTIVE
                assert memory.version == 1 + count
                assert [line for line in memory.content.splitlines() if line.startswith("revision")] == [
                    f"revision {k}" for k in range(count)
                ]
                history = service.history(memory_id)
                assert [c.action for c in history] == ["create"] + ["update"] * count
                assert [c.version for c in history] == list(range(1, count + 2))
                assert {c.actor for c in history} == {user}
    finally:
        service.storage.close()


@pytest.mark.every_backend
def test_four_processes_updating_one_memory_without_expected_version_all_land(tmp_path: Path, database: str):
    home = str(tmp_path / "home")
    setup = _open(home, "setup")
    try:
        memory_id = setup.store("A shared scratchpad that every process appends to").memory.id
    finally:
        setup.storage.close()

    reports = _run_children(_appender, [(home, i, memory_id) for i in range(PROCESSES)])

    assert _all_errors(reports) == []
    total = PROCESSES * UPDATES_PER_PROCESS_ON_ONE_MEMORY
    assert sum(len(r["landed"]) for r in reports) == total
    service = _open(home, "checker")
    try:
        memory = service.get(memory_id)
        assert memory.version == 1 + total
        lines = memory.content.splitlines()[1:]
        assert sorted(lines) == sorted(line for r in reports for line in r["landed"])
        for report in reports:  # each process's own lines stay in the order it wrote them
            own = [line for line in lines if line.startswith(f"line p{report['index']}u")]
            assert own == report["landed"]
        history = service.history(memory_id)
        assert len(history) == 1 + total
        assert [c.version for c in history] == list(range(1, total + 2))
        assert [c.action for c in history] == ["create"] + ["update"] * total
        assert {c.actor for c in history[1:]} == {f"proc{i}" for i in range(PROCESSES)}
    finally:
        service.storage.close()


# -- eight processes, every profile, through MCP ----------------------------------------------
# Each child serves one profile over the one store in-process and writes through mcp.Client:
# new memories (each answer's id is written down) and, between them, updates of one memory that
# all children share (but those of spec 003, which updates its own entries only), so its version
# history must hold every update.
MIXED_PROCESSES = 8
MIXED_PROFILES = ("full", "agent", "memento", "stores", "shared")
UPDATE_COMMON_EVERY = 5
MIXED_STORE = "default"  # the stores profile serves registered stores only, and default always is


def _create(profile: str, index: int, j: int) -> tuple[str, dict[str, Any]]:
    text = f"{MARKERS[index % len(MARKERS)]} note {j} written by process {index}"
    return {
        "full": ("store_memory", {"content": text}),
        "agent": ("store_memory", {"type": "core", "content": text}),
        "memento": ("store_memory", {"content": text, "subject": f"P{index}", "category": "fact"}),
        "stores": ("add_memory", {"store": MIXED_STORE, "path": f"p{index}/note-{j}", "content": text}),
        "shared": ("add_memory", {"agent_name": f"p{index}", "content": text}),
    }[profile]


def _update_common(profile: str, memory_id: str, line: str) -> tuple[str, dict[str, Any]]:
    return {
        "full": ("update_memory", {"memory_id": memory_id, "updates": {"content": line}}),
        "agent": ("update_memory", {"id": memory_id, "content": line}),
        "memento": ("update_memory", {"memory_id": memory_id, "new_content": line}),
        "stores": ("update_memory", {"store": MIXED_STORE, "path": "common/counter", "content": line}),
    }[profile]


def _created_key(profile: str, args: dict[str, Any], result: CallToolResult) -> str:
    """How the store names what a create call made: its id, or its path for spec 002."""
    if profile == "stores":
        return args["path"]
    body = result.structured_content or json.loads(result.content[0].text)
    return (
        {"full": body.get("memory_id"), "agent": body.get("memory", {}).get("id")}.get(profile)
        or body.get("id")
        or body["entry_id"]
    )


async def _mcp_writes(home: str, index: int, common_id: str, writes: int) -> dict[str, Any]:
    from mcp import Client

    profile = MIXED_PROFILES[index % len(MIXED_PROFILES)]
    server = build_server(Settings(home=Path(home), embedder="none"), profile, MIXED_STORE)
    errors: list[str] = []
    created: list[str] = []
    updates = 0
    try:
        async with Client(server) as client:
            for j in range(writes):
                # spec 003 updates entries of the shared space only: its processes add entries
                common = j % UPDATE_COMMON_EVERY == UPDATE_COMMON_EVERY - 1 and profile != "shared"
                tool, args = (
                    _update_common(profile, common_id, f"p{index}u{j}") if common else _create(profile, index, j)
                )
                try:
                    result = await client.call_tool(tool, args)
                except Exception as exc:  # a protocol error (spec 002) reaches the client as an exception
                    errors.append(f"{tool} {j}: {_describe(exc)}")
                    continue
                if result.is_error:
                    errors.append(f"{tool} {j}: {result.content[0].text[:300]}")
                elif common:
                    updates += 1
                else:
                    created.append(_created_key(profile, args, result))
    finally:
        server.close()
    return {"index": index, "profile": profile, "errors": errors, "created": created, "updates": updates}


def _mixed_writer(home: str, index: int, common_id: str, writes: int, start: Barrier, results: Any) -> None:
    start.wait(timeout=CHILD_TIMEOUT_S)
    try:
        report = asyncio.run(_mcp_writes(home, index, common_id, writes))
    except Exception as exc:
        report = {"index": index, "errors": [f"worker: {_describe(exc)}"], "created": [], "updates": 0}
    results.put(report)


def test_eight_processes_writing_through_every_profile_lose_no_write_no_update_and_no_entry_number(tmp_path: Path):
    home = str(tmp_path / "home")
    setup = open_service(Settings(home=Path(home), embedder="none"), MIXED_STORE, actor="setup")
    try:
        common_id = setup.add_at("common/counter", "A counter every process updates").id
    finally:
        setup.storage.close()

    reports = _run_children(_mixed_writer, [(home, i, common_id, WRITES) for i in range(MIXED_PROCESSES)])

    FIGURES["concurrency: processes x writes"] += MIXED_PROCESSES * WRITES
    assert _all_errors(reports) == []
    service = open_service(Settings(home=Path(home), embedder="none"), MIXED_STORE, actor="checker")
    try:
        everything = Filters(now=service.clock.now(), statuses=None, include_expired=True)
        stored = {m.id: m for m, _ in service.storage.select(everything, Sort(descending=False), None)}
        paths = {m.path for m in stored.values()}
        lost = [key for r in reports for key in r["created"] if key not in stored and key not in paths]
        assert lost == []
        total_updates = sum(r["updates"] for r in reports)
        history = service.history(common_id)
        assert [c.version for c in history] == list(range(1, total_updates + 2))
        assert service.get(common_id).version == 1 + total_updates
        numbers = [m.entry_number for m in stored.values() if m.entry_number is not None]
        assert len(numbers) == len(set(numbers)), "two shared entries got the same entry number"
        FIGURES["concurrency: writes acknowledged"] += sum(len(r["created"]) for r in reports) + total_updates
    finally:
        service.storage.close()


# -- many plain updates of one memory through two servers' stores at once -------------------------
SERVERS = 2
APPENDERS_PER_SERVER = 16
APPENDS_EACH = 10


@pytest.mark.every_backend
def test_many_plain_updates_of_one_memory_through_two_stores_all_land(settings: Settings):
    """A plain update (no expected_version) is applied however many others write the same memory:
    the update contract says they are applied one after another, on every backend."""
    services = [open_service(settings, actor=f"server{n}") for n in range(SERVERS)]
    try:
        memory_id = services[0].store("A scratchpad every appender adds a line to").memory.id
        errors: queue.Queue[str] = queue.Queue()

        def append(service: MemoryService, name: str) -> None:
            for j in range(APPENDS_EACH):
                try:
                    service.update(memory_id, content=f"line {name}-{j}", merge_strategy="append")
                except Exception as exc:
                    errors.put(f"{name}-{j}: {_describe(exc)}")

        threads = [
            threading.Thread(target=append, args=(service, f"s{n}t{t}"))
            for n, service in enumerate(services)
            for t in range(APPENDERS_PER_SERVER)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(CHILD_TIMEOUT_S)
        assert list(errors.queue) == []
        memory = services[1].get(memory_id)
        total = SERVERS * APPENDERS_PER_SERVER * APPENDS_EACH
        assert memory.version == 1 + total
        assert len(memory.content.splitlines()) == 1 + total
    finally:
        for service in services:
            service.close()
