"""Facts of spec 004 that tests check the server against, written as the spec gives them, and its error format."""

from datetime import datetime
from typing import Any

from mcp import Client

from mcp_calls import answer

TOOLS = {
    "store_memory", "recall_memories", "update_memory", "forget_memory", "consolidate_memories", "list_memories",
    "get_memory_stats", "sync_memories", "archive_memory", "restore_memory",
}  # fmt: skip
SERVED_TOOLS = TOOLS  # all ten, as the spec lists them
ERROR_FIELDS = {"code", "message", "status", "details", "timestamp", "request_id"}

METRICS = [
    "count",
    "storage_size",
    "category_distribution",
    "importance_distribution",
    "access_patterns",
    "growth_rate",
    "recall_frequency",
    "consolidation_rate",
    "deletion_rate",
    "health_score",
]


async def store(client: Client, content: str, **args: Any) -> str:
    body = await answer(client, "store_memory", content=content, **args)
    assert body["success"] is True, body
    return body["memory_id"]


def error_of(body: dict[str, Any], status: int) -> dict[str, Any]:
    """Check the spec's common error format and the status; return the error object."""
    assert body["success"] is False, body
    assert body["api_version"] == "1.0.0"
    error = body["error"]
    assert set(error) >= ERROR_FIELDS
    assert error["status"] == status, error
    assert error["code"] and error["code"] == error["code"].upper()
    assert error["message"]
    assert isinstance(error["details"], dict)
    assert datetime.fromisoformat(error["timestamp"]).tzinfo is not None
    assert error["request_id"]
    return error
