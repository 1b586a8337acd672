"""The `full` profile's contract with spec 004, through an in-memory MCP client.

Covers tools 1-4, 6 and 7 (store, recall, update, forget, list, stats): the tool list, annotations
and input schemas, every "Example Usage" input of the spec, every error case the spec lists for
those tools, and that a rejected call leaves the store as it was. Behaviour lives in
test_full_profile_behaviour.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from mcp import Client

from mcp_calls import answer as call
from spec004 import METRICS, SERVED_TOOLS, error_of, store

pytestmark = pytest.mark.every_backend  # every profile on SQLite and PostgreSQL

CATEGORIES = ["fact", "preference", "instruction", "context", "relationship", "skill", "goal", "event", "custom"]
ACCESS_LEVELS = ["public", "private", "shared"]


# -- tools/list ----------------------------------------------------------------------------
async def tools_by_name(client: Client) -> dict[str, Any]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_tools_list_shows_exactly_the_tools_served(client):
    assert set(await tools_by_name(client)) == SERVED_TOOLS


@pytest.mark.parametrize(
    ("tool", "read_only", "destructive"),
    [
        ("store_memory", False, False),
        ("recall_memories", False, False),  # it counts what it returns as accessed
        ("update_memory", False, False),
        ("forget_memory", False, True),
        ("list_memories", True, False),
        ("get_memory_stats", True, False),
    ],
)
async def test_each_tool_is_annotated_truthfully(client, tool, read_only, destructive):
    hints = (await tools_by_name(client))[tool].annotations
    assert hints.read_only_hint is read_only
    assert hints.destructive_hint is destructive
    assert hints.open_world_hint is False
    if read_only:
        assert hints.idempotent_hint is True


def prop(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    """The schema of a property path."""
    node = schema
    for name in path:
        node = node["properties"][name]
    return node


SCHEMA_LIMITS = [
    ("store_memory", ("content",), {"type": "string", "minLength": 1, "maxLength": 50000}),
    ("store_memory", ("metadata", "category"), {"enum": CATEGORIES}),
    ("store_memory", ("metadata", "tags"), {"type": "array", "maxItems": 20}),
    ("store_memory", ("metadata", "importance"), {"minimum": 0, "maximum": 1}),
    ("store_memory", ("metadata", "access_level"), {"enum": ACCESS_LEVELS, "default": "private"}),
    ("store_memory", ("metadata", "expires_at"), {"format": "date-time"}),
    ("store_memory", ("context", "timestamp"), {"format": "date-time"}),
    ("store_memory", ("related_memory_ids",), {"type": "array", "items": {"type": "string"}}),
    ("recall_memories", ("query",), {"minLength": 1, "maxLength": 1000}),
    ("recall_memories", ("limit",), {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}),
    ("recall_memories", ("offset",), {"type": "integer", "minimum": 0, "default": 0}),
    ("recall_memories", ("include_archived",), {"type": "boolean", "default": False}),
    ("recall_memories", ("filters", "categories"), {"items": {"type": "string", "enum": CATEGORIES}}),
    ("recall_memories", ("filters", "access_level"), {"items": {"type": "string", "enum": ACCESS_LEVELS}}),
    ("recall_memories", ("filters", "min_importance"), {"minimum": 0, "maximum": 1}),
    ("recall_memories", ("filters", "date_range", "start"), {"format": "date-time"}),
    ("recall_memories", ("ranking", "recency_decay"), {"enum": ["linear", "exponential", "logarithmic"]}),
    ("recall_memories", ("ranking", "recency_decay"), {"default": "exponential"}),
    ("recall_memories", ("ranking", "weights", "semantic_similarity"), {"minimum": 0, "maximum": 1, "default": 0.5}),
    ("recall_memories", ("ranking", "weights", "recency"), {"minimum": 0, "maximum": 1, "default": 0.2}),
    ("recall_memories", ("ranking", "weights", "importance"), {"minimum": 0, "maximum": 1, "default": 0.2}),
    ("recall_memories", ("ranking", "weights", "access_frequency"), {"minimum": 0, "maximum": 1, "default": 0.1}),
    ("update_memory", ("updates",), {"minProperties": 1}),
    ("update_memory", ("updates", "content"), {"minLength": 1, "maxLength": 50000}),
    ("update_memory", ("updates", "category"), {"enum": CATEGORIES}),
    ("update_memory", ("updates", "importance"), {"minimum": 0, "maximum": 1}),
    ("update_memory", ("updates", "access_level"), {"enum": ACCESS_LEVELS}),
    ("update_memory", ("updates", "tags", "add"), {"items": {"type": "string"}}),
    ("update_memory", ("updates", "tags", "replace"), {"items": {"type": "string"}}),
    ("update_memory", ("reason",), {"maxLength": 500}),
    ("update_memory", ("merge_strategy",), {"enum": ["replace", "append", "prepend"], "default": "replace"}),
    (
        "forget_memory",
        ("reason",),
        {
            "enum": ["user_request", "privacy", "outdated", "incorrect", "duplicate", "expired", "other"],
            "default": "user_request",
        },
    ),
    ("forget_memory", ("reason_details",), {"maxLength": 1000}),
    ("forget_memory", ("hard_delete",), {"type": "boolean", "default": False}),
    ("forget_memory", ("retention_period_days",), {"type": "integer", "minimum": 0, "maximum": 365, "default": 30}),
    ("forget_memory", ("cascade_related",), {"type": "boolean", "default": False}),
    ("list_memories", ("filters", "categories"), {"items": {"type": "string", "enum": CATEGORIES}}),
    ("list_memories", ("filters", "importance_range", "min"), {"minimum": 0, "maximum": 1}),
    ("list_memories", ("filters", "importance_range", "max"), {"minimum": 0, "maximum": 1}),
    (
        "list_memories",
        ("filters", "status"),
        {"items": {"type": "string", "enum": ["active", "archived", "deleted"]}, "default": ["active"]},
    ),
    (
        "list_memories",
        ("sort", "field"),
        {
            "enum": ["created_at", "updated_at", "last_accessed", "importance", "access_count", "content_length"],
            "default": "created_at",
        },
    ),
    ("list_memories", ("sort", "order"), {"enum": ["asc", "desc"], "default": "desc"}),
    ("list_memories", ("pagination", "limit"), {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}),
    ("list_memories", ("pagination", "offset"), {"type": "integer", "minimum": 0, "default": 0}),
    ("list_memories", ("pagination", "cursor"), {"type": "string"}),
    ("list_memories", ("include_content",), {"type": "boolean", "default": True}),
    ("list_memories", ("include_stats",), {"type": "boolean", "default": False}),
    ("get_memory_stats", ("scope",), {"enum": ["global", "user", "conversation", "category"], "default": "user"}),
    ("get_memory_stats", ("time_range", "end"), {"format": "date-time"}),
    ("get_memory_stats", ("include_trends",), {"type": "boolean", "default": False}),
    ("get_memory_stats", ("granularity",), {"enum": ["hour", "day", "week", "month"], "default": "day"}),
]


@pytest.mark.parametrize(
    ("tool", "path", "expected"), SCHEMA_LIMITS, ids=[f"{t}.{'.'.join(p)}" for t, p, _ in SCHEMA_LIMITS]
)
async def test_input_schemas_carry_the_spec_limits_enums_and_defaults(client, tool, path, expected):
    schema = (await tools_by_name(client))[tool].input_schema
    node = prop(schema, *path)
    assert {key: node.get(key) for key in expected} == expected


async def test_stats_metrics_schema_lists_the_ten_metrics_of_the_spec(client):
    schema = (await tools_by_name(client))["get_memory_stats"].input_schema
    assert set(prop(schema, "metrics")["items"]["enum"]) == set(METRICS)


@pytest.mark.parametrize(
    ("tool", "required"),
    [
        ("store_memory", ["content"]),
        ("recall_memories", ["query"]),
        ("update_memory", ["memory_id", "updates"]),
        ("forget_memory", ["memory_id"]),
        ("list_memories", []),
        ("get_memory_stats", []),
    ],
)
async def test_input_schemas_require_only_what_the_spec_requires(client, tool, required):
    schema = (await tools_by_name(client))[tool].input_schema
    assert sorted(schema.get("required", [])) == sorted(required)


# -- the spec's "Example Usage" inputs -----------------------------------------------------
def has_fields(body: dict[str, Any], *fields: str) -> None:
    assert body["api_version"] == "1.0.0"
    assert body["success"] is True
    missing = set(fields) - set(body)
    assert not missing, f"missing {missing} in {body}"


SPANISH = {
    "content": "User is learning Spanish and wants conversational practice",
    "context": {"conversation_id": "conv_xyz789", "user_id": "user_123"},
    "metadata": {"tags": ["language", "learning"], "importance": 0.9},
}


async def test_store_example_is_accepted_and_answers_every_output_field(client, clock):
    body = await call(client, "store_memory", **SPANISH)
    has_fields(
        body,
        *("memory_id", "content", "category", "auto_tags", "importance", "embeddings_generated"),
        *("created_at", "links_created"),
    )
    assert body["content"] == SPANISH["content"]
    assert body["importance"] == 0.9
    assert body["category"] in CATEGORIES
    assert body["links_created"] == 0
    assert datetime.fromisoformat(body["created_at"]) == clock.now()


async def test_recall_example_is_accepted_and_answers_every_output_field(client):
    await store(
        client,
        "User has dietary restrictions: vegetarian, no peanuts",
        context={"conversation_id": "conv_food", "user_id": "user_123"},
        metadata={"category": "fact", "importance": 0.8},
    )
    body = await call(
        client,
        "recall_memories",
        query="user's dietary restrictions",
        filters={"categories": ["preference", "fact"], "min_importance": 0.7},
        ranking={"weights": {"semantic_similarity": 0.6, "recency": 0.1, "importance": 0.3}},
        limit=5,
    )
    has_fields(body, "query", "total_results", "returned_count", "memories", "execution_time_ms")
    assert body["query"] == "user's dietary restrictions"
    assert (body["total_results"], body["returned_count"]) == (1, 1)
    [memory] = body["memories"]
    assert set(memory) >= {
        *("memory_id", "content", "category", "tags", "importance", "created_at", "last_accessed"),
        *("access_count", "scores", "context"),
    }
    assert set(memory["scores"]) == {"semantic_similarity", "recency", "importance", "access_frequency", "combined"}
    assert memory["context"] == {"conversation_id": "conv_food", "user_id": "user_123"}


async def test_update_example_is_accepted_and_answers_every_output_field(client):
    memory_id = await store(client, SPANISH["content"], metadata={"tags": ["language", "beginner"]})
    body = await call(
        client,
        "update_memory",
        memory_id=memory_id,
        updates={
            "content": "User is learning Spanish at intermediate level and prefers conversation over grammar exercises",
            "tags": {"add": ["intermediate", "conversation-focused"], "remove": ["beginner"]},
            "importance": 0.95,
        },
        reason="User provided updated proficiency level",
        merge_strategy="replace",
    )
    has_fields(
        body, "memory_id", "version", "updated_fields", "embeddings_regenerated", "previous_version_id", "updated_at"
    )
    assert body["memory_id"] == memory_id
    assert body["version"] == 2
    assert set(body["updated_fields"]) == {"content", "tags", "importance"}
    assert body["previous_version_id"]


async def test_forget_example_is_accepted_and_answers_every_output_field(client, clock):
    memory_id = await store(client, SPANISH["content"])
    body = await call(
        client,
        "forget_memory",
        memory_id=memory_id,
        reason="outdated",
        reason_details="User changed language learning focus from Spanish to French",
        hard_delete=False,
        retention_period_days=90,
    )
    has_fields(
        body,
        *("memory_id", "deletion_type", "deleted_at", "recoverable_until", "related_memories_affected", "backup_id"),
    )
    assert body["deletion_type"] == "soft"
    assert datetime.fromisoformat(body["recoverable_until"]) == clock.now() + timedelta(days=90)
    assert body["related_memories_affected"] == 0


async def test_list_example_is_accepted_and_answers_every_output_field(client):
    await store(client, "User wants to run a marathon this year", metadata={"category": "goal", "importance": 0.8})
    await store(client, "User prefers tea to coffee", metadata={"category": "preference", "importance": 0.75})
    await store(client, "User prefers short answers", metadata={"category": "preference", "importance": 0.3})
    await store(client, "Paris is the capital of France", metadata={"category": "fact", "importance": 0.9})
    body = await call(
        client,
        "list_memories",
        filters={"categories": ["preference", "goal"], "importance_range": {"min": 0.7}, "status": ["active"]},
        sort={"field": "importance", "order": "desc"},
        pagination={"limit": 50},
        include_stats=True,
    )
    has_fields(body, "total_count", "returned_count", "memories", "pagination")
    assert [m["content"] for m in body["memories"]] == [
        "User wants to run a marathon this year",
        "User prefers tea to coffee",
    ]
    assert (body["total_count"], body["returned_count"]) == (2, 2)
    for memory in body["memories"]:
        assert set(memory) >= {
            *("memory_id", "content", "category", "tags", "importance", "created_at", "updated_at"),
            *("last_accessed", "access_count", "version", "access_level", "context", "stats"),
        }
        assert set(memory["stats"]) == {"content_length", "link_count", "days_since_creation", "days_since_access"}
    assert set(body["pagination"]) == {"has_more", "next_cursor", "next_offset"}
    assert body["pagination"]["has_more"] is False


async def test_stats_example_is_accepted_and_answers_every_output_field(client, clock):
    await store(
        client,
        SPANISH["content"],
        context={"user_id": "user_123", "timestamp": "2025-11-20T10:00:00Z"},
        metadata={"category": "skill"},
    )
    body = await call(
        client,
        "get_memory_stats",
        scope="user",
        scope_id="user_123",
        time_range={"start": "2025-11-01T00:00:00Z", "end": "2025-12-06T23:59:59Z"},
        metrics=["count", "category_distribution", "health_score"],
        include_trends=True,
        granularity="week",
    )
    has_fields(body, "scope", "scope_id", "time_range", "statistics", "trends", "generated_at")
    assert (body["scope"], body["scope_id"]) == ("user", "user_123")
    assert datetime.fromisoformat(body["time_range"]["start"]) == datetime.fromisoformat("2025-11-01T00:00:00Z")
    assert set(body["statistics"]) == {"count", "category_distribution", "health_score"}
    assert body["statistics"]["count"]["total"] == 1
    assert body["statistics"]["category_distribution"] == {"skill": 1}
    assert body["trends"]["memory_count"][-1]["value"] == 1
    assert datetime.fromisoformat(body["generated_at"]) == clock.now()


# -- errors, and that a rejected call changes nothing --------------------------------------
@pytest.fixture
async def seeded(client) -> dict[str, str]:
    """Two live memories (B linked to A) and one soft-deleted one; their ids by name."""
    a = await store(client, "The user's cat is called Miso", metadata={"tags": ["pets"], "importance": 0.6})
    b = await store(client, "Miso the cat is afraid of the vacuum cleaner", related_memory_ids=[a])
    gone = await store(client, "The user used to live in Lisbon")
    await call(client, "forget_memory", memory_id=gone)
    return {"$A": a, "$B": b, "$GONE": gone}


def fill(value: Any, ids: dict[str, str]) -> Any:
    """The arguments with "$A"-style names replaced by the seeded memories' ids."""
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list):
        return [fill(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, ids) for k, v in value.items()}
    return value


