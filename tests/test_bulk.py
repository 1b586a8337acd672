"""store_many (bulk import's writes): the same outcome as storing the memories one after the other."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from mnemo.access.caller import Caller, acting_as
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.engine import bulk
from mnemo.engine.memories import NewMemory
from mnemo.engine.results import StoreResult
from mnemo.engine.service import MemoryService
from mnemo.errors import Conflict, MnemoError
from mnemo.model import Context, Memory

HELD = "The boiler was serviced in March"
CALLS: list[dict[str, Any]] = [
    {"content": "Liam plays chess on Sundays"},
    {"content": "On Sundays Liam plays chess"},  # a rewrite of the batch's first: a duplicate of it
    {"content": "Liam plays chess on Saturdays"},  # another fact: stored
    {"content": "Emma plays the cello every Tuesday evening", "subject": "Emma"},
    {"content": "Every Tuesday evening Emma plays the cello", "subject": " emma "},  # the subject's first spelling
    {"content": "Noah is vegetarian", "context": Context(user_id="u2")},
    {"content": "Noah is vegetarian", "context": Context(user_id="u3")},  # another user's: stored
    {"content": HELD},  # held before the batch
    {"content": "   "},  # refused: blank
    {"content": "Wrong tags", "tags": 7},  # refused: not a list
    {"content": "Mia keeps her notes in a green binder", "memory_id": "m-1"},
    {"content": "Another note given the same id", "memory_id": "m-1"},  # that memory
    {"content": "Zoe drinks green tea", "related_memory_ids": ["m-1"]},  # links to the batch's own
    {"content": "Signed by an agent of the team", "agent_name": "scout"},  # numbered: written alone
    {"content": "Ines moved to Porto in May", "expires_at": None, "importance": 0.8},
]


def _fresh(settings: Settings, clock: ManualClock, name: str) -> MemoryService:
    settings.store_folder(name, create=True)
    service = open_service(settings.model_copy(update={"store": name}), clock=clock,
                           embedder=FakeEmbedder())  # fmt: skip
    service.store(HELD)
    return service


def _seen(outcome: StoreResult | Exception) -> tuple[Any, ...]:
    if isinstance(outcome, StoreResult):
        memory = outcome.memory
        return (outcome.existing, memory.content, memory.subject, memory.context.user_id, memory.entry_number,
                outcome.links_created, tuple(outcome.auto_tags), outcome.embedded)  # fmt: skip
    return (type(outcome).__name__, outcome.message if isinstance(outcome, MnemoError) else "")


def _held(service: MemoryService) -> list[tuple[Any, ...]]:
    memories = service.list(limit=None).memories
    return sorted((m.content, m.subject, m.context.user_id, m.category, m.importance, m.all_tags) for m in memories)


@pytest.mark.every_backend
def test_storing_many_at_once_gives_what_storing_them_one_by_one_gives(settings: Settings, clock: ManualClock):
    together, one_by_one = _fresh(settings, clock, "together"), _fresh(settings, clock, "one_by_one")
    try:
        vectors = list(FakeEmbedder().embed_documents([call["content"] for call in CALLS]))
        outcomes = together.store_many(CALLS, vectors, actor="test")
        expected: list[StoreResult | Exception] = []
        for call, vector in zip(CALLS, vectors, strict=True):
            try:
                expected.append(one_by_one.store(**call, vector=vector, on_duplicate="return", actor="test"))
            except (MnemoError, TypeError) as refused:
                expected.append(refused)
        assert [_seen(o) for o in outcomes] == [_seen(o) for o in expected]
        assert [o.existing for o in outcomes if isinstance(o, StoreResult)] == [
            False, True, False, False, True, False, False, True, False, True, False, False, False,
        ]  # fmt: skip
        assert outcomes[1].memory.id == outcomes[0].memory.id  # type: ignore[union-attr]
        assert _held(together) == _held(one_by_one)
        assert together.storage.unembedded(100) == []  # every stored memory has its vector
        (created,) = together.history(outcomes[2].memory.id)  # type: ignore[union-attr]
        assert (created.action, created.actor) == ("create", "test")
        assert together.recall("who plays chess on Saturdays").hits[0].memory.content == "Liam plays chess on Saturdays"
    finally:
        together.close()
        one_by_one.close()


def test_an_id_taken_out_of_sight_refuses_that_memory_alone(settings: Settings, clock: ManualClock):
    service = open_service(settings, clock=clock, embedder=FakeEmbedder())
    try:
        with acting_as(Caller("u1")):
            service.store("u1's private note", memory_id="m-secret")
        calls = [{"content": "Someone else's note", "memory_id": "m-secret"}, {"content": "A note of u2's"}]
        with acting_as(Caller("u2")):  # u2 cannot see m-secret, so the batch's insert meets it
            refused, stored = service.store_many(
                calls, list(FakeEmbedder().embed_documents([c["content"] for c in calls]))
            )
            assert isinstance(refused, Conflict)
            assert isinstance(stored, StoreResult) and not stored.existing
            assert service.get(stored.memory.id).content == "A note of u2's"
    finally:
        service.close()


def test_without_vectors_given_the_batch_is_embedded_together_and_checked(settings: Settings, clock: ManualClock):
    service = open_service(settings, clock=clock, embedder=FakeEmbedder())
    try:
        calls = [{"content": "Ava is vegan"}, {"content": "Liam plays the cello"}, {"content": "vegan is Ava"}, {}]
        first, second, rewrite, missing = service.store_many(calls)
        assert isinstance(first, StoreResult) and first.embedded and not first.existing
        assert isinstance(second, StoreResult) and second.embedded
        assert isinstance(rewrite, StoreResult) and rewrite.existing and rewrite.memory.id == first.memory.id
        assert isinstance(missing, TypeError)  # no content: the call is malformed, the rest stored
        assert service.storage.unembedded(10) == []
    finally:
        service.close()


@pytest.mark.every_backend
def test_a_batch_written_at_once_finds_the_same_content_held_for_that_user_and_subject(
    settings: Settings, clock: ManualClock
):
    service = open_service(settings, clock=clock, embedder=None)  # no vectors: the store's own check decides
    try:
        held = service.store("Ava is vegan").memory
        service.store("Liam is away this week", expires_at=clock.now() + timedelta(hours=1))
        clock.advance(hours=2)  # that one has expired: the same words again are a new memory
        contents = [("Ava is vegan", None), ("Ava is vegan", "u2"), ("Liam is away this week", None), ("Mia", None)]
        new = [service.prepare_store(content, context=Context(user_id=user)) for content, user in contents]
        assert all(isinstance(n, NewMemory) for n in new)
        written = service.storage.insert_new([(n.memory, n.change) for n in new])  # type: ignore[union-attr]
        assert written[0] == held.id
        assert [isinstance(w, Memory) for w in written[1:]] == [True, True, True]
        assert len(service.list(limit=None).memories) == 4  # Ava's for two users, Liam's again, Mia
    finally:
        service.close()


def test_a_long_batch_is_written_in_runs_and_a_rewrite_in_the_next_run_is_still_found(
    settings: Settings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(bulk, "MAX_RUN", 3)
    service = open_service(settings, clock=clock, embedder=FakeEmbedder())
    try:
        notes = [f"Note {word}: the shed key is in the blue drawer" for word in ("one", "two", "three", "four")]
        rewrite = "the shed key is in the blue drawer, note two"  # of the first run's second
        checked: list[int] = []  # the size of each run checked
        check = service.searcher.near_duplicates
        monkeypatch.setattr(
            service.searcher,
            "near_duplicates",
            lambda run, now, **viewer: checked.append(len(run)) or check(run, now, **viewer),
        )
        outcomes = service.store_many([{"content": content} for content in [*notes, rewrite]])
        assert checked == [3, 2]
        assert [o.existing for o in outcomes] == [False, False, False, False, True]  # type: ignore[union-attr]
        assert outcomes[4].memory.id == outcomes[1].memory.id  # type: ignore[union-attr]
    finally:
        service.close()
