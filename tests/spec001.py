"""The `memento` profile's (spec 001) error object in tests; its answers come from mcp_calls.structured."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client

SPEC_CODES = {"MEMORY_NOT_FOUND", "INVALID_PARAMETER", "STORAGE_ERROR", "EMBEDDING_ERROR", "RATE_LIMIT"}


async def error(client: Client, tool: str, /, **args: Any) -> dict[str, Any]:
    """The spec's error object of a call that must fail: {"error": {"code", "message"}}."""
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    body = json.loads(result.content[0].text)
    assert set(body) == {"error"}
    assert {"code", "message"} <= set(body["error"]) <= {"code", "message", "details"}
    assert body["error"]["code"] in SPEC_CODES
    assert body["error"]["message"]
    return body["error"]
