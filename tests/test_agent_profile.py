"""The `agent` profile's contract with spec 000, through an in-memory MCP client.

The tool list, annotations and input schemas; the spec's example inputs; each error code the
engine can produce, in the spec's format; every limit at its edge and one past it; and that a
rejected call leaves the store as it was. What the tools do lives in test_agent_behaviour.py.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from mcp import Client

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.profiles import get_profile
from mnemo.serve.server import ProfileServer, build_server
from mnemo.storage.sqlite import DB_FILENAME
from spec000 import (
    FIVE_TOOLS,
    MEMORY_FIELDS,
    QUERY_EXAMPLE,
    STORE_EXAMPLE,
    UNKNOWN_ID,
    call,
    error_code,
    ok,
    state,
    store,
)

pytestmark = pytest.mark.every_backend  # every profile on SQLite and PostgreSQL

UUID4 = "^[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}$"
TYPES = ["core", "learning", "task"]
BANDS = ["high", "medium", "low"]


@pytest.fixture
def server(settings, clock):
    srv = build_server(settings, "agent", clock=clock)
    yield srv
    srv.service.storage.close()


# -- tools/list ----------------------------------------------------------------------------
async def tools_by_name(client: Client) -> dict[str, Any]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_tools_list_shows_exactly_the_five_tools_of_the_spec(client):
    assert set(await tools_by_name(client)) == FIVE_TOOLS


@pytest.mark.parametrize(
    ("tool", "read_only", "destructive"),
    [
        ("store_memory", False, False),
        ("query_memories", False, False),  # it counts what it returns as accessed
        ("update_memory", False, False),
        ("delete_memory", False, True),
        ("get_memory_stats", True, False),
    ],
)
async def test_each_tool_is_annotated_truthfully(client, tool, read_only, destructive):
    hints = (await tools_by_name(client))[tool].annotations
    assert hints.read_only_hint is read_only
    assert hints.destructive_hint is destructive
    # each repeats to the same effect (see the profile's notes), but a query adds to access counts
    assert hints.idempotent_hint is (tool != "query_memories")
    assert hints.open_world_hint is False


async def test_the_server_tells_the_model_when_to_use_which_tool(server):
    for tool in FIVE_TOOLS:
        assert tool in server.instructions


SCHEMA = [
    ("store_memory", "type", {"type": "string", "enum": TYPES}),
    ("store_memory", "content", {"type": "string", "minLength": 1, "maxLength": 5000}),
    ("store_memory", "category", {"type": "string", "maxLength": 50}),
    ("store_memory", "tags", {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 10}),
    ("store_memory", "importance", {"type": "string", "enum": BANDS, "default": "medium"}),
    ("store_memory", "id", {"type": "string", "pattern": UUID4}),
    ("query_memories", "type", {"type": "string", "enum": TYPES}),
    ("query_memories", "tags", {"type": "array", "items": {"type": "string"}}),
    ("query_memories", "search", {"type": "string", "maxLength": 200}),
    ("query_memories", "importance", {"type": "string", "enum": BANDS}),
    ("query_memories", "category", {"type": "string"}),
    ("query_memories", "archived", {"type": "boolean", "default": False}),
    ("query_memories", "limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}),
    ("query_memories", "offset", {"type": "integer", "minimum": 0, "default": 0}),
    (
        "query_memories",
        "sort_by",
        {
            "type": "string",
            "enum": ["created_at", "updated_at", "accessed_at", "importance", "access_count"],
            "default": "accessed_at",
        },
    ),
    ("query_memories", "sort_order", {"type": "string", "enum": ["asc", "desc"], "default": "desc"}),
    ("update_memory", "id", {"type": "string", "pattern": UUID4}),
    ("update_memory", "content", {"type": "string", "minLength": 1, "maxLength": 5000}),
    ("update_memory", "category", {"type": "string", "maxLength": 50}),
    ("update_memory", "tags", {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 10}),
    ("update_memory", "importance", {"type": "string", "enum": BANDS}),
    ("update_memory", "archived", {"type": "boolean"}),
    ("delete_memory", "id", {"type": "string", "pattern": UUID4}),
    ("delete_memory", "permanent", {"type": "boolean", "default": False}),
]


@pytest.mark.parametrize(("tool", "name", "expected"), SCHEMA, ids=[f"{t}.{n}" for t, n, _ in SCHEMA])
async def test_input_schemas_carry_the_specs_types_limits_and_defaults(client, tool, name, expected):
    schema = (await tools_by_name(client))[tool].input_schema["properties"][name]
    assert {key: schema.get(key) for key in expected} == expected


@pytest.mark.parametrize(
    ("tool", "required"),
    [
        ("store_memory", ["type", "content"]),
        ("query_memories", []),
        ("update_memory", ["id"]),
        ("delete_memory", ["id"]),
        ("get_memory_stats", []),
    ],
)
async def test_only_the_specs_required_inputs_are_required(client, tool, required):
    schema = (await tools_by_name(client))[tool].input_schema
    assert sorted(schema.get("required", [])) == sorted(required)
    assert "'null'" not in str(schema.get("properties"))  # optional inputs are left out, never null


# -- the spec's examples -------------------------------------------------------------------
async def test_the_specs_store_example_creates_a_complete_memory(client, clock):
    body = await ok(client, "store_memory", **STORE_EXAMPLE)

    assert body["created"] is True
    memory = body["memory"]
    assert set(memory) == MEMORY_FIELDS
    assert memory["id"] == body["id"]
    assert {k: memory[k] for k in STORE_EXAMPLE} == STORE_EXAMPLE
    assert memory["created_at"] == memory["updated_at"] == memory["accessed_at"] == "2026-01-15T12:00:00.000000Z"
    assert memory["access_count"] == 0
    assert memory["archived"] is False


async def test_the_specs_query_example_finds_the_high_importance_python_memories(client):
    wanted = await store(client, **STORE_EXAMPLE)
    await store(client, "Python projects use ruff for linting", tags=["python"], importance="low")
    await store(client, "User writes tests before code", tags=["testing"], importance="high")

    body = await ok(client, "query_memories", **QUERY_EXAMPLE)

    assert body == {"memories": [wanted], "total": 1, "limit": 5, "offset": 0, "has_more": False}


# -- errors: each code, in the spec's format, changing nothing -----------------------------
BAD_INPUTS = [
    ("store_memory", {"content": "no type"}),
    ("store_memory", {"type": "core"}),
    ("store_memory", {"type": "habit", "content": "x"}),
    ("store_memory", {"type": "core", "content": ""}),
    ("store_memory", {"type": "core", "content": "   "}),
    ("store_memory", {"type": "core", "content": "x" * 5001}),
    ("store_memory", {"type": "core", "content": "x", "category": "c" * 51}),
    ("store_memory", {"type": "core", "content": "x", "tags": [f"t{i}" for i in range(11)]}),
    ("store_memory", {"type": "core", "content": "x", "tags": ["t" * 31]}),
    ("store_memory", {"type": "core", "content": "x", "importance": "urgent"}),
    ("store_memory", {"type": "core", "content": "x", "id": "not-a-uuid"}),
    ("store_memory", {"type": "core", "content": "x", "id": "0b6f3c1e-8d2a-1f5b-9c7d-1e2f3a4b5c6d"}),  # UUID1
    ("query_memories", {"type": "habit"}),
    ("query_memories", {"search": "s" * 201}),
    ("query_memories", {"importance": "urgent"}),
    ("query_memories", {"limit": 0}),
    ("query_memories", {"limit": 101}),
    ("query_memories", {"offset": -1}),
    ("query_memories", {"sort_by": "content"}),
    ("query_memories", {"sort_order": "up"}),
    ("update_memory", {}),
    ("update_memory", {"id": "not-a-uuid", "content": "x"}),
    ("update_memory", {"id": "{kept}"}),  # nothing to change
    ("update_memory", {"id": "{kept}", "content": ""}),
    ("update_memory", {"id": "{kept}", "content": "x" * 5001}),
    ("update_memory", {"id": "{kept}", "category": "c" * 51}),
    ("update_memory", {"id": "{kept}", "tags": [f"t{i}" for i in range(11)]}),
    ("update_memory", {"id": "{kept}", "tags": ["t" * 31]}),
    ("update_memory", {"id": "{kept}", "importance": "urgent"}),
    ("update_memory", {"id": "{kept}", "archived": "maybe"}),
    ("delete_memory", {}),
    ("delete_memory", {"id": "not-a-uuid"}),
    ("delete_memory", {"id": "{kept}", "permanent": "yes please"}),
    ("no_such_tool", {}),
]


@pytest.mark.parametrize(("tool", "args"), BAD_INPUTS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(BAD_INPUTS)])
async def test_bad_input_is_invalid_input_and_changes_nothing(client, server, tool, args):
    kept = await store(client, **STORE_EXAMPLE)
    before = state(server.service)
    args = {k: kept["id"] if v == "{kept}" else v for k, v in args.items()}

    assert error_code(await call(client, tool, **args)) == "INVALID_INPUT"
    assert state(server.service) == before


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("store_memory", {"type": "core", "content": "x", "id": UNKNOWN_ID}),
        ("update_memory", {"id": UNKNOWN_ID, "content": "x"}),
        ("delete_memory", {"id": UNKNOWN_ID}),
        ("delete_memory", {"id": UNKNOWN_ID, "permanent": True}),
    ],
)
async def test_an_unknown_id_is_not_found_and_changes_nothing(client, server, tool, args):
    await store(client, **STORE_EXAMPLE)
    before = state(server.service)

    body = await call(client, tool, **args)

    assert error_code(body) == "NOT_FOUND"
    assert UNKNOWN_ID in body["error"]["message"]
    assert state(server.service) == before


async def test_a_permanently_deleted_memory_is_not_found_afterwards(client):
    memory = await store(client, **STORE_EXAMPLE)
    await ok(client, "delete_memory", id=memory["id"], permanent=True)

    for tool, args in [("update_memory", {"archived": False}), ("delete_memory", {}), ("store_memory", STORE_EXAMPLE)]:
        assert error_code(await call(client, tool, id=memory["id"], **args)) == "NOT_FOUND"


async def test_storing_past_the_stores_quota_is_limit_exceeded_and_stores_nothing(tmp_path, clock):
    settings = Settings(home=tmp_path / "home", embedder="none", max_memories=2)
    srv = build_server(settings, "agent", clock=clock)
    try:
        async with Client(srv) as client:
            await store(client, "first")
            await store(client, "second")  # at the quota: still accepted

            body = await call(client, "store_memory", type="core", content="third")

            assert error_code(body) == "LIMIT_EXCEEDED"
            assert sorted(m.content for m in state(srv.service)) == ["first", "second"]
    finally:
        srv.service.storage.close()


async def test_a_store_held_by_another_writer_past_the_busy_timeout_is_a_storage_error(tmp_path, clock):
    settings = Settings(home=tmp_path / "home", embedder="none", busy_timeout_s=0.2)
    srv = build_server(settings, "agent", clock=clock)
    try:
        async with Client(srv) as client:
            kept = await store(client, **STORE_EXAMPLE)
            other = sqlite3.connect(settings.store_folder() / DB_FILENAME, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
                body = await call(client, "update_memory", id=kept["id"], importance="low")
                other.execute("ROLLBACK")
            finally:
                other.close()

            assert error_code(body) == "STORAGE_ERROR"
            assert state(srv.service)[0].importance == 0.8
    finally:
        srv.service.storage.close()


class BrokenModel(FakeEmbedder):
    """Embeds documents, then fails on every query."""

    def embed_query(self, text: str) -> Any:
        raise RuntimeError("the model ran out of memory")


async def test_a_model_failing_on_a_search_is_an_internal_error_the_model_can_read(settings, clock):
    srv = ProfileServer(get_profile("agent"), open_service(settings, clock=clock, embedder=BrokenModel()))
    try:
        async with Client(srv) as client:
            await store(client, **STORE_EXAMPLE)

            body = await call(client, "query_memories", search="pytest")

            assert error_code(body) == "INTERNAL_ERROR"
            assert "could not be embedded" in body["error"]["message"]
    finally:
        # srv.close(): the search's word thread may still be reading when the embedding has failed,
        # and the service waits for it before it closes the store's connections (closing them under
        # it crashed the interpreter once in CI).
        srv.close()


# -- limits at their edge ------------------------------------------------------------------
async def test_store_accepts_every_limit_at_its_edge(client):
    body = await ok(
        client,
        "store_memory",
        type="task",
        content="x" * 5000,
        category="c" * 50,
        tags=[f"{i}".ljust(30, "t") for i in range(10)],
        importance="low",
    )

    memory = body["memory"]
    assert len(memory["content"]) == 5000
    assert memory["category"] == "c" * 50
    assert len(memory["tags"]) == 10 and all(len(t) == 30 for t in memory["tags"])


async def test_update_accepts_every_limit_at_its_edge(client):
    memory = await store(client, **STORE_EXAMPLE)

    body = await ok(
        client,
        "update_memory",
        id=memory["id"],
        content="y" * 5000,
        category="c" * 50,
        tags=[f"{i}".ljust(30, "t") for i in range(10)],
    )

    assert sorted(body["updated_fields"]) == ["category", "content", "tags"]
    assert len(body["memory"]["tags"]) == 10


@pytest.mark.parametrize(("limit", "offset"), [(1, 0), (100, 0), (10, 10_000)])
async def test_query_accepts_limit_and_offset_at_their_edges(client, limit, offset):
    await store(client, **STORE_EXAMPLE)

    body = await ok(client, "query_memories", limit=limit, offset=offset, search="s" * 200)

    assert (body["limit"], body["offset"]) == (limit, offset)
