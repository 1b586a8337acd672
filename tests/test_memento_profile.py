"""The `memento` profile's contract with spec 001, through an in-memory MCP client.

The tool list, annotations and input schemas; every "Example Usage" of the spec; each limit at its
edge and one past it; each error code; and that a rejected call leaves the store as it was. Recall
here is by words (conftest's settings have no model); meaning is tested in test_memento_search.py.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta
from typing import Any, get_args

import pytest
from mcp import Client

from conftest import START
from mcp_calls import structured as call
from mnemo import errors
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.model import MEMENTO_CATEGORIES, to_iso
from mnemo.profiles import get_profile
from mnemo.profiles.memento import MementoCategory, error_code
from mnemo.serve.server import ProfileServer, build_server
from spec001 import SPEC_CODES, error

pytestmark = pytest.mark.every_backend  # every profile on SQLite and PostgreSQL

CATEGORIES = ["preference", "restriction", "fact", "skill", "relationship", "goal", "history", "context"]
FIVE_TOOLS = {"store_memory", "search_memories", "list_recent_memories", "update_memory", "get_memory_stats"}
MEMORY_FIELDS = {"id", "content", "subject", "category", "tags", "confidence", "created_at"}
EXAMPLE = {
    "content": "Emma is lactose intolerant",
    "subject": "Emma",
    "category": "restriction",
    "tags": ["dietary", "health"],
    "confidence": 1.0,
}


@pytest.fixture
def server(settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    srv = build_server(settings, "memento", clock=clock)
    yield srv
    srv.service.storage.close()


async def store(client: Client, content: str, subject: str = "Emma", category: str = "fact", **args: Any) -> str:
    body = await call(client, "store_memory", content=content, subject=subject, category=category, **args)
    return body["id"]


async def recent(client: Client, **args: Any) -> list[dict[str, Any]]:
    return (await call(client, "list_recent_memories", limit=50, **args))["memories"]


async def search(client: Client, query: str, **args: Any) -> list[dict[str, Any]]:
    return (await call(client, "search_memories", query=query, **args))["memories"]


# -- tools/list, schemas, annotations, instructions ----------------------------------------
async def tools_by_name(client: Client) -> dict[str, Any]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_tools_list_shows_exactly_the_five_tools_of_spec_001(client: Client):
    assert set(await tools_by_name(client)) == FIVE_TOOLS


async def test_annotations_say_which_tools_write_and_that_none_destroys_or_reaches_outside(client: Client):
    tools = await tools_by_name(client)
    for name, tool in tools.items():
        a = tool.annotations
        # search_memories counts what it returns as accessed: a write, repeated to a further effect
        assert a.read_only_hint is (name not in {"store_memory", "update_memory", "search_memories"}), name
        assert a.destructive_hint is False, name
        assert a.open_world_hint is False, name
        # Storing a fact twice returns the first; the same update twice changes nothing the second time.
        assert a.idempotent_hint is (name != "search_memories"), name


async def test_input_schemas_carry_the_specs_fields_enums_limits_and_defaults(client: Client):
    tools = {name: tool.input_schema for name, tool in (await tools_by_name(client)).items()}
    assert set(tools["store_memory"]["required"]) == {"content", "subject", "category"}
    assert set(tools["store_memory"]["properties"]) == {"content", "subject", "category", "tags", "confidence"}
    assert tools["store_memory"]["properties"]["category"]["enum"] == CATEGORIES
    confidence = tools["store_memory"]["properties"]["confidence"]
    assert (confidence["minimum"], confidence["maximum"], confidence["default"]) == (0, 1, 1.0)

    assert tools["search_memories"]["required"] == ["query"]
    props = tools["search_memories"]["properties"]
    assert set(props) == {"query", "subject_filter", "category_filter", "limit", "threshold"}
    assert props["category_filter"]["enum"] == CATEGORIES
    assert (props["limit"]["minimum"], props["limit"]["maximum"], props["limit"]["default"]) == (1, 20, 5)
    threshold = props["threshold"]
    assert (threshold["minimum"], threshold["maximum"], threshold["default"]) == (0, 1, 0.7)

    props = tools["list_recent_memories"]["properties"]
    assert set(props) == {"limit", "subject_filter"}
    assert (props["limit"]["minimum"], props["limit"]["maximum"], props["limit"]["default"]) == (1, 50, 10)
    assert "required" not in tools["list_recent_memories"]

    assert tools["update_memory"]["required"] == ["memory_id"]
    assert set(tools["update_memory"]["properties"]) == {"memory_id", "new_content", "mark_outdated", "reason"}
    assert tools["update_memory"]["properties"]["mark_outdated"]["type"] == "boolean"

    assert set(tools["get_memory_stats"]["properties"]) == {"subject_filter"}
    assert "required" not in tools["get_memory_stats"]


async def test_tool_descriptions_are_the_specs(client: Client):
    tools = await tools_by_name(client)
    assert tools["store_memory"].description.startswith(
        "Store a new fact or memory about a person, preference, or situation. Use this when you learn something "
        "new that should be remembered for future conversations."
    )
    assert tools["search_memories"].description.startswith("Search for relevant memories based on a query.")
    assert tools["update_memory"].description.startswith("Update an existing memory when information changes")


def test_the_schema_enum_is_the_vocabulary_the_model_maps():
    assert list(get_args(MementoCategory)) == list(MEMENTO_CATEGORIES) == CATEGORIES


async def test_the_servers_instructions_carry_the_specs_usage_guidelines_for_llms(client: Client):
    instructions = client.instructions
    assert instructions is not None
    for line in (
        "Store when users explicitly share facts about themselves or others",
        "Store when users correct previous information",
        "Store conclusions from successful interactions",
        "Before making recommendations that depend on preferences or restrictions",
        'When users ask "Do you remember..." or similar queries',
        "Keep memories atomic - one fact per memory",
        'Maintain consistent subject naming (e.g., always "Emma", not sometimes "Emma" and sometimes "Gordon\'s '
        'daughter")',
    ):
        assert line in instructions


# -- store_memory --------------------------------------------------------------------------
async def test_the_specs_store_example_returns_the_stored_memory(client: Client):
    body = await call(client, "store_memory", **EXAMPLE)
    assert uuid.UUID(body["id"]).version == 4
    assert body == {
        "id": body["id"],
        "content": "Emma is lactose intolerant",
        "subject": "Emma",
        "category": "restriction",
        "tags": ["dietary", "health"],
        "confidence": 1.0,
        "created_at": to_iso(START),
        "already_stored": False,
    }
    [listed] = await recent(client)
    assert listed["id"] == body["id"] and listed["status"] == "active"


async def test_confidence_defaults_to_one_for_explicitly_stated_facts(client: Client):
    body = await call(client, "store_memory", content="Liam plays the cello", subject="Liam", category="skill")
    assert body["confidence"] == 1.0
    assert body["tags"] == []


@pytest.mark.parametrize("confidence", [0, 0.0, 0.35, 1])
async def test_confidence_is_kept_from_zero_to_one(client: Client, confidence: float):
    body = await call(client, "store_memory", content="Jake may like jazz", subject="Jake", category="preference",
                      confidence=confidence)  # fmt: skip
    assert body["confidence"] == confidence


@pytest.mark.parametrize("category", CATEGORIES)
async def test_every_category_of_the_spec_is_stored_and_shown_as_given(client: Client, category: str):
    body = await call(client, "store_memory", content=f"A {category} about Gordon", subject="Gordon", category=category)
    assert body["category"] == category
    [listed] = await recent(client)
    assert listed["category"] == category
    stats = await call(client, "get_memory_stats")
    assert stats["by_category"][category] == 1


async def test_emma_spelt_three_ways_is_one_subject_spelt_as_first_stored(client: Client):
    await store(client, "Emma is lactose intolerant", subject="Emma")
    second = await call(client, "store_memory", content="Emma likes green", subject="emma", category="preference")
    third = await call(client, "store_memory", content="Emma swims", subject="  Emma ", category="skill")
    assert second["subject"] == third["subject"] == "Emma"
    assert (await call(client, "get_memory_stats"))["by_subject"] == {"Emma": 3}
    assert len(await recent(client, subject_filter=" EMMA ")) == 3


async def test_storing_the_same_fact_again_returns_the_memory_already_stored(client: Client):
    first = await call(client, "store_memory", **EXAMPLE)
    again = await call(client, "store_memory", **{**EXAMPLE, "content": "emma is  lactose intolerant.",
                                                  "subject": " emma ", "tags": ["other"]})  # fmt: skip
    assert again["already_stored"] is True
    assert {k: v for k, v in again.items() if k != "already_stored"} == {
        k: v for k, v in first.items() if k != "already_stored"
    }
    assert len(await recent(client)) == 1


async def test_a_fact_in_another_word_order_is_the_memory_already_stored_for_its_subject_only(
    settings: Settings, clock: ManualClock
):
    # With vectors (the fake model gives words in any order one vector), so that the near-duplicate
    # check, not the exact one, finds the stored fact and reads its subject from the store.
    server = ProfileServer(get_profile("memento"), open_service(settings, clock=clock, embedder=FakeEmbedder()))
    try:
        async with Client(server, raise_exceptions=True) as client:
            first = await store(client, "Emma has been lactose intolerant since 2019", subject="Emma")
            rewrite = {"content": "Since 2019 Emma has been lactose intolerant", "category": "fact"}
            again = await call(client, "store_memory", **rewrite, subject="emma")
            assert again["already_stored"] is True and again["id"] == first
            other = await call(client, "store_memory", **rewrite, subject="Liam")
            assert other["already_stored"] is False and other["id"] != first
    finally:
        server.close()


async def test_the_same_fact_about_another_subject_is_another_memory(client: Client):
    first = await store(client, "Is lactose intolerant", subject="Emma")
    second = await call(client, "store_memory", content="Is lactose intolerant", subject="Liam", category="fact")
    assert second["already_stored"] is False and second["id"] != first
    assert len(await recent(client)) == 2


async def test_twenty_tags_are_accepted(client: Client):
    body = await call(client, "store_memory", content="Tagged", subject="Emma", category="fact",
                      tags=[f"t{i}" for i in range(20)])  # fmt: skip
    assert len(body["tags"]) == 20


@pytest.mark.parametrize(
    "args",
    [
        {"subject": "Emma", "category": "fact"},  # no content
        {"content": "Emma is lactose intolerant", "category": "restriction"},  # no subject
        {"content": "Emma is lactose intolerant", "subject": "Emma"},  # no category
        {"content": "", "subject": "Emma", "category": "fact"},
        {"content": "   ", "subject": "Emma", "category": "fact"},
        {"content": "x" * 50_001, "subject": "Emma", "category": "fact"},
        {"content": "Emma is lactose intolerant", "subject": "", "category": "restriction"},
        {"content": "Emma is lactose intolerant", "subject": "   ", "category": "restriction"},
        {"content": "Emma is lactose intolerant", "subject": "Emma", "category": "allergy"},
        {"content": "Emma is lactose intolerant", "subject": "Emma", "category": "instruction"},  # spec 004's name
        {"content": "Emma is lactose intolerant", "subject": "Emma", "category": "fact", "confidence": -0.01},
        {"content": "Emma is lactose intolerant", "subject": "Emma", "category": "fact", "confidence": 1.01},
        {"content": "Emma is lactose intolerant", "subject": "Emma", "category": "fact", "tags": "dietary"},
        {"content": "Tagged", "subject": "Emma", "category": "fact", "tags": [f"t{i}" for i in range(21)]},
    ],
)
async def test_a_store_that_breaks_the_schema_is_invalid_parameter_and_stores_nothing(
    client: Client, args: dict[str, Any]
):
    assert (await error(client, "store_memory", **args))["code"] == "INVALID_PARAMETER"
    assert await recent(client) == []


async def test_a_blank_subject_is_refused_with_a_message_that_says_so(client: Client):
    found = await error(client, "store_memory", content="Someone is tall", subject="  ", category="fact")
    assert "subject" in found["message"] and "blank" in found["message"]


# -- search_memories -----------------------------------------------------------------------
async def test_the_specs_search_example_finds_emmas_restriction_in_the_response_format(client: Client):
    kept = await call(client, "store_memory", **EXAMPLE)
    await store(client, "Emma prefers dietary variety at dinner", category="preference")  # other category
    await store(client, "Gordon's car is blue", subject="Gordon")
    body = await call(client, "search_memories", query="dietary restrictions for the family",
                      category_filter="restriction", limit=10)  # fmt: skip
    assert set(body) == {"memories"}
    [found] = body["memories"]
    assert set(found) == MEMORY_FIELDS | {"relevance_score"}
    assert {k: found[k] for k in MEMORY_FIELDS} == {k: kept[k] for k in MEMORY_FIELDS}
    assert 0.7 <= found["relevance_score"] <= 1


async def test_results_are_ordered_by_relevance_and_none_is_below_the_threshold(client: Client):
    await store(client, "Emma drinks oat milk with her coffee")
    await store(client, "Gordon drinks coffee", subject="Gordon")
    await store(client, "Liam hates milk", subject="Liam")
    for threshold in (0.0, 0.5, 0.7):
        found = await search(client, "oat milk coffee", threshold=threshold, limit=20)
        scores = [m["relevance_score"] for m in found]
        assert scores == sorted(scores, reverse=True)
        assert all(score >= threshold for score in scores)
    assert (await search(client, "oat milk coffee", threshold=0.0))[0][
        "content"
    ] == "Emma drinks oat milk with her coffee"
    assert await search(client, "oat milk coffee", threshold=1.0) == []  # a calibrated score never reaches 1


async def test_subject_and_category_filters_narrow_the_search(client: Client):
    await store(client, "Emma swims on Mondays", category="history")
    await store(client, "Emma wants to swim a mile", category="goal")
    await store(client, "Liam swims on Fridays", subject="Liam", category="history")
    by_subject = await search(client, "swims swim", subject_filter="emma", threshold=0)
    assert {m["subject"] for m in by_subject} == {"Emma"} and len(by_subject) == 2
    by_category = await search(client, "swims swim", category_filter="history", threshold=0)
    assert {m["content"] for m in by_category} == {"Emma swims on Mondays", "Liam swims on Fridays"}
    both = await search(client, "swims swim", subject_filter="Liam", category_filter="goal", threshold=0)
    assert both == []


async def test_search_returns_five_by_default_and_up_to_twenty(client: Client):
    for i in range(21):
        await store(client, f"Emma visited museum number {i}", category="history")
    assert len(await search(client, "museum", threshold=0)) == 5
    assert len(await search(client, "museum", threshold=0, limit=1)) == 1
    assert len(await search(client, "museum", threshold=0, limit=20)) == 20


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"query": ""},
        {"query": "   "},
        {"query": "q" * 1_001},
        {"query": "museum", "limit": 0},
        {"query": "museum", "limit": 21},
        {"query": "museum", "threshold": -0.01},
        {"query": "museum", "threshold": 1.01},
        {"query": "museum", "category_filter": "allergy"},
        {"query": "museum", "subject_filter": "  "},
    ],
)
async def test_a_search_that_breaks_the_schema_is_invalid_parameter(client: Client, args: dict[str, Any]):
    await store(client, "Emma visited the museum")
    assert (await error(client, "search_memories", **args))["code"] == "INVALID_PARAMETER"
    [memory] = await recent(client)
    assert memory["content"] == "Emma visited the museum"


# -- list_recent_memories ------------------------------------------------------------------
async def test_recent_memories_come_newest_first_ten_by_default(client: Client, clock: ManualClock):
    for i in range(12):
        await store(client, f"Note {i} about Emma")
        clock.advance(minutes=1)
    listed = (await call(client, "list_recent_memories"))["memories"]
    assert [m["content"] for m in listed] == [f"Note {i} about Emma" for i in range(11, 1, -1)]
    assert [m["created_at"] for m in listed] == sorted((m["created_at"] for m in listed), reverse=True)
    assert set(listed[0]) == MEMORY_FIELDS | {"status", "outdated_reason", "updated_at"}


async def test_recent_memories_limit_runs_from_one_to_fifty(client: Client, clock: ManualClock):
    for i in range(51):
        await store(client, f"Note {i} about Emma")
        clock.advance(seconds=1)
    assert [m["content"] for m in (await call(client, "list_recent_memories", limit=1))["memories"]] == [
        "Note 50 about Emma"
    ]
    assert len((await call(client, "list_recent_memories", limit=50))["memories"]) == 50


async def test_recent_memories_filter_by_subject(client: Client):
    await store(client, "Emma is lactose intolerant")
    await store(client, "Liam plays the cello", subject="Liam")
    assert [m["subject"] for m in await recent(client, subject_filter="liam")] == ["Liam"]
    assert await recent(client, subject_filter="Nobody") == []


@pytest.mark.parametrize("args", [{"limit": 0}, {"limit": 51}, {"limit": "ten"}, {"subject_filter": ""}])
async def test_a_recent_list_that_breaks_the_schema_is_invalid_parameter(client: Client, args: dict[str, Any]):
    assert (await error(client, "list_recent_memories", **args))["code"] == "INVALID_PARAMETER"


# -- update_memory -------------------------------------------------------------------------
async def test_new_content_replaces_the_content_and_the_update_returns_the_memory(client: Client, clock: ManualClock):
    memory_id = await store(client, "Emma is vegetarian", category="restriction", tags=["diet"])
    clock.advance(hours=1)
    body = await call(client, "update_memory", memory_id=memory_id, new_content="Emma is vegan", reason="she said so")
    assert body == {
        "id": memory_id,
        "content": "Emma is vegan",
        "subject": "Emma",
        "category": "restriction",
        "tags": ["diet"],
        "confidence": 1.0,
        "created_at": to_iso(START),
        "status": "active",
        "outdated_reason": None,
        "updated_at": to_iso(START + timedelta(hours=1)),
    }
    assert [m["id"] for m in await search(client, "vegan", threshold=0)] == [memory_id]
    assert await search(client, "vegetarian", threshold=0) == []


async def test_a_memory_marked_outdated_drops_out_of_search_but_stays_readable(client: Client):
    memory_id = await store(client, "Emma lives in Leeds", category="fact")
    assert len(await search(client, "Leeds", threshold=0)) == 1
    body = await call(client, "update_memory", memory_id=memory_id, mark_outdated=True, reason="moved to York")
    assert (body["status"], body["outdated_reason"], body["content"]) == (
        "outdated",
        "moved to York",
        "Emma lives in Leeds",
    )
    assert await search(client, "Leeds", threshold=0) == []
    [listed] = await recent(client)
    assert (listed["id"], listed["status"], listed["outdated_reason"]) == (memory_id, "outdated", "moved to York")
    again = await call(client, "update_memory", memory_id=memory_id, mark_outdated=True, reason="moved to York")
    assert again == body  # marking it again changes nothing


async def test_an_outdated_fact_may_be_stored_afresh(client: Client):
    memory_id = await store(client, "Emma lives in Leeds")
    await call(client, "update_memory", memory_id=memory_id, mark_outdated=True)
    fresh = await call(client, "store_memory", content="Emma lives in Leeds", subject="Emma", category="fact")
    assert fresh["already_stored"] is False and fresh["id"] != memory_id


@pytest.mark.parametrize(
    "args",
    [
        {},  # neither new content nor outdated
        {"reason": "no idea"},
        {"mark_outdated": False},
        {"new_content": "Emma is vegan", "mark_outdated": True},  # the spec: outdated "rather than" updated
        {"new_content": ""},
        {"new_content": "   "},
        {"new_content": "x" * 50_001},
        {"mark_outdated": True, "reason": "r" * 501},
        {"mark_outdated": "maybe"},
    ],
)
async def test_an_update_that_breaks_the_schema_is_invalid_parameter_and_changes_nothing(
    client: Client, args: dict[str, Any]
):
    memory_id = await store(client, "Emma is vegetarian", category="restriction")
    before = await recent(client)
    assert (await error(client, "update_memory", memory_id=memory_id, **args))["code"] == "INVALID_PARAMETER"
    assert await recent(client) == before


async def test_a_reason_of_five_hundred_characters_is_kept(client: Client):
    memory_id = await store(client, "Emma is vegetarian")
    body = await call(client, "update_memory", memory_id=memory_id, mark_outdated=True, reason="r" * 500)
    assert body["outdated_reason"] == "r" * 500


async def test_updating_an_unknown_memory_is_memory_not_found(client: Client):
    missing = str(uuid.uuid4())
    found = await error(client, "update_memory", memory_id=missing, new_content="Emma is vegan")
    assert found["code"] == "MEMORY_NOT_FOUND"
    assert missing in found["message"]
    assert (await error(client, "update_memory", memory_id="mem_xyz789", mark_outdated=True))["code"] == (
        "MEMORY_NOT_FOUND"
    )


async def test_a_missing_memory_id_is_invalid_parameter(client: Client):
    assert (await error(client, "update_memory", new_content="Emma is vegan"))["code"] == "INVALID_PARAMETER"


# -- get_memory_stats ----------------------------------------------------------------------
async def test_stats_of_an_empty_store_name_every_category_with_zero(client: Client):
    assert await call(client, "get_memory_stats") == {
        "total_memories": 0,
        "by_category": dict.fromkeys(CATEGORIES, 0),
        "by_subject": {},
        "oldest_memory": None,
        "newest_memory": None,
        "outdated_memories": 0,
    }


async def test_stats_count_by_category_and_subject_with_the_oldest_and_newest(client: Client, clock: ManualClock):
    await store(client, "Emma is lactose intolerant", category="restriction")
    clock.advance(days=1)
    await store(client, "Emma likes green", subject="emma", category="preference")
    await store(client, "Gordon works nights", subject="Gordon", category="fact")
    clock.advance(days=1)
    outdated = await store(client, "Gordon works days", subject="Gordon", category="fact")
    await call(client, "update_memory", memory_id=outdated, mark_outdated=True, reason="changed shifts")

    stats = await call(client, "get_memory_stats")
    assert stats["total_memories"] == 3
    assert stats["by_category"] == {**dict.fromkeys(CATEGORIES, 0), "restriction": 1, "preference": 1, "fact": 1}
    assert stats["by_subject"] == {"Emma": 2, "Gordon": 1}
    assert stats["oldest_memory"] == to_iso(START)
    assert stats["newest_memory"] == to_iso(START + timedelta(days=1))
    assert stats["outdated_memories"] == 1

    emma = await call(client, "get_memory_stats", subject_filter=" EMMA")
    assert (emma["total_memories"], emma["by_subject"], emma["outdated_memories"]) == (2, {"Emma": 2}, 0)
    assert emma["newest_memory"] == to_iso(START + timedelta(days=1))
    gordon = await call(client, "get_memory_stats", subject_filter="gordon")
    assert (gordon["total_memories"], gordon["outdated_memories"]) == (1, 1)
    nobody = await call(client, "get_memory_stats", subject_filter="Nobody")
    assert (nobody["total_memories"], nobody["by_subject"], nobody["oldest_memory"]) == (0, {}, None)


async def test_stats_refuse_a_blank_subject_filter(client: Client):
    assert (await error(client, "get_memory_stats", subject_filter=" "))["code"] == "INVALID_PARAMETER"


# -- errors --------------------------------------------------------------------------------
def _subclasses(kind: type[errors.MnemoError]) -> list[type[errors.MnemoError]]:
    return [kind, *(sub for direct in kind.__subclasses__() for sub in _subclasses(direct))]


@pytest.mark.parametrize("kind", _subclasses(errors.MnemoError), ids=lambda k: k.__name__)
def test_every_mnemo_error_maps_onto_one_of_the_specs_five_codes(kind: type[errors.MnemoError]):
    assert error_code(kind.__new__(kind)) in SPEC_CODES


def test_the_mapping_is_the_one_the_spec_reads_for():
    assert error_code(errors.NotFound("x")) == "MEMORY_NOT_FOUND"
    assert error_code(errors.InvalidInput("x")) == "INVALID_PARAMETER"
    assert error_code(errors.EmbeddingError("x")) == "EMBEDDING_ERROR"
    assert error_code(errors.Locked("x")) == "RATE_LIMIT"
    assert error_code(errors.CorruptedData("x")) == "STORAGE_ERROR"
    assert error_code(errors.StorageError("x")) == "STORAGE_ERROR"


async def test_an_unknown_tool_is_invalid_parameter(client: Client):
    assert (await error(client, "forget_memory", memory_id="x"))["code"] == "INVALID_PARAMETER"


async def test_a_full_store_is_storage_error_and_keeps_what_it_holds(tmp_path, clock: ManualClock):
    srv = build_server(Settings(home=tmp_path / "home", embedder="none", max_memories=1), "memento", clock=clock)
    try:
        async with Client(srv, raise_exceptions=True) as client:
            await store(client, "Emma is lactose intolerant")
            found = await error(client, "store_memory", content="Liam plays cello", subject="Liam", category="skill")
            assert found["code"] == "STORAGE_ERROR"
            assert [m["content"] for m in await recent(client)] == ["Emma is lactose intolerant"]
    finally:
        srv.service.storage.close()


async def test_a_store_kept_busy_by_another_writer_is_rate_limit(tmp_path, clock: ManualClock):
    srv = build_server(Settings(home=tmp_path / "home", embedder="none", busy_timeout_s=0.2), "memento", clock=clock)
    try:
        async with Client(srv, raise_exceptions=True) as client:
            await store(client, "Emma is lactose intolerant")
            with closing(sqlite3.connect(srv.service.storage.path, isolation_level=None)) as other_writer:
                other_writer.execute("BEGIN IMMEDIATE")
                found = await error(client, "store_memory", content="Liam swims", subject="Liam", category="skill")
                assert found["code"] == "RATE_LIMIT"
                other_writer.execute("ROLLBACK")
            assert len(await recent(client)) == 1
            await store(client, "Liam swims", subject="Liam")
    finally:
        srv.service.storage.close()
