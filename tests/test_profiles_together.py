"""The five profiles are views of one store: what one writes, the others read.

Five servers, one per profile, on the same settings and store, each through its own MCP client.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from jsonschema.validators import validator_for
from mcp import Client

import spec004
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.serve.server import build_server

TOOLS = {
    "full": spec004.SERVED_TOOLS,
    "agent": {"store_memory", "query_memories", "update_memory", "delete_memory", "get_memory_stats"},
    "memento": {"store_memory", "search_memories", "list_recent_memories", "update_memory", "get_memory_stats"},
    "stores": {"add_memory", "get_memory", "update_memory", "remove_memory", "move_memory", "list_memories",
               "prune_memories"},
    "shared": {"add_memory", "read_memory", "update_memory", "delete_memory", "get_memory", "search_memory",
               "get_memory_stats", "clear_memory", "health_check"},
}  # fmt: skip


@asynccontextmanager
async def five_clients(settings: Settings, clock: ManualClock) -> AsyncIterator[dict[str, Client]]:
    async with AsyncExitStack() as stack:
        clients = {}
        for profile in TOOLS:
            server = build_server(settings, profile, clock=clock)
            stack.callback(server.close)
            clients[profile] = await stack.enter_async_context(Client(server, raise_exceptions=True))
        yield clients


async def call(client: Client, tool: str, /, **args: Any) -> Any:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def test_each_profile_lists_exactly_its_specs_tools(settings: Settings, clock: ManualClock):
    async with five_clients(settings, clock) as clients:
        for profile, client in clients.items():
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS[profile], profile


async def test_every_tool_schema_is_whole_json_schema_without_refs_or_titles(settings: Settings, clock: ManualClock):
    # Several clients do not follow "$ref" into "$defs": a tool would show no parameters there. And
    # pydantic's titles only restate the names, in every model turn's input.
    async with five_clients(settings, clock) as clients:
        for profile, client in clients.items():
            for tool in (await client.list_tools()).tools:
                for schema in (tool.input_schema, tool.output_schema):
                    if schema is None:
                        continue
                    written = json.dumps(schema)
                    assert "$ref" not in written and "$defs" not in written, (profile, tool.name)
                    assert '"title"' not in written, (profile, tool.name)
                    validator_for(schema).check_schema(schema)


async def test_a_memory_written_through_any_profile_is_read_through_the_others(settings: Settings, clock: ManualClock):
    async with five_clients(settings, clock) as c:
        await call(c["full"], "store_memory", content="The release train leaves every second Tuesday")
        await call(c["agent"], "store_memory", type="core", content="User prefers pytest over unittest")
        await call(c["memento"], "store_memory", content="Emma is lactose intolerant", subject="Emma",
                   category="restriction")  # fmt: skip
        await call(c["stores"], "add_memory", store="default", path="project/database", content="Atlas uses PostgreSQL")
        await call(c["shared"], "add_memory", agent_name="claude-alpha", content="Analysis of churn complete")

        listed = await call(c["full"], "list_memories", pagination={"limit": 10})
        assert listed["total_count"] == 5
        for query, expected in [
            ("lactose", "Emma is lactose intolerant"),
            ("pytest", "User prefers pytest over unittest"),
            ("PostgreSQL", "Atlas uses PostgreSQL"),
            ("churn", "Analysis of churn complete"),
        ]:
            recalled = await call(c["full"], "recall_memories", query=query)
            assert recalled["memories"][0]["content"] == expected

        agent = await call(c["agent"], "query_memories", limit=10)
        assert agent["total"] == 5
        memento = await call(c["memento"], "list_recent_memories", limit=10)
        assert {m["content"] for m in memento["memories"]} >= {"User prefers pytest over unittest",
                                                                "Emma is lactose intolerant"}  # fmt: skip
        # Paths and the shared space are what those two profiles manage: each shows its own.
        level = await call(c["stores"], "list_memories", store="default", category="project")
        assert [m["path"] for m in level["memories"]] == ["project/database"]
        board = await call(c["shared"], "read_memory", response_format="json")
        assert [e["content"] for e in board["entries"]] == ["Analysis of churn complete"]


async def test_a_change_through_one_profile_shows_through_another(settings: Settings, clock: ManualClock):
    async with five_clients(settings, clock) as c:
        stored = await call(c["memento"], "store_memory", content="Liam lives in Porto", subject="Liam",
                            category="fact")  # fmt: skip
        memory_id = stored["id"]
        await call(c["full"], "update_memory", memory_id=memory_id, updates={"content": "Liam lives in Lisbon"})
        recent = await call(c["memento"], "list_recent_memories")
        assert [m["content"] for m in recent["memories"]] == ["Liam lives in Lisbon"]
        await call(c["agent"], "delete_memory", id=memory_id)  # archives
        assert (await call(c["full"], "recall_memories", query="Lisbon"))["memories"] == []
        archived = await call(c["full"], "recall_memories", query="Lisbon", include_archived=True)
        assert [m["memory_id"] for m in archived["memories"]] == [memory_id]