def reject(tool: str, args: dict[str, Any], status: int, code: str, label: str) -> Any:
    return pytest.param(tool, args, status, code, id=label)


PAST = "2020-01-01T00:00:00Z"
LATER = "2026-01-01T00:00:00Z"
REJECTED = [
    # store_memory
    reject("store_memory", {"content": "x" * 50_001}, 400, "INVALID_INPUT", "store content too long"),
    reject("store_memory", {"content": ""}, 400, "INVALID_INPUT", "store empty content"),
    reject("store_memory", {"content": "new", "metadata": {"category": "opinion"}}, 400, "INVALID_INPUT",
           "store unknown category"),
    reject("store_memory", {"content": "new", "metadata": {"access_level": "secret"}}, 400, "INVALID_INPUT",
           "store unknown access level"),
    reject("store_memory", {"content": "new", "metadata": {"tags": [f"t{i}" for i in range(21)]}}, 400,
           "INVALID_INPUT", "store 21 tags"),
    reject("store_memory", {"content": "new", "metadata": {"importance": 1.5}}, 400, "INVALID_INPUT",
           "store importance above 1"),
    reject("store_memory", {"content": "new", "metadata": {"expires_at": PAST}}, 400, "INVALID_INPUT",
           "store expires in the past"),
    reject("store_memory", {"content": "new", "related_memory_ids": ["mem_missing"]}, 404, "MEMORY_NOT_FOUND",
           "store related to unknown id"),
    reject("store_memory", {"content": "new", "related_memory_ids": ["$GONE"]}, 404, "MEMORY_NOT_FOUND",
           "store related to deleted id"),
    reject("store_memory", {"content": "The user's cat is called Miso", "related_memory_ids": ["$B"]}, 409,
           "DUPLICATE_MEMORY", "store duplicate"),
    # recall_memories
    reject("recall_memories", {"query": "cat", "ranking": {"weights": {"semantic_similarity": 0.5, "recency": 0.2}}},
           400, "INVALID_INPUT", "recall weights sum to 0.7"),
    reject("recall_memories", {"query": "cat", "ranking": {"recency_decay": "cubic"}}, 400, "INVALID_INPUT",
           "recall unknown decay"),
    reject("recall_memories", {"query": "cat", "filters": {"categories": ["opinion"]}}, 400, "INVALID_INPUT",
           "recall unknown category"),
    reject("recall_memories", {"query": "cat", "filters": {"date_range": {"start": LATER, "end": PAST}}}, 400,
           "INVALID_INPUT", "recall date range backwards"),
    reject("recall_memories", {"query": "cat", "limit": 101}, 400, "INVALID_INPUT", "recall limit 101"),
    reject("recall_memories", {"query": "x" * 1001}, 400, "INVALID_INPUT", "recall query too long"),
    reject("recall_memories", {"query": "cat", "filters": {"tags": [f"t{i}" for i in range(101)]}}, 413,
           "QUERY_TOO_COMPLEX", "recall 101 tag filters"),
    # update_memory
    reject("update_memory", {"memory_id": "$A", "updates": {}}, 400, "INVALID_INPUT", "update empty updates"),
    reject("update_memory", {"memory_id": "$A", "updates": {"importance": 1.5}}, 400, "INVALID_INPUT",
           "update importance above 1"),
    reject("update_memory", {"memory_id": "$A", "updates": {"category": "opinion"}}, 400, "INVALID_INPUT",
           "update unknown category"),
    reject("update_memory", {"memory_id": "$A", "updates": {"content": "x" * 50_001}}, 400, "INVALID_INPUT",
           "update content too long"),
    reject("update_memory", {"memory_id": "$A", "updates": {"content": "x" * 49_990}, "merge_strategy": "append"},
           400, "INVALID_INPUT", "update append past the limit"),
    reject("update_memory", {"memory_id": "$A", "updates": {"tags": {"add": [f"t{i}" for i in range(20)]}}}, 400,
           "INVALID_INPUT", "update tags past 20"),
    reject("update_memory", {"memory_id": "$A", "updates": {"importance": 0.1}, "merge_strategy": "shuffle"}, 400,
           "INVALID_INPUT", "update unknown merge strategy"),
    reject("update_memory", {"memory_id": "$A", "updates": {"importance": 0.1}, "expected_version": 7}, 409,
           "CONCURRENT_MODIFICATION", "update stale version"),
    reject("update_memory", {"memory_id": "mem_missing", "updates": {"importance": 0.1}}, 404, "MEMORY_NOT_FOUND",
           "update unknown id"),
    reject("update_memory", {"memory_id": "$GONE", "updates": {"importance": 0.1}}, 404, "MEMORY_NOT_FOUND",
           "update deleted memory"),
    # forget_memory
    reject("forget_memory", {"memory_id": "$A", "reason": "bored"}, 400, "INVALID_INPUT", "forget unknown reason"),
    reject("forget_memory", {"memory_id": "$A", "retention_period_days": 366}, 400, "INVALID_INPUT",
           "forget retention 366"),
    reject("forget_memory", {"memory_id": "$A", "reason_details": "x" * 1001}, 400, "INVALID_INPUT",
           "forget details too long"),
    reject("forget_memory", {"memory_id": "mem_missing"}, 404, "MEMORY_NOT_FOUND", "forget unknown id"),
    reject("forget_memory", {"memory_id": "$GONE"}, 404, "MEMORY_NOT_FOUND", "forget already forgotten"),
    # list_memories
    reject("list_memories", {"filters": {"importance_range": {"min": 0.8, "max": 0.2}}}, 400, "INVALID_INPUT",
           "list importance min above max"),
    reject("list_memories", {"filters": {"date_range": {"start": LATER, "end": PAST}}}, 400, "INVALID_INPUT",
           "list date range backwards"),
    reject("list_memories", {"filters": {"status": ["lost"]}}, 400, "INVALID_INPUT", "list unknown status"),
    reject("list_memories", {"sort": {"field": "colour"}}, 400, "INVALID_INPUT", "list unknown sort field"),
    reject("list_memories", {"pagination": {"limit": 0}}, 400, "INVALID_INPUT", "list limit 0"),
    reject("list_memories", {"pagination": {"cursor": "not-a-cursor"}}, 400, "INVALID_INPUT", "list bad cursor"),
    # get_memory_stats
    reject("get_memory_stats", {"scope": "conversation"}, 400, "INVALID_INPUT", "stats conversation without id"),
    reject("get_memory_stats", {"scope": "planet"}, 400, "INVALID_INPUT", "stats unknown scope"),
    reject("get_memory_stats", {"granularity": "year", "include_trends": True}, 400, "INVALID_INPUT",
           "stats unknown granularity"),
    reject("get_memory_stats", {"metrics": ["happiness"]}, 400, "INVALID_INPUT", "stats unknown metric"),
    reject("get_memory_stats", {"scope": "category"}, 400, "INVALID_INPUT", "stats category without id"),
    reject("get_memory_stats", {"scope": "global", "include_trends": True, "granularity": "hour",
           "time_range": {"start": PAST}}, 400, "INVALID_INPUT", "stats trend of too many buckets"),
    reject("get_memory_stats", {"scope": "global", "time_range": {"start": LATER, "end": PAST}}, 400,
           "INVALID_INPUT", "stats time range backwards"),
    reject("get_memory_stats", {"scope": "user", "scope_id": "user_nobody"}, 404, "SCOPE_NOT_FOUND",
           "stats unknown user"),
    reject("get_memory_stats", {"scope": "conversation", "scope_id": "conv_nowhere"}, 404, "SCOPE_NOT_FOUND",
           "stats unknown conversation"),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "args", "status", "code"), REJECTED)
