"""Helpers for the tests of the `shared` profile (spec 003), driven through an MCP client."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client

from mnemo.model import Memory
from mnemo.query import Filters, Sort
from mnemo.serve.server import ProfileServer

NINE_TOOLS = {
    "add_memory",
    "read_memory",
    "update_memory",
    "delete_memory",
    "get_memory",
    "search_memory",
    "get_memory_stats",
    "clear_memory",
    "health_check",
}
EXAMPLE = "Analysis complete. Found 3 key insights in user behavior data."


async def text(client: Client, tool: str, /, **args: Any) -> str:
    """The tool's successful answer, as the text it sent (it never sends structured content)."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    assert result.structured_content is None
    assert len(result.content) == 1
    return result.content[0].text


async def body(client: Client, tool: str, /, **args: Any) -> dict[str, Any]:
    parsed = json.loads(await text(client, tool, **args))
    assert isinstance(parsed, dict)
    return parsed


async def error(client: Client, tool: str, /, **args: Any) -> str:
    """The message of spec 003's error shape, which must come back as a tool error."""
    result = await client.call_tool(tool, args)
    assert result.is_error, result.content[0].text
    parsed = json.loads(result.content[0].text)
    assert set(parsed) == {"success", "error"} and parsed["success"] is False, parsed
    assert isinstance(parsed["error"], str) and parsed["error"]
    return parsed["error"]


async def add(client: Client, content: str = EXAMPLE, agent: str = "claude-alpha", **args: Any) -> dict[str, Any]:
    answer = await body(client, "add_memory", agent_name=agent, content=content, **args)
    assert answer["success"] is True
    return answer


def everything(server: ProfileServer) -> list[Memory]:
    """Every memory in the store, whatever its status, oldest first."""
    service = server.service
    rows = service.storage.select(
        Filters(now=service.clock.now(), statuses=None, include_expired=True), Sort(descending=False), None
    )
    return [m for m, _ in rows]


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))
