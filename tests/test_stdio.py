"""The real ``mnemo serve`` process, spoken to over its stdin/stdout by the MCP SDK client."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult

import spec004
from mnemo.config import Settings
from mnemo.serve.server import WarmUpAfterHandshake

TOOLS = spec004.SERVED_TOOLS


def _ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["success"] is True
    return result.structured_content


async def test_mnemo_serve_answers_every_tool_over_stdio_and_logs_only_to_its_log_file(tmp_path: Path):
    home = tmp_path / "home"
    Settings(home=home, config_dir=tmp_path / "config").store_folder("stdio", create=True)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnemo", "serve", "--profile", "full", "--store", "stdio"],
        env={"MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(tmp_path / "config")},
        cwd=tmp_path,  # away from any .env file in the working tree
    )
    # The transport hands every stdout line that is not a JSON-RPC message to the message
    # handler as an exception (the session itself only logs it), so this list proves that
    # nothing but protocol was written to stdout.
    stray: list[Exception] = []

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            stray.append(message)

    async with Client(params, message_handler=on_message) as client:
        assert client.server_info is not None
        assert client.server_info.name == "mnemo-full"
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS

        lactose = _ok(
            await client.call_tool(
                "store_memory",
                {"content": "Emma is lactose intolerant", "context": {"user_id": "emma"}},
            )
        )
        hiking = _ok(
            await client.call_tool(
                "store_memory",
                {"content": "Emma goes hiking in the Alps every August", "context": {"user_id": "emma"}},
            )
        )

        recalled = _ok(await client.call_tool("recall_memories", {"query": "lactose"}))
        assert recalled["memories"][0]["memory_id"] == lactose["memory_id"]  # hiking may follow, far behind

        updated = _ok(
            await client.call_tool(
                "update_memory",
                {
                    "memory_id": hiking["memory_id"],
                    "updates": {"content": "Emma goes kayaking in Norway every August"},
                    "reason": "plans changed",
                },
            )
        )
        assert updated["version"] == 2
        assert updated["updated_fields"] == ["content"]
        kayak = _ok(await client.call_tool("recall_memories", {"query": "kayaking"}))
        assert kayak["memories"][0]["memory_id"] == hiking["memory_id"]

        forgotten = _ok(
            await client.call_tool("forget_memory", {"memory_id": lactose["memory_id"], "reason": "outdated"})
        )
        assert forgotten["deletion_type"] == "soft"
        assert forgotten["backup_id"]

        active = _ok(await client.call_tool("list_memories", {}))
        assert [m["memory_id"] for m in active["memories"]] == [hiking["memory_id"]]
        assert active["memories"][0]["version"] == 2
        deleted = _ok(await client.call_tool("list_memories", {"filters": {"status": ["deleted"]}}))
        assert [m["memory_id"] for m in deleted["memories"]] == [lactose["memory_id"]]

        stats = _ok(await client.call_tool("get_memory_stats", {"scope": "global", "metrics": ["count"]}))
        assert stats["statistics"]["count"] == {"total": 2, "active": 1, "archived": 0, "deleted": 1, "outdated": 0}

        missing = await client.call_tool("update_memory", {"memory_id": "no-such-id", "updates": {"importance": 0.5}})
        assert missing.is_error
        assert json.loads(missing.content[0].text)["error"]["code"] == "MEMORY_NOT_FOUND"

    assert stray == []
    assert (home / "stores" / "stdio" / "memory.db").is_file()
    log_file = home / "logs" / "mnemo.log"
    assert log_file.is_file()
    assert "serving profile full" in log_file.read_text()


async def test_the_model_starts_loading_with_the_first_message_after_initialize():
    warmed = threading.Event()
    middleware = WarmUpAfterHandshake(warmed.set)

    async def call_next(ctx: object) -> None:
        return None

    await middleware(SimpleNamespace(method="initialize"), call_next)  # type: ignore[arg-type]
    assert not warmed.wait(0.2)
    await middleware(SimpleNamespace(method="notifications/initialized"), call_next)  # type: ignore[arg-type]
    assert warmed.wait(10)
