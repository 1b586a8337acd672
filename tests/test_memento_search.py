"""memento over the real local model, over a failing model, and beside `full` on the same store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client

from embedders import FlakyEmbedder
from mcp_calls import structured as call
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.profiles import get_profile
from mnemo.serve.server import ProfileServer, build_server
from spec001 import error

pytestmark = pytest.mark.every_backend  # the storage contract: SQLite and PostgreSQL

FAMILY = [
    ("Emma is lactose intolerant", "Emma", "restriction", ["dietary", "health"]),  # the spec's example
    ("Liam is allergic to peanuts", "Liam", "restriction", ["food", "allergy"]),
    ("Liam must not play video games after 8pm", "Liam", "restriction", []),
    ("Antonia loves hiking in the Alps", "Antonia", "preference", []),
    ("Jake is learning calculus", "Jake", "skill", ["math", "calculus"]),
    ("Emma prefers window seats on planes", "Emma", "preference", []),
    ("Gordon works as a nurse", "Gordon", "fact", []),
    ("Antonia is Gordon's wife", "Antonia", "relationship", []),
    ("Jake wants to run a marathon next year", "Jake", "goal", []),
    ("The family went to Portugal last summer", "Gordon", "history", []),
]


def closing_store(server: ProfileServer) -> Iterator[ProfileServer]:
    yield server
    server.service.storage.close()


# -- meaning, with the real model ----------------------------------------------------------
@pytest.fixture
def model_settings(tmp_path: Path, installed_model: Path) -> Settings:
    return Settings(home=tmp_path / "home", embedder="local", model_dir=installed_model)


@pytest.fixture
def family_server(model_settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    yield from closing_store(build_server(model_settings, "memento", clock=clock))


@asynccontextmanager
async def family(server: ProfileServer) -> AsyncIterator[Client]:
    """A client of a store that holds FAMILY (client fixtures must be entered and left in one task)."""
    async with Client(server, raise_exceptions=True) as client:
        for content, subject, category, tags in FAMILY:
            await call(client, "store_memory", content=content, subject=subject, category=category, tags=tags)
        yield client


async def test_the_specs_example_finds_that_emma_is_lactose_intolerant(family_server: ProfileServer):
    async with family(family_server) as client:
        found = await call(client, "search_memories", query="dietary restrictions for the family",
                           category_filter="restriction", limit=10)  # fmt: skip
        assert found["memories"][0]["content"] == "Emma is lactose intolerant"
        assert found["memories"][0]["relevance_score"] >= 0.7


async def test_a_fact_about_someone_else_is_found_but_not_presented_as_the_answer(family_server: ProfileServer):
    async with family(family_server) as client:
        await call(client, "store_memory", content="User's blood type is O negative", subject="User", category="fact")

        asked_about_liam = await call(client, "search_memories", query="What is Liam's blood type?")
        loosely = await call(client, "search_memories", query="What is Liam's blood type?", threshold=0.0)
        asked_about_user = await call(client, "search_memories", query="What is the user's blood type?")

        assert asked_about_liam["memories"] == []
        assert loosely["memories"][0]["content"] == "User's blood type is O negative"
        assert loosely["memories"][0]["relevance_score"] < 0.7
        assert asked_about_user["memories"][0]["content"] == "User's blood type is O negative"
        assert asked_about_user["memories"][0]["relevance_score"] >= 0.7


@pytest.mark.xfail(
    strict=True,
    reason="all-MiniLM-L6-v2 puts 'dietary restrictions for the family' at cosine 0.24 from 'Emma is lactose "
    "intolerant'; with no 'dietary' tag and no shared word its calibrated relevance is about 0.2, under 0.7",
)
async def test_the_specs_example_finds_emma_by_meaning_alone(model_settings: Settings, clock: ManualClock):
    server = build_server(model_settings, "memento", clock=clock)
    try:
        async with Client(server, raise_exceptions=True) as client:
            for content, subject, category, _tags in FAMILY:
                await call(client, "store_memory", content=content, subject=subject, category=category)
            found = await call(client, "search_memories", query="dietary restrictions for the family",
                               category_filter="restriction", limit=10)  # fmt: skip
            assert [m["content"] for m in found["memories"]][:1] == ["Emma is lactose intolerant"]
    finally:
        server.service.storage.close()


async def test_a_question_in_other_words_finds_the_fact_it_means(family_server: ProfileServer):
    async with family(family_server) as client:
        found = (await call(client, "search_memories", query="Does anyone have food allergies?"))["memories"]
        assert found[0]["content"] == "Liam is allergic to peanuts"
        assert all(m["relevance_score"] >= 0.7 for m in found)


async def test_a_question_nothing_answers_finds_nothing_at_the_default_threshold(family_server: ProfileServer):
    async with family(family_server) as client:
        assert (await call(client, "search_memories", query="favourite football team"))["memories"] == []


async def test_the_same_fact_in_other_words_returns_the_memory_already_stored(family_server: ProfileServer):
    async with family(family_server) as client:
        again = await call(client, "store_memory", content="Emma has lactose intolerance", subject="emma",
                           category="restriction")  # fmt: skip
        assert again["already_stored"] is True
        assert again["content"] == "Emma is lactose intolerant"
        stats = await call(client, "get_memory_stats", subject_filter="Emma")
        assert stats["total_memories"] == 2


async def test_the_same_words_about_another_subject_are_a_new_memory(family_server: ProfileServer):
    async with family(family_server) as client:
        other = await call(client, "store_memory", content="Jake is lactose intolerant", subject="Jake",
                           category="restriction")  # fmt: skip
        assert other["already_stored"] is False


# -- a failing model -----------------------------------------------------------------------
@pytest.fixture
def embedder() -> FlakyEmbedder:
    return FlakyEmbedder()


@pytest.fixture
def flaky_server(settings: Settings, clock: ManualClock, embedder: FlakyEmbedder) -> Iterator[ProfileServer]:
    service = open_service(settings, clock=clock, embedder=embedder)
    yield from closing_store(ProfileServer(get_profile("memento"), service))


async def test_a_failing_model_is_embedding_error_and_the_memory_is_still_stored(
    flaky_server: ProfileServer, embedder: FlakyEmbedder
):
    async with Client(flaky_server, raise_exceptions=True) as client:
        embedder.broken = True
        stored = await error(client, "store_memory", content="Emma is lactose intolerant", subject="Emma",
                               category="restriction")  # fmt: skip
        assert stored["code"] == "EMBEDDING_ERROR"
        assert "stored" in stored["message"]
        [kept] = (await call(client, "list_recent_memories"))["memories"]
        assert stored["details"]["memory_ids"] == [kept["id"]]
        assert (await error(client, "search_memories", query="lactose"))["code"] == "EMBEDDING_ERROR"

        embedder.broken = False
        assert flaky_server.service.embed_pending() == 1
        [found] = (await call(client, "search_memories", query="lactose intolerant"))["memories"]
        assert found["id"] == kept["id"]


# -- beside `full`, on the same store --------------------------------------------------------
@pytest.fixture
def memento_server(settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    yield from closing_store(build_server(settings, "memento", clock=clock))


@pytest.fixture
def full_server(settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    yield from closing_store(build_server(settings, "full", clock=clock))


@asynccontextmanager
async def side_by_side(memento: ProfileServer, full: ProfileServer) -> AsyncIterator[tuple[Client, Client]]:
    """Clients of two servers, memento's and full's, built on the same settings: the same store."""
    async with Client(memento, raise_exceptions=True) as m, Client(full, raise_exceptions=True) as f:
        yield m, f


async def test_a_memory_stored_through_memento_is_recalled_through_full(
    memento_server: ProfileServer, full_server: ProfileServer
):
    async with side_by_side(memento_server, full_server) as (memento, full):
        stored = await call(memento, "store_memory", content="Emma is lactose intolerant", subject="Emma",
                            category="restriction", tags=["dietary", "health"])  # fmt: skip
        [recalled] = (await call(full, "recall_memories", query="lactose intolerant"))["memories"]
        assert recalled["memory_id"] == stored["id"]
        assert recalled["category"] == "instruction"  # spec 004's name for a restriction
        assert recalled["tags"] == ["dietary", "health"]


async def test_a_memory_stored_through_full_shows_in_memento_with_spec_001s_names(
    memento_server: ProfileServer, full_server: ProfileServer
):
    async with side_by_side(memento_server, full_server) as (memento, full):
        rule = await call(full, "store_memory", content="Never schedule meetings on Fridays",
                          metadata={"category": "instruction", "tags": ["work"]})  # fmt: skip
        note = await call(full, "store_memory", content="Fridays the office closes early",
                          metadata={"category": "custom"})  # fmt: skip
        found = {m["id"]: m for m in (await call(memento, "search_memories", query="Fridays", threshold=0))["memories"]}
        assert set(found) == {rule["memory_id"], note["memory_id"]}
        shown = found[rule["memory_id"]]
        assert (shown["category"], shown["subject"], shown["confidence"]) == ("restriction", None, None)
        assert "work" in shown["tags"]
        assert found[note["memory_id"]]["category"] == "context"

        in_context = await call(memento, "search_memories", query="Fridays", category_filter="context", threshold=0)
        assert [m["id"] for m in in_context["memories"]] == [note["memory_id"]]
        stats = await call(memento, "get_memory_stats")
        assert (stats["by_category"]["restriction"], stats["by_category"]["context"], stats["by_subject"]) == (1, 1, {})


async def test_memento_marks_outdated_what_full_then_no_longer_recalls(
    memento_server: ProfileServer, full_server: ProfileServer
):
    async with side_by_side(memento_server, full_server) as (memento, full):
        stored = await call(full, "store_memory", content="Emma lives in Leeds")
        await call(memento, "update_memory", memory_id=stored["memory_id"], mark_outdated=True, reason="moved to York")
        assert (await call(full, "recall_memories", query="Leeds"))["memories"] == []
        [listed] = (await call(memento, "list_recent_memories"))["memories"]
        assert (listed["status"], listed["outdated_reason"]) == ("outdated", "moved to York")


async def test_a_memory_that_shares_only_the_subjects_name_with_a_question_is_not_presented_as_its_answer(
    family_server: ProfileServer,
):
    atlas = "Atlas is the billing service; its entries table is partitioned by month."
    async with family(family_server) as client:
        await call(client, "store_memory", content=atlas, subject="Atlas", category="fact")
        unanswerable = await call(client, "search_memories", query="When is the Atlas SOC 2 audit?", threshold=0.0)
        answerable = await call(client, "search_memories", query="How is the Atlas entries table split?")
        assert unanswerable["memories"][0]["content"] == atlas  # found, as the closest...
        assert unanswerable["memories"][0]["relevance_score"] < 0.7  # ...but not as an answer
        assert [m["content"] for m in answerable["memories"]][:1] == [atlas]
