"""Among the first results a newer memory about the same thing comes before the one it updates (superseded.py).

Over the real local model and real SQLite files: memento's search ranks by relevance alone, so the
order it returns is the searcher's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import Client

from mcp_calls import structured as call
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.server import build_server

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
