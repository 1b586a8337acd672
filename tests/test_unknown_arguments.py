"""Every argument is used or refused: a real `mnemo serve` over stdio, a real MCP client.

An LLM client that puts an argument where the tool does not take it (full's `tags` beside
`content` instead of in `metadata`) used to get success while the value was dropped. Each profile
now refuses the call in its spec's error shape, says where the argument belongs, and stores nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters

from conftest import serve_env
from mnemo.config import Settings

# (profile, tool, arguments with a misplaced or unknown one, what the refusal must say)
MISPLACED = [
    ("full", "store_memory", {"content": "Ann likes green tea", "tags": ["tea"], "importance": 0.9},
     "it goes in `metadata.tags`"),
    ("full", "store_memory", {"content": "Ann likes green tea", "metadata": {"priority": "high"}},
     "metadata.priority: unknown argument"),
    ("full", "recall_memories", {"query": "tea", "filters": {"tag": ["tea"]}}, "filters.tag: unknown argument"),
    ("agent", "store_memory", {"content": "Ann likes green tea", "type": "core", "user": "ann"},
     "user: unknown argument"),
    ("memento", "store_memory", {"subject": "ann", "content": "Ann likes green tea", "priority": "high"},
     "priority: unknown argument"),
    ("shared", "add_memory", {"agent_name": "a", "content": "Ann likes green tea", "category": "x"},
     "category: unknown argument"),
    ("stores", "add_memory", {"store": "default", "path": "people/ann", "content": "Ann likes green tea",
                              "importance": 1}, "importance: unknown argument"),
]  # fmt: skip


def refusal_text(outcome: Any) -> str:
    if isinstance(outcome, MCPError):  # spec 002 fails the request itself
        return outcome.error.message
    assert outcome.is_error, outcome.content
    return str(outcome.content[0].text)


@pytest.mark.parametrize("profile", ["full", "agent", "memento", "shared", "stores"])
async def test_an_unknown_or_misplaced_argument_is_refused_with_where_it_belongs(tmp_path: Path, profile: str):
    settings = Settings(home=tmp_path / "home", config_dir=tmp_path / "config", embedder="none")
    params = StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "serve", "--profile", profile],
                                   env=serve_env(settings), cwd=tmp_path)  # fmt: skip
    async with Client(params) as client:
        for _, tool, arguments, said in (case for case in MISPLACED if case[0] == profile):
            try:
                outcome: Any = await client.call_tool(tool, arguments)
            except MCPError as error:
                outcome = error
            assert said in refusal_text(outcome), (tool, arguments, refusal_text(outcome))
    database = settings.store_folder("default") / "memory.db"
    if database.exists():  # nothing was stored
        import sqlite3

        with sqlite3.connect(database) as db:
            assert db.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


async def test_every_tool_says_it_takes_no_other_argument(tmp_path: Path):
    settings = Settings(home=tmp_path / "home", config_dir=tmp_path / "config", embedder="none")
    params = StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "serve", "--profile", "full"],
                                   env=serve_env(settings), cwd=tmp_path)  # fmt: skip
    async with Client(params) as client:
        for tool in (await client.list_tools()).tools:
            assert tool.input_schema.get("additionalProperties") is False, tool.name
            nested = json.dumps(tool.input_schema)
            assert '"additionalProperties": true' not in nested, tool.name
