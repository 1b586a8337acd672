"""Access counts written just after a recall's answer (storage.access_tally, PostgreSQL): every count
reaches the store, this process's reads see each one it gave back, recalls that come while a write
is under way are written together, and a failed write costs the counts, never a read or a recall."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.engine.service import MemoryService
from mnemo.storage import access_tally
from mnemo.storage.access_tally import AccessTally, Counts, Recalls

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SLOW_WRITE_S = 1.0  # a write slower than any recall of a one-memory store takes, even on a busy machine


class SlowWrites:
    """What a tally wrote, each write held until let go."""

    def __init__(self) -> None:
        self.written: list[tuple[Counts, Recalls]] = []
        self.go = threading.Event()
        self.started = threading.Event()

    def __call__(self, counts: Counts, recalls: Recalls) -> None:
        self.started.set()
        assert self.go.wait(10)
        self.written.append((counts, recalls))


def _then(call: Callable[[], None], done: threading.Event) -> None:
    """Run the call on a thread of its own, and set ``done`` when it returns."""

    def run() -> None:
        call()
        done.set()

    threading.Thread(target=run).start()


def test_recalls_that_come_during_a_write_are_written_together_and_settle_waits_for_them():
    writes = SlowWrites()
    tally = AccessTally(writes, settle_timeout_s=10)
    tally.add(["a", "b"], AT)
    assert writes.started.wait(5)  # the first recall's write is under way and held
    tally.add(["a"], AT + timedelta(seconds=1))
    tally.add(["c", "a"], AT + timedelta(seconds=2))
    settled = threading.Event()
    _then(tally.settle, settled)
    assert not settled.wait(0.2)  # nothing is written yet
    writes.go.set()
    assert settled.wait(5)
    assert writes.written == [
        ({"a": (1, AT), "b": (1, AT)}, [(AT, 2)]),
        ({"a": (2, AT + timedelta(seconds=2)), "c": (1, AT + timedelta(seconds=2))},
         [(AT + timedelta(seconds=1), 1), (AT + timedelta(seconds=2), 2)]),
    ]  # fmt: skip
    tally.close()


def test_a_read_inside_another_or_a_search_does_not_wait_for_the_writer():
    writes = SlowWrites()
    tally = AccessTally(writes, settle_timeout_s=10)
    tally.add(["a"], AT)
    assert writes.started.wait(5)
    with tally.searching(), tally.held():  # a search's read: no wait
        pass
    waited: list[float] = []

    def outer_read() -> None:
        started = time.monotonic()
        with tally.held():  # the outermost read waits for the write
            waited.append(time.monotonic() - started)
            inner = time.monotonic()
            with tally.held():  # one inside it does not (the writer may need what it holds)
                waited.append(time.monotonic() - inner)

    reader = threading.Thread(target=outer_read)
    reader.start()
    time.sleep(0.2)
    writes.go.set()
    reader.join(5)
    assert waited[0] >= 0.15 and waited[1] < 0.1
    tally.close()


def test_a_failed_write_loses_its_counts_says_so_and_lets_reads_go_on(caplog: pytest.LogCaptureFixture):
    def failing(counts: Counts, recalls: Recalls) -> None:
        raise ConnectionError("the database is down")

    tally = AccessTally(failing, settle_timeout_s=10)
    with caplog.at_level(logging.WARNING, logger="mnemo.storage.access_tally"):
        tally.add(["a", "b"], AT)
        tally.settle()
    assert "the access counts of 2 memories were not written: the database is down" in caplog.text
    tally.close()


def test_closing_writes_what_is_tallied():
    written: list[Counts] = []
    tally = AccessTally(lambda counts, recalls: written.append(counts), settle_timeout_s=10)
    for i in range(50):
        tally.add([f"m{i % 5}"], AT)
    tally.close()
    assert sum(count for counts in written for count, _ in counts.values()) == 50


def test_a_recall_waits_when_too_many_are_tallied(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(access_tally, "MOST_PENDING", 2)
    writes = SlowWrites()
    tally = AccessTally(writes, settle_timeout_s=10)
    tally.add(["a"], AT)
    assert writes.started.wait(5)
    tally.add(["b"], AT)
    tally.add(["c"], AT)  # two pending behind the held write
    added = threading.Event()
    _then(lambda: tally.add(["d"], AT), added)
    assert not added.wait(0.2)
    writes.go.set()
    assert added.wait(5)
    tally.close()
    assert sorted(key for counts, _ in writes.written for key in counts) == ["a", "b", "c", "d"]


# -- on PostgreSQL, through the service ----------------------------------------------------------


def _service(tmp_path: Path, url: str, name: str) -> MemoryService:
    settings = Settings(home=tmp_path / name, config_dir=tmp_path / "config", embedder="none", database_url=url)
    return open_service(settings, clock=ManualClock(AT))


def test_this_process_reads_a_recall_s_counts_at_once_while_they_are_written(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
):
    service = _service(tmp_path, postgres_url, "a")
    try:
        memory = service.store("The otter project ships on Friday").memory
        tally = service.storage._access  # type: ignore[attr-defined]
        writing = tally._write

        def slow_write(counts: Counts, recalls: Recalls) -> None:
            time.sleep(SLOW_WRITE_S)  # the database takes its time
            writing(counts, recalls)

        monkeypatch.setattr(tally, "_write", slow_write)
        started = time.monotonic()
        assert service.recall("otter project").hits[0].memory.access_count == 1  # answered before the write
        answered = time.monotonic() - started
        assert service.get(memory.id).access_count == 1  # the next read waits for it
        assert answered < SLOW_WRITE_S <= time.monotonic() - started
    finally:
        service.close()


def test_servers_counting_the_same_memory_at_once_keep_every_count(tmp_path: Path, postgres_url: str):
    first, second = _service(tmp_path, postgres_url, "a"), _service(tmp_path, postgres_url, "b")
    try:
        memory = first.store("The otter project ships on Friday").memory

        def recall(service: MemoryService) -> None:
            for _ in range(20):
                assert service.recall("otter project").hits

        threads = [threading.Thread(target=recall, args=(service,)) for service in (first, first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        second.close()  # writes what it tallied
        assert first.get(memory.id).access_count == 60
    finally:
        first.close()
        second.close()
