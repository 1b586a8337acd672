"""The SQLite store's contract, checked on real database files in ``tmp_path``.

Through ``SQLiteStorage`` for the schema and its migrations, through the service for what a
caller sees; raw ``sqlite3`` is used only to look at (or prepare) the file from outside.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from conftest import START, sqlite_only
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.engine.results import TagEdit
from mnemo.engine.service import MemoryService
from mnemo.errors import CorruptedData, Duplicate, Locked, MnemoError, NotFound, StorageError
from mnemo.model import Context, Status
from mnemo.query import Filters
from mnemo.search.words import search_terms
from mnemo.storage import IdempotentCall, Storage, sql
from mnemo.storage import sqlite as sqlite_backend
from mnemo.storage.sqlite import DB_FILENAME, SQLiteStorage
from mnemo.storage.sqlite_files import backups
from mnemo.storage.sqlite_schema import MIGRATIONS, m017_change_numbers
from postgres_server import store_connection, undo_m005, undo_m006, undo_m011

MIGRATION_NAMES = [m.__name__ for m in MIGRATIONS]


@contextmanager
def _raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection to look at the file from outside mnemo (autocommit)."""
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        yield db


def _user_version(path: Path) -> int:
    with _raw(path) as db:
        return db.execute("PRAGMA user_version").fetchone()[0]


def _tables(path: Path) -> set[str]:
    with _raw(path) as db:
        return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _fts_rowids(path: Path, word: str) -> list[int]:
    with _raw(path) as db:
        return [r for (r,) in db.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", (f'"{word}"',))]


def _fts_is_consistent(path: Path) -> bool:
    """FTS5's own check that the index holds exactly what the content table says."""
    with _raw(path) as db:
        db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
    return True


# The tests that take ``service`` are the storage contract: they run on every backend.
pytestmark = pytest.mark.every_backend


def _ranked_matches(service: MemoryService) -> ModuleType:
    """The backend module whose RANKED_MATCHES caps the matches of common words a search ranks."""
    module = inspect.getmodule(type(service.storage.inner))  # type: ignore[attr-defined]
    assert module is not None
    return module


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[SQLiteStorage]:
    store = SQLiteStorage(tmp_path / "store", "contract")
    yield store
    store.close()


# -- migrations ------------------------------------------------------------------------


def test_a_new_store_records_each_migration_by_name_in_order(storage: SQLiteStorage):
    assert storage.applied_migrations() == MIGRATION_NAMES
    assert all(name.startswith(f"m{n:03d}_") for n, name in enumerate(MIGRATION_NAMES, start=1))
    assert _user_version(storage.path) == len(MIGRATIONS)


def test_reopening_a_store_runs_none_of_its_migrations_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "store"
    SQLiteStorage(folder).close()
    with _raw(folder / DB_FILENAME) as db:
        recorded = db.execute("SELECT name, applied_at FROM migrations ORDER BY rowid").fetchall()
    ran: list[str] = []

    def spy(migration: Callable[[sqlite3.Connection], None]) -> Callable[[sqlite3.Connection], None]:
        @functools.wraps(migration)
        def run(db: sqlite3.Connection) -> None:
            if db.execute("PRAGMA database_list").fetchone()[2]:  # not the in-memory reference schema
                ran.append(migration.__name__)
            migration(db)

        return run

    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", [spy(m) for m in MIGRATIONS])

    reopened = SQLiteStorage(folder)
    try:
        assert ran == []
        assert reopened.applied_migrations() == MIGRATION_NAMES
    finally:
        reopened.close()
    with _raw(folder / DB_FILENAME) as db:
        assert db.execute("SELECT name, applied_at FROM migrations ORDER BY rowid").fetchall() == recorded
    assert _user_version(folder / DB_FILENAME) == len(MIGRATIONS)


def test_m004_lets_a_user_filter_read_the_keys_it_keeps_from_the_index_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
):
    folder = tmp_path / "store"
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", MIGRATIONS[:3])
    SQLiteStorage(folder).close()  # a store made before m004
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", MIGRATIONS)

    upgraded = SQLiteStorage(folder)
    try:
        kept = MemoryService(upgraded, clock).store("Emma is lactose intolerant", context=Context(user_id="u1")).memory
        keys = upgraded.keys_matching(Filters(now=clock.now(), user_id="u1"))
        assert upgraded.keys_passing(keys, Filters(now=clock.now())) == {keys[0]: kept.id}
    finally:
        upgraded.close()
    where, params = sql.where(Filters(now=clock.now(), user_id="u1"))
    with _raw(folder / DB_FILENAME) as db:
        plan = db.execute(f"EXPLAIN QUERY PLAN SELECT m.rowid FROM memories m WHERE {where}", params).fetchall()
    assert "COVERING INDEX memories_user" in plan[0][-1]


