"""Every value that enters the engine is bounded: the caller's mistakes are refused in each profile's
own invalid-input shape, change nothing, and never reach storage as a crash."""

from __future__ import annotations

import base64
import json

import pytest

from bounds_calls import (  # noqa: F401  # profile_server is the ``server`` fixture
    ok_json,
    ok_text,
    profile_server,
    refusal,
    refused_as_invalid,
    rows,
    store_call,
)
from mnemo.bounds import MAX_FILTER_VALUES, MAX_METADATA_CHARS, MAX_OFFSET, MAX_TAG_CHARS
from mnemo.engine.shared_space import SharedSpace
from mnemo.errors import InvalidInput

PROFILES = ["full", "agent", "memento", "shared", "stores"]
NOT_REPRESENTABLE = "9999-12-31T23:59:59-14:00"  # in UTC, past the year 9999
BEFORE_1970 = "0999-06-01T00:00:00Z"
HUGE = 2**62
BIG_TAG = "t" * (MAX_TAG_CHARS + 1)


async def store_one(client, profile: str) -> str:
    tool, args = store_call(profile)
    return await ok_text(client, tool, **args)


# -- dates ---------------------------------------------------------------------------------
@pytest.mark.parametrize("server", ["full"], indirect=True)
@pytest.mark.parametrize("timestamp", [BEFORE_1970, NOT_REPRESENTABLE, "1969-12-31T23:59:59Z"])
async def test_a_timestamp_outside_the_years_1970_to_9999_is_refused_and_nothing_is_stored(client, settings, timestamp):
    before = rows(settings)
    message = await refused_as_invalid(client, "store_memory", content="An old note", context={"timestamp": timestamp})
    assert "1970" in message and "9999" in message
    assert rows(settings) == before


@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_an_expiry_past_the_last_representable_moment_is_refused_on_store_and_update(client, settings):
    await refused_as_invalid(client, "store_memory", content="Keep this", metadata={"expires_at": NOT_REPRESENTABLE})
    stored = await ok_json(client, "store_memory", content="Keep this")
    await refused_as_invalid(
        client, "update_memory", memory_id=stored["memory_id"], updates={"expires_at": NOT_REPRESENTABLE}
    )


@pytest.mark.parametrize("server", ["stores"], indirect=True)
async def test_stores_refuses_an_expiry_out_of_range_as_invalid_params(client):
    tool, args = store_call("stores", expires_at=NOT_REPRESENTABLE)
    await refused_as_invalid(client, tool, **args)
    await store_one(client, "stores")
    await refused_as_invalid(client, "update_memory", store="default", path="office/plants", expires_at="10000-01-01")


@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_a_date_range_before_1970_is_refused_rather_than_compared_as_text(client):
    await ok_json(client, "store_memory", content="Today's note about the garden")
    await refused_as_invalid(client, "list_memories", filters={"date_range": {"end": BEFORE_1970}})
    await refused_as_invalid(client, "recall_memories", query="garden", filters={"date_range": {"end": BEFORE_1970}})
    await refused_as_invalid(client, "get_memory_stats", scope="global", time_range={"start": NOT_REPRESENTABLE})


@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_a_range_ending_in_1970_keeps_none_of_todays_memories(client):
    await ok_json(client, "store_memory", content="Today's note about the garden")
    page = await ok_json(client, "list_memories", filters={"date_range": {"end": "1970-01-02T00:00:00Z"}})
    assert page["total_count"] == 0


@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_trends_up_to_the_last_day_of_year_9999_are_answered(client):
    await ok_json(client, "store_memory", content="A note about the garden")
    for granularity in ("hour", "week", "month"):
        window = {"start": "9999-12-01T00:00:00Z", "end": "9999-12-31T23:59:59Z"}
        if granularity == "hour":
            window["start"] = "9999-12-31T00:00:00Z"
        stats = await ok_json(
            client, "get_memory_stats", scope="global", time_range=window, include_trends=True, granularity=granularity
        )
        assert stats["trends"]["memory_count"]


@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_a_question_naming_a_time_before_year_one_is_still_answered(client):
    await ok_json(client, "store_memory", content="A note about the garden")
    await ok_json(client, "recall_memories", query="the garden 99999999999 days ago")


