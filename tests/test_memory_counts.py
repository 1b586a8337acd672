"""Counts of memories by status and expiry alone (a list's total, a store's quota) come from the
counts the triggers keep by status (``memory_counts``) less the expired memories: they must agree
with counting the memories themselves, whatever was written, on both backends and after upgrading a
store made before the counts were kept. So must a list's total and page with tags and importance
bands, whichever read the store plans for them.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.engine.service import MemoryService
from mnemo.model import Status, importance_band
from mnemo.query import Filters, Sort, SortField
from mnemo.storage import sqlite as sqlite_backend
from mnemo.storage.sqlite import SQLiteStorage
from mnemo.storage.sqlite_schema import MIGRATIONS, m017_change_numbers
from postgres_server import store_connection, undo_m009

pytestmark = pytest.mark.every_backend

STATUS_SETS = ((Status.ACTIVE,), (Status.ACTIVE, Status.ARCHIVED), (Status.FORGOTTEN,), tuple(Status), (), None)


def _assert_counts_are_the_memories(service: MemoryService, now_hours: float = 0) -> None:
    now = service.clock.now() + timedelta(hours=now_hours)
    for statuses in STATUS_SETS:
        for include_expired in (False, True):
            filters = Filters(now=now, statuses=statuses, include_expired=include_expired)
            assert service.storage.count(filters) == len(service.storage.keys_matching(filters)), filters


def _written(service: MemoryService) -> list[str]:
    """Memories of every status, some expiring within hours, some changed and deleted."""
    now = service.clock.now()
    ids = [service.store(f"note {i} about kettles", expires_at=now + timedelta(hours=1 + i % 3)).memory.id
           for i in range(6)]  # fmt: skip
    ids += [service.store(f"lasting note {i} about teapots").memory.id for i in range(5)]
    service.forget(ids[0])  # soft: forgotten, recoverable
    service.forget(ids[6])
    service.forget(ids[1], hard_delete=True)  # gone
    service.forget(ids[7], hard_delete=True)
    return ids


def test_a_count_by_status_and_expiry_is_the_count_of_the_memories_whatever_was_written(
    service: MemoryService, clock: ManualClock
):
    _assert_counts_are_the_memories(service)  # an empty store
    _written(service)
    _assert_counts_are_the_memories(service)
    clock.advance(hours=2)  # some have expired
    _assert_counts_are_the_memories(service)
    _assert_counts_are_the_memories(service, now_hours=5)  # all that expire


def test_a_count_with_other_filters_still_counts_the_memories(service: MemoryService, clock: ManualClock):
    _written(service)
    filters = Filters(now=clock.now(), tags_any=("nothing-has-it",))
    assert service.storage.count(filters) == 0
    viewer = Filters(now=clock.now(), visible_to="someone-else")  # their own or shared: none here
    assert service.storage.count(viewer) == len(service.storage.keys_matching(viewer)) == 0


def test_a_sqlite_store_made_before_the_counts_gets_them_from_its_memories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
):
    folder = tmp_path / "store"
    # today's writes number their changes: the store has m017 already
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", [*MIGRATIONS[:9], m017_change_numbers])
    before = SQLiteStorage(folder)  # a store made before m010
    _written(MemoryService(before, clock))
    before.close()
    monkeypatch.setattr(
        sqlite_backend,
        "MIGRATIONS",
        [*MIGRATIONS[:9], m017_change_numbers, *(m for m in MIGRATIONS[9:] if m is not m017_change_numbers)],
    )
    upgraded = SQLiteStorage(folder)
    try:
        _assert_counts_are_the_memories(MemoryService(upgraded, clock))
    finally:
        upgraded.close()


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_postgresql_store_made_before_the_counts_gets_them_from_its_memories(
    service: MemoryService, settings: Settings, clock: ManualClock
):
    _written(service)
    service.storage.close()
    assert settings.database_url is not None
    with store_connection(settings.database_url) as db:
        undo_m009(db)  # the store as m008 left it
    upgraded = open_service(settings, clock=clock)
    try:
        _assert_counts_are_the_memories(upgraded)
    finally:
        upgraded.storage.close()


def test_totals_and_pages_with_tags_and_bands_are_the_memories_that_pass(service: MemoryService, clock: ManualClock):
    # Whichever read SQLite plans (tags' lists less the memories that fail, the tagged memories by
    # key, or a walk looking tags up; bands as a range or a CASE), a list's total and page are the
    # memories that pass, as the written records say: 600 memories of five tags as common as 90% to
    # 1%, some forgotten, archived or expired, 150 random filters, each page by creation and importance.
    rng = random.Random(5)
    tags, shares = ["a", "b", "c", "d", "e"], [0.9, 0.5, 0.2, 0.05, 0.01]
    written: dict[str, dict[str, Any]] = {}
    for n in range(600):
        expiring = rng.random() < 0.02
        record = {
            "order": n,
            "created_at": clock.now(),
            "importance": round(rng.random(), 3),
            "status": Status.ACTIVE,
            "tags": {tag for tag, share in zip(tags, shares, strict=True) if rng.random() < share},
            "expires_at": clock.now() + timedelta(hours=rng.randint(1, 9)) if expiring else None,
        }
        stored = service.store(
            f"note {n} about errand {rng.randrange(10**6)}",
            tags=sorted(record["tags"]),
            importance=record["importance"],
            expires_at=record["expires_at"],
            auto_tag=False,
        )
        written[stored.memory.id] = record
        clock.advance(seconds=1)
    for memory_id in rng.sample(sorted(written), 15):
        service.forget(memory_id)
        written[memory_id]["status"] = Status.FORGOTTEN
    for memory_id in rng.sample(sorted(i for i, r in written.items() if r["status"] is Status.ACTIVE), 5):
        service.update(memory_id, status=Status.ARCHIVED)
        written[memory_id]["status"] = Status.ARCHIVED
    clock.advance(hours=5)  # about half of the expiring ones have expired

    def passes(record: dict[str, Any], f: Filters) -> bool:
        return (
            (f.statuses is None or record["status"] in f.statuses)
            and (f.include_expired or record["expires_at"] is None or record["expires_at"] > f.now)
            and (not f.tags_any or bool(record["tags"] & set(f.tags_any)))
            and set(f.tags_all or ()) <= record["tags"]
            and (f.importance_bands is None or importance_band(record["importance"]).value in f.importance_bands)
        )

    for _ in range(150):
        asked = {rng.choice(["tags_any", "tags_all"]): tuple(rng.sample(tags, rng.randint(1, 3)))}
        bands = rng.choice([None, ("high",), ("medium",), ("low", "medium"), ("low", "high")])
        statuses = rng.choice([(Status.ACTIVE,), (Status.ACTIVE, Status.ARCHIVED), (Status.FORGOTTEN,), None])
        f = Filters(now=clock.now(), statuses=statuses, include_expired=rng.random() < 0.3, importance_bands=bands,
                    visible_to=None, **asked)  # type: ignore[arg-type]  # fmt: skip
        passing = {memory_id: record for memory_id, record in written.items() if passes(record, f)}
        assert service.storage.count(f) == len(passing), f
        for field, column in ((SortField.CREATED_AT, "created_at"), (SortField.IMPORTANCE, "importance")):
            page = [memory.id for memory, _ in service.storage.select(f, Sort(field, True), 7)]
            newest_first = sorted(passing, key=lambda i: (passing[i][column], passing[i]["order"]), reverse=True)
            assert page == newest_first[:7], (f, field)