def test_m009_gives_the_word_index_each_memory_s_readers_and_keeps_them_as_they_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: ManualClock
):
    folder = tmp_path / "store"
    # today's writes number their changes: the store has m017 already
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", [*MIGRATIONS[:8], m017_change_numbers])
    before = SQLiteStorage(folder)  # a store made before m009, with memories
    mine = MemoryService(before, clock).store("coffee with Emma", context=Context(user_id="u1")).memory
    theirs = MemoryService(before, clock).store("coffee break with Emma", context=Context(user_id="u2")).memory
    for day in ("Monday", "Tuesday", "Wednesday", "Thursday"):  # the store's newest matches: another user's
        MemoryService(before, clock).store(f"coffee with Emma on {day}", context=Context(user_id="u9"))
    before.close()
    monkeypatch.setattr(
        sqlite_backend,
        "MIGRATIONS",
        [*MIGRATIONS[:8], m017_change_numbers, *(m for m in MIGRATIONS[8:] if m is not m017_change_numbers)],
    )
    monkeypatch.setattr(sqlite_backend, "RANKED_MATCHES", 1)  # both words common: the newest 3 ranked

    upgraded = SQLiteStorage(folder)
    try:

        def found(**scope: str) -> list[str]:
            return [h.memory_id for h in upgraded.search_text(["coffee", "emma"], Filters(now=clock.now(), **scope), 1)]

        assert found(user_id="u1") == found(visible_to="u1") == [mine.id]
        readers_token = "u" + b"u1".hex() + "0"  # in the index, but no memory's word
        assert upgraded.search_text([readers_token, "latte"], Filters(now=clock.now()), 5) == []
        assert found(user_id="u2") == found(visible_to="u2") == [theirs.id]
        with _raw(folder / DB_FILENAME) as db:  # the index follows a change of readers
            db.execute("UPDATE memories SET access_level = 'shared' WHERE id = ?", (theirs.id,))
            db.execute("UPDATE memories SET user_id = 'u3', owner = 'u3' WHERE id = ?", (mine.id,))
            db.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
        assert found(visible_to="u1") == [theirs.id]
        assert found(user_id="u3") == [mine.id]
    finally:
        upgraded.close()


@pytest.mark.parametrize("backend", ["postgres"])
def test_postgresql_m004_lets_a_user_filter_read_the_keys_it_keeps_from_the_index_alone(
    service: MemoryService, settings: Settings, clock: ManualClock
):
    kept = service.store("Emma is lactose intolerant", context=Context(user_id="u1")).memory
    service.storage.close()
    assert settings.database_url is not None
    with store_connection(settings.database_url) as db:  # the store as m003 left it
        undo_m006(db)
        undo_m005(db)
        db.execute("DROP INDEX memories_user")
        db.execute("CREATE INDEX memories_user ON memories(user_id, status, created_at, expires_at)")
        db.execute("DELETE FROM migrations WHERE name = 'm004_keys_in_user_index'")

    upgraded = open_service(settings, clock=clock)
    try:
        keys = upgraded.storage.keys_matching(Filters(now=clock.now(), user_id="u1"))
        assert upgraded.storage.keys_passing(keys, Filters(now=clock.now())) == {keys[0]: kept.id}
        dialect = upgraded.storage.inner._dialect  # type: ignore[attr-defined]
    finally:
        upgraded.storage.close()
    where, params = sql.where(Filters(now=clock.now(), user_id="u1"), dialect)
    with store_connection(settings.database_url) as db:
        db.execute("VACUUM memories")  # marks the pages all-visible, as autovacuum does
        db.execute("SET enable_seqscan = off")  # one row: the planner would rather read the table
        db.execute("SET enable_bitmapscan = off")
        plan = db.execute(f"EXPLAIN SELECT m.rowid FROM memories m WHERE {where}", params).fetchall()  # type: ignore[call-overload]
    assert "Index Only Scan using memories_user" in plan[0][0]


