"""The `shared` profile's contract with spec 003, through an in-memory MCP client.

Every tool: the spec's examples, its output shapes, each listed error, each limit at its edge and
one past it, and that a rejected call changes nothing. Rotation, backups, health failures,
truncation and several processes are in test_shared_space.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from mcp import Client

from mnemo.access.caller import Caller, Role, acting_as
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.engine.space_files import KEEP_BACKUPS
from mnemo.model import BAND_IMPORTANCE, ImportanceBand, Status
from mnemo.serve.server import ProfileServer, build_server
from spec003 import EXAMPLE, NINE_TOOLS, add, body, error, everything, text, words

pytestmark = pytest.mark.every_backend  # every profile on SQLite and PostgreSQL

ENTRY_FIELDS = {
    "entry_id",
    "timestamp",
    "agent_name",
    "content",
    "word_count",
    "tags",
    "priority",
    "metadata",
    "updated_at",
}


@pytest.fixture
def server(settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    srv = build_server(settings, "shared", clock=clock)
    yield srv
    srv.service.storage.close()


# -- tools/list ---------------------------------------------------------------------------------
async def tools(client: Client) -> dict:
    return {t.name: t for t in (await client.list_tools()).tools}


async def test_tools_list_shows_exactly_the_nine_tools_of_the_spec(client):
    assert set(await tools(client)) == NINE_TOOLS


@pytest.mark.parametrize(
    ("tool", "read_only", "destructive", "idempotent"),
    [
        ("add_memory", False, False, False),
        ("read_memory", True, False, True),
        ("update_memory", False, False, True),
        ("delete_memory", False, True, True),
        ("get_memory", True, False, True),
        ("search_memory", True, False, True),
        ("get_memory_stats", True, False, True),
        ("clear_memory", False, True, True),
        ("health_check", True, False, True),
    ],
)
async def test_each_tool_is_annotated_as_the_spec_lists(client, tool, read_only, destructive, idempotent):
    hints = (await tools(client))[tool].annotations
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (read_only, destructive, idempotent)
    assert hints.open_world_hint is False


async def test_no_tool_declares_an_output_schema_because_answers_are_json_or_markdown_text(client):
    assert all(t.output_schema is None for t in (await tools(client)).values())


async def test_input_schemas_carry_the_specs_limits_and_defaults(client):
    listed = await tools(client)
    add_schema = listed["add_memory"].input_schema
    assert add_schema["required"] == ["agent_name", "content"]
    agent = add_schema["properties"]["agent_name"]
    assert (agent["minLength"], agent["maxLength"]) == (1, 100)
    assert add_schema["properties"]["tags"]["maxItems"] == 10
    assert add_schema["properties"]["priority"]["default"] == "medium"
    assert add_schema["properties"]["priority"]["enum"] == ["low", "medium", "high"]
    assert "200 words" in add_schema["properties"]["content"]["description"]
    read = listed["read_memory"].input_schema["properties"]
    assert read["response_format"]["default"] == "markdown"
    assert read["sort_order"]["default"] == "chronological"
    assert read["limit"]["default"] is None
    assert listed["get_memory"].input_schema["properties"]["response_format"]["default"] == "json"
    assert listed["get_memory_stats"].input_schema["properties"]["response_format"]["default"] == "json"
    query = listed["search_memory"].input_schema["properties"]["query"]
    assert (query["minLength"], query["maxLength"]) == (1, 200)
    assert listed["clear_memory"].input_schema["required"] == ["confirm"]
    assert listed["health_check"].input_schema["properties"] == {}


# -- add_memory ---------------------------------------------------------------------------------
async def test_the_specs_add_example_returns_exactly_its_fields(client, server):
    answer = await add(
        client,
        tags=["analysis", "insights", "user-behavior"],
        priority="high",
        metadata={"project": "user-research-2025", "confidence": 0.95, "data_points": 10000},
    )
    assert set(answer) == {
        "success", "entry_id", "entry_number", "timestamp", "agent_name", "word_count", "tags", "priority", "message",
    }  # fmt: skip
    assert uuid.UUID(answer["entry_id"]).version == 4
    assert answer["entry_number"] == 1
    assert answer["agent_name"] == "claude-alpha"
    assert answer["word_count"] == 10
    assert answer["tags"] == ["analysis", "insights", "user-behavior"]
    assert answer["priority"] == "high"
    assert answer["message"] == "Memory entry #1 added successfully by claude-alpha"
    assert answer["timestamp"] == "2026-01-15T12:00:00.000000Z"
    stored = server.service.get(answer["entry_id"])
    assert stored.metadata == {"project": "user-research-2025", "confidence": 0.95, "data_points": 10000}
    assert stored.agent_name == "claude-alpha" and stored.entry_number == 1


async def test_add_defaults_to_medium_priority_no_tags_and_empty_metadata(client, server):
    answer = await add(client, "Starting analysis...")
    assert (answer["priority"], answer["tags"]) == ("medium", [])
    stored = server.service.get(answer["entry_id"])
    assert stored.importance == BAND_IMPORTANCE[ImportanceBand.MEDIUM]
    assert stored.metadata == {}
    assert stored.auto_tags == ()  # the space shows the tags agents chose, nothing derived


async def test_entry_numbers_grow_by_one_and_are_never_reused_after_a_delete(client):
    numbers = [(await add(client, f"status {i}"))["entry_number"] for i in range(3)]
    assert numbers == [1, 2, 3]
    last = (await add(client, "status 3"))["entry_id"]
    await body(client, "delete_memory", entry_id=last)
    again = await add(client, "status after delete")
    assert again["entry_number"] == 5
    assert again["message"] == "Memory entry #5 added successfully by claude-alpha"


async def test_the_same_status_posted_twice_is_two_entries(client):
    first = await add(client, "Build is green", agent="ci-bot")
    second = await add(client, "Build is green", agent="ci-bot")
    assert first["entry_id"] != second["entry_id"]
    assert (await body(client, "read_memory", response_format="json"))["total_entries"] == 2


async def test_content_of_exactly_200_words_is_accepted_and_201_is_refused_without_a_trace(client, server):
    assert (await add(client, words(200)))["word_count"] == 200
    before = everything(server)
    message = await error(client, "add_memory", agent_name="a", content=words(201))
    assert "201 words" in message and "200" in message
    assert everything(server) == before
    assert (await add(client, "next"))["entry_number"] == 2  # the refused add took no number


async def test_words_are_what_whitespace_separates(client):
    assert (await add(client, "  one\ttwo\nthree   four-five  "))["word_count"] == 4


async def test_blank_content_is_refused(client, server):
    assert "content" in await error(client, "add_memory", agent_name="a", content="   \n ")
    assert "content" in await error(client, "add_memory", agent_name="a", content="")
    assert everything(server) == []


async def test_an_agent_name_of_100_characters_is_accepted_and_101_or_none_refused(client, server):
    assert (await add(client, agent="a" * 100))["agent_name"] == "a" * 100
    before = everything(server)
    for bad in ("a" * 101, "", "   "):
        assert "agent_name" in await error(client, "add_memory", agent_name=bad, content="hello")
    assert everything(server) == before


async def test_ten_tags_are_accepted_and_eleven_refused(client, server):
    ten = [f"t{i}" for i in range(10)]
    assert (await add(client, tags=ten))["tags"] == ten
    before = everything(server)
    assert "tags" in await error(client, "add_memory", agent_name="a", content="x", tags=[*ten, "t10"])
    assert everything(server) == before


@pytest.mark.parametrize(
    ("field", "value"), [("priority", "urgent"), ("metadata", ["not", "an", "object"]), ("tags", "solo")]
)
async def test_add_with_a_value_outside_the_schema_is_refused(client, server, field, value):
    message = await error(client, "add_memory", agent_name="a", content="x", **{field: value})
    assert field in message
    assert everything(server) == []


# -- read_memory --------------------------------------------------------------------------------
async def test_read_in_markdown_has_the_specs_layout(client):
    entry = await add(client, "Message content here", tags=["analysis", "complete"], priority="high")
    shown = await text(client, "read_memory")
    assert shown == (
        "# Shared Memory\n\nTotal entries: 1\n\n"
        "## Entry 1: claude-alpha\n"
        f"**ID**: `{entry['entry_id']}`\n"
        "**Time**: 2026-01-15T12:00:00.000000Z\n"
        "**Words**: 3/200\n"
        "**Priority**: high\n"
        "**Tags**: analysis, complete\n\n"
        "Message content here\n\n---\n\n"
    )


async def test_read_in_json_has_the_specs_entry_objects(client):
    entry = await add(client, "Message content here", tags=["tag1", "tag2"], priority="high", metadata={"k": 1})
    answer = await body(client, "read_memory", response_format="json")
    assert set(answer) == {"total_entries", "entries"}
    assert answer["total_entries"] == 1
    (shown,) = answer["entries"]
    assert shown == {
        "entry_id": entry["entry_id"],
        "timestamp": "2026-01-15T12:00:00.000000Z",
        "agent_name": "claude-alpha",
        "content": "Message content here",
        "word_count": 3,
        "tags": ["tag1", "tag2"],
        "priority": "high",
        "metadata": {"k": 1},
        "updated_at": None,
    }


async def test_an_empty_space_reads_as_zero_entries(client):
    assert (await text(client, "read_memory")).startswith("# Shared Memory\n\nTotal entries: 0\n")
    assert await body(client, "read_memory", response_format="json") == {"total_entries": 0, "entries": []}


async def fill(client: Client, clock: ManualClock) -> dict[str, str]:
    """Four entries a minute apart; returns their ids by name."""
    ids = {}
    for name, agent, tags, priority in [
        ("a1", "claude-alpha", ["analysis", "complete"], "high"),
        ("b1", "claude-beta", ["analysis"], "low"),
        ("a2", "claude-alpha", ["review"], "medium"),
        ("b2", "claude-beta", ["analysis", "complete"], "high"),
    ]:
        ids[name] = (await add(client, f"entry {name}", agent=agent, tags=tags, priority=priority))["entry_id"]
        clock.advance(minutes=1)
    return ids


async def read_ids(client: Client, **args) -> list[str]:
    answer = await body(client, "read_memory", response_format="json", **args)
    return [e["entry_id"] for e in answer["entries"]]


async def test_read_filters_by_agent_by_every_tag_given_and_by_priority(client, clock):
    ids = await fill(client, clock)
    assert await read_ids(client, agent_filter="claude-alpha") == [ids["a1"], ids["a2"]]
    assert await read_ids(client, tags=["analysis", "complete"]) == [ids["a1"], ids["b2"]]
    assert await read_ids(client, tags=["analysis"]) == [ids["a1"], ids["b1"], ids["b2"]]
    assert await read_ids(client, priority="high") == [ids["a1"], ids["b2"]]
    assert await read_ids(client, priority="medium") == [ids["a2"]]
    assert await read_ids(client, agent_filter="claude-beta", priority="low") == [ids["b1"]]
    assert await read_ids(client, agent_filter="nobody") == []


async def test_read_sorts_chronologically_in_reverse_or_by_priority(client, clock):
    ids = await fill(client, clock)
    assert await read_ids(client) == [ids["a1"], ids["b1"], ids["a2"], ids["b2"]]
    assert await read_ids(client, sort_order="reverse") == [ids["b2"], ids["a2"], ids["b1"], ids["a1"]]
    by_priority = await read_ids(client, sort_order="priority")
    assert set(by_priority[:2]) == {ids["a1"], ids["b2"]}
    assert by_priority[2:] == [ids["a2"], ids["b1"]]


async def test_the_specs_read_examples_work(client, clock):
    ids = await fill(client, clock)
    newest_high = await text(client, "read_memory", priority="high", sort_order="reverse", response_format="markdown")
    assert newest_high.index(ids["b2"]) < newest_high.index(ids["a1"])
    assert "Total entries: 2" in newest_high
    last = await read_ids(client, agent_filter="claude-alpha", limit=10, sort_order="reverse")
    assert last == [ids["a2"], ids["a1"]]
    assert await read_ids(client, tags=["analysis", "complete"]) == [ids["a1"], ids["b2"]]


async def test_limit_keeps_the_first_entries_of_the_order_while_the_total_counts_every_match(client, clock):
    ids = await fill(client, clock)
    answer = await body(client, "read_memory", response_format="json", limit=1, sort_order="reverse")
    assert answer["total_entries"] == 4
    assert [e["entry_id"] for e in answer["entries"]] == [ids["b2"]]
    assert len(await read_ids(client, limit=1000)) == 4


@pytest.mark.parametrize("limit", [0, 1001, -1])
async def test_a_read_limit_outside_1_to_1000_is_refused(client, limit):
    assert "limit" in await error(client, "read_memory", limit=limit)


@pytest.mark.parametrize(("field", "value"), [("sort_order", "alphabetical"), ("response_format", "xml")])
async def test_read_with_an_unknown_choice_is_refused(client, field, value):
    assert field in await error(client, "read_memory", **{field: value})


async def test_read_shows_only_what_agents_signed_not_memories_of_other_profiles(client, server):
    server.service.store("The user prefers dark mode")  # as the full profile would store it
    await add(client, "A signed entry")
    answer = await body(client, "read_memory", response_format="json")
    assert [e["content"] for e in answer["entries"]] == ["A signed entry"]


# -- update_memory ------------------------------------------------------------------------------
async def test_the_specs_update_example_sets_tags_and_priority(client, server, clock):
    entry_id = (await add(client, tags=["analysis"], priority="high"))["entry_id"]
    clock.advance(hours=1)
    answer = await body(
        client, "update_memory", entry_id=entry_id, tags=["analysis", "reviewed", "archived"], priority="low"
    )
    assert answer == {
        "success": True,
        "entry_id": entry_id,
        "updated_fields": ["tags", "priority"],
        "updated_at": "2026-01-15T13:00:00.000000Z",
        "message": f"Entry {entry_id} updated successfully",
    }
    shown = (await body(client, "get_memory", entry_id=entry_id))["entry"]
    assert (shown["tags"], shown["priority"], shown["content"]) == (
        ["analysis", "reviewed", "archived"],
        "low",
        EXAMPLE,
    )
    assert shown["updated_at"] == "2026-01-15T13:00:00.000000Z"


async def test_update_replaces_content_and_metadata(client):
    entry_id = (await add(client, metadata={"old": True}))["entry_id"]
    answer = await body(
        client, "update_memory", entry_id=entry_id, content="Updated analysis: Found 5 insights instead of 3.",
        metadata={"new": 1},
    )  # fmt: skip
    assert answer["updated_fields"] == ["content", "metadata"]
    shown = (await body(client, "get_memory", entry_id=entry_id))["entry"]
    assert shown["content"] == "Updated analysis: Found 5 insights instead of 3."
    assert shown["metadata"] == {"new": 1}
    assert shown["word_count"] == 8


async def test_the_same_update_twice_gives_the_same_result_and_one_new_version(client, server):
    entry_id = (await add(client))["entry_id"]
    first = await body(client, "update_memory", entry_id=entry_id, priority="low", tags=["done"])
    second = await body(client, "update_memory", entry_id=entry_id, priority="low", tags=["done"])
    assert first == second
    assert server.service.get(entry_id).version == 2


async def test_an_update_past_the_word_limit_or_with_eleven_tags_changes_nothing(client, server):
    entry_id = (await add(client))["entry_id"]
    before = everything(server)
    assert "201 words" in await error(client, "update_memory", entry_id=entry_id, content=words(201))
    assert "tags" in await error(client, "update_memory", entry_id=entry_id, tags=[f"t{i}" for i in range(11)])
    assert everything(server) == before
    assert (await body(client, "update_memory", entry_id=entry_id, content=words(200)))["success"] is True


async def test_an_update_with_no_field_is_refused(client, server):
    entry_id = (await add(client))["entry_id"]
    assert "no updates" in await error(client, "update_memory", entry_id=entry_id)
    assert server.service.get(entry_id).version == 1


# -- delete_memory ------------------------------------------------------------------------------
async def test_delete_returns_the_specs_fields_and_counts_what_remains(client, server):
    keep = (await add(client, "keep me"))["entry_id"]
    entry_id = (await add(client, "delete me", agent="claude-beta"))["entry_id"]
    answer = await body(client, "delete_memory", entry_id=entry_id)
    assert answer == {
        "success": True,
        "entry_id": entry_id,
        "agent_name": "claude-beta",
        "deleted_at": "2026-01-15T12:00:00.000000Z",
        "remaining_entries": 1,
        "message": f"Entry {entry_id} deleted successfully",
    }
    assert await read_ids(client) == [keep]
    assert server.service.get(entry_id).status is Status.FORGOTTEN  # soft: recoverable, nothing lost


async def test_deleting_twice_answers_the_same_and_changes_nothing_the_second_time(client, server, clock):
    entry_id = (await add(client))["entry_id"]
    first = await body(client, "delete_memory", entry_id=entry_id)
    before = everything(server)
    clock.advance(minutes=5)
    assert await body(client, "delete_memory", entry_id=entry_id) == first  # spec 003: idempotent
    assert everything(server) == before


async def test_a_deleted_entry_is_gone_for_every_other_tool(client):
    entry_id = (await add(client))["entry_id"]
    await body(client, "delete_memory", entry_id=entry_id)
    assert entry_id in await error(client, "get_memory", entry_id=entry_id)
    assert entry_id in await error(client, "update_memory", entry_id=entry_id, priority="low")


# -- get_memory ---------------------------------------------------------------------------------
async def test_get_answers_json_by_default_in_the_specs_shape(client):
    entry_id = (await add(client, tags=["tag1"], priority="high"))["entry_id"]
    answer = await body(client, "get_memory", entry_id=entry_id)
    assert set(answer) == {"success", "entry"}
    assert answer["success"] is True
    assert set(answer["entry"]) == ENTRY_FIELDS
    assert answer["entry"]["entry_id"] == entry_id
    assert answer == await body(client, "get_memory", entry_id=entry_id, response_format="json")


async def test_get_in_markdown_shows_the_entry_as_read_does(client):
    entry_id = (await add(client, "Message content"))["entry_id"]
    shown = await text(client, "get_memory", entry_id=entry_id, response_format="markdown")
    assert shown.startswith(f"## Entry 1: claude-alpha\n**ID**: `{entry_id}`\n")
    assert shown in await text(client, "read_memory")


@pytest.mark.parametrize("tool", ["get_memory", "update_memory", "delete_memory"])
async def test_an_entry_id_that_is_not_a_uuid_is_an_invalid_format_error(client, tool):
    args = {"priority": "low"} if tool == "update_memory" else {}
    message = await error(client, tool, entry_id="550e8400-not-a-uuid", **args)
    assert "invalid entry_id format" in message


@pytest.mark.parametrize("tool", ["get_memory", "update_memory", "delete_memory"])
async def test_an_unknown_entry_is_not_found(client, tool):
    args = {"priority": "low"} if tool == "update_memory" else {}
    missing = str(uuid.uuid4())
    assert f"no entry {missing}" in await error(client, tool, entry_id=missing, **args)


async def test_a_memory_no_agent_signed_is_not_an_entry_of_the_space(client, server):
    other = server.service.store("Stored through the full profile").memory.id
    assert "no entry" in await error(client, "get_memory", entry_id=other)
    assert "no entry" in await error(client, "delete_memory", entry_id=other)
    assert server.service.get(other).status is Status.ACTIVE


# -- search_memory ------------------------------------------------------------------------------
async def search_contents(client: Client, query: str, **args) -> list[str]:
    answer = await body(client, "search_memory", query=query, response_format="json", **args)
    assert answer["total_results"] == len(answer["entries"]) or "limit" in args
    return [e["content"] for e in answer["entries"]]


async def test_search_matches_content_agent_names_and_tags(client):
    await add(client, "Looked at user behavior", agent="claude-alpha", tags=["research"])
    await add(client, "Nothing to see", agent="analysis-bot")
    await add(client, "Plain note", agent="claude-beta", tags=["analysis"])
    await add(client, "Unrelated", agent="claude-gamma")
    assert await search_contents(client, "analysis") == ["Nothing to see", "Plain note"]
    assert await search_contents(client, "user behavior") == ["Looked at user behavior"]
    assert await search_contents(client, "RESEARCH") == ["Looked at user behavior"]


async def test_search_in_json_has_the_specs_fields(client):
    await add(client, "needs review now")
    answer = await body(client, "search_memory", query="needs review", response_format="json")
    assert set(answer) == {"success", "query", "total_results", "entries"}
    assert (answer["success"], answer["query"], answer["total_results"]) == (True, "needs review", 1)
    assert set(answer["entries"][0]) == ENTRY_FIELDS


async def test_search_answers_markdown_by_default(client):
    await add(client, "CRITICAL: disk full")
    shown = await text(client, "search_memory", query="critical")
    assert shown.startswith('# Search Results: "critical"\n\nFound 1 entries\n\n## Entry 1: claude-alpha\n')


async def test_case_sensitive_search_tells_case_apart(client):
    await add(client, "CRITICAL: disk full")
    await add(client, "critical path reviewed")
    assert await search_contents(client, "CRITICAL", case_sensitive=True) == ["CRITICAL: disk full"]
    assert await search_contents(client, "CRITICAL") == ["CRITICAL: disk full", "critical path reviewed"]


async def test_case_insensitive_search_folds_non_ascii_letters(client):
    await add(client, "Treffen in der Straße um acht")
    await add(client, "L'ÉTÉ arrive bientôt")
    await add(client, "ΣΟΦΙΑ wrote the summary")
    assert await search_contents(client, "STRASSE") == ["Treffen in der Straße um acht"]
    assert await search_contents(client, "été") == ["L'ÉTÉ arrive bientôt"]
    assert await search_contents(client, "σοφια") == ["ΣΟΦΙΑ wrote the summary"]
    assert await search_contents(client, "été", case_sensitive=True) == []


async def test_search_is_literal_so_wildcards_and_quotes_are_plain_characters(client):
    await add(client, "progress is 50% done")
    await add(client, "file_name.txt saved")
    await add(client, 'he said "ship it"')
    assert await search_contents(client, "%") == ["progress is 50% done"]
    assert await search_contents(client, "e_n") == ["file_name.txt saved"]
    assert await search_contents(client, '"ship') == ['he said "ship it"']


async def test_search_limit_keeps_the_first_matches_and_the_total_counts_all(client):
    for i in range(3):
        await add(client, f"match {i}")
    answer = await body(client, "search_memory", query="match", response_format="json", limit=2)
    assert answer["total_results"] == 3
    assert [e["content"] for e in answer["entries"]] == ["match 0", "match 1"]


async def test_a_search_query_of_200_characters_is_accepted_and_201_or_none_refused(client):
    assert (await body(client, "search_memory", query="q" * 200, response_format="json"))["total_results"] == 0
    for bad in ("q" * 201, "", "   "):
        assert "query" in await error(client, "search_memory", query=bad)
    for limit in (0, 1001):
        assert "limit" in await error(client, "search_memory", query="q", limit=limit)


async def test_search_leaves_out_deleted_entries_and_memories_of_other_profiles(client, server):
    server.service.store("analysis stored through full")
    gone = (await add(client, "analysis deleted"))["entry_id"]
    await body(client, "delete_memory", entry_id=gone)
    await add(client, "analysis kept")
    assert await search_contents(client, "analysis") == ["analysis kept"]


# -- get_memory_stats ---------------------------------------------------------------------------
async def test_stats_report_every_field_of_the_spec_from_the_store(client, server, clock):
    await add(client, "one two three", agent="claude-alpha", tags=["analysis", "complete"], priority="high")
    clock.advance(days=1)
    await add(client, "four five", agent="claude-alpha", tags=["analysis"], priority="low")
    clock.advance(days=1)
    await add(client, "six", agent="claude-beta", tags=["review"])
    server.service.store("a memory of the full profile, not counted")
    stats = await body(client, "get_memory_stats")
    size = server.service.storage.size_bytes()  # SQLite: the file with its WAL; PostgreSQL: the schema's tables
    assert stats == {
        "success": True,
        "total_entries": 3,
        "total_words": 6,
        "average_words_per_entry": 2.0,
        "agent_activity": {"claude-alpha": 2, "claude-beta": 1},
        "top_agents": [["claude-alpha", 2], ["claude-beta", 1]],
        "tag_usage": {"analysis": 2, "complete": 1, "review": 1},
        "top_tags": [["analysis", 2], ["complete", 1], ["review", 1]],
        "priority_distribution": {"low": 1, "medium": 1, "high": 1},
        "date_range": {"earliest": "2026-01-15T12:00:00.000000Z", "latest": "2026-01-17T12:00:00.000000Z"},
        "storage_size_bytes": size,
        "storage_size_kb": round(size / 1024, 2),
        "max_entries": 1000,
        "entries_until_rotation": 997,
    }
    assert size > 0


async def test_stats_of_an_empty_space_are_zero_not_an_error(client):
    stats = await body(client, "get_memory_stats", response_format="json")
    assert (stats["total_entries"], stats["average_words_per_entry"], stats["entries_until_rotation"]) == (0, 0.0, 1000)
    assert stats["date_range"] == {"earliest": None, "latest": None}
    assert stats["priority_distribution"] == {"low": 0, "medium": 0, "high": 0}


async def test_stats_in_markdown_are_a_readable_report(client):
    await add(client, "one two", agent="claude-alpha", tags=["analysis"])
    report = await text(client, "get_memory_stats", response_format="markdown")
    assert report.startswith("# Shared Memory Statistics\n")
    assert "**Total entries**: 1 of 1000 (999 until rotation)" in report
    assert "1. claude-alpha: 1" in report and "1. analysis: 1" in report


# -- clear_memory -------------------------------------------------------------------------------
async def test_clear_without_confirmation_is_refused_and_changes_nothing(client, server):
    await add(client)
    before = everything(server)
    message = await error(client, "clear_memory", confirm=False)
    assert message.startswith("Confirmation required")
    assert everything(server) == before
    assert not (server.service.shared_limits.folder / "backups").exists()
    assert "confirm" in await error(client, "clear_memory")


async def test_clear_backs_up_then_removes_every_entry_of_the_space_only(client, server, clock):
    clock.advance(hours=3)
    for i in range(3):
        await add(client, f"entry {i}")
    other = server.service.store("a memory of the full profile").memory.id
    answer = await body(client, "clear_memory", confirm=True)
    backup = answer.pop("backup_file")
    assert answer == {
        "success": True,
        "entries_cleared": 3,
        "cleared_at": "2026-01-15T15:00:00.000000Z",
        "message": "Successfully cleared 3 memory entries. Backup created.",
    }
    assert backup.startswith("backups/")  # relative to the store folder, which callers are not shown
    saved = json.loads((server.service.shared_limits.folder / backup).read_text(encoding="utf-8"))
    assert [e["content"] for e in saved["entries"]] == ["entry 0", "entry 1", "entry 2"]
    assert (await body(client, "read_memory", response_format="json"))["total_entries"] == 0
    assert server.service.get(other).status is Status.ACTIVE
    assert {m.status for m in everything(server) if m.agent_name} == {Status.FORGOTTEN}


async def test_clearing_an_empty_space_writes_no_backup(client, server):
    answer = await body(client, "clear_memory", confirm=True)
    assert (answer["entries_cleared"], answer["backup_file"]) == (0, None)
    assert answer["message"] == "Successfully cleared 0 memory entries. Nothing to back up."


async def test_each_user_keeps_their_own_newest_backups_whatever_others_clear(client, server, clock):
    with acting_as(Caller("alice")):
        await add(client, "alice's entry")
        alices = (await body(client, "clear_memory", confirm=True))["backup_file"]
    bobs = []
    for i in range(KEEP_BACKUPS + 1):
        clock.advance(seconds=1)
        with acting_as(Caller("bob")):
            await add(client, f"bob's entry {i}")
            bobs.append((await body(client, "clear_memory", confirm=True))["backup_file"])
    folder = server.service.shared_limits.folder
    kept = sorted(f"backups/{p.name}" for p in (folder / "backups").glob("shared-*.json"))
    assert kept == sorted([alices, *bobs[1:]])  # bob's eleventh clear dropped bob's oldest, not alice's


async def test_a_reader_clearing_or_deleting_or_updating_is_forbidden_and_changes_nothing(client, server):
    with acting_as(Caller("carol")):
        kept = (await add(client, "carol's entry", priority="low"))["entry_id"]
        deleted = (await add(client, "carol's deleted entry"))["entry_id"]
        await body(client, "delete_memory", entry_id=deleted)
    before = everything(server)
    calls = [
        ("clear_memory", {"confirm": True}),
        ("delete_memory", {"entry_id": deleted}),  # deleted already: a member is told it is done
        ("update_memory", {"entry_id": kept, "priority": "low"}),  # as it is: a member is told it is done
        ("update_memory", {"entry_id": kept, "content": "carol's entry"}),
    ]
    for reader in (Caller("carol", Role.READER), Caller("dave", Role.READER)):  # with entries of their own, and none
        for tool, args in calls[: 1 if reader.user_id == "dave" else None]:
            with acting_as(reader):
                assert "read-only key" in await error(client, tool, **args)
    assert everything(server) == before
    assert not (server.service.shared_limits.folder / "backups").exists()


# -- health_check -------------------------------------------------------------------------------
async def test_health_check_runs_each_check_and_reports_all_operational(client, server, backend):
    await add(client)
    health = await body(client, "health_check")
    assert set(health) == {"success", "timestamp", "checks", "message"}
    assert (health["success"], health["message"]) == (True, "All systems operational")
    checks = health["checks"]
    assert set(checks) == {"storage_file", "file_locking", "json_parsing", "backup_system", "embeddings"}
    assert all(c["status"] == "ok" for c in checks.values())
    storage = server.service.storage
    # The store is named, not where it lives on disk: callers of a server need not know its layout.
    where = "memory.db" if backend == "sqlite" else "schema mnemo_default"
    assert (checks["storage_file"]["store"], checks["storage_file"]["path"]) == ("default", where)
    assert str(server.service.shared_limits.folder) not in json.dumps(health)
    assert checks["storage_file"]["exists"] is True
    assert checks["storage_file"]["size_bytes"] == storage.size_bytes()
    assert checks["file_locking"]["message"].startswith("File locking operational")
    assert checks["json_parsing"]["entry_count"] == 1
    assert "integrity check" in checks["json_parsing"]["message"]
    assert checks["backup_system"]["backup_dir"] == "backups"
    assert checks["backup_system"]["backup_count"] == 0
    assert checks["embeddings"]["meaning_search"] is False  # this server runs on words only


# -- across profiles ----------------------------------------------------------------------------
async def test_an_entry_added_through_shared_is_recalled_through_full(client, settings, clock):
    entry_id = (await add(client, "The deployment window moved to Thursday night", agent="ops-bot"))["entry_id"]
    full = build_server(settings, "full", clock=clock)
    try:
        async with Client(full, raise_exceptions=True) as other:
            result = await other.call_tool("recall_memories", {"query": "deployment window"})
        assert not result.is_error
        assert [m["memory_id"] for m in result.structured_content["memories"]] == [entry_id]
    finally:
        full.service.storage.close()