async def test_each_error_case_of_the_spec_answers_its_status_in_the_common_error_format(
    client, seeded, tool, args, status, code
):
    error = error_of(await call(client, tool, **fill(args, seeded)), status)
    assert error["code"] == code


async def snapshot(client: Client) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every memory of every status with its stats, and the store's counts."""
    listed = await call(
        client,
        "list_memories",
        filters={"status": ["active", "archived", "deleted"]},
        sort={"field": "created_at", "order": "asc"},
        pagination={"limit": 100},
        include_stats=True,
    )
    stats = await call(
        client, "get_memory_stats", scope="global", metrics=["count", "access_patterns", "deletion_rate"]
    )
    return listed["memories"], stats["statistics"]


@pytest.mark.parametrize(("tool", "args", "status", "code"), REJECTED)
async def test_a_rejected_call_leaves_the_store_unchanged(client, seeded, tool, args, status, code):
    before = await snapshot(client)
    assert len(before[0]) == 3
    error_of(await call(client, tool, **fill(args, seeded)), status)
    assert await snapshot(client) == before


async def test_a_duplicate_store_returns_the_existing_memory_id(client):
    first = await store(client, "The user's cat is called Miso")
    error = error_of(await call(client, "store_memory", content="The user's cat is called Miso"), 409)
    assert error["details"]["existing_memory_id"] == first


async def test_a_stale_expected_version_is_refused_while_the_current_one_is_accepted(client):
    memory_id = await store(client, "The user's cat is called Miso")
    await call(client, "update_memory", memory_id=memory_id, updates={"importance": 0.3})
    stale = await call(client, "update_memory", memory_id=memory_id, updates={"importance": 0.9}, expected_version=1)
    assert error_of(stale, 409)["details"]["current_version"] == 2
    fresh = await call(client, "update_memory", memory_id=memory_id, updates={"importance": 0.9}, expected_version=2)
    assert fresh["version"] == 3


async def test_an_unknown_memory_id_names_the_id_in_the_error_details(client):
    error = error_of(await call(client, "forget_memory", memory_id="mem_invalid123"), 404)
    assert error["details"]["memory_id"] == "mem_invalid123"


async def test_a_cursor_is_refused_under_another_sort_order(client):
    await store(client, "First note")
    await store(client, "Second note")
    page = await call(client, "list_memories", pagination={"limit": 1})
    cursor = page["pagination"]["next_cursor"]
    other = await call(client, "list_memories", sort={"field": "importance"}, pagination={"limit": 1, "cursor": cursor})
    assert error_of(other, 400)["details"]["field"] == "cursor"