@pytest.mark.parametrize("backend", ["postgres"])
def test_postgresql_plans_each_read_for_its_parameters_and_keeps_the_writes_prepared(
    settings: Settings, clock: ManualClock
):
    # psycopg prepares a statement run five times, and PostgreSQL may then use one plan for all
    # parameters: a search's best plan depends on its words and its filter, so reads are never
    # prepared; a write's plan does not, so writes are (docs/postgresql-performance.md). One connection:
    # prepared statements are its session's.
    service = open_service(settings.model_copy(update={"database_pool_size": 1}), clock=clock, embedder=FakeEmbedder())
    try:
        for i in range(8):
            service.store(f"Emma is allergic to pollen number {i}", context=Context(user_id="u1"))
            service.recall("what is Emma allergic to")
            service.recall("what is Emma allergic to", user_id="u1")
        with service.storage.inner._tx() as db:  # type: ignore[attr-defined]
            prepared = [statement for (statement,) in db.execute("SELECT statement FROM pg_prepared_statements")]
            assert db.prepare_threshold == 5  # a read gives its connection back as it found it
    finally:
        service.storage.close()
    assert any(statement.startswith("INSERT INTO memories") for statement in prepared)
    assert any(statement.startswith("INSERT INTO versions") for statement in prepared)
    searches = ("unnest(d.words)", "bit_count", "<=>", "words @@")
    assert not [statement for statement in prepared if any(part in statement for part in searches)]


def test_a_store_from_a_newer_mnemo_is_refused_naming_both_schema_versions(tmp_path: Path):
    folder = tmp_path / "store"
    folder.mkdir()
    newer = len(MIGRATIONS) + 3
    with _raw(folder / DB_FILENAME) as db:
        db.execute(f"PRAGMA user_version = {newer}")

    storage = SQLiteStorage(folder)  # opens, so that a server starts and answers each call with why
    try:
        with pytest.raises(StorageError) as refused:
            storage.count(Filters(now=datetime.now(UTC)))
    finally:
        storage.close()

    assert refused.value.details == {"store": "default", "schema_version": newer, "supported": len(MIGRATIONS)}
    assert str(newer) in refused.value.message
    assert str(len(MIGRATIONS)) in refused.value.message
    # Refused means untouched: no schema written over the newer one.
    assert _user_version(folder / DB_FILENAME) == newer
    assert _tables(folder / DB_FILENAME) == set()


def test_an_old_database_at_user_version_zero_without_tables_is_migrated_and_usable(tmp_path: Path):
    home = tmp_path / "home"
    path = Settings(home=home).store_folder("old", create=True) / DB_FILENAME
    path.parent.mkdir(parents=True)
    with _raw(path) as db:  # a real, non-empty SQLite file that holds no tables
        db.execute("CREATE TABLE scratch (x)")
        db.execute("DROP TABLE scratch")
    assert path.stat().st_size > 0
    assert _user_version(path) == 0

    service = open_service(Settings(home=home), "old")
    try:
        assert service.storage.applied_migrations() == MIGRATION_NAMES
        stored = service.store("Emma is lactose intolerant").memory
        assert [h.memory.id for h in service.recall("lactose").hits] == [stored.id]
    finally:
        service.storage.close()
    assert _user_version(path) == len(MIGRATIONS)
    assert {"migrations", "memories", "versions", "backups", "memories_fts"} <= _tables(path)


