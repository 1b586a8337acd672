"""Reading never fails on what a store holds: rows an older mnemo (or another program) wrote with
dates out of range, NaN in metadata or huge tags still list, recall and count in every profile."""

from __future__ import annotations

import json

import pytest

from bounds_calls import ok_json, ok_text, profile_server, store_call, write_directly  # noqa: F401
from mnemo.profiles.shared import CHARACTER_LIMIT

OUT_OF_RANGE = [
    "999-01-01T00:00:00.000000Z",  # what strftime wrote for the year 999: unpadded
    "10000-01-01T00:00:00.000000Z",
    "not a date",
]

# Every reading call of each profile, as (tool, arguments).
READS = {
    "full": [
        ("list_memories", {}),
        ("list_memories", {"sort": {"field": "created_at", "order": "asc"}, "include_stats": True}),
        ("recall_memories", {"query": "plants"}),
        ("get_memory_stats", {"scope": "global", "include_trends": True}),
    ],
    "agent": [("query_memories", {}), ("query_memories", {"search": "plants"}), ("get_memory_stats", {})],
    "memento": [
        ("list_recent_memories", {}),
        ("search_memories", {"query": "plants", "threshold": 0}),
        ("get_memory_stats", {}),
    ],
    "shared": [
        ("read_memory", {"response_format": "json"}),
        ("read_memory", {}),
        ("search_memory", {"query": "plants", "response_format": "json"}),
        ("get_memory_stats", {}),
    ],
    "stores": [
        ("list_memories", {"store": "default", "category": "office"}),
        ("get_memory", {"store": "default", "path": "office/plants", "include_expired": True}),
    ],
}


@pytest.mark.parametrize("server", list(READS), indirect=True)
@pytest.mark.parametrize("stored", OUT_OF_RANGE)
async def test_a_row_with_a_date_out_of_range_still_lists_recalls_and_counts(client, server, settings, stored):
    tool, args = store_call(server.profile.name)
    await ok_text(client, tool, **args)
    write_directly(
        settings,
        "UPDATE memories SET created_at = ?, updated_at = ?, accessed_at = ?, expires_at = ?, metadata = ?",
        stored, stored, stored, stored, '{"score": NaN, "limit": Infinity}',
    )  # fmt: skip
    for tool, args in READS[server.profile.name]:
        await ok_text(client, tool, **args)


@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_a_date_out_of_range_reads_as_the_nearest_date_mnemo_can_hold(client, settings):
    await ok_json(client, "store_memory", content="The office plants need water on Mondays")
    write_directly(settings, "UPDATE memories SET created_at = ?", "999-01-01T00:00:00.000000Z")
    (listed,) = (await ok_json(client, "list_memories"))["memories"]
    assert listed["created_at"] == "1970-01-01T00:00:00.000000Z"


@pytest.mark.parametrize("server", ["shared"], indirect=True)
async def test_nan_stored_in_metadata_comes_back_as_json_null(client, settings):
    added = json.loads(await ok_text(client, "add_memory", agent_name="a", content="status ok"))
    write_directly(settings, "UPDATE memories SET metadata = ?", '{"score": NaN, "more": [-Infinity]}')
    text = await ok_text(client, "get_memory", entry_id=added["entry_id"])
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["entry"]["metadata"] == {"score": None, "more": [None]}


@pytest.mark.parametrize("server", ["shared"], indirect=True)
async def test_shared_answers_stay_within_the_cap_for_entries_stored_with_huge_tags_and_metadata(client, settings):
    added = json.loads(await ok_text(client, "add_memory", agent_name="a", content="status ok"))
    write_directly(
        settings,
        "UPDATE memories SET tags = ?, metadata = ?",
        json.dumps([f"{i}" + "t" * 100_000 for i in range(20)]),
        json.dumps({"blob": "m" * 100_000}),
    )
    for tool, args in [
        ("get_memory", {"entry_id": added["entry_id"]}),
        ("get_memory", {"entry_id": added["entry_id"], "response_format": "markdown"}),
        ("read_memory", {"response_format": "json"}),
        ("read_memory", {}),
    ]:
        text = await ok_text(client, tool, **args)
        assert len(text) <= CHARACTER_LIMIT, tool
        if args.get("response_format", "json" if tool == "get_memory" else "markdown") == "json":
            assert json.loads(text)["truncated"] is True
