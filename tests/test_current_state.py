"""Among the first results a newer memory about the same thing comes before the one it updates (superseded.py).

Over the real local model and real SQLite files: memento's search ranks by relevance alone, so the
order it returns is the searcher's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from mcp import Client

from mcp_calls import structured as call
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.model import Context, subject_key
from mnemo.query import RankFields
from mnemo.search.ranking import Weights
from mnemo.search.superseded import same_subject
from mnemo.serve.server import build_server

OLDER = "Liam lives in Boston."
NEWER = "Liam moved to Denver in March for a new job."


@asynccontextmanager
async def memento(tmp_path: Path, installed_model: Path, clock: ManualClock) -> AsyncIterator[Client]:
    settings = Settings(home=tmp_path / "home", embedder="local", model_dir=installed_model)
    server = build_server(settings, "memento", clock=clock)
    try:
        async with Client(server, raise_exceptions=True) as client:
            yield client
    finally:
        server.service.storage.close()


async def stored(client: Client, clock: ManualClock, notes: list[tuple[str, str]]) -> None:
    """Each (content, subject) a month after the one before."""
    for content, subject in notes:
        await call(client, "store_memory", content=content, subject=subject, category="fact")
        clock.advance(days=30)


async def order(client: Client, query: str) -> list[str]:
    found = await call(client, "search_memories", query=query, threshold=0.0, limit=5)
    return [m["content"] for m in found["memories"]]


async def test_a_question_about_now_gets_the_update_before_the_fact_it_replaced(tmp_path, installed_model, clock):
    async with memento(tmp_path, installed_model, clock) as client:
        await stored(client, clock, [(OLDER, "Liam"), ("Liam is a structural engineer.", "Liam"), (NEWER, "Liam")])
        ranked = await order(client, "Where does Liam live?")
        assert ranked.index(NEWER) < ranked.index(OLDER)


async def test_a_question_in_the_past_tense_keeps_the_order_of_relevance(tmp_path, installed_model, clock):
    async with memento(tmp_path, installed_model, clock) as client:
        await stored(client, clock, [(OLDER, "Liam"), (NEWER, "Liam")])
        ranked = await order(client, "Where did Liam live?")
        assert ranked.index(OLDER) < ranked.index(NEWER)  # the older memory words it closer


async def test_a_newer_memory_about_another_subject_is_not_taken_for_an_update(tmp_path, installed_model, clock):
    async with memento(tmp_path, installed_model, clock) as client:
        await stored(client, clock, [(OLDER, "Liam"), ("Liam moved to Denver in March for a new job.", "Rose")])
        ranked = await order(client, "Where does Liam live?")
        assert ranked[0] == OLDER


def test_at_default_weights_an_update_keeps_the_importance_and_use_of_the_fact_it_updates(
    tmp_path, installed_model, clock
):
    service = open_service(Settings(home=tmp_path / "home", embedder="local", model_dir=installed_model), clock=clock)
    try:
        service.store(OLDER, subject="Liam", importance=0.9)
        for _ in range(5):  # an often-needed fact
            service.recall("Liam's home town")
        clock.advance(days=30)
        service.store(NEWER, subject="Liam", importance=0.3)
        ranked = [hit.memory.content for hit in service.recall("Where does Liam live?").hits]  # default weights
        assert ranked.index(NEWER) < ranked.index(OLDER)
    finally:
        service.storage.close()


def test_an_update_written_by_another_user_of_the_store_comes_first(tmp_path, installed_model, clock):
    """Two parents keep notes on their daughter: the newer note is the update whoever wrote it, and
    "this school year" asks about now."""
    service = open_service(Settings(home=tmp_path / "home", embedder="local", model_dir=installed_model), clock=clock)
    try:
        older = "Emma's teacher this year is Ms. Alvarez."
        newer = "Emma started 4th grade; her new teacher is Mr. Kowalski."
        service.store(older, subject="Emma", context=Context(user_id="dad"))
        clock.advance(days=365)
        service.store(newer, subject="Emma", context=Context(user_id="mum"))
        ranked = [hit.memory.content for hit in service.recall("Who is Emma's teacher this school year?").hits]
        assert ranked.index(newer) < ranked.index(older)
    finally:
        service.storage.close()


def test_two_users_own_subject_user_are_two_people():
    def fields(user_id: str, subject: str) -> RankFields:
        moment = datetime(2026, 1, 1, tzinfo=UTC)
        return RankFields(moment, 0.5, 0, moment, user_id, subject_key(subject))

    assert same_subject(fields("u1", "Emma"), fields("u3", "emma"))
    assert same_subject(fields("u1", "User"), fields("u1", "user"))
    assert not same_subject(fields("u1", "User"), fields("u3", "User"))
    assert not same_subject(fields("u1", "Emma"), fields("u1", "Liam"))


def test_a_question_about_this_year_asks_about_now(tmp_path, installed_model):
    clock = ManualClock(datetime(2026, 2, 1, tzinfo=UTC))
    service = open_service(Settings(home=tmp_path / "home", embedder="local", model_dir=installed_model), clock=clock)
    try:
        service.store(OLDER, subject="Liam")
        clock.advance(days=150)
        service.store(NEWER, subject="Liam")
        ranked = [hit.memory.content for hit in service.recall("Where does Liam live this year?").hits]
        assert ranked.index(NEWER) < ranked.index(OLDER)
    finally:
        service.storage.close()


def test_a_question_that_says_now_takes_a_newer_note_further_in_meaning_for_the_update(
    tmp_path, installed_model, clock
):
    """The two notes are further apart than SAME_TOPIC: only a question that says it asks about now
    ("these days") puts the newer one first; the crossword note, newer but not relevant, stays last."""
    service = open_service(Settings(home=tmp_path / "home", embedder="local", model_dir=installed_model), clock=clock)
    older = "Declan lives alone in a flat in Galway."
    newer = "Declan moved into Ard Mhuire care home in Oranmore in February."
    unrelated = "Declan likes crosswords."
    try:
        for note in (older, unrelated, newer):
            service.store(note, subject="Declan")
            clock.advance(days=30)

        def ranked(question: str) -> list[str]:
            hits = service.recall(question, weights=Weights(1.0, 0.0, 0.0, 0.0)).hits
            return [hit.memory.content for hit in hits]

        assert ranked("Where is Declan living these days?") == [newer, older, unrelated]
        assert ranked("Where is Declan living?")[0] == older
    finally:
        service.storage.close()
