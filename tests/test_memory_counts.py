"""Counts of memories by status and expiry alone (a list's total, a store's quota) come from the
counts the triggers keep by status (``memory_counts``) less the expired memories: they must agree
with counting the memories themselves, whatever was written, on both backends and after upgrading a
store made before the counts were kept.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.model import Status
from mnemo.query import Filters
from mnemo.service import MemoryService
from mnemo.storage import sqlite as sqlite_backend
from mnemo.storage.sqlite import SQLiteStorage
from mnemo.storage.sqlite_schema import MIGRATIONS
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
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", MIGRATIONS[:9])
    before = SQLiteStorage(folder)  # a store made before m010
    _written(MemoryService(before, clock))
    before.close()
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", MIGRATIONS)
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
