"""PostgreSQL's time bounds as settings (issue 47): one statement's (``statement_timeout``) and the
wait for a pooled connection, against the real PostgreSQL of the test suite.

A statement kept past its timeout, by a slow query or by a lock another session holds, reaches the
caller as ``TimedOut`` (STATEMENT_TIMEOUT, retryable; the full profile's 503) with its write rolled
back; a wait for a connection past the pool timeout stays ``Locked``, as before.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from mcp import Client
from pydantic import ValidationError

from mcp_calls import answer
from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.engine.service import MemoryService
from mnemo.errors import Locked, TimedOut, Unavailable
from mnemo.serve.server import build_server
from mnemo.storage.postgres import PostgresStorage
from postgres_server import store_connection

TINY_S = 0.2  # a statement timeout no statement here needs, which a held lock or a sleep outlasts


def _service(tmp_path: Path, url: str, **settings: object) -> MemoryService:
    return open_service(Settings(home=tmp_path / "home", embedder="none", database_url=url, **settings))  # type: ignore[arg-type]


@pytest.fixture
def blocker(postgres_url: str) -> Iterator[psycopg.Connection]:
    """Another session of the store's database, which takes locks in a transaction the test ends."""
    with store_connection(postgres_url) as db:
        yield db


def test_a_write_kept_past_the_statement_timeout_is_a_retryable_timeout_and_stores_nothing(
    tmp_path: Path, postgres_url: str, blocker: psycopg.Connection
):
    service = _service(tmp_path, postgres_url, database_statement_timeout_s=TINY_S)
    try:
        service.store("A note stored before the table was locked.")
        with blocker.transaction():
            blocker.execute("LOCK TABLE memories IN SHARE MODE")  # reads go on, inserts wait
            started = time.monotonic()
            with pytest.raises(TimedOut) as timed_out:
                service.store("The boiler was serviced on Tuesday.")
            waited = time.monotonic() - started
            assert len(service.list().memories) == 1  # a read is not held up by the lock
        assert waited < 5  # the 30 s busy timeout (lock_timeout) was not what ended it
        error = timed_out.value
        assert error.code == "STATEMENT_TIMEOUT" and isinstance(error, Unavailable)  # retryable, not LOCKED
        assert not isinstance(error, Locked)
        assert error.details["retry_after"] == Unavailable.RETRY_AFTER_S and error.details["timeout_s"] == TINY_S
        assert [m.content for m in service.list().memories] == ["A note stored before the table was locked."]
        assert service.store("The boiler was serviced on Tuesday.").memory.content  # and it works again
    finally:
        service.close()


def test_a_slow_statement_is_cancelled_at_the_statement_timeout(postgres_url: str):
    storage = PostgresStorage(postgres_url, statement_timeout_s=TINY_S)
    try:
        with pytest.raises(TimedOut):
            storage._rows("SELECT pg_sleep(5)")
        assert storage._one("SHOW statement_timeout") == "200ms"  # the pool's connection serves on
    finally:
        storage.close()


def test_maintenance_runs_without_the_statement_timeout(postgres_url: str):
    storage = PostgresStorage(postgres_url, statement_timeout_s=TINY_S)
    try:
        with storage._unbounded() as db:  # what reset_vectors and refresh_statistics run in
            db.execute("SELECT pg_sleep(0.4)")
        storage.refresh_statistics()
        storage.reset_vectors("all-MiniLM-L6-v2")
        assert storage._one("SHOW statement_timeout") == "200ms"  # the bound is back for the next call
    finally:
        storage.close()


async def test_the_full_profile_answers_a_timed_out_call_with_a_retryable_503(
    tmp_path: Path, postgres_url: str, blocker: psycopg.Connection
):
    settings = Settings(
        home=tmp_path / "home", embedder="none", database_url=postgres_url, database_statement_timeout_s=TINY_S
    )
    server = build_server(settings, "full")
    try:
        async with Client(server) as client:
            with blocker.transaction():
                blocker.execute("LOCK TABLE memories IN SHARE MODE")
                refused = await answer(client, "store_memory", content="The boiler was serviced on Tuesday.")
        error = refused["error"]
        assert (error["code"], error["status"]) == ("STORAGE_UNAVAILABLE", 503)
        assert error["details"]["retry_after"] == Unavailable.RETRY_AFTER_S
    finally:
        server.close()


def test_a_call_left_without_a_connection_for_the_pool_timeout_is_locked(tmp_path: Path, postgres_url: str):
    service = _service(tmp_path, postgres_url, database_pool_size=1, database_pool_timeout_s=TINY_S)
    pool = service.storage._pool  # type: ignore[attr-defined]  # PostgresStorage's, behind the access rules
    try:
        with pool.connection():  # the only connection, held
            started = time.monotonic()
            with pytest.raises(Locked) as locked:
                service.list()
            assert time.monotonic() - started < 5  # not the 30 s busy timeout
        assert not isinstance(locked.value, TimedOut)
        assert service.list().memories == []
    finally:
        service.close()


def test_the_timeouts_are_settings_with_bounds(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MNEMO_DATABASE_STATEMENT_TIMEOUT_S", "2.5")
    monkeypatch.setenv("MNEMO_DATABASE_POOL_TIMEOUT_S", "4")
    settings = Settings()
    assert (settings.database_statement_timeout_s, settings.database_pool_timeout_s) == (2.5, 4.0)
    monkeypatch.delenv("MNEMO_DATABASE_POOL_TIMEOUT_S")
    assert Settings().database_pool_timeout_s is None  # the busy timeout, then
    assert Settings.model_fields["database_statement_timeout_s"].default > Settings().busy_timeout_s
    for name, bad in [("STATEMENT", "0"), ("STATEMENT", "86401"), ("POOL", "0"), ("POOL", "3601")]:
        monkeypatch.setenv(f"MNEMO_DATABASE_{name}_TIMEOUT_S", bad)
        with pytest.raises(ValidationError):
            Settings()
        monkeypatch.delenv(f"MNEMO_DATABASE_{name}_TIMEOUT_S")