def test_a_migration_that_fails_leaves_the_store_at_its_previous_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    folder = tmp_path / "store"
    SQLiteStorage(folder).close()

    def m999_half_done(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE half_done (x)")
        db.execute("SELECT * FROM no_such_table")

    def m999_add_notes(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE notes (x)")

    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", [*MIGRATIONS, m999_half_done])
    refused = SQLiteStorage(folder)  # opens, and answers every call with the failure
    with pytest.raises(StorageError):
        refused.applied_migrations()
    refused.close()
    assert _user_version(folder / DB_FILENAME) == len(MIGRATIONS)
    assert [p.name.endswith(f"-before-migration-{len(MIGRATIONS) + 1}.db") for p in backups(folder)] == [True]
    assert "half_done" not in _tables(folder / DB_FILENAME)

    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", [*MIGRATIONS, m999_add_notes])
    upgraded = SQLiteStorage(folder)
    try:
        assert upgraded.applied_migrations() == [*MIGRATION_NAMES, "m999_add_notes"]
    finally:
        upgraded.close()
    assert _user_version(folder / DB_FILENAME) == len(MIGRATIONS) + 1
    assert "notes" in _tables(folder / DB_FILENAME)


def _calls_left_by_a_mnemo_before_leases_after_the_upgrade(storage: Storage) -> None:
    """The calls the store held, as a mnemo without leases wrote them at START: "stuck" (its server
    was killed mid-call) is free for a retry; "done" keeps its answer."""
    at = START + timedelta(minutes=1)
    for key, kept in (("stuck", None), ("done", IdempotentCall("digest", '{"ok": 1}'))):
        assert storage.begin_idempotent("alice", key, "digest", "retry", at, at + timedelta(seconds=15),
                                        at - timedelta(hours=24)) == kept  # fmt: skip


def test_m016_frees_the_key_of_a_call_left_running_before_leases_and_keeps_the_answers_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    folder = tmp_path / "store"
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", MIGRATIONS[: MIGRATION_NAMES.index("m016_idempotency_leases")])
    with caplog.at_level(logging.INFO, logger="mnemo.storage"):
        SQLiteStorage(folder).close()
    assert not caplog.records  # a new store is made, not upgraded
    with _raw(folder / DB_FILENAME) as db:
        db.executemany(
            "INSERT INTO idempotent_calls VALUES ('alice', ?, 'digest', ?, '2026-01-15T12:00:00.000000Z')",
            [("stuck", None), ("done", '{"ok": 1}')],
        )
    monkeypatch.setattr(sqlite_backend, "MIGRATIONS", MIGRATIONS)
    with caplog.at_level(logging.INFO, logger="mnemo.storage"):
        upgraded = SQLiteStorage(folder)
    assert "schema upgraded (m016_idempotency_leases, m017_change_numbers, m018_applied_calls) in" in caplog.text
    try:
        _calls_left_by_a_mnemo_before_leases_after_the_upgrade(upgraded)
    finally:
        upgraded.close()


@pytest.mark.parametrize("backend", ["postgres"])
def test_postgresql_m011_frees_the_key_of_a_call_left_running_before_leases_and_keeps_the_answers_kept(
    service: MemoryService, settings: Settings, clock: ManualClock, caplog: pytest.LogCaptureFixture
):
    service.storage.close()
    assert settings.database_url is not None
    with store_connection(settings.database_url) as db:
        undo_m011(db)  # the store as m010 left it
        db.cursor().executemany(
            "INSERT INTO idempotent_calls VALUES ('alice', %s, 'digest', %s, %s)",
            [("stuck", None, START), ("done", '{"ok": 1}', START)],
        )
    with caplog.at_level(logging.INFO, logger="mnemo.storage"):
        upgraded = open_service(settings, clock=clock)
    assert (
        "schema upgraded (m011_idempotency_leases, m012_change_numbers, m013_applied_calls,"
        " m014_vectors_fed_in_commit_order) in" in caplog.text
    )
    try:
        _calls_left_by_a_mnemo_before_leases_after_the_upgrade(upgraded.storage)
    finally:
        upgraded.storage.close()


# -- the text index follows the content --------------------------------------------------


def test_an_updated_memory_is_found_by_its_new_words_and_no_longer_by_its_old_ones(
    service: MemoryService, backend: str
):
    memory = service.store("The heron fishes in the marsh", auto_tag=False).memory

    service.update(memory.id, content="The otter swims in the river")

    assert [h.memory.id for h in service.recall("otter").hits] == [memory.id]
    assert service.recall("heron").hits == []
    if backend != "sqlite":
        return
    path = service.storage.path  # FTS5's own view
    assert _fts_rowids(path, "heron") == []
    assert len(_fts_rowids(path, "otter")) == 1
    assert _fts_is_consistent(path)


def test_edited_tags_are_found_and_removed_tags_are_not(service: MemoryService, backend: str):
    memory = service.store("Weekend plans on the water", tags=["kayak"], auto_tag=False).memory

    service.update(memory.id, tags=TagEdit(add=("canoe",), remove=("kayak",)))

    assert [h.memory.id for h in service.recall("canoe").hits] == [memory.id]
    assert service.recall("kayak").hits == []
    assert backend != "sqlite" or _fts_is_consistent(service.storage.path)


@sqlite_only  # reads FTS5's pages and the file's tables
def test_a_hard_delete_leaves_its_words_nowhere_in_the_index_the_history_or_the_backups(
    service: MemoryService,
):
    for n in range(3):
        service.store(f"Gardening note {n}: water the tomatoes")
    memory = service.store("The secret codeword is zanzibar").memory
    service.update(memory.id, content="The secret codeword is xylophone", reason="rotated")
    soft = service.forget(memory.id, reason="privacy")
    assert soft.backup_id is not None

    hard = service.forget(memory.id, reason="privacy", hard_delete=True)

    assert hard.deletion_type == "hard"
    with pytest.raises(NotFound):
        service.get(memory.id)
    assert service.storage.backup(soft.backup_id) is None
    path = service.storage.path
    secrets = ("zanzibar", "xylophone")
    with _raw(path) as db:
        assert db.execute("SELECT COUNT(*) FROM memories WHERE id = ?", (memory.id,)).fetchone() == (0,)
        for word in secrets:
            assert _fts_rowids(path, word) == []
            # Not just unmatchable: the index's own pages no longer hold the word.
            blocks = [b for (b,) in db.execute("SELECT block FROM memories_fts_data") if b]
            assert not any(word.encode() in block for block in blocks), f"{word!r} is still in the FTS index"
            for table in ("versions", "backups"):
                rows = db.execute(f"SELECT * FROM {table}").fetchall()
                assert not any(word in str(cell) for row in rows for cell in row), f"{word!r} is still in {table}"
        previous = db.execute("SELECT previous FROM versions WHERE memory_id = ?", (memory.id,)).fetchall()
        assert previous and all(p is None for (p,) in previous)
        assert db.execute("SELECT COUNT(*) FROM backups WHERE memory_id = ?", (memory.id,)).fetchone() == (0,)
    assert _fts_is_consistent(path)
    # Who did what and when is kept, and the other memories are still found.
    with _raw(path) as db:
        actions = [
            a for (a,) in db.execute("SELECT action FROM versions WHERE memory_id = ? ORDER BY version", (memory.id,))
        ]
    assert actions == ["create", "update", "forget", "hard_delete"]
    assert service.recall("tomatoes").total == 3


# -- every change leaves a version ---------------------------------------------------------


def test_every_change_writes_a_version_with_its_actor_reason_and_previous_content(
    service: MemoryService, clock: ManualClock, backend: str
):
    created = service.store("Emma lives in Lyon", actor="alice").memory
    clock.advance(minutes=1)
    updated = service.update(created.id, content="Emma lives in Porto", reason="moved house", actor="bob").memory
    clock.advance(minutes=1)
    service.forget(created.id, reason="outdated", reason_details="no longer true", actor="carol")

    history = service.storage.history(created.id)

    assert [(c.action, c.version, c.actor, c.reason) for c in history] == [
        ("create", 1, "alice", None),
        ("update", 2, "bob", "moved house"),
        ("forget", 3, "carol", "outdated: no longer true"),
    ]
    assert [c.at for c in history] == [created.created_at, updated.updated_at, clock.now()]
    assert history[0].previous is None
    assert history[1].previous is not None
    assert (history[1].previous.content, history[1].previous.version) == ("Emma lives in Lyon", 1)
    assert history[2].previous is not None
    assert (history[2].previous.content, history[2].previous.version) == ("Emma lives in Porto", 2)
    assert history[2].previous.status is Status.ACTIVE
    if backend != "sqlite":
        return
    with _raw(service.storage.path) as db:
        rows = db.execute("SELECT COUNT(*) FROM versions WHERE memory_id = ?", (created.id,)).fetchone()
    assert rows == (3,)


def test_a_change_without_a_named_actor_is_credited_to_the_memorys_user_or_else_the_service(
    service: MemoryService,
):
    owned = service.store("Emma prefers tea", context=Context(user_id="emma")).memory
    unowned = service.store("The office closes at six").memory

    assert [c.actor for c in service.history(owned.id)] == ["emma"]
    assert [c.actor for c in service.history(unowned.id)] == [service.actor]


def test_an_update_that_changes_nothing_writes_no_version(service: MemoryService):
    memory = service.store("Emma prefers tea", importance=0.4).memory

    result = service.update(memory.id, importance=0.4)

    assert result.updated_fields == []
    assert result.previous_version_id is None
    assert service.get(memory.id).version == 1
    assert [c.action for c in service.history(memory.id)] == ["create"]


# -- a batch of writes is one transaction ----------------------------------------------------


def test_a_batch_is_seen_by_others_only_when_it_ends_and_a_refused_write_undoes_only_itself(
    service: MemoryService, settings: Settings, clock: ManualClock
):
    other = open_service(settings, clock=clock)  # another connection, as another process has
    try:
        with service.batched():
            first = service.store("Emma plays the cello").memory
            with pytest.raises(MnemoError):  # refused inside the write: its savepoint is undone
                service.store("Emma plays the cello", on_duplicate="raise")
            second = service.store("Liam plays chess").memory
            assert service.storage.get(first.id) is not None  # the batch reads its own writes
            assert other.storage.get(first.id) is None
        assert {m.id for m in other.storage.get_many([first.id, second.id])} == {first.id, second.id}
        assert [c.action for c in other.history(second.id)] == ["create"]
    finally:
        other.storage.close()


@pytest.mark.parametrize("backend", ["postgres"])  # SQLite goes on after a failed statement
def test_a_batch_in_which_a_read_failed_on_postgresql_says_so_instead_of_committing_nothing(service: MemoryService):
    with pytest.raises(StorageError, match="none of it was kept"), service.batched():
        lost = service.store("Emma plays the cello").memory
        with pytest.raises(StorageError), service.storage.inner._read() as db:  # type: ignore[attr-defined]
            db.execute("SELECT 1 / 0")
    assert service.storage.get(lost.id) is None


def test_a_batch_finds_a_near_duplicate_of_a_memory_stored_earlier_in_it(settings: Settings, clock: ManualClock):
    service = open_service(settings, clock=clock, embedder=FakeEmbedder())
    try:
        with service.batched():
            first = service.store("Emma plays the cello every Tuesday evening").memory
            with pytest.raises(Duplicate) as refused:  # same words: to the vectors, the same note
                service.store("Every Tuesday evening Emma plays the cello", on_duplicate="raise")
            assert refused.value.existing_id == first.id and "similarity" in refused.value.details  # by its vector
            assert service.store("Liam plays chess on Sundays").memory.id != first.id  # the batch goes on
        assert len(service.storage.keys_matching(Filters(now=clock.now()))) == 2
    finally:
        service.storage.close()


def test_a_batch_that_fails_keeps_none_of_its_writes_nor_their_vectors_in_the_index(
    settings: Settings, clock: ManualClock
):
    service = open_service(settings, clock=clock, embedder=FakeEmbedder())
    try:
        with pytest.raises(RuntimeError), service.batched():
            lost = service.store("Emma plays the cello").memory
            assert service.recall("cello").hits  # the index took in the batch's vector
            raise RuntimeError("the import was interrupted")
        assert service.storage.get(lost.id) is None
        kept = service.store("Liam collects vinyl records").memory  # may reuse the lost rows' keys
        (hit,) = service.recall("Liam collects vinyl records").hits
        assert hit.memory.id == kept.id and hit.scores.semantic_similarity > 0.99
    finally:
        service.storage.close()


def test_a_search_in_a_batch_finds_what_the_batch_stored_by_its_words_as_well_as_by_its_vector(
    settings: Settings, clock: ManualClock
):
    service = open_service(settings, clock=clock, embedder=FakeEmbedder())
    try:
        with service.batched():
            stored = service.store("Emma plays the cello").memory
            # The words are searched beside the vectors on another thread, except in a batch:
            # another thread's connection would not see the batch's writes.
            found = service.searcher.find("cello", search_terms("cello"), Filters(now=clock.now()), 10)
            assert [(c.memory_id, c.text) for c in found.candidates] == [(stored.id, 1.0)]
    finally:
        service.storage.close()


# -- vectors ------------------------------------------------------------------------------------


def test_a_vector_search_among_the_memories_that_pass_filters_returns_their_true_top_k(
    settings: Settings, clock: ManualClock
):
    service = open_service(settings, clock=clock, embedder=FakeEmbedder())
    try:
        topics = ["cello lessons", "chess club", "vinyl records", "garden roses", "sourdough bread", "tide tables"]
        for i in range(36):
            text = f"Note {i} about {topics[i % 6]} and {topics[(i * 5) % 6]}"
            memory = service.store(text, context=Context(user_id=f"u{i % 3}")).memory
            if i % 9 == 0:
                service.forget(memory.id)  # soft-deleted: no longer passes
        query = FakeEmbedder().embed_query("roses and bread in the garden")
        filters = Filters(now=clock.now(), user_id="u1")
        index = service.searcher.index
        assert index is not None
        passing = service.storage.keys_matching(filters)
        cosine = {key: float(vector @ query) for key, vector in index.vectors(passing).items()}
        best = sorted(cosine.values(), reverse=True)[:5]  # notes that differ by their number alone tie

        found = index.search_passing(query, 5, filters, service.storage)

        assert np.allclose([score for _, score in found], best, atol=1e-5)
        assert all(np.isclose(score, cosine[key], atol=1e-5) for key, score in found)  # keys that pass
        nobody = Filters(now=clock.now(), user_id="nobody")
        assert index.search_passing(query, 5, nobody, service.storage) == []
    finally:
        service.storage.close()


# -- driver errors become mnemo errors ------------------------------------------------------


def test_a_file_that_is_not_a_database_opens_as_a_store_whose_every_operation_is_corrupted_data(tmp_path: Path):
    home = tmp_path / "home"
    path = Settings(home=home).store_folder("broken", create=True) / DB_FILENAME
    path.parent.mkdir(parents=True)
    path.write_bytes(b"these are my notes, not a database\n" * 200)

    service = open_service(Settings(home=home), "broken")  # so a server starts and can say what is wrong
    try:
        for operation in (lambda: service.store("Emma is lactose intolerant"), service.list, service.overview):
            with pytest.raises(CorruptedData) as failed:
                operation()
            assert failed.value.details == {"store": "broken"}  # the store's name, never where it is on disk
    finally:
        service.storage.close()
    assert path.read_bytes().startswith(b"these are my notes")  # left for the user to inspect


def test_a_writer_kept_waiting_past_the_busy_timeout_gets_locked_and_readers_are_not_blocked(
    tmp_path: Path, clock: ManualClock
):
    storage = SQLiteStorage(tmp_path / "store", busy_timeout_s=0.2)
    service = MemoryService(storage, clock)
    try:
        kept = service.store("Emma is lactose intolerant").memory
        with _raw(storage.path) as other_writer:
            other_writer.execute("BEGIN IMMEDIATE")
            with pytest.raises(Locked):
                service.store("Emma goes hiking in August")
            assert [m.id for m in service.list().memories] == [kept.id]
            other_writer.execute("ROLLBACK")
        service.store("Emma goes hiking in August")
        assert service.list().total == 2
    finally:
        storage.close()


def _open_handles(path: Path) -> list[str]:
    fds = Path("/proc/self/fd")
    return [fd.name for fd in fds.iterdir() if os.path.realpath(fd) == str(path)]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files through /proc")
@pytest.mark.parametrize("kind", ["not_a_database", "newer_schema"])
def test_a_store_that_refuses_to_open_keeps_no_handle_on_its_file(tmp_path: Path, kind: str):
    folder = tmp_path / "store"
    folder.mkdir()
    path = folder / DB_FILENAME
    if kind == "not_a_database":
        path.write_bytes(b"not a database\n" * 300)
    else:
        with _raw(path) as db:
            db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")

    with pytest.raises(MnemoError):
        SQLiteStorage(folder).vector_model()  # a damaged store opens, then refuses every operation

    # An open handle would keep the file locked on Windows, so the user could not move it aside.
    assert _open_handles(path) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files through /proc")
def test_closing_a_store_closes_the_connections_its_reads_opened_on_other_threads(tmp_path: Path):
    storage = SQLiteStorage(tmp_path / "store")
    readers = [threading.Thread(target=storage.vector_model) for _ in range(2)]
    for reader in readers:  # each thread opens a connection of its own, and leaves it open
        reader.start()
        reader.join()
    path = tmp_path / "store" / DB_FILENAME
    assert len(_open_handles(path)) >= 2

    storage.close()

    assert _open_handles(path) == []


def test_keys_holding_a_word_are_those_a_word_search_matches_among_the_keys_given(service: MemoryService):
    stored = [
        service.store(text).memory
        for text in ("Emma is allergic to peanuts", "Emma runs marathons", "Liam is allergic to cats", "Emma")
    ]
    every = Filters(now=service.clock.now())
    key_of = {
        memory_id: key
        for key, memory_id in service.storage.keys_passing(service.storage.keys_matching(every), every).items()
    }
    emma = [key_of[m.id] for m in stored if m.content.startswith("Emma")]
    holding = service.storage.keys_holding(emma, search_terms("Is she allergic? Does she run?"))
    assert holding == {key_of[stored[0].id], key_of[stored[1].id]}  # stems match; Liam's is not among the keys
    assert service.storage.keys_holding(emma, search_terms("the of and")) == set()  # stop words alone
    assert service.storage.keys_holding([], ["allergic"]) == set()


def test_text_search_finds_the_true_best_match_when_the_best_hits_are_filtered_out(service: MemoryService):
    hidden = [service.store(f"zebra zebra zebra stripes number {i}").memory for i in range(6)]
    for memory in hidden:
        service.forget(memory.id)
    visible = service.store("a lone zebra was seen near the river, among many other animals").memory
    filters = Filters(now=service.clock.now())
    hits = service.storage.search_text(["zebra"], filters, limit=1)
    assert [h.memory_id for h in hits] == [visible.id]
    with_attribute = Filters(now=service.clock.now(), categories=(visible.category or "custom",))
    assert [h.memory_id for h in service.storage.search_text(["zebra"], with_attribute, limit=1)] == [visible.id]


def test_text_search_ranks_every_memory_with_a_rare_word_by_all_the_query_words(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
):
    for i in range(30):
        service.store(f"tea time number {i} on the terrace")
    for i in range(8):
        service.store(f"coffee break number {i} in the kitchen")
    both = service.store("Emma drinks her coffee black").memory
    rare_only = service.store("Emma walks to work").memory
    filters = Filters(now=service.clock.now())

    # "coffee" is in more memories than are ranked for common words: of those, only the newest
    # would be ranked, but every memory with "emma" is, with its score for both words.
    monkeypatch.setattr(_ranked_matches(service), "RANKED_MATCHES", 4)
    split = {h.memory_id: h.score for h in service.storage.search_text(["emma", "coffee"], filters, limit=2)}
    monkeypatch.setattr(_ranked_matches(service), "RANKED_MATCHES", 1_000)
    exact = {h.memory_id: h.score for h in service.storage.search_text(["emma", "coffee"], filters, limit=2)}

    assert list(split) == list(exact) == [both.id, rare_only.id]
    assert split == pytest.approx(exact)


def test_a_text_search_of_one_user_s_memories_ranks_the_newest_of_theirs_for_common_words(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
):
    # A team's store: the words a user searches are common across everyone's memories. The newest
    # matches that are ranked are the newest of those the search may return (the user's, or those
    # a member may read), not the store's newest, which may all be other users'.
    monkeypatch.setattr(_ranked_matches(service), "RANKED_MATCHES", 4)
    days = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
    own = [service.store(f"coffee with Emma on {day}", context=Context(user_id="u1")).memory for day in days]
    for i in range(6):
        service.store(f"coffee break number {i} with Emma", context=Context(user_id="u2"))  # private to u2
    now = service.clock.now()

    for filters in (Filters(now=now, user_id="u1"), Filters(now=now, visible_to="u1")):
        hits = service.storage.search_text(["coffee", "emma"], filters, limit=1)
        assert [h.memory_id for h in hits] in ([m.id] for m in own[-4:])


def test_text_search_ranks_only_the_newest_memories_with_words_that_most_memories_contain(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(_ranked_matches(service), "RANKED_MATCHES", 4)
    best_but_oldest = service.store("coffee coffee coffee").memory
    newer = [service.store(f"coffee break number {i} in the kitchen").memory for i in range(6)]

    hits = service.storage.search_text(["coffee"], Filters(now=service.clock.now()), limit=1)

    assert [h.memory_id for h in hits] != [best_but_oldest.id]
    assert {h.memory_id for h in hits} <= {m.id for m in newer[-4:]}


# -- request ledgers ------------------------------------------------------------------------------


def test_an_idempotency_key_whose_lease_ran_out_is_taken_over_by_one_retry_and_its_old_holder_changes_nothing(
    service: MemoryService,
):
    storage, start, lease = service.storage, service.clock.now(), timedelta(seconds=15)

    def begin(holder: str, after_s: int) -> IdempotentCall | None:
        at = start + timedelta(seconds=after_s)
        return storage.begin_idempotent("alice", "k", "digest", holder, at, at + lease, at - timedelta(hours=24))

    assert begin("killed", 0) is None
    assert begin("retry", 10) == IdempotentCall("digest", None, start + lease)  # still leased: refused
    storage.renew_idempotent("killed", [("alice", "k")], start + timedelta(seconds=25))
    assert begin("retry", 20) == IdempotentCall("digest", None, start + timedelta(seconds=25))
    # Not renewed since (its server was killed): of four retries at once, one takes the key over.
    barrier = threading.Barrier(4)

    def retry(n: int) -> IdempotentCall | None:
        barrier.wait()
        return begin(f"retry-{n}", 30)

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(retry, range(4)))
    taken = start + timedelta(seconds=30) + lease
    assert sorted(outcomes, key=str) == [IdempotentCall("digest", None, taken)] * 3 + [None]
    storage.renew_idempotent("killed", [("alice", "k")], start + timedelta(hours=1))  # the old holder is ignored
    storage.end_idempotent("alice", "k", "killed", None)
    storage.end_idempotent("alice", "k", "killed", '"stale"')
    assert begin("retry", 31) == IdempotentCall("digest", None, taken)
    storage.end_idempotent("alice", "k", f"retry-{outcomes.index(None)}", '"done"')
    assert begin("retry", 60) == IdempotentCall("digest", '"done"', taken)  # an answer is kept past its lease
