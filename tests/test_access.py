"""The access rules between users, in the engine (``mnemo.access.rules``), on a real store.

Each block runs as one authenticated caller (``acting_as``), as the HTTP transport does per call.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from mcp import Client, MCPError

from mnemo.access.caller import Caller, Role, acting_as
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.engine import registry
from mnemo.engine.service import MemoryService
from mnemo.engine.shared_space import SharedSpace
from mnemo.errors import Forbidden, NotFound
from mnemo.lifecycle.archive import Archiver, Criteria
from mnemo.model import Context, to_iso
from mnemo.serve.server import build_server

ALICE, BOB = Caller("alice"), Caller("bob")
ROOT, CAROL = Caller("root", Role.ADMIN), Caller("carol", Role.READER)
ALICE_READS = Caller("alice", Role.READER)  # alice's read-only key: her own memories, and no writes


def test_a_members_memory_is_theirs_and_invisible_to_another_member(service: MemoryService):
    with acting_as(ALICE):
        secret = service.store("Alice's locker is number 12").memory
    assert secret.owner == "alice" and secret.context.user_id == "alice"
    with acting_as(BOB):
        with pytest.raises(NotFound):
            service.get(secret.id)
        assert service.list(limit=10).memories == []
        assert service.recall("locker number", min_relevance=0).hits == []
        with pytest.raises(NotFound):
            service.update(secret.id, content="Bob was here")
        with pytest.raises(NotFound):
            service.forget(secret.id)
        # the same words are bob's own memory, not a duplicate of alice's
        assert service.store("Alice's locker is number 12").memory.id != secret.id
    with acting_as(ALICE):
        assert service.get(secret.id).content == "Alice's locker is number 12"


def test_shared_memories_are_read_by_all_and_written_by_their_owner(service: MemoryService):
    with acting_as(ALICE):
        note = service.store("Standup moved to 10:00", access_level="shared").memory
    with acting_as(BOB):
        assert service.get(note.id).content == "Standup moved to 10:00"
        with pytest.raises(Forbidden):
            service.update(note.id, content="Standup cancelled")
        with pytest.raises(Forbidden):
            service.forget(note.id)
    assert service.get(note.id).version == 1


def test_naming_another_users_scope_is_forbidden_but_an_admin_may(service: MemoryService):
    with acting_as(ALICE):
        service.store("Alice prefers tea")
    with acting_as(BOB):
        with pytest.raises(Forbidden):
            service.list(user_id="alice")
        with pytest.raises(Forbidden):
            service.recall("tea", user_id="alice")
        with pytest.raises(Forbidden):
            service.store("forged", context=Context(user_id="alice"))
    with acting_as(ROOT):
        assert [m.content for m in service.list(user_id="alice").memories] == ["Alice prefers tea"]
        service.update(service.list(user_id="alice").memories[0].id, content="Alice prefers green tea")


def test_a_reader_reads_and_writes_nothing(service: MemoryService):
    with acting_as(ALICE):
        service.store("Office wifi is guest-5G", access_level="public")
    with acting_as(CAROL):
        assert len(service.list().memories) == 1
        with pytest.raises(Forbidden):
            service.store("Carol's note")


def test_auto_archive_criteria_pick_only_the_callers_own_memories(service: MemoryService):
    with acting_as(ALICE):
        service.store("Old shared fact", access_level="shared", importance=0.1)
    with acting_as(BOB):
        mine = service.store("Bob's old fact", importance=0.1).memory
        result = Archiver(service, service.lifecycle).archive(criteria=Criteria(low_importance=0.5))
    assert [a.memory_id for a in result.archived] == [mine.id]


def test_a_cascading_forget_leaves_a_teammates_linked_memory(service: MemoryService):
    with acting_as(ALICE):
        shared = service.store("Release checklist lives in the wiki", access_level="shared").memory
    with acting_as(BOB):
        mine = service.store("My release notes draft", related_memory_ids=[shared.id]).memory
        assert service.forget(mine.id, cascade_related=True).related_affected == 0
    assert service.get(shared.id).status.value == "active"


def test_each_user_has_a_shared_space_of_their_own(service: MemoryService):
    space = SharedSpace(service)
    with acting_as(ALICE):
        entry = space.add("alpha", "Build is green").entry
    with acting_as(BOB):
        assert space.read().entries == []
        with pytest.raises(NotFound):
            space.get(entry.id)
        with pytest.raises(NotFound):
            space.delete(entry.id)
    with acting_as(ALICE):
        assert [e.id for e in space.read().entries] == [entry.id]


def test_a_member_syncs_only_their_own_memories_and_a_reader_none(settings, service: MemoryService):
    from mnemo.app import open_service
    from mnemo.lifecycle.sync import SyncFilters, run_sync

    cloud = open_service(settings, "cloud", create=True)
    try:
        with acting_as(ALICE):
            service.store("Alice's private plan", access_level="private")
        with acting_as(BOB):
            mine = service.store("Bob's note").memory
            with pytest.raises(Forbidden):
                run_sync(service, "local", "cloud", filters=SyncFilters(user_id="alice"))
            report = run_sync(service, "local", "cloud")
        assert report.created == 1 and [m.id for m in cloud.list().memories] == [mine.id]
        with acting_as(CAROL), pytest.raises(Forbidden):
            run_sync(service, "local", "cloud")
    finally:
        cloud.storage.close()


async def test_a_reader_pruning_is_forbidden_and_nothing_is_pruned(settings: Settings, clock: ManualClock):
    registry.add(settings.registry_file, settings.home, "later", settings.home.parent / "later")
    server = build_server(settings, "stores", clock=clock)
    expires = to_iso(clock.now() + timedelta(hours=1))
    try:
        async with Client(server) as client:
            with acting_as(ALICE):
                await client.call_tool("add_memory", {"store": "default", "path": "todo/milk", "content": "Buy milk",
                                                      "expires_at": expires})  # fmt: skip
            clock.advance(hours=2)
            for store in ("default", "later"):  # a store with alice's expired memory; one with no folder yet
                with acting_as(CAROL), pytest.raises(MCPError) as refused:
                    await client.call_tool("prune_memories", {"store": store})
                assert refused.value.data["code"] == "FORBIDDEN"
            with acting_as(ALICE):
                pruned = await client.call_tool("prune_memories", {"store": "default"})
            assert pruned.structured_content == {"pruned_count": 1, "pruned": [{"path": "todo/milk",
                                                                                "expires_at": expires}]}  # fmt: skip
    finally:
        server.close()


def test_a_write_that_would_change_nothing_is_still_forbidden_to_who_may_not_write(service: MemoryService):
    with acting_as(ALICE):
        own = service.store("Alice's desk is by the window").memory
        shared = service.store("Lunch is at noon", access_level="shared").memory
    for who, memory in ((ALICE_READS, own), (CAROL, shared), (BOB, shared)):
        with acting_as(who), pytest.raises(Forbidden):
            service.update(memory.id, content=memory.content)
    with acting_as(ALICE_READS), pytest.raises(Forbidden):
        Archiver(service, service.lifecycle).archive(memory_id=own.id, dry_run=True)
    assert [service.get(m.id).version for m in (own, shared)] == [1, 1]
