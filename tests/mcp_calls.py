"""Calling a tool through an MCP client in tests, for the profiles whose tools answer with structured content."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client


async def answer(client: Client, tool: str, /, **args: Any) -> dict[str, Any]:
    """The tool's answer: its structured content, or its error object parsed from the text."""
    result = await client.call_tool(tool, args)
    if result.is_error:
        return json.loads(result.content[0].text)
    assert result.structured_content is not None
    return result.structured_content


async def structured(client: Client, tool: str, /, **args: Any) -> dict[str, Any]:
    """The tool's structured answer; fails the test on an error result, showing it."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content
