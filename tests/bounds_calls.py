"""Calling any profile in the tests of input bounds: a refusal in that profile's own shape, and the store's rows."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.types import INVALID_PARAMS

from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.serve.server import ProfileServer, build_server
from mnemo.storage.sqlite import DB_FILENAME

# What each profile calls a caller's mistake (spec 002 fails the request itself with INVALID_PARAMS).
INVALID = {"full": "INVALID_INPUT", "agent": "INVALID_INPUT", "memento": "INVALID_PARAMETER", "shared": "refused"}


# One call per profile that stores a memory, with room for more arguments.
STORE = {
    "full": ("store_memory", {"content": "The office plants need water on Mondays"}),
    "agent": ("store_memory", {"type": "core", "content": "The office plants need water on Mondays"}),
    "memento": ("store_memory", {"content": "Emma waters the plants", "subject": "Emma", "category": "fact"}),
    "shared": ("add_memory", {"agent_name": "gardener", "content": "The office plants need water on Mondays"}),
    "stores": ("add_memory", {"store": "default", "path": "office/plants", "content": "Water them on Mondays"}),
}


def store_call(profile: str, **more: object) -> tuple[str, dict[str, object]]:
    tool, args = STORE[profile]
    if profile == "full" and "tags" in more:  # spec 004 takes tags in metadata
        more = {**more, "metadata": {"tags": more.pop("tags")}}
    return tool, {**args, **more}


@pytest.fixture(name="server")
def profile_server(request: pytest.FixtureRequest, settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    """A server of the profile the test names with ``@pytest.mark.parametrize("server", [...], indirect=True)``."""
    srv = build_server(settings, request.param, clock=clock)
    yield srv
    srv.close()


async def refusal(client: Client, tool: str, /, **args: Any) -> tuple[str, str]:
    """(code, message) of a call the server must refuse, read from its profile's error shape."""
    profile = client_profile(client)
    if profile == "stores":
        with pytest.raises(MCPError) as caught:
            await client.call_tool(tool, args)
        assert caught.value.code == INVALID_PARAMS, caught.value
        return "INVALID_PARAMS", caught.value.message
    result = await client.call_tool(tool, args)
    assert result.is_error, result.content[0].text[:500]
    body = json.loads(result.content[0].text)
    if profile == "shared":
        assert set(body) == {"success", "error"} and body["success"] is False, body
        return "refused", body["error"]
    return body["error"]["code"], body["error"]["message"]


async def refused_as_invalid(client: Client, tool: str, /, **args: Any) -> str:
    """The message of a call refused as the caller's mistake (the profile's invalid-input error)."""
    code, message = await refusal(client, tool, **args)
    assert code == INVALID.get(client_profile(client), "INVALID_PARAMS"), message
    return message


async def ok_text(client: Client, tool: str, /, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text[:500]
    return str(result.content[0].text)


async def ok_json(client: Client, tool: str, /, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text[:500]
    if result.structured_content is not None:
        return result.structured_content
    parsed = json.loads(result.content[0].text)
    assert isinstance(parsed, dict)
    return parsed


def client_profile(client: Client) -> str:
    return client.server_info.name.removeprefix("mnemo-")


def db_file(settings: Settings) -> Path:
    return settings.store_folder() / DB_FILENAME


def rows(settings: Settings) -> list[tuple[Any, ...]]:
    """Every memory row and change row: what a refused call must leave as it was."""
    with sqlite3.connect(db_file(settings)) as db:
        return (
            db.execute("SELECT * FROM memories ORDER BY rowid").fetchall()
            + db.execute("SELECT * FROM versions ORDER BY rowid").fetchall()
        )


def write_directly(settings: Settings, statement: str, *params: Any) -> None:
    """Change the store as an older mnemo (or another program) might have left it."""
    with sqlite3.connect(db_file(settings)) as db:
        db.execute(statement, params)
