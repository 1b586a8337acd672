"""The `stores` profile's contract with spec 002, through a real MCP client.

Every scenario of the spec, each error as the JSON-RPC error a client sees (MCPError with
INVALID_PARAMS or INTERNAL_ERROR), the limits at their edge and one past, and that a refused
call leaves the store as it was.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS

from conftest import START, serve_env, sqlite_only
from mcp_calls import structured as call
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.engine import registry
from mnemo.engine.path_rules import MAX_PATH_CHARS, MAX_PATH_DEPTH
from mnemo.engine.service import MemoryService
from mnemo.errors import Conflict
from mnemo.model import MAX_CONTENT_CHARS, MAX_TAGS, Status, to_iso
from mnemo.serve.server import ProfileServer, build_server

pytestmark = pytest.mark.every_backend  # every profile on SQLite and PostgreSQL

SEVEN_TOOLS = {
    "add_memory",
    "get_memory",
    "update_memory",
    "remove_memory",
    "move_memory",
    "list_memories",
    "prune_memories",
}
TOMORROW = to_iso(START + timedelta(days=1))
NEXT_WEEK = to_iso(START + timedelta(days=7))


@pytest.fixture
def server(settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    srv = build_server(settings, "stores", clock=clock)
    yield srv
    srv.close()


async def refused(client: Client, tool: str, /, code: int = INVALID_PARAMS, **args: Any) -> MCPError:
    """The call fails as a JSON-RPC error (not a tool result) with this code; returns it."""
    with pytest.raises(MCPError) as caught:
        await client.call_tool(tool, args)
    assert caught.value.code == code, caught.value
    assert caught.value.message
    return caught.value


async def add(client: Client, path: str, content: str = "some memory", store: str = "default", **args: Any) -> None:
    await call(client, "add_memory", store=store, path=path, content=content, **args)


async def paths_in(client: Client, category: str | None = None, store: str = "default", **args: Any) -> list[str]:
    where = {} if category is None else {"category": category}
    listed = await call(client, "list_memories", store=store, **where, **args)
    return [m["path"] for m in listed["memories"]]


# -- tools/list ----------------------------------------------------------------------------
async def test_tools_list_shows_exactly_the_seven_spec_tools(client: Client):
    assert {t.name for t in (await client.list_tools()).tools} == SEVEN_TOOLS


@pytest.mark.parametrize(
    ("tool", "read_only", "destructive"),
    [
        ("add_memory", False, False),
        ("get_memory", True, False),
        ("update_memory", False, False),
        ("remove_memory", False, True),
        ("move_memory", False, False),
        ("list_memories", True, False),
        ("prune_memories", False, True),
    ],
)
async def test_each_tool_is_annotated_truthfully(client: Client, tool: str, read_only: bool, destructive: bool):
    hints = {t.name: t for t in (await client.list_tools()).tools}[tool].annotations
    assert hints.read_only_hint is read_only
    assert hints.destructive_hint is destructive
    assert hints.idempotent_hint is True  # paths are unique: a repeated call changes nothing more
    assert hints.open_world_hint is False


async def test_every_tool_requires_store_in_its_input_schema(client: Client):
    for tool in (await client.list_tools()).tools:
        assert "store" in tool.input_schema["required"], tool.name


# -- store parameter -----------------------------------------------------------------------
MINIMAL_ARGS = {
    "add_memory": {"path": "a/b", "content": "x"},
    "get_memory": {"path": "a/b"},
    "update_memory": {"path": "a/b", "content": "x"},
    "remove_memory": {"path": "a/b"},
    "move_memory": {"from_path": "a/b", "to_path": "a/c"},
    "list_memories": {},
    "prune_memories": {},
}


@pytest.mark.parametrize("tool", sorted(SEVEN_TOOLS))
async def test_a_call_without_store_is_a_validation_error_saying_store_is_required(client: Client, tool: str):
    error = await refused(client, tool, **MINIMAL_ARGS[tool])
    assert "store" in error.message and "required" in error.message.lower()
    assert error.data["code"] == "INVALID_INPUT"


@pytest.mark.parametrize("tool", sorted(SEVEN_TOOLS))
async def test_a_store_not_in_the_registry_is_refused_naming_the_registered_stores(
    client: Client, settings: Settings, tool: str
):
    registry.add(settings.registry_file, settings.home, "work", settings.home.parent / "work")
    error = await refused(client, tool, store="nowhere", **MINIMAL_ARGS[tool])
    assert "nowhere" in error.message and "not registered" in error.message
    assert "default, work" in error.message
    assert error.data["registered"] == ["default", "work"]
    assert not (settings.home / "stores" / "nowhere").exists()


async def test_the_store_named_is_the_one_registered_under_that_name(client: Client, settings: Settings, backend: str):
    work = settings.home.parent / "elsewhere" / "work"
    registry.add(settings.registry_file, settings.home, "work", work)
    await add(client, "notes/one", "kept in the work store", store="work")

    assert backend != "sqlite" or (work / "memory.db").is_file()
    assert (await call(client, "get_memory", store="work", path="notes/one"))["content"] == "kept in the work store"
    await refused(client, "get_memory", store="default", path="notes/one")


async def test_a_registered_store_without_a_folder_is_created_on_first_write_and_not_by_reads(
    client: Client, settings: Settings, backend: str
):
    folder = settings.home.parent / "later"
    registry.add(settings.registry_file, settings.home, "later", folder)

    await refused(client, "get_memory", store="later", path="a/b")
    await refused(client, "update_memory", store="later", path="a/b", content="x")
    await refused(client, "remove_memory", store="later", path="a/b")
    await refused(client, "move_memory", store="later", from_path="a/b", to_path="a/c")
    listed = await call(client, "list_memories", store="later", category="a")
    assert listed == {"category": "a", "count": 0, "memories": [], "subcategories": []}
    assert await call(client, "prune_memories", store="later") == {"pruned_count": 0, "pruned": []}
    assert not folder.exists()

    await add(client, "a/b", "first words", store="later")
    assert backend != "sqlite" or (folder / "memory.db").is_file()
    assert await paths_in(client, "a", store="later") == ["a/b"]


async def test_a_bad_path_is_refused_for_a_store_without_a_folder_too(client: Client, settings: Settings):
    folder = settings.home.parent / "later"
    registry.add(settings.registry_file, settings.home, "later", folder)
    await refused(client, "add_memory", store="later", path="a//b", content="x")
    await refused(client, "get_memory", store="later", path="../b")
    assert not folder.exists()


# -- add_memory ----------------------------------------------------------------------------
async def test_adding_a_memory_creates_it_at_the_path_with_its_tags_and_expiry(client: Client):
    added = await call(
        client,
        "add_memory",
        store="default",
        path="project/decisions/database",
        content="We use PostgreSQL 16 for the main database",
        tags=["db", "decision"],
        expires_at=NEXT_WEEK,
    )
    assert added == {
        "message": "Memory created at project/decisions/database",
        "store": "default",
        "path": "project/decisions/database",
        "created_at": to_iso(START),
    }
    got = await call(client, "get_memory", store="default", path="project/decisions/database")
    assert got == {
        "path": "project/decisions/database",
        "content": "We use PostgreSQL 16 for the main database",
        "metadata": {
            "created_at": to_iso(START),
            "updated_at": to_iso(START),
            "tags": ["db", "decision"],
            "expires_at": NEXT_WEEK,
        },
    }


async def test_adding_a_memory_in_new_categories_creates_them(client: Client):
    await add(client, "project/decisions/database")
    assert (await call(client, "list_memories", store="default"))["subcategories"] == [
        {"path": "project", "memory_count": 1}
    ]
    assert (await call(client, "list_memories", store="default", category="project"))["subcategories"] == [
        {"path": "project/decisions", "memory_count": 1}
    ]
    assert await paths_in(client, "project/decisions") == ["project/decisions/database"]


async def test_a_memory_without_expiry_shows_no_expires_at(client: Client):
    await add(client, "notes/plain")
    got = await call(client, "get_memory", store="default", path="notes/plain")
    assert "expires_at" not in got["metadata"]


async def test_adding_at_an_occupied_path_is_refused_and_keeps_the_memory_there(client: Client):
    await add(client, "notes/one", "the first")
    error = await refused(client, "add_memory", store="default", path="notes/one", content="the second")
    assert "notes/one" in error.message and "already exists" in error.message
    assert (await call(client, "get_memory", store="default", path="notes/one"))["content"] == "the first"
    assert await paths_in(client, "notes") == ["notes/one"]


async def test_the_same_words_may_live_at_two_paths(client: Client):
    await add(client, "a/one", "identical words")
    await add(client, "b/two", "identical words")
    assert (await call(client, "get_memory", store="default", path="b/two"))["content"] == "identical words"


async def test_an_expiry_in_the_past_is_refused(client: Client):
    await refused(client, "add_memory", store="default", path="a/b", content="x", expires_at=to_iso(START))
    assert await paths_in(client, "a") == []


async def test_a_memory_may_sit_at_the_root(client: Client):
    await add(client, "readme", "at the top")
    assert await paths_in(client) == ["readme"]


# -- paths and limits ----------------------------------------------------------------------
BAD_PATHS = [
    "/a/b",
    "a/b/",
    "a//b",
    "a/../b",
    "..",
    "a/./b",
    "a/.hidden",
    "a/b c",
    "a/b?",
    "a\\b",
    "é/b",
    " a/b",
    "/".join("a" * MAX_PATH_DEPTH) + "/a",
]


@pytest.mark.parametrize("path", BAD_PATHS)
async def test_a_path_that_breaks_the_rule_is_refused_and_nothing_is_stored(client: Client, path: str):
    error = await refused(client, "add_memory", store="default", path=path, content="x")
    assert error.data["code"] == "INVALID_INPUT"
    root = await call(client, "list_memories", store="default")
    assert root["memories"] == [] and root["subcategories"] == []


async def test_an_empty_path_is_refused(client: Client):
    await refused(client, "add_memory", store="default", path="", content="x")
    await refused(client, "get_memory", store="default", path="")


async def test_paths_keep_letters_digits_dashes_underscores_and_dots_and_are_case_sensitive(client: Client):
    await add(client, "Project_X/v1.2/read-me", "upper")
    await add(client, "project_x/v1.2/read-me", "lower")
    assert (await call(client, "get_memory", store="default", path="Project_X/v1.2/read-me"))["content"] == "upper"
    assert (await call(client, "get_memory", store="default", path="project_x/v1.2/read-me"))["content"] == "lower"


async def test_a_path_of_the_longest_length_and_depth_is_accepted_and_one_more_is_refused(client: Client):
    longest = "a/" + "b" * (MAX_PATH_CHARS - 2)
    await add(client, longest)
    assert (await call(client, "get_memory", store="default", path=longest))["path"] == longest
    await refused(client, "add_memory", store="default", path=longest + "b", content="x")

    deepest = "/".join(["d"] * MAX_PATH_DEPTH)
    await add(client, deepest)
    await refused(client, "add_memory", store="default", path=deepest + "/d", content="x")
    assert await paths_in(client, "a") == [longest]


async def test_content_up_to_the_limit_is_stored_and_one_character_more_is_refused(client: Client):
    await add(client, "big/edge", "x" * MAX_CONTENT_CHARS)
    await refused(client, "add_memory", store="default", path="big/over", content="x" * (MAX_CONTENT_CHARS + 1))
    await refused(client, "add_memory", store="default", path="big/empty", content="")
    assert await paths_in(client, "big") == ["big/edge"]


async def test_tags_up_to_the_limit_are_stored_and_one_more_is_refused(client: Client):
    tags = [f"t{i}" for i in range(MAX_TAGS)]
    await add(client, "tags/edge", tags=tags)
    assert (await call(client, "get_memory", store="default", path="tags/edge"))["metadata"]["tags"] == tags
    await refused(client, "add_memory", store="default", path="tags/over", content="x", tags=[*tags, "one-more"])
    assert await paths_in(client, "tags") == ["tags/edge"]


# -- get_memory ----------------------------------------------------------------------------
async def test_getting_a_path_where_nothing_is_stored_is_an_error_naming_it(client: Client):
    error = await refused(client, "get_memory", store="default", path="no/such/memory")
    assert "no/such/memory" in error.message
    assert error.data["code"] == "NOT_FOUND"


async def test_an_expired_memory_is_not_returned_unless_include_expired(client: Client, clock: ManualClock):
    await add(client, "temp/note", "short-lived", expires_at=TOMORROW)
    clock.advance(days=2)

    error = await refused(client, "get_memory", store="default", path="temp/note")
    assert "expired" in error.message
    got = await call(client, "get_memory", store="default", path="temp/note", include_expired=True)
    assert got["content"] == "short-lived"
    assert got["metadata"]["expires_at"] == TOMORROW


# -- update_memory -------------------------------------------------------------------------
async def test_updating_content_replaces_it_and_refreshes_updated_at(client: Client, clock: ManualClock):
    await add(client, "notes/plan", "the old plan", tags=["plan"])
    clock.advance(hours=1)
    updated = await call(client, "update_memory", store="default", path="notes/plan", content="the new plan")
    assert updated["updated_fields"] == ["content"]
    assert updated["updated_at"] == to_iso(START + timedelta(hours=1))

    got = await call(client, "get_memory", store="default", path="notes/plan")
    assert got["content"] == "the new plan"
    assert got["metadata"]["created_at"] == to_iso(START)
    assert got["metadata"]["updated_at"] == to_iso(START + timedelta(hours=1))
    assert got["metadata"]["tags"] == ["plan"]


async def test_updating_only_tags_or_expiry_changes_only_the_metadata(client: Client, clock: ManualClock):
    await add(client, "notes/plan", "the plan", tags=["old"])
    clock.advance(minutes=5)
    tagged = await call(client, "update_memory", store="default", path="notes/plan", tags=["new", "more"])
    assert tagged["updated_fields"] == ["tags"]
    dated = await call(client, "update_memory", store="default", path="notes/plan", expires_at=NEXT_WEEK)
    assert dated["updated_fields"] == ["expires_at"]
    assert dated["expires_at"] == NEXT_WEEK

    got = await call(client, "get_memory", store="default", path="notes/plan")
    assert got["content"] == "the plan"
    assert got["metadata"]["tags"] == ["new", "more"]
    assert got["metadata"]["expires_at"] == NEXT_WEEK


async def test_clear_expiry_removes_the_expiry_date(client: Client, clock: ManualClock):
    await add(client, "temp/note", "short-lived", expires_at=TOMORROW)
    cleared = await call(client, "update_memory", store="default", path="temp/note", clear_expiry=True)
    assert cleared["updated_fields"] == ["expires_at"]
    assert cleared["expires_at"] is None
    clock.advance(days=30)
    assert "expires_at" not in (await call(client, "get_memory", store="default", path="temp/note"))["metadata"]


async def test_an_expired_memory_can_be_revived_by_clearing_its_expiry(client: Client, clock: ManualClock):
    await add(client, "temp/note", "short-lived", expires_at=TOMORROW)
    clock.advance(days=2)
    await call(client, "update_memory", store="default", path="temp/note", clear_expiry=True)
    assert (await call(client, "get_memory", store="default", path="temp/note"))["content"] == "short-lived"


async def test_an_update_with_nothing_to_change_is_refused(client: Client):
    await add(client, "notes/plan", "the plan")
    error = await refused(client, "update_memory", store="default", path="notes/plan")
    assert "no updates" in error.message


async def test_expires_at_together_with_clear_expiry_is_refused_and_changes_nothing(client: Client):
    await add(client, "notes/plan", "the plan", expires_at=TOMORROW)
    await refused(client, "update_memory", store="default", path="notes/plan", expires_at=NEXT_WEEK, clear_expiry=True)
    assert (await call(client, "get_memory", store="default", path="notes/plan"))["metadata"]["expires_at"] == TOMORROW


async def test_updating_a_missing_memory_or_with_bad_values_is_refused_and_changes_nothing(client: Client):
    await refused(client, "update_memory", store="default", path="notes/none", content="x")
    await add(client, "notes/plan", "the plan", tags=["keep"])
    await refused(client, "update_memory", store="default", path="notes/plan", content="")
    await refused(client, "update_memory", store="default", path="notes/plan", expires_at=to_iso(START))
    await refused(
        client, "update_memory", store="default", path="notes/plan", tags=[f"{i}" for i in range(MAX_TAGS + 1)]
    )
    got = await call(client, "get_memory", store="default", path="notes/plan")
    assert got["content"] == "the plan"
    assert got["metadata"]["tags"] == ["keep"]
    assert got["metadata"]["updated_at"] == to_iso(START)


# -- remove_memory -------------------------------------------------------------------------
async def test_removing_a_memory_deletes_it_and_frees_its_path(client: Client, server: ProfileServer):
    await add(client, "notes/gone", "to be removed")
    removed = await call(client, "remove_memory", store="default", path="notes/gone")
    assert removed["message"] == "Memory removed at notes/gone"
    assert removed["recoverable_until"] == to_iso(START + timedelta(days=30))

    await refused(client, "get_memory", store="default", path="notes/gone")
    assert await paths_in(client, "notes") == []
    await add(client, "notes/gone", "a new memory at the freed path")
    assert (await call(client, "get_memory", store="default", path="notes/gone"))["content"].startswith("a new")


async def test_a_removed_memory_is_soft_deleted_and_its_backup_keeps_the_path(server: ProfileServer, client: Client):
    await add(client, "notes/gone", "to be removed")
    storage = server.service.storage
    memory_id = storage.get_by_path("notes/gone").id
    await call(client, "remove_memory", store="default", path="notes/gone")

    forgotten = storage.get(memory_id)
    assert forgotten.status is Status.FORGOTTEN
    assert forgotten.path is None
    assert forgotten.content == "to be removed"
    history = storage.history(memory_id)
    assert history[-1].action == "forget"
    assert history[-1].previous.path == "notes/gone"


async def test_removing_a_missing_memory_is_an_error(client: Client):
    error = await refused(client, "remove_memory", store="default", path="notes/none")
    assert "notes/none" in error.message


# -- move_memory ---------------------------------------------------------------------------
async def test_moving_a_memory_changes_only_its_path_as_a_new_version(
    client: Client, server: ProfileServer, clock: ManualClock
):
    await add(client, "drafts/idea", "an idea worth keeping", tags=["idea"], expires_at=NEXT_WEEK)
    memory_id = server.service.storage.get_by_path("drafts/idea").id
    clock.advance(minutes=1)
    moved = await call(client, "move_memory", store="default", from_path="drafts/idea", to_path="ideas/kept/idea")
    assert moved == {
        "message": "Memory moved from drafts/idea to ideas/kept/idea",
        "from_path": "drafts/idea",
        "to_path": "ideas/kept/idea",
    }

    await refused(client, "get_memory", store="default", path="drafts/idea")
    got = await call(client, "get_memory", store="default", path="ideas/kept/idea")
    assert got["content"] == "an idea worth keeping"
    assert got["metadata"]["tags"] == ["idea"]
    assert got["metadata"]["expires_at"] == NEXT_WEEK
    assert got["metadata"]["created_at"] == to_iso(START)
    assert server.service.storage.get_by_path("ideas/kept/idea").id == memory_id
    last = server.service.storage.history(memory_id)[-1]
    assert (last.version, last.reason, last.previous.path) == (2, "moved from drafts/idea", "drafts/idea")


async def test_moving_onto_an_existing_memory_is_refused_and_changes_neither(client: Client):
    await add(client, "a/one", "first")
    await add(client, "a/two", "second")
    error = await refused(client, "move_memory", store="default", from_path="a/one", to_path="a/two")
    assert "a/two" in error.message and "already exists" in error.message
    assert (await call(client, "get_memory", store="default", path="a/one"))["content"] == "first"
    assert (await call(client, "get_memory", store="default", path="a/two"))["content"] == "second"


async def test_moving_a_missing_memory_is_an_error(client: Client):
    error = await refused(client, "move_memory", store="default", from_path="a/none", to_path="a/else")
    assert "a/none" in error.message


async def test_moving_a_memory_onto_itself_or_to_a_bad_path_is_refused(client: Client):
    await add(client, "a/one", "first")
    await refused(client, "move_memory", store="default", from_path="a/one", to_path="a/one")
    await refused(client, "move_memory", store="default", from_path="a/one", to_path="a/../one")
    assert await paths_in(client, "a") == ["a/one"]


# -- list_memories -------------------------------------------------------------------------
async def test_listing_a_category_shows_its_memories_and_subcategories_one_level_deep(client: Client):
    for path in ("project/readme", "project/api/auth", "project/api/rate-limits", "project/db/schema/users", "other/x"):
        await add(client, path, f"about {path}")
    listed = await call(client, "list_memories", store="default", category="project")
    assert listed["category"] == "project"
    assert listed["count"] == 1
    assert [m["path"] for m in listed["memories"]] == ["project/readme"]
    assert listed["subcategories"] == [
        {"path": "project/api", "memory_count": 2},
        {"path": "project/db", "memory_count": 1},
    ]
    assert await paths_in(client, "project/api") == ["project/api/auth", "project/api/rate-limits"]
    assert await paths_in(client, "project/") == ["project/readme"]  # a trailing slash is forgiven


async def test_listing_without_a_category_shows_the_root(client: Client):
    await add(client, "top", "at the root")
    await add(client, "project/readme", "in a category")
    listed = await call(client, "list_memories", store="default")
    assert listed["category"] == "all"
    assert [m["path"] for m in listed["memories"]] == ["top"]
    assert listed["subcategories"] == [{"path": "project", "memory_count": 1}]


async def test_listed_memories_carry_size_tags_and_expiry(client: Client):
    await add(client, "n/one", "x" * 10, tags=["t"], expires_at=NEXT_WEEK)
    (memory,) = (await call(client, "list_memories", store="default", category="n"))["memories"]
    assert memory == {
        "path": "n/one",
        "token_estimate": 3,
        "tags": ["t"],
        "updated_at": to_iso(START),
        "expires_at": NEXT_WEEK,
        "is_expired": False,
    }


async def test_expired_memories_are_listed_only_with_include_expired(client: Client, clock: ManualClock):
    await add(client, "n/lasting", "stays")
    await add(client, "n/brief", "goes", expires_at=TOMORROW)
    await add(client, "n/deep/brief", "goes too", expires_at=TOMORROW)
    clock.advance(days=2)

    listed = await call(client, "list_memories", store="default", category="n")
    assert [m["path"] for m in listed["memories"]] == ["n/lasting"]
    assert listed["subcategories"] == []
    everything = await call(client, "list_memories", store="default", category="n", include_expired=True)
    assert [(m["path"], m["is_expired"]) for m in everything["memories"]] == [("n/brief", True), ("n/lasting", False)]
    assert everything["subcategories"] == [{"path": "n/deep", "memory_count": 1}]


async def test_listing_a_category_that_holds_nothing_is_empty_and_a_bad_one_is_refused(client: Client):
    assert await call(client, "list_memories", store="default", category="nothing/here") == {
        "category": "nothing/here",
        "count": 0,
        "memories": [],
        "subcategories": [],
    }
    await refused(client, "list_memories", store="default", category="a//b")
    await refused(client, "list_memories", store="default", category="x" * (MAX_PATH_CHARS + 1))


async def test_a_category_is_not_confused_with_a_sibling_sharing_its_prefix(client: Client):
    await add(client, "ab/one")
    await add(client, "a/two")
    await add(client, "a-b/three")
    assert await paths_in(client, "a") == ["a/two"]
    assert (await call(client, "list_memories", store="default"))["subcategories"] == [
        {"path": "a", "memory_count": 1},
        {"path": "a-b", "memory_count": 1},
        {"path": "ab", "memory_count": 1},
    ]


async def test_memories_stored_without_a_path_are_not_listed(client: Client, server: ProfileServer):
    server.service.store("stored through another profile, with no path")
    await add(client, "n/one", "with a path")
    root = await call(client, "list_memories", store="default")
    assert root["memories"] == [] and root["subcategories"] == [{"path": "n", "memory_count": 1}]
    assert await paths_in(client, "n") == ["n/one"]


# -- prune_memories ------------------------------------------------------------------------
async def test_pruning_deletes_every_expired_memory_and_reports_them(
    client: Client, server: ProfileServer, clock: ManualClock
):
    await add(client, "n/lasting", "stays")
    await add(client, "n/brief", "goes", expires_at=TOMORROW)
    await add(client, "deep/er/brief", "goes too", expires_at=TOMORROW)
    await add(client, "n/later", "goes next week", expires_at=NEXT_WEEK)
    clock.advance(days=2)

    pruned = await call(client, "prune_memories", store="default")
    assert pruned == {
        "pruned_count": 2,
        "pruned": [
            {"path": "deep/er/brief", "expires_at": TOMORROW},
            {"path": "n/brief", "expires_at": TOMORROW},
        ],
    }
    everything = await call(client, "list_memories", store="default", category="n", include_expired=True)
    assert [m["path"] for m in everything["memories"]] == ["n/lasting", "n/later"]
    await refused(client, "get_memory", store="default", path="n/brief", include_expired=True)
    forgotten = server.service.list(statuses=["deleted"], include_expired=True, limit=None).memories
    assert {m.forget_reason for m in forgotten} == {"expired"}
    assert len(forgotten) == 2


async def test_pruning_with_nothing_expired_succeeds_with_zero(client: Client):
    await add(client, "n/lasting", "stays", expires_at=NEXT_WEEK)
    assert await call(client, "prune_memories", store="default") == {"pruned_count": 0, "pruned": []}
    assert await paths_in(client, "n") == ["n/lasting"]


async def test_pruning_leaves_expired_memories_without_a_path_alone(
    client: Client, server: ProfileServer, clock: ManualClock
):
    other = server.service.store("kept by another profile", expires_at=START + timedelta(days=1)).memory
    clock.advance(days=2)
    assert (await call(client, "prune_memories", store="default"))["pruned_count"] == 0
    assert server.service.get(other.id).status is Status.ACTIVE


# -- errors as the protocol sees them ------------------------------------------------------
@sqlite_only  # a damaged file
async def test_a_store_that_cannot_be_opened_fails_with_an_internal_error(client: Client, settings: Settings):
    folder = settings.home.parent / "broken"
    registry.add(settings.registry_file, settings.home, "broken", folder)
    folder.mkdir()
    (folder / "memory.db").write_bytes(b"this is not a database" * 100)
    error = await refused(client, "add_memory", code=INTERNAL_ERROR, store="broken", path="a/b", content="x")
    assert error.data["code"] in ("CORRUPTED_DATA", "STORAGE_ERROR")


async def test_errors_fail_the_request_for_a_client_that_does_not_raise_exceptions(server: ProfileServer):
    async with Client(server) as plain:
        with pytest.raises(MCPError) as caught:
            await plain.call_tool("get_memory", {"store": "default", "path": "no/such"})
    assert caught.value.code == INVALID_PARAMS


# -- across profiles -----------------------------------------------------------------------
async def test_a_memory_added_through_stores_is_recalled_through_full(client: Client, settings: Settings):
    await add(client, "diet/emma", "Emma is lactose intolerant", tags=["diet"])
    full = build_server(settings, "full")
    try:
        async with Client(full, raise_exceptions=True) as other:
            recalled = (await other.call_tool("recall_memories", {"query": "lactose"})).structured_content
    finally:
        full.close()
    assert [m["content"] for m in recalled["memories"]] == ["Emma is lactose intolerant"]


async def test_serve_store_of_another_profile_opens_the_registered_folder(client: Client, settings: Settings):
    work = settings.home.parent / "work"
    registry.add(settings.registry_file, settings.home, "work", work)
    await add(client, "team/standup", "Standup is at 9:30 every weekday", store="work")
    full = build_server(settings, "full", store="work")
    try:
        async with Client(full, raise_exceptions=True) as other:
            recalled = (await other.call_tool("recall_memories", {"query": "standup"})).structured_content
    finally:
        full.close()
    assert [m["content"] for m in recalled["memories"]] == ["Standup is at 9:30 every weekday"]


# -- over stdio ----------------------------------------------------------------------------
async def test_mnemo_serve_stores_answers_over_stdio_and_fails_bad_calls_as_json_rpc_errors(
    tmp_path: Path, settings: Settings
):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnemo", "serve", "--profile", "stores"],
        env=serve_env(settings),
        cwd=tmp_path,
    )
    async with Client(params) as client:
        assert client.server_info.name == "mnemo-stores"
        assert {t.name for t in (await client.list_tools()).tools} == SEVEN_TOOLS
        await add(client, "a/b", "over stdio")
        assert (await call(client, "get_memory", store="default", path="a/b"))["content"] == "over stdio"
        with pytest.raises(MCPError) as missing:
            await client.call_tool("get_memory", {"store": "default", "path": "a/none"})
        assert missing.value.code == INVALID_PARAMS
        with pytest.raises(MCPError) as unregistered:
            await client.call_tool("list_memories", {"store": "nope"})
        assert unregistered.value.code == INVALID_PARAMS
        assert "registered stores: default" in unregistered.value.message


# -- the service beneath: the store itself keeps paths unique --------------------------------
def test_the_store_refuses_a_second_memory_at_a_path_even_past_the_service_check(service: MemoryService):
    service.add_at("a/b", "first")
    with pytest.raises(Conflict):
        service.store("second", path="a/b", on_duplicate="allow")
    other = service.add_at("a/c", "third")
    with pytest.raises(Conflict, match="already taken"):
        service.update(other.id, path="a/b", expected_version=other.version)
    assert service.get_at("a/b").content == "first"
    assert service.get_at("a/c").content == "third"


def test_a_memory_forgotten_through_any_profile_gives_up_its_path(service: MemoryService):
    memory = service.add_at("a/b", "first")
    service.forget(memory.id)
    assert service.add_at("a/b", "second").content == "second"
