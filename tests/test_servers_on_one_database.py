"""Several `mnemo serve` processes (stdio) on one store, writing at once: no write is lost, entry
numbers are unique across the processes, and each server sees the others' memories at once, by
id, by words and by meaning (no index in a process that another's writes leave stale).

Run on both backends: several servers per store is what PostgreSQL is for, and SQLite promises it
on one machine.
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import serve_env, sqlite_only
from mcp_calls import structured
from mnemo.config import Settings
from spec003 import add, body
from spec004 import store

pytestmark = pytest.mark.every_backend

SERVERS = 3
ENTRIES_PER_SERVER = 15


async def _servers(stack: AsyncExitStack, settings: Settings, profile: str, n: int, **env: str) -> list[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnemo", "serve", "--profile", profile],
        env=serve_env(settings) | env,
        cwd=settings.home.parent,
    )
    # Entered one by one: a client's task group must be left by the task that entered it.
    return [await stack.enter_async_context(Client(params)) for _ in range(n)]


async def test_servers_writing_at_once_lose_nothing_number_entries_uniquely_and_see_each_others_entries_at_once(
    settings: Settings,
):
    async with AsyncExitStack() as stack:
        clients = await _servers(stack, settings, "shared", SERVERS)

        async def write(i: int) -> list[tuple[str, int]]:
            written = []
            neighbour = clients[(i + 1) % SERVERS]
            for k in range(ENTRIES_PER_SERVER):
                added = await add(clients[i], f"note {k} from agent {i} about the otter project", agent=f"agent-{i}")
                written.append((added["entry_id"], added["entry_number"]))
                # Another server reads it at once, by id and by its words.
                got = await body(neighbour, "get_memory", entry_id=added["entry_id"])
                assert got["entry"]["content"] == f"note {k} from agent {i} about the otter project"
            return written

        written = [entry for entries in await asyncio.gather(*(write(i) for i in range(SERVERS))) for entry in entries]

        total = SERVERS * ENTRIES_PER_SERVER
        numbers = sorted(number for _, number in written)
        assert numbers == list(range(1, total + 1)), "entry numbers are unique and none is skipped"
        for client in clients:
            listed = await body(client, "read_memory", response_format="json", limit=100)
            assert {e["entry_id"] for e in listed["entries"]} == {entry_id for entry_id, _ in written}
            stats = await body(client, "get_memory_stats")
            assert stats["total_entries"] == total


async def test_a_memory_stored_through_one_server_is_recalled_by_meaning_through_another_at_once(
    settings: Settings, installed_model: Path
):
    async with AsyncExitStack() as stack:
        first, second = await _servers(stack, settings, "full", 2, MNEMO_EMBEDDER="local")
        for content in ("The team standup is at 9:30 every weekday", "Parking passes are renewed in March"):
            await store(first, content)
        lactose = await store(first, "Emma is lactose intolerant")

        found = await structured(second, "recall_memories", query="which dairy products should Emma avoid", limit=3)

        assert found["memories"][0]["memory_id"] == lactose
        assert found["memories"][0]["scores"]["semantic_similarity"] > 0.3
        assert not found.get("warnings")
        # And the other way round, for a memory stored after the second server's first search.
        later = await store(second, "Liam is allergic to peanuts")
        again = await structured(first, "recall_memories", query="nut allergy", limit=1)
        assert again["memories"][0]["memory_id"] == later


@sqlite_only  # the vector index's snapshot files beside a SQLite store (PostgreSQL searches in SQL)
async def test_servers_past_the_vector_graph_threshold_share_its_snapshot_and_each_others_writes(
    settings: Settings, installed_model: Path
):
    async with AsyncExitStack() as stack:
        first, second = await _servers(stack, settings, "full", 2, MNEMO_EMBEDDER="local", MNEMO_VECTOR_GRAPH_FROM="20")
        topics = ["the harbour", "sourdough", "chess openings", "the garden shed", "tax forms", "a cello"]
        for i in range(30):
            await store(first, f"Note {i}: the user mentioned {topics[i % len(topics)]} on day {i}")
        lactose = await store(first, "Emma is lactose intolerant")
        folder = settings.home / "stores" / "default" / "vector-index"
        for _ in range(300):  # the first server writes the snapshot in the background
            if any(entry.name.isdigit() for entry in folder.iterdir()) if folder.is_dir() else False:
                break
            await structured(first, "recall_memories", query="anything", limit=1)
            await asyncio.sleep(0.1)
        assert any(entry.name.isdigit() for entry in folder.iterdir()), "a snapshot was written"

        found = await structured(second, "recall_memories", query="which dairy products should Emma avoid", limit=3)
        assert found["memories"][0]["memory_id"] == lactose
        later = await store(second, "Liam is allergic to peanuts")  # after the snapshot: the recent layer
        again = await structured(first, "recall_memories", query="nut allergy", limit=1)
        assert again["memories"][0]["memory_id"] == later
