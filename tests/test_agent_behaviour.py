"""What the `agent` profile's five tools do (spec 000), through an in-memory MCP client.

Time is a ManualClock at 2026-01-15T12:00Z (conftest). Searches run on words unless a test
brings the real model (``installed_model``). Also: a memory crosses between `agent` and `full` on
one store, and a damaged store file is answered with CORRUPTED_DATA instead of a crash.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client

from mnemo.app import open_service
from mnemo.embed.local import LocalEmbedder
from mnemo.errors import NotFound
from mnemo.model import Status
from mnemo.profiles import get_profile
from mnemo.serve.server import ProfileServer, build_server
from mnemo.storage.sqlite import DB_FILENAME
from spec000 import FIVE_TOOLS, STORE_EXAMPLE, call, error_code, ok, store

SORT_FIELDS = ["created_at", "updated_at", "accessed_at", "importance", "access_count"]


@pytest.fixture
def server(settings, clock):
    srv = build_server(settings, "agent", clock=clock)
    yield srv
    srv.service.storage.close()


async def contents(client: Client, **args: Any) -> list[str]:
    return [m["content"] for m in (await ok(client, "query_memories", **args))["memories"]]


# -- store_memory --------------------------------------------------------------------------
async def test_storing_with_an_id_updates_that_memory_and_keeps_what_was_not_given(client, clock):
    first = await store(client, **STORE_EXAMPLE)
    clock.advance(minutes=5)

    body = await ok(client, "store_memory", id=first["id"], type="learning", content="User now prefers nose2")

    assert body["created"] is False
    assert body["id"] == first["id"]
    memory = body["memory"]
    assert (memory["type"], memory["content"]) == ("learning", "User now prefers nose2")
    assert (memory["category"], memory["tags"], memory["importance"]) == ("preference", ["python", "testing"], "high")
    assert memory["created_at"] == first["created_at"]
    assert memory["updated_at"] == "2026-01-15T12:05:00.000000Z"
    assert (await ok(client, "get_memory_stats"))["total_memories"] == 1


async def test_storing_the_same_content_again_returns_the_stored_memory_instead_of_a_copy(client):
    first = await store(client, **STORE_EXAMPLE)

    again = await ok(
        client, "store_memory", type="task", content=" user prefers PYTEST over unittest for python testing. "
    )

    assert again == {"id": first["id"], "created": False, "memory": first}
    assert (await ok(client, "get_memory_stats"))["total_memories"] == 1


async def test_importance_defaults_to_medium_and_the_tags_are_exactly_the_callers(client):
    memory = await store(client, "Deploys to the staging cluster happen every Tuesday afternoon")

    assert memory["importance"] == "medium"
    assert memory["tags"] == []
    assert memory["category"]  # detected when not given


# -- query_memories ------------------------------------------------------------------------
@pytest.fixture
async def mixed(client, clock) -> dict[str, dict[str, Any]]:
    """Five memories, one minute apart, of every type, band and several tags and categories."""
    specs = {
        "pytest": dict(type="core", category="preference", tags=["python", "testing"], importance="high"),
        "ruff": dict(type="core", category="preference", tags=["python", "lint"], importance="medium"),
        "flaky": dict(type="learning", category="pattern", tags=["testing"], importance="high"),
        "release": dict(type="task", category="todo", tags=["python", "release"], importance="low"),
        "docs": dict(type="task", category="todo", tags=["docs"], importance="medium"),
    }
    stored = {}
    for name, args in specs.items():
        stored[name] = await store(client, f"{name} note about the project", **args)
        clock.advance(minutes=1)
    return stored


async def test_a_plain_query_lists_active_memories_most_recently_accessed_first(client, mixed):
    body = await ok(client, "query_memories")

    assert [m["id"] for m in body["memories"]] == [
        mixed[n]["id"] for n in ["docs", "release", "flaky", "ruff", "pytest"]
    ]
    assert (body["total"], body["limit"], body["offset"], body["has_more"]) == (5, 10, 0, False)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"type": "task"}, ["docs", "release"]),
        ({"tags": ["python", "testing"]}, ["pytest"]),  # AND
        ({"tags": ["python"]}, ["release", "ruff", "pytest"]),
        ({"importance": "high"}, ["flaky", "pytest"]),
        ({"category": "pattern"}, ["flaky"]),
        ({"category": "Pattern"}, []),  # a category is an exact label
        ({"type": "core", "importance": "medium"}, ["ruff"]),
        ({"tags": ["python"], "importance": "low", "type": "task", "category": "todo"}, ["release"]),
    ],
)
async def test_every_filter_narrows_the_query_and_filters_combine(client, mixed, filters, expected):
    body = await ok(client, "query_memories", **filters)

    assert [m["id"] for m in body["memories"]] == [mixed[n]["id"] for n in expected]
    assert body["total"] == len(expected)


@pytest.mark.parametrize("sort_by", SORT_FIELDS)
@pytest.mark.parametrize("sort_order", ["asc", "desc"])
async def test_each_sort_field_orders_the_results_either_way(client, server, mixed, clock, sort_by, sort_order):
    # Give each field an order of its own: updates and accesses in another order than creation.
    for name in ["ruff", "pytest", "docs"]:
        clock.advance(minutes=1)
        await ok(client, "update_memory", id=mixed[name]["id"], content=f"{name} note about the project, revised")
    for name, times in [("flaky", 3), ("docs", 2), ("release", 1)]:
        for _ in range(times):
            clock.advance(minutes=1)
            server.service.storage.record_recall([mixed[name]["id"]], clock.now())

    body = await ok(client, "query_memories", sort_by=sort_by, sort_order=sort_order)

    values = [m[sort_by] for m in body["memories"]]
    if sort_by == "importance":
        values = [{"low": 0, "medium": 1, "high": 2}[v] for v in values]
    assert values == sorted(values, reverse=sort_order == "desc")
    assert len(set(values)) > 2  # the order was really tested


async def test_pages_cover_every_match_once_with_total_and_has_more(client, mixed):
    pages = [await ok(client, "query_memories", limit=2, offset=offset) for offset in (0, 2, 4)]

    assert [p["has_more"] for p in pages] == [True, True, False]
    assert {p["total"] for p in pages} == {5}
    seen = [m["id"] for p in pages for m in p["memories"]]
    assert sorted(seen) == sorted(m["id"] for m in mixed.values())
    beyond = await ok(client, "query_memories", limit=2, offset=5)
    assert (beyond["memories"], beyond["total"], beyond["has_more"]) == ([], 5, False)


async def test_archived_memories_are_left_out_unless_asked_for(client, mixed):
    await ok(client, "delete_memory", id=mixed["flaky"]["id"])

    assert "flaky note about the project" not in await contents(client, tags=["testing"])
    shown = (await ok(client, "query_memories", tags=["testing"], archived=True))["memories"]
    assert {m["content"]: m["archived"] for m in shown} == {
        "flaky note about the project": True,
        "pytest note about the project": False,
    }


async def test_a_search_keeps_matching_memories_best_first_within_the_filters(client):
    await store(client, "User prefers pytest over unittest for Python testing", tags=["python"])
    await store(client, "pytest fixtures live in conftest.py; pytest runs them per test", tags=["python"])
    await store(client, "Deploys happen on Tuesday", tags=["ops"])
    await store(client, "pytest plugins are banned on the CI runners", tags=["ci"])

    body = await ok(client, "query_memories", search="pytest", tags=["python"])

    assert body["total"] == 2
    assert body["memories"][0]["content"].startswith("pytest fixtures")  # the word twice: the best match
    assert {m["content"] for m in body["memories"]} == {
        "User prefers pytest over unittest for Python testing",
        "pytest fixtures live in conftest.py; pytest runs them per test",
    }
    assert await contents(client, search="kubernetes") == []


async def test_a_search_with_sort_by_orders_its_matches_by_that_field(client, clock):
    for n in range(3):
        await store(client, f"pytest run number {n} passed" + " pytest" * (2 - n))
        clock.advance(minutes=1)

    newest_first = await contents(client, search="pytest", sort_by="created_at")
    oldest_first = await contents(client, search="pytest", sort_by="created_at", sort_order="asc")

    assert newest_first == [f"pytest run number {n} passed" + " pytest" * (2 - n) for n in (2, 1, 0)]
    assert oldest_first == newest_first[::-1]


async def test_memories_found_by_a_search_count_as_accessed_and_plain_listing_does_not(client, clock):
    memory = await store(client, **STORE_EXAMPLE)
    clock.advance(hours=1)

    listed = (await ok(client, "query_memories"))["memories"][0]
    found = (await ok(client, "query_memories", search="unittest"))["memories"][0]

    assert (listed["access_count"], listed["accessed_at"]) == (0, memory["accessed_at"])
    assert (found["access_count"], found["accessed_at"]) == (1, "2026-01-15T13:00:00.000000Z")
    assert (await ok(client, "get_memory_stats"))["most_accessed"] == found


async def test_a_search_by_meaning_finds_memories_that_share_no_word_with_it(settings, clock, installed_model):
    srv = ProfileServer(
        get_profile("agent"), open_service(settings, clock=clock, embedder=LocalEmbedder(installed_model))
    )
    try:
        async with Client(srv) as client:
            for content, tags in [
                ("Emma is lactose intolerant", ["family"]),
                ("Liam is allergic to peanuts", ["family"]),
                ("User prefers pytest over unittest", ["dev"]),
                ("The car needs new winter tyres before December", ["car"]),
                ("Standup meeting is at 9:30 every weekday", ["work"]),
            ]:
                await store(client, content, tags=tags)

            assert await contents(client, search="milk") == ["Emma is lactose intolerant"]
            assert await contents(client, search="nuts") == ["Liam is allergic to peanuts"]
            assert await contents(client, search="milk", tags=["car"]) == []
    finally:
        srv.service.storage.close()


# -- update_memory -------------------------------------------------------------------------
async def test_update_names_the_fields_it_changed_as_the_spec_names_them(client, clock):
    memory = await store(client, **STORE_EXAMPLE)
    clock.advance(minutes=1)

    body = await ok(
        client,
        "update_memory",
        id=memory["id"],
        content=memory["content"],  # unchanged: not listed
        tags=["python"],
        importance="low",
        archived=True,
    )

    assert sorted(body["updated_fields"]) == ["archived", "importance", "tags"]
    updated = body["memory"]
    assert (updated["tags"], updated["importance"], updated["archived"]) == (["python"], "low", True)
    assert updated["updated_at"] == "2026-01-15T12:01:00.000000Z"


async def test_unarchiving_brings_a_memory_back_into_queries(client, server):
    memory = await store(client, **STORE_EXAMPLE)
    await ok(client, "update_memory", id=memory["id"], archived=True)
    assert await contents(client) == []

    body = await ok(client, "update_memory", id=memory["id"], archived=False)

    assert body["updated_fields"] == ["archived"]
    assert await contents(client) == [memory["content"]]
    assert server.service.get(memory["id"]).status is Status.ACTIVE


async def test_an_update_that_changes_nothing_lists_no_fields(client):
    memory = await store(client, **STORE_EXAMPLE)

    body = await ok(client, "update_memory", id=memory["id"], importance="high", category="preference")

    assert body == {"memory": memory, "updated_fields": []}


# -- delete_memory -------------------------------------------------------------------------
async def test_delete_archives_by_default_and_the_memory_stays_readable(client, server):
    memory = await store(client, **STORE_EXAMPLE)

    assert await ok(client, "delete_memory", id=memory["id"]) == {
        "success": True,
        "action": "archived",
        "id": memory["id"],
    }
    assert server.service.get(memory["id"]).status is Status.ARCHIVED
    assert (await ok(client, "get_memory_stats"))["archived_count"] == 1


async def test_permanent_delete_removes_the_memory_for_good(client, server):
    memory = await store(client, **STORE_EXAMPLE)

    body = await ok(client, "delete_memory", id=memory["id"], permanent=True)

    assert body == {"success": True, "action": "deleted", "id": memory["id"]}
    assert await contents(client, archived=True) == []
    with pytest.raises(NotFound):
        server.service.get(memory["id"])


async def test_an_archived_memory_can_still_be_deleted_permanently(client):
    memory = await store(client, **STORE_EXAMPLE)
    await ok(client, "delete_memory", id=memory["id"])

    assert (await ok(client, "delete_memory", id=memory["id"], permanent=True))["action"] == "deleted"
    assert (await ok(client, "get_memory_stats"))["archived_count"] == 0


# -- get_memory_stats ----------------------------------------------------------------------
async def test_stats_of_an_empty_store_have_every_key_at_zero(client):
    body = await ok(client, "get_memory_stats")

    assert body["total_memories"] == 0
    assert body["by_type"] == {"core": 0, "learning": 0, "task": 0}
    assert body["by_importance"] == {"high": 0, "medium": 0, "low": 0}
    assert body["archived_count"] == 0
    assert body["total_storage_kb"] > 0  # the empty database itself
    assert (body["oldest_memory"], body["newest_memory"], body["most_accessed"], body["top_tags"]) == (
        None,
        None,
        None,
        [],
    )


async def test_stats_count_what_the_store_holds(client, server, settings, mixed):
    await ok(client, "delete_memory", id=mixed["docs"]["id"])
    await ok(client, "query_memories", search="flaky")

    body = await ok(client, "get_memory_stats")

    assert body["total_memories"] == 4
    assert body["by_type"] == {"core": 2, "learning": 1, "task": 1}
    assert body["by_importance"] == {"high": 2, "medium": 1, "low": 1}
    assert body["archived_count"] == 1
    assert body["oldest_memory"] == mixed["pytest"]["created_at"] == "2026-01-15T12:00:00.000000Z"
    assert body["newest_memory"] == mixed["release"]["created_at"]
    assert body["most_accessed"]["id"] == mixed["flaky"]["id"]
    assert body["top_tags"][:2] == [{"tag": "python", "count": 3}, {"tag": "testing", "count": 2}]
    on_disk = sum(p.stat().st_size for p in settings.store_folder().glob(f"{DB_FILENAME}*"))
    assert body["total_storage_kb"] == round(on_disk / 1024, 2)


async def test_stats_show_the_ten_most_used_tags(client):
    # "a" on 5 memories, "b" on 4, "c" on 3, and ten tags used once: twelve tags in all.
    for n in range(5):
        shared = ["a", "b", "c"][: 5 - n if n > 1 else 3]
        await store(client, f"memory number {n}", tags=[*shared, f"once{2 * n}", f"once{2 * n + 1}"])

    top = (await ok(client, "get_memory_stats"))["top_tags"]

    assert top[:3] == [{"tag": "a", "count": 5}, {"tag": "b", "count": 4}, {"tag": "c", "count": 3}]
    assert len(top) == 10
    assert {t["count"] for t in top[3:]} == {1}


# -- across profiles and a damaged store -----------------------------------------------------
@asynccontextmanager
async def serving(settings, clock, profile: str) -> AsyncIterator[Client]:
    srv = build_server(settings, profile, clock=clock)
    try:
        async with Client(srv) as client:
            yield client
    finally:
        srv.service.storage.close()


async def test_a_memory_crosses_between_agent_and_full_on_one_store(settings, clock):
    async with serving(settings, clock, "agent") as agent, serving(settings, clock, "full") as full:
        from_agent = await store(agent, **STORE_EXAMPLE)
        from_full = (await call(full, "store_memory", content="The staging database is restored every Sunday"))[
            "memory_id"
        ]

        recalled = (await call(full, "recall_memories", query="pytest unittest"))["memories"]
        listed = await ok(agent, "query_memories", search="staging database")

        assert [m["memory_id"] for m in recalled] == [from_agent["id"]]
        assert [m["id"] for m in listed["memories"]] == [from_full]
        assert listed["memories"][0]["type"] is None  # stored without one


async def test_a_store_file_that_is_not_a_database_is_answered_with_corrupted_data(settings, clock):
    path = settings.store_folder() / DB_FILENAME
    path.parent.mkdir(parents=True)
    garbage = b"\x00\xffnot a database at all\n" * 300
    path.write_bytes(garbage)
    calls = {
        "store_memory": STORE_EXAMPLE,
        "query_memories": {"search": "pytest"},
        "update_memory": {"id": "0b6f3c1e-8d2a-4f5b-9c7d-1e2f3a4b5c6d", "archived": True},
        "delete_memory": {"id": "0b6f3c1e-8d2a-4f5b-9c7d-1e2f3a4b5c6d"},
        "get_memory_stats": {},
    }

    async with serving(settings, clock, "agent") as agent, serving(settings, clock, "full") as full:
        assert set(calls) == FIVE_TOOLS
        for tool, args in calls.items():
            body = await call(agent, tool, **args)
            assert error_code(body) == "CORRUPTED_DATA", tool
            assert "damaged" in body["error"]["message"]
        answer = await call(full, "list_memories")
        assert answer["success"] is False
        assert (answer["error"]["code"], answer["error"]["status"]) == ("STORAGE_ERROR", 500)

    assert path.read_bytes() == garbage  # left as it was, for the user to inspect