# -- huge integers -------------------------------------------------------------------------
@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_full_refuses_offsets_past_its_maximum_in_recall_and_list(client):
    message = await refused_as_invalid(client, "recall_memories", query="garden", offset=HUGE)
    assert str(MAX_OFFSET) in message
    await refused_as_invalid(client, "list_memories", pagination={"offset": HUGE})
    await refused_as_invalid(client, "list_memories", pagination={"offset": MAX_OFFSET + 1})
    assert (await ok_json(client, "list_memories", pagination={"offset": MAX_OFFSET}))["returned_count"] == 0


@pytest.mark.parametrize("server", ["agent"], indirect=True)
async def test_agent_refuses_offsets_past_its_maximum(client):
    await refused_as_invalid(client, "query_memories", offset=HUGE)
    await refused_as_invalid(client, "query_memories", search="plants", offset=HUGE)


@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_a_forged_cursor_with_integers_sqlite_cannot_hold_is_refused(client):
    for _ in range(3):
        await ok_json(client, "store_memory", content=f"Note number {_} about the garden")
    page = await ok_json(client, "list_memories", pagination={"limit": 1})
    raw = json.loads(base64.urlsafe_b64decode(page["pagination"]["next_cursor"] + "=="))
    for forged in ({**raw, "k": 2**70}, {**raw, "v": 2**70}, {**raw, "v": [1, 2]}):
        cursor = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode().rstrip("=")
        await refused_as_invalid(client, "list_memories", pagination={"limit": 1, "cursor": cursor})


# -- too many filter values ------------------------------------------------------------------
MANY_TAGS = [f"tag{i}" for i in range(1_000)]


@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_full_answers_too_many_filter_values_with_query_too_complex_naming_the_limit(client):
    for tool, args in (("list_memories", {"filters": {"tags": MANY_TAGS}}), ("recall_memories", {"query": "x",
                       "filters": {"tags": MANY_TAGS}})):  # fmt: skip
        code, message = await refusal(client, tool, **args)
        assert code == "QUERY_TOO_COMPLEX"
        assert str(MAX_FILTER_VALUES) in message


@pytest.mark.parametrize(
    ("server", "tool", "args"),
    [
        ("agent", "query_memories", {"tags": MANY_TAGS}),
        ("agent", "query_memories", {"tags": MANY_TAGS, "search": "plants"}),
        ("shared", "read_memory", {"tags": MANY_TAGS}),
    ],
    indirect=["server"],
)
async def test_other_profiles_answer_too_many_filter_values_as_invalid_input_naming_the_limit(client, tool, args):
    assert str(MAX_FILTER_VALUES) in await refused_as_invalid(client, tool, **args)


# -- "null" is a value ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("server", "tool", "args", "count_key"),
    [
        ("agent", "query_memories", {"category": "null"}, "total"),
        ("memento", "list_recent_memories", {"subject_filter": "null"}, "memories"),
        ("memento", "search_memories", {"query": "plants", "subject_filter": "null", "threshold": 0}, "memories"),
        ("memento", "get_memory_stats", {"subject_filter": "null"}, "total_memories"),
        ("shared", "read_memory", {"agent_filter": "null", "response_format": "json"}, "total_entries"),
    ],
    indirect=["server"],
)
async def test_the_string_null_filters_literally_instead_of_being_dropped(client, server, tool, args, count_key):
    await store_one(client, server.profile.name)
    found = (await ok_json(client, tool, **args))[count_key]
    assert found in (0, [])


@pytest.mark.parametrize("server", ["agent"], indirect=True)
async def test_the_string_null_is_refused_where_the_field_takes_no_text(client):
    await refused_as_invalid(client, "query_memories", type="null")
    await refused_as_invalid(client, "query_memories", tags="null")


# -- strict booleans -----------------------------------------------------------------------
@pytest.mark.parametrize("server", ["shared"], indirect=True)
@pytest.mark.parametrize("confirm", [1, "true", "yes"])
async def test_clear_memory_needs_the_boolean_true_and_clears_nothing_otherwise(client, settings, confirm):
    await store_one(client, "shared")
    before = rows(settings)
    await refused_as_invalid(client, "clear_memory", confirm=confirm)
    assert rows(settings) == before


