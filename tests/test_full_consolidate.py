"""Spec 004's consolidate_memories through an MCP client, on real SQLite files.

ai_synthesis is tried against a real local HTTP server that speaks the chat completions API, and
through MCP sampling with the SDK client's sampling callback on a legacy (handshake) connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import CreateMessageResult, TextContent

from local_api import Behaviour, serving
from mcp_calls import answer as call
from mcp_calls import structured
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.profiles import get_profile
from mnemo.serve.server import ProfileServer
from spec004 import error_of, store
from test_full_lifecycle import dump, listed

SPANISH = [
    "User is learning Spanish at an intermediate level.",
    "User learning Spanish prefers conversational Spanish practice over grammar drills.",
    "User learning Spanish practises with a language app for 30 minutes daily.",
]
SYNTHESIS = (
    "User is learning Spanish at intermediate level, prefers conversational practice over grammar, "
    "and uses language learning apps daily for 30 minutes"
)


def chat(body: dict[str, Any]) -> dict[str, Any]:
    return {"object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": SYNTHESIS}}]}  # fmt: skip


@pytest.fixture
def behaviour() -> Behaviour:
    return Behaviour()


@pytest.fixture
def chat_url(behaviour: Behaviour) -> Iterator[str]:
    with serving({"/v1/chat/completions": chat}, behaviour) as url:
        yield url


def settings_for(tmp_path: Path, **extra: Any) -> Settings:
    return Settings(home=tmp_path / "home", config_dir=tmp_path / "config", embedder="none", **extra)


@asynccontextmanager
async def full(settings: Settings, clock: ManualClock, **client: Any) -> AsyncIterator[tuple[Client, ProfileServer]]:
    server = ProfileServer(get_profile("full"), open_service(settings, clock=clock, embedder=FakeEmbedder()))
    try:
        async with Client(server, raise_exceptions=True, **client) as c:
            yield c, server
    finally:
        server.close()


async def spanish(client: Client, clock: ManualClock) -> list[str]:
    ids = []
    for n, text in enumerate(SPANISH):
        ids.append(await store(client, text, metadata={"tags": ["spanish", f"tag{n}"], "importance": 0.5 + n / 10}))
        clock.advance(days=1)
    return ids


async def test_the_specs_example_synthesises_with_the_configured_chat_model_and_archives_the_originals(
    tmp_path, clock, chat_url, behaviour
):
    settings = settings_for(tmp_path, synthesis_url=chat_url, synthesis_model="llama3")
    async with full(settings, clock) as (client, _):
        ids = await spanish(client, clock)
        body = await structured(
            client,
            "consolidate_memories",
            memory_ids=ids,
            consolidation_strategy="ai_synthesis",
            synthesis_instructions="Merge these related language learning preferences into a comprehensive summary",
            preserve_metadata={"earliest_timestamp": True, "highest_importance": True, "all_tags": True},
            keep_originals=True,
        )
        assert (body["success"], body["api_version"], body["content"]) == (True, "1.0.0", SYNTHESIS)
        assert body["source_memory_ids"] == ids
        assert body["provenance"]["synthesis_method"] == "ai_synthesis"
        assert body["provenance"]["originals_archived"] is True
        assert body["provenance"]["source_count"] == 3 and len(body["provenance"]["archive_ids"]) == 3
        assert body["importance"] == pytest.approx(0.7)
        assert {"spanish", "tag0", "tag1", "tag2"} <= set(body["tags"])
        assert body["created_at"] == "2026-01-15T12:00:00.000000Z"  # the earliest source's
        for memory_id in ids:
            assert (await listed(client, memory_id, "archived"))["status"] == "archived"
        consolidated = body["consolidated_memory_id"]
    sent = behaviour.requests[0]["body"]
    assert sent["model"] == "llama3" and all(text in sent["messages"][1]["content"] for text in SPANISH)
    assert "comprehensive summary" in sent["messages"][1]["content"]
    history = open_service(settings).history(consolidated)
    assert all(memory_id in (history[0].reason or "") for memory_id in ids)


async def test_without_a_language_model_ai_synthesis_merges_all_and_says_how_to_enable_synthesis(tmp_path, clock):
    async with full(settings_for(tmp_path), clock) as (client, _):
        ids = await spanish(client, clock)
        body = await structured(client, "consolidate_memories", memory_ids=ids, consolidation_strategy="ai_synthesis")
    assert body["provenance"]["synthesis_method"] == "merge_all"
    assert "MNEMO_SYNTHESIS_URL" in body["warnings"][0]
    assert body["content"] == " ".join(SPANISH)


async def test_a_caller_that_requires_synthesis_gets_422_and_nothing_changes(tmp_path, clock):
    settings = settings_for(tmp_path)
    async with full(settings, clock) as (client, _):
        ids = await spanish(client, clock)
        before = dump(settings)
        refused = await call(client, "consolidate_memories", memory_ids=ids, consolidation_strategy="ai_synthesis",
                             require_synthesis=True)  # fmt: skip
        assert "MNEMO_SYNTHESIS_URL" in error_of(refused, 422)["message"]
    assert dump(settings) == before


@pytest.mark.parametrize("failure", ["status", "timeout", "malformed"])
async def test_a_synthesis_that_fails_or_times_out_is_500_and_changes_nothing(
    tmp_path, clock, chat_url, behaviour, failure
):
    settings = settings_for(tmp_path, synthesis_url=chat_url, synthesis_model="llama3", synthesis_timeout_s=0.3)
    async with full(settings, clock) as (client, _):
        ids = await spanish(client, clock)
        before = dump(settings)
        if failure == "status":
            behaviour.status = 503
        elif failure == "timeout":
            behaviour.delay_s = 1.0
        else:
            behaviour.body = b'{"choices": []}'
        failed = await call(client, "consolidate_memories", memory_ids=ids, consolidation_strategy="ai_synthesis")
        assert error_of(failed, 500)["code"] == "OPERATION_FAILED"
    assert dump(settings) == before


async def test_sampling_synthesises_with_the_clients_model_on_a_legacy_connection(tmp_path, clock):
    asked: list[str] = []

    async def sample(context: Any, params: Any) -> CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=SYNTHESIS), model="client")

    async with full(settings_for(tmp_path), clock, mode="legacy", sampling_callback=sample) as (client, _):
        ids = await spanish(client, clock)
        body = await structured(client, "consolidate_memories", memory_ids=ids, consolidation_strategy="ai_synthesis")
    assert (body["content"], body["provenance"]["synthesis_method"]) == (SYNTHESIS, "ai_synthesis")
    assert SPANISH[0] in asked[0]


async def test_a_2026_connection_offers_no_sampling_so_the_memories_are_merged_and_nothing_fails(tmp_path, clock):
    async def sample(context: Any, params: Any) -> CreateMessageResult:
        raise AssertionError("a 2026-era connection has no back channel for sampling")

    async with full(settings_for(tmp_path), clock, sampling_callback=sample) as (client, _):
        ids = await spanish(client, clock)
        body = await structured(client, "consolidate_memories", memory_ids=ids, consolidation_strategy="ai_synthesis")
    assert body["provenance"]["synthesis_method"] == "merge_all"


async def test_merge_all_keeps_every_distinct_statement_once(tmp_path, clock):
    async with full(settings_for(tmp_path), clock) as (client, _):
        ids = [
            await store(client, "Emma is lactose intolerant. Emma loves hiking."),
            await store(client, "emma is lactose intolerant!"),
            await store(client, "Emma loves hiking in the Alps\nEmma is lactose intolerant"),
        ]
        body = await structured(client, "consolidate_memories", memory_ids=ids, consolidation_strategy="merge_all")
    assert body["content"] == "Emma is lactose intolerant. Emma loves hiking. Emma loves hiking in the Alps."


async def test_keep_primary_keeps_its_content_and_gains_the_others_tags_links_and_dates(tmp_path, clock):
    async with full(settings_for(tmp_path), clock) as (client, server):
        linked = await store(client, "Noah's school is Lincoln Elementary")
        older = await store(client, "Noah is allergic to peanuts", metadata={"tags": ["allergy"], "importance": 0.9},
                            related_memory_ids=[linked])  # fmt: skip
        clock.advance(days=3)
        primary = await store(client, "Noah has a severe peanut allergy", metadata={"tags": ["noah"]})
        body = await structured(client, "consolidate_memories", memory_ids=[older, primary],
                                consolidation_strategy="keep_primary", primary_memory_id=primary)  # fmt: skip
        assert (body["consolidated_memory_id"], body["content"]) == (primary, "Noah has a severe peanut allergy")
        assert {"noah", "allergy"} <= set(body["tags"]) and body["importance"] == 0.9
        assert body["created_at"] == "2026-01-15T12:00:00.000000Z"
        assert body["provenance"]["archive_ids"] and (await listed(client, older, "archived"))
        assert linked in server.service.storage.linked_ids(primary)


async def test_without_keep_originals_the_originals_are_forgotten_softly(tmp_path, clock):
    async with full(settings_for(tmp_path), clock) as (client, _):
        ids = await spanish(client, clock)
        body = await structured(client, "consolidate_memories", memory_ids=ids, consolidation_strategy="merge_all",
                                keep_originals=False)  # fmt: skip
        assert body["provenance"] == {"source_count": 3, "synthesis_method": "merge_all", "originals_archived": False,
                                      "archive_ids": []}  # fmt: skip
        assert (await listed(client, ids[0], "deleted"))["status"] == "deleted"


async def test_each_listed_error_comes_from_the_input_that_should_produce_it(tmp_path, clock):
    settings = settings_for(tmp_path)
    async with full(settings, clock) as (client, _):
        ids = await spanish(client, clock)
        other_user = await store(client, "User is learning Spanish verbs", context={"user_id": "someone-else"})
        unrelated = await store(client, "The quarterly tax filing is due on 15 April")
        before = dump(settings)

        async def refused(status: int, **args: Any) -> str:
            args.setdefault("consolidation_strategy", "merge_all")
            return error_of(await call(client, "consolidate_memories", **args), status)["code"]

        assert await refused(400, memory_ids=ids[:1]) == "INVALID_INPUT"
        assert await refused(400, memory_ids=ids, consolidation_strategy="average") == "INVALID_INPUT"
        assert await refused(400, memory_ids=ids, consolidation_strategy="keep_primary") == "INVALID_INPUT"
        assert await refused(404, memory_ids=[ids[0], "0b6f3c1e-8d2a-4f5b-9c7d-1e2f3a4b5c6d"]) == "MEMORY_NOT_FOUND"
        assert await refused(409, memory_ids=[ids[0], unrelated]) == "MEMORIES_TOO_DISSIMILAR"
        assert await refused(422, memory_ids=[ids[0], other_user]) == "UNPROCESSABLE"
        assert await refused(422, memory_ids=ids[:2], consolidation_strategy="keep_primary",
                             primary_memory_id=ids[2]) == "UNPROCESSABLE"  # fmt: skip
        assert dump(settings) == before
        await structured(client, "archive_memory", memory_id=ids[2])
        assert await refused(422, memory_ids=ids) == "UNPROCESSABLE"
