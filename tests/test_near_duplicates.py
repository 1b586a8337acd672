"""No profile that deduplicates swallows a distinct fact, and each names the memory a rewrite matched.

Run over the real local model: every distinct pair here scores a cosine at or above the
near-duplicate threshold (checked first), so only the rule that reads the words keeps it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from mcp_calls import answer, structured
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.local import LocalEmbedder
from mnemo.search.twins import NEAR_DUPLICATE
from mnemo.serve.server import ProfileServer, build_server
from one_slot_apart import DISTINCT, REWRITES


@pytest.fixture(scope="module")
def model(installed_model: Path) -> LocalEmbedder:
    return LocalEmbedder(installed_model)


def test_every_distinct_pair_is_as_close_as_a_rewrite_to_the_model(model: LocalEmbedder):
    for kind, first, second in DISTINCT + REWRITES:
        a, b = model.embed_documents([first, second])
        assert float(a @ b) >= NEAR_DUPLICATE, f"{kind}: cosine {float(a @ b):.3f} would not test the rule"


def serve(tmp_path: Path, installed_model: Path, clock: ManualClock, profile: str) -> Iterator[ProfileServer]:
    settings = Settings(home=tmp_path / "home", embedder="local", model_dir=installed_model)
    server = build_server(settings, profile, clock=clock)
    yield server
    server.service.storage.close()


@pytest.fixture
def full_server(tmp_path, installed_model, clock) -> Iterator[ProfileServer]:
    yield from serve(tmp_path, installed_model, clock, "full")


@pytest.fixture
def agent_server(tmp_path, installed_model, clock) -> Iterator[ProfileServer]:
    yield from serve(tmp_path, installed_model, clock, "agent")


@pytest.fixture
def memento_server(tmp_path, installed_model, clock) -> Iterator[ProfileServer]:
    yield from serve(tmp_path, installed_model, clock, "memento")


async def test_full_keeps_both_facts_of_every_pair_and_refuses_a_rewrite_naming_its_twin(full_server):
    async with Client(full_server, raise_exceptions=True) as client:
        for kind, first, second in DISTINCT:
            kept = [await answer(client, "store_memory", content=text) for text in (first, second)]
            assert all(body.get("success") is not False for body in kept), (kind, kept)
            assert kept[0]["memory_id"] != kept[1]["memory_id"]
        for kind, original, rewrite in REWRITES:
            stored = await answer(client, "store_memory", content=original)
            twin = stored["memory_id"] if "memory_id" in stored else stored["error"]["details"]["existing_memory_id"]
            refused = await answer(client, "store_memory", content=rewrite)
            assert refused["error"]["code"] == "DUPLICATE_MEMORY", (kind, refused)
            assert refused["error"]["details"]["existing_memory_id"] == twin


async def test_agent_creates_a_memory_for_every_distinct_fact_and_returns_the_twin_of_a_rewrite(agent_server):
    async with Client(agent_server, raise_exceptions=True) as client:
        for kind, first, second in DISTINCT:
            kept = [await structured(client, "store_memory", type="core", content=text) for text in (first, second)]
            assert kept[0]["created"] and kept[1]["created"], kind
        for kind, original, rewrite in REWRITES:
            twin = await structured(client, "store_memory", type="core", content=original)
            again = await structured(client, "store_memory", type="core", content=rewrite)
            assert (again["created"], again["id"]) == (False, twin["id"]), kind
            assert again["memory"]["content"] == twin["memory"]["content"]


async def test_memento_stores_every_distinct_fact_and_names_the_fact_a_rewrite_was_already_stored_as(memento_server):
    async with Client(memento_server, raise_exceptions=True) as client:
        for kind, first, second in DISTINCT:
            kept = [
                await structured(client, "store_memory", content=text, subject="Liam", category="fact")
                for text in (first, second)
            ]
            assert not kept[0]["already_stored"] and not kept[1]["already_stored"], kind
        for kind, original, rewrite in REWRITES:
            twin = await structured(client, "store_memory", content=original, subject="Liam", category="fact")
            again = await structured(client, "store_memory", content=rewrite, subject="liam", category="fact")
            assert again["already_stored"] is True, kind
            assert (again["id"], again["content"]) == (twin["id"], twin["content"])


async def test_a_rewrite_of_a_memory_kept_compressed_in_glacier_names_that_memory(full_server):
    _, original, rewrite = REWRITES[0]
    async with Client(full_server, raise_exceptions=True) as client:
        twin = (await answer(client, "store_memory", content=original))["memory_id"]
        await structured(client, "archive_memory", memory_id=twin, archive_tier="glacier", retain_embeddings=True)
        refused = await answer(client, "store_memory", content=rewrite)
    assert refused["error"]["code"] == "DUPLICATE_MEMORY", refused
    assert refused["error"]["details"]["existing_memory_id"] == twin