@pytest.mark.parametrize(
    ("server", "tool", "args"),
    [
        ("agent", "delete_memory", {"id": "0b6f3c1e-8d2a-4f5b-9c7d-1e2f3a4b5c6d", "permanent": 1}),
        ("full", "recall_memories", {"query": "plants", "include_archived": "true"}),
        ("memento", "update_memory", {"memory_id": "x", "mark_outdated": 1}),
        ("stores", "get_memory", {"store": "default", "path": "a/b", "include_expired": "true"}),
        ("shared", "search_memory", {"query": "plants", "case_sensitive": 0}),
    ],
    indirect=["server"],
)
async def test_boolean_arguments_take_only_true_or_false(client, tool, args):
    await refused_as_invalid(client, tool, **args)


# -- sizes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("server", PROFILES, indirect=True)
async def test_a_tag_longer_than_the_limit_is_refused_and_nothing_is_stored(client, server, settings):
    before = rows(settings)
    tool, args = store_call(server.profile.name, tags=["fine", BIG_TAG])
    await refused_as_invalid(client, tool, **args)
    assert rows(settings) == before


@pytest.mark.parametrize("server", ["full"], indirect=True)
async def test_full_bounds_tag_edits_context_ids_and_related_ids(client):
    await refused_as_invalid(client, "store_memory", content="x y", metadata={"tags": [BIG_TAG]})
    await refused_as_invalid(client, "store_memory", content="x y", context={"user_id": "u" * 257})
    await refused_as_invalid(client, "store_memory", content="x y", related_memory_ids=["a"] * 101)
    stored = await ok_json(client, "store_memory", content="A note about the garden")
    await refused_as_invalid(
        client, "update_memory", memory_id=stored["memory_id"], updates={"tags": {"add": [BIG_TAG]}}
    )
    await refused_as_invalid(client, "recall_memories", query="garden", filters={"user_id": "u" * 1_001})


@pytest.mark.parametrize("server", ["shared"], indirect=True)
@pytest.mark.parametrize(
    "metadata",
    [{"blob": "x" * (MAX_METADATA_CHARS + 1)}, {"deep": json.loads("[" * 11 + "]" * 11)}, {"key\x00": 1}],
    ids=["too-large", "too-deep", "nul-in-key"],
)
async def test_shared_refuses_metadata_too_large_or_too_deep_and_stores_nothing(client, settings, metadata):
    before = rows(settings)
    await refused_as_invalid(client, "add_memory", agent_name="a", content="status ok", metadata=metadata)
    assert rows(settings) == before
    added = json.loads(await ok_text(client, "add_memory", agent_name="a", content="status ok"))
    await refused_as_invalid(client, "update_memory", entry_id=added["entry_id"], metadata=metadata)


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_the_engine_refuses_metadata_numbers_json_cannot_carry_in_every_profile(service, number):
    # The SDK's client sends NaN as null, so this is the engine that every profile's writes go through.
    with pytest.raises(InvalidInput, match="NaN or Infinity"):
        SharedSpace(service).add("a", "status ok", metadata={"nested": [{"score": number}]})
    with pytest.raises(InvalidInput, match="NaN or Infinity"):
        service.store("status ok", metadata={"score": number})
    memory = service.store("status ok").memory
    with pytest.raises(InvalidInput, match="NaN or Infinity"):
        service.update(memory.id, metadata={"score": number})


@pytest.mark.parametrize("server", ["shared"], indirect=True)
async def test_an_entry_id_of_a_megabyte_is_refused_without_being_echoed(client):
    message = await refused_as_invalid(client, "get_memory", entry_id="e" * 1_000_000)
    assert len(message) < 1_000


# -- NUL and lone surrogates ---------------------------------------------------------------
@pytest.mark.parametrize("server", PROFILES, indirect=True)
@pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "lone-surrogate"])
async def test_nul_and_lone_surrogates_are_refused_in_content_and_tags(client, server, settings, bad):
    before = rows(settings)
    tool, args = store_call(server.profile.name)
    await refused_as_invalid(client, tool, **{**args, "content": f"Water the plants{bad} on Mondays"})
    await refused_as_invalid(client, tool, **store_call(server.profile.name, tags=[f"plants{bad}"])[1])
    assert rows(settings) == before
    await ok_text(client, tool, **args)  # the store still takes a clean call
