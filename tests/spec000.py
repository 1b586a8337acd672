"""Calling the `agent` profile (spec 000) in tests: its answers, its errors, and the store's state."""

from __future__ import annotations

from typing import Any

from mcp import Client

from mcp_calls import answer as call
from mnemo.engine.service import MemoryService
from mnemo.model import Memory

FIVE_TOOLS = {"store_memory", "query_memories", "update_memory", "delete_memory", "get_memory_stats"}
ERROR_CODES = {
    "INVALID_INPUT",
    "NOT_FOUND",
    "STORAGE_ERROR",
    "PERMISSION_ERROR",
    "CORRUPTED_DATA",
    "LIMIT_EXCEEDED",
    "INTERNAL_ERROR",
}
MEMORY_FIELDS = {
    "id",
    "type",
    "content",
    "category",
    "tags",
    "importance",
    "created_at",
    "updated_at",
    "accessed_at",
    "access_count",
    "archived",
}
# The spec's "Example Usage" inputs.
STORE_EXAMPLE = {
    "type": "core",
    "content": "User prefers pytest over unittest for Python testing",
    "category": "preference",
    "tags": ["python", "testing"],
    "importance": "high",
}
QUERY_EXAMPLE = {"tags": ["python"], "importance": "high", "limit": 5, "sort_by": "accessed_at", "sort_order": "desc"}
UNKNOWN_ID = "0b6f3c1e-8d2a-4f5b-9c7d-1e2f3a4b5c6d"  # a UUID4 no memory has


async def ok(client: Client, tool: str, /, **args: Any) -> dict[str, Any]:
    """The tool's structured answer; fails the test on an error result."""
    body = await call(client, tool, **args)
    assert "error" not in body, body
    return body


def error_code(body: dict[str, Any]) -> str:
    """Check the spec's error format exactly ({"error": {"code", "message"}}) and return the code."""
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] in ERROR_CODES
    assert body["error"]["message"]
    return body["error"]["code"]


async def store(client: Client, content: str, type: str = "core", **args: Any) -> dict[str, Any]:
    """Store a new memory through store_memory; returns the memory object."""
    body = await ok(client, "store_memory", type=type, content=content, **args)
    assert body["created"] is True
    return body["memory"]


def state(service: MemoryService) -> list[Memory]:
    """Every memory in the store, whatever its status, exactly as stored."""
    page = service.list(statuses=("active", "archived", "deleted", "outdated"), include_expired=True, limit=None)
    return sorted(page.memories, key=lambda m: m.id)
