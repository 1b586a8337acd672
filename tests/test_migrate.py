"""`mnemo migrate`: a whole store copied from SQLite to PostgreSQL and back, as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mnemo.app import open_service
from mnemo.cli import cli
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.engine.service import MemoryService
from mnemo.engine.shared_space import SharedSpace
from mnemo.model import Context, Memory
from mnemo.query import Filters, Sort
from mnemo.storage import Storage
from mnemo.storage.sqlite import SQLiteStorage

pytestmark = pytest.mark.parametrize("backend", ["postgres"])  # settings' stores are in PostgreSQL


def _everything(storage: Storage, clock: ManualClock) -> list[Memory]:
    filters = Filters(now=clock.now(), statuses=None, include_expired=True, visible_to=None)
    return [m for m, _ in storage.select(filters, Sort(descending=False), None)]


def _fill(service: MemoryService, clock: ManualClock) -> list[str]:
    kept = service.store("Emma is lactose intolerant", context=Context(user_id="emma"), tags=["diet"]).memory
    clock.advance(minutes=1)
    service.update(kept.id, content="Emma is lactose intolerant and avoids cream", reason="more precise")
    gone = service.store("The old office code is 4471").memory
    service.forget(gone.id, reason="privacy")
    linked = service.store("Emma's sister is Mia", related_memory_ids=[kept.id]).memory
    space = SharedSpace(service)
    space.add("claude-alpha", "first shared entry")
    space.add("claude-beta", "second shared entry")
    return [kept.id, gone.id, linked.id]


def _migrate(home: Path, monkeypatch: pytest.MonkeyPatch, source: str, target: str) -> str:
    monkeypatch.setenv("MNEMO_HOME", str(home))
    result = CliRunner().invoke(cli, ["migrate", "--from", source, "--to", target])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_store_migrated_to_postgresql_and_back_is_the_same_store(
    tmp_path: Path, settings: Settings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
):
    assert settings.database_url is not None
    local = Settings(home=tmp_path / "laptop", config_dir=settings.config_dir, embedder="none")
    laptop = open_service(local, clock=clock, embedder=FakeEmbedder())
    ids = _fill(laptop, clock)
    before = _everything(laptop.storage, clock)
    histories = {i: laptop.storage.history(i) for i in ids}
    links = laptop.storage.linked_ids(ids[2])
    vectors = laptop.storage.vector_bytes()
    assert vectors > 0
    laptop.storage.close()
    folder = local.store_folder()

    output = _migrate(tmp_path / "laptop", monkeypatch, f"sqlite:{folder}", settings.database_url)
    assert "copied store default: 5 memories" in output

    team = open_service(settings, clock=clock, embedder=FakeEmbedder())
    try:
        assert _everything(team.storage, clock) == before
        assert {i: team.storage.history(i) for i in ids} == histories
        assert team.storage.linked_ids(ids[2]) == links
        assert team.storage.vector_bytes() == vectors
        assert team.storage.check_integrity() == []  # the HNSW index, built once the vectors were in
        assert team.recall("dairy cream").hits[0].memory.id == ids[0]
        # The entry counter came along: the next shared entry is the third.
        assert SharedSpace(team).add("claude-alpha", "third shared entry").entry.entry_number == 3
        after = _everything(team.storage, clock)
    finally:
        team.storage.close()

    back = tmp_path / "back"
    _migrate(tmp_path / "laptop", monkeypatch, settings.database_url, f"sqlite:{back}")
    again = SQLiteStorage(back)
    try:
        assert _everything(again, clock) == after
        assert {i: again.history(i) for i in ids} == histories
    finally:
        again.close()


def test_migrating_into_a_store_that_holds_memories_is_refused_and_changes_nothing(
    tmp_path: Path, settings: Settings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
):
    assert settings.database_url is not None
    team = open_service(settings, clock=clock)
    team.store("Already here")
    team.storage.close()
    local = Settings(home=tmp_path / "laptop", config_dir=settings.config_dir, embedder="none")
    laptop = open_service(local, clock=clock)
    laptop.store("From the laptop")
    laptop.storage.close()

    monkeypatch.setenv("MNEMO_HOME", str(tmp_path / "laptop"))
    result = CliRunner().invoke(
        cli, ["migrate", "--from", f"sqlite:{local.store_folder()}", "--to", settings.database_url]
    )

    assert result.exit_code != 0
    assert "already holds memories" in result.output
    team = open_service(settings, clock=clock)
    try:
        assert [m.content for m in _everything(team.storage, clock)] == ["Already here"]
    finally:
        team.storage.close()
