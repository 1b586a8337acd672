"""Several OS processes share one store: no write is lost and no caller sees the store busy.

Each child is a real process (multiprocessing, "spawn") with its own SQLite connections. Every
operation a child runs is wrapped so that any exception, a raw ``sqlite3`` error, ``Locked`` or
``StorageError``, is written down and sent back rather than killing the child; the parent then
checks the error lists are empty and counts what reached the database.
"""

from __future__ import annotations

import multiprocessing
import queue
import traceback
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.model import Context, Status
from mnemo.query import Filters
from mnemo.service import MemoryService
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


def test_four_processes_storing_recalling_and_updating_at_once_lose_no_write_and_see_no_error(tmp_path: Path):
    home = str(tmp_path / "home")

    reports = _run_children(_writer, [(home, i) for i in range(PROCESSES)])

    assert _all_errors(reports) == []
    service = _open(home, "checker")
    try:
        everything = Filters(now=service.clock.now(), statuses=None, include_expired=True)
        assert service.storage.count(everything) == PROCESSES * MEMORIES_PER_PROCESS
        assert service.storage.applied_migrations() == [m.__name__ for m in MIGRATIONS]
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


def test_four_processes_updating_one_memory_without_expected_version_all_land(tmp_path: Path):
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
