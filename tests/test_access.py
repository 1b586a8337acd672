"""The access rules between users, in the engine (``mnemo.access``), on a real store.

Each block runs as one authenticated caller (``acting_as``), as the HTTP transport does per call.
"""

from __future__ import annotations

import pytest

from mnemo.caller import Caller, Role, acting_as
from mnemo.errors import Forbidden, NotFound
from mnemo.lifecycle.archive import Archiver, Criteria
from mnemo.model import Context
from mnemo.service import MemoryService
from mnemo.shared_space import SharedSpace

ALICE, BOB = Caller("alice"), Caller("bob")
ROOT, CAROL = Caller("root", Role.ADMIN), Caller("carol", Role.READER)


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
