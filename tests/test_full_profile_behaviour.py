"""What the `full` profile's six tools do (spec 004), through an in-memory MCP client.

Time is a ManualClock at 2026-01-15T12:00Z (conftest), moved with ``clock.advance``. The settings
configure no model, so recall is by words (FTS5 BM25): every memory a test recalls shares a word
with the query.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from mcp import Client

from mcp_calls import structured as call
from spec004 import METRICS

EVERY_STATUS = {"status": ["active", "archived", "deleted"]}


async def store(client: Client, content: str, **args: Any) -> str:
    return (await call(client, "store_memory", content=content, **args))["memory_id"]


async def recall(client: Client, query: str, **args: Any) -> list[dict[str, Any]]:
    return (await call(client, "recall_memories", query=query, **args))["memories"]


async def listed(client: Client, **args: Any) -> list[dict[str, Any]]:
    args.setdefault("pagination", {"limit": 100})
    return (await call(client, "list_memories", **args))["memories"]


async def one(client: Client, memory_id: str) -> dict[str, Any]:
    """The memory as list_memories shows it, whatever its status."""
    [memory] = [
        m for m in await listed(client, filters=EVERY_STATUS, include_stats=True) if m["memory_id"] == memory_id
    ]
    return memory


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def iso(when: datetime) -> str:
    return when.isoformat()


# -- recall ----------------------------------------------------------------------------------
@pytest.fixture
async def coffee(client) -> dict[str, str]:
    """Three memories that all mention coffee; their names by memory id."""
    ids = {
        await store(
            client,
            "Coffee fact: the user drinks coffee black",
            context={"user_id": "u1", "conversation_id": "c1", "timestamp": "2025-06-01T09:00:00Z"},
            metadata={"category": "fact", "tags": ["tag-alpha"], "importance": 0.3, "access_level": "private"},
        ): "fact",
        await store(
            client,
            "The user prefers coffee in the morning",
            context={"user_id": "u2", "conversation_id": "c2", "timestamp": "2025-12-01T09:00:00Z"},
            metadata={"category": "preference", "tags": ["tag-beta"], "importance": 0.8, "access_level": "public"},
        ): "preference",
        await store(
            client,
            "Goal: cut down on coffee by March",
            context={"user_id": "u1", "conversation_id": "c3"},
            metadata={"category": "goal", "tags": ["tag-gamma"], "importance": 0.6, "access_level": "shared"},
        ): "goal",
    }
    return ids


FILTERS = [
    pytest.param({}, {"fact", "preference", "goal"}, id="none"),
    pytest.param({"categories": ["preference", "goal"]}, {"preference", "goal"}, id="categories"),
    pytest.param({"tags": ["tag-alpha", "tag-gamma"]}, {"fact", "goal"}, id="tags are ORed"),
    pytest.param({"min_importance": 0.6}, {"preference", "goal"}, id="min_importance is inclusive"),
    pytest.param({"user_id": "u1"}, {"fact", "goal"}, id="user_id"),
    pytest.param({"conversation_id": "c2"}, {"preference"}, id="conversation_id"),
    pytest.param(
        {"date_range": {"start": "2025-11-01T00:00:00Z", "end": "2025-12-31T00:00:00Z"}}, {"preference"}, id="dates"
    ),
    pytest.param({"date_range": {"start": "2025-11-01T00:00:00Z"}}, {"preference", "goal"}, id="dates from"),
    pytest.param({"access_level": ["public", "shared"]}, {"preference", "goal"}, id="access_level"),
    pytest.param({"user_id": "u1", "min_importance": 0.5}, {"goal"}, id="filters are ANDed"),
    pytest.param({"user_id": "nobody"}, set(), id="no match"),
]


@pytest.mark.parametrize(("filters", "expected"), FILTERS)
async def test_recall_returns_only_the_memories_its_filters_match(client, coffee, filters, expected):
    body = await call(client, "recall_memories", query="coffee", filters=filters)
    assert {coffee[m["memory_id"]] for m in body["memories"]} == expected
    assert body["total_results"] == len(expected)


@pytest.mark.parametrize(("filters", "expected"), FILTERS)
async def test_list_returns_only_the_memories_its_filters_match(client, coffee, filters, expected):
    listing = dict(filters)
    if "min_importance" in listing:
        listing["importance_range"] = {"min": listing.pop("min_importance")}
    body = await call(client, "list_memories", filters=listing)
    assert {coffee[m["memory_id"]] for m in body["memories"]} == expected
    assert body["total_count"] == len(expected)


async def test_list_importance_range_max_is_inclusive(client, coffee):
    found = await listed(client, filters={"importance_range": {"min": 0.3, "max": 0.6}})
    assert {coffee[m["memory_id"]] for m in found} == {"fact", "goal"}


async def test_recall_accepts_include_archived(client, coffee):
    body = await call(client, "recall_memories", query="coffee", include_archived=True)
    assert body["total_results"] == 3


async def test_recall_finds_nothing_for_words_no_memory_holds(client, coffee):
    body = await call(client, "recall_memories", query="submarine")
    assert (body["total_results"], body["returned_count"], body["memories"]) == (0, 0, [])


@pytest.fixture
async def espresso(client) -> tuple[str, str]:
    """(most relevant but unimportant, barely relevant but important)."""
    relevant = await store(client, "Espresso espresso espresso", metadata={"importance": 0.1})
    important = await store(
        client,
        "A long note that mentions espresso once among many other words about tea, weather, trains and gardening",
        metadata={"importance": 0.9},
    )
    return relevant, important


async def test_recall_with_importance_only_weights_puts_the_most_important_first(client, espresso):
    relevant, important = espresso
    found = await recall(client, "espresso", ranking={"weights": {"importance": 1.0}})
    assert [m["memory_id"] for m in found] == [important, relevant]
    assert [m["scores"]["combined"] for m in found] == [0.9, 0.1]


async def test_recall_with_similarity_only_weights_puts_the_most_relevant_first(client, espresso):
    relevant, important = espresso
    found = await recall(client, "espresso", ranking={"weights": {"semantic_similarity": 1.0}})
    assert [m["memory_id"] for m in found] == [relevant, important]
    assert found[0]["scores"]["semantic_similarity"] > found[1]["scores"]["semantic_similarity"]


async def test_recall_scores_every_factor_in_0_1_and_combines_them_by_the_default_weights(client, espresso):
    await recall(client, "espresso", limit=1)  # one access, so access_frequency varies
    for memory in await recall(client, "espresso"):
        scores = memory["scores"]
        assert all(0.0 <= value <= 1.0 for value in scores.values()), scores
        weighted = (
            0.5 * scores["semantic_similarity"]
            + 0.2 * scores["recency"]
            + 0.2 * scores["importance"]
            + 0.1 * scores["access_frequency"]
        )
        assert scores["combined"] == pytest.approx(weighted, abs=1e-3)


async def test_recall_scores_the_most_recalled_memory_1_for_access_frequency_and_an_unrecalled_one_0(client):
    often = await store(client, "Tulips bloom in spring")
    never = await store(client, "Tulips need cold winters")
    await recall(client, "spring")
    await recall(client, "spring")
    scores = {m["memory_id"]: m["scores"]["access_frequency"] for m in await recall(client, "tulips")}
    assert scores == {often: 1.0, never: 0.0}


@pytest.mark.parametrize(
    ("days", "decay", "expected"),
    [
        (0, "exponential", 1.0),
        (30, "exponential", 0.5),
        (60, "exponential", 0.25),
        (30, "linear", 0.5),
        (60, "linear", 0.0),
        (30, "logarithmic", 0.5),
        (90, "logarithmic", 1 / 3),
    ],
)
async def test_recall_recency_decays_with_the_age_behind_the_newest_match(client, clock, days, decay, expected):
    older = await store(client, "The user's bicycle is green")
    clock.advance(days=days)
    newer = await store(client, "The user's bicycle has a wicker basket")
    clock.advance(days=365)  # recency is relative to the newest match, not to now
    weights = {"recency": 1.0}  # all weight on recency: the priors count in full
    found = await recall(client, "bicycle", ranking={"recency_decay": decay, "weights": weights})
    recency = {m["memory_id"]: m["scores"]["recency"] for m in found}
    assert recency[newer] == 1.0
    assert recency[older] == pytest.approx(expected if days else 1.0, abs=1e-3)


async def test_at_default_weights_a_fresh_important_memory_that_barely_matches_stays_below_the_answer(client, clock):
    answer = await store(client, "The user's bicycle is green", metadata={"importance": 0.1})
    clock.advance(days=200)
    other = await store(
        client,
        "A long note about trains, tea, gardens and the weather that names a bicycle once",
        metadata={"importance": 1.0},
    )
    found = await recall(client, "What colour is the user's bicycle?")
    assert [m["memory_id"] for m in found][:1] == [answer]
    scores = {m["memory_id"]: m["scores"] for m in found}
    assert scores[answer]["semantic_similarity"] - scores[other]["semantic_similarity"] > 0.1
    assert (scores[other]["recency"], scores[other]["importance"]) == (0.0, 0.0)  # too far below the best


async def test_at_default_weights_the_newer_of_two_comparably_relevant_memories_ranks_first(client, clock):
    older = await store(client, "Daily standup: 9:30 in the big room")
    clock.advance(days=120)
    newer = await store(client, "The team standup now happens every day at 10:15")
    by_relevance = await recall(client, "standup time", ranking={"weights": {"semantic_similarity": 1.0}})
    assert [m["memory_id"] for m in by_relevance] == [older, newer]  # the older one words it closer
    found = await recall(client, "standup time")
    assert [m["memory_id"] for m in found] == [newer, older]


async def test_recall_pages_by_limit_and_offset_and_counts_every_match(client):
    by_importance = [await store(client, f"Walnut note {i}", metadata={"importance": i / 10}) for i in range(1, 6)]
    by_importance.reverse()
    pages = []
    for offset in (0, 2, 4):
        body = await call(
            client, "recall_memories", query="walnut", ranking={"weights": {"importance": 1.0}}, limit=2, offset=offset
        )
        assert body["total_results"] == 5
        assert body["returned_count"] == len(body["memories"])
        pages.append([m["memory_id"] for m in body["memories"]])
    assert pages == [by_importance[0:2], by_importance[2:4], by_importance[4:]]


async def test_recall_counts_as_an_access_of_each_memory_it_returns(client, clock):
    hit = await store(client, "The user's dog is called Rex")
    miss = await store(client, "The user's fish is called Bubbles")
    clock.advance(hours=1)
    [memory] = await recall(client, "dog")
    assert (memory["access_count"], at(memory["last_accessed"])) == (1, clock.now())
    clock.advance(hours=1)
    await recall(client, "rex")
    again = await one(client, hit)
    assert (again["access_count"], at(again["last_accessed"])) == (2, clock.now())
    untouched = await one(client, miss)
    assert (untouched["access_count"], untouched["last_accessed"]) == (0, untouched["created_at"])


async def test_an_expired_memory_is_neither_recalled_nor_listed(client, clock):
    await store(
        client, "The door code is 4812 this week", metadata={"expires_at": iso(clock.now() + timedelta(hours=1))}
    )
    await store(client, "The door is painted red")
    assert len(await recall(client, "door")) == 2
    clock.advance(hours=2)
    assert [m["content"] for m in await recall(client, "door")] == ["The door is painted red"]
    body = await call(client, "list_memories")
    assert [m["content"] for m in body["memories"]] == ["The door is painted red"]
    assert body["total_count"] == 1


async def test_clearing_expires_at_with_null_keeps_the_memory_past_its_old_expiry(client, clock):
    memory_id = await store(client, "Parking spot 12", metadata={"expires_at": iso(clock.now() + timedelta(hours=1))})
    body = await call(client, "update_memory", memory_id=memory_id, updates={"expires_at": None})
    assert body["updated_fields"] == ["expires_at"]
    clock.advance(days=2)
    assert [m["memory_id"] for m in await recall(client, "parking")] == [memory_id]


# -- update ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"add": ["yellow", "red"]}, ["red", "green", "yellow"]),
        ({"remove": ["red"]}, ["green"]),
        ({"add": ["yellow"], "remove": ["green"]}, ["red", "yellow"]),
        ({"replace": ["violet"]}, ["violet"]),
        ({"replace": ["violet"], "add": ["yellow"]}, ["violet", "yellow"]),
    ],
    ids=["add", "remove", "add and remove", "replace", "replace and add"],
)
async def test_update_edits_tags_by_add_remove_and_replace(client, edit, expected):
    # No word of this content is long enough to become an auto-tag, so the tags are only the given ones.
    body = await call(client, "store_memory", content="Up at 6", metadata={"tags": ["red", "green"]})
    assert body["auto_tags"] == []
    memory_id = body["memory_id"]
    body = await call(client, "update_memory", memory_id=memory_id, updates={"tags": edit})
    assert body["updated_fields"] == ["tags"]
    assert (await one(client, memory_id))["tags"] == expected


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("replace", "Now at B2 level"),
        ("append", "Learning Spanish\nNow at B2 level"),
        ("prepend", "Now at B2 level\nLearning Spanish"),
    ],
)
async def test_update_merges_content_by_its_merge_strategy(client, strategy, expected):
    memory_id = await store(client, "Learning Spanish")
    await call(
        client, "update_memory", memory_id=memory_id, updates={"content": "Now at B2 level"}, merge_strategy=strategy
    )
    assert (await one(client, memory_id))["content"] == expected


async def test_updated_content_is_what_recall_finds(client):
    memory_id = await store(client, "The user lives in Porto")
    await call(client, "update_memory", memory_id=memory_id, updates={"content": "The user lives in Madrid"})
    [found] = await recall(client, "madrid")
    assert (found["memory_id"], found["content"]) == (memory_id, "The user lives in Madrid")
    assert await recall(client, "porto") == []


async def test_each_update_adds_a_version_and_names_the_previous_one(client, clock):
    memory_id = await store(client, "The user's favourite colour is blue", metadata={"category": "fact"})
    clock.advance(hours=1)
    first = await call(client, "update_memory", memory_id=memory_id, updates={"importance": 0.9}, reason="said twice")
    assert (first["version"], first["updated_fields"]) == (2, ["importance"])
    assert at(first["updated_at"]) == clock.now()
    clock.advance(hours=1)
    second = await call(
        client,
        "update_memory",
        memory_id=memory_id,
        updates={"content": "The user's favourite colour is teal", "category": "preference", "access_level": "public"},
    )
    assert second["version"] == 3
    assert set(second["updated_fields"]) == {"content", "category", "access_level"}
    assert first["previous_version_id"] and second["previous_version_id"]
    assert first["previous_version_id"] != second["previous_version_id"]
    memory = await one(client, memory_id)
    assert (memory["version"], memory["importance"], memory["category"], memory["access_level"]) == (
        3,
        0.9,
        "preference",
        "public",
    )
    assert at(memory["updated_at"]) == clock.now()
    assert at(memory["created_at"]) == clock.now() - timedelta(hours=2)


async def test_an_update_that_changes_nothing_keeps_the_version(client):
    memory_id = await store(client, "The user is left-handed", metadata={"importance": 0.4})
    body = await call(client, "update_memory", memory_id=memory_id, updates={"importance": 0.4})
    assert (body["version"], body["updated_fields"]) == (1, [])
    assert (await one(client, memory_id))["version"] == 1


# -- forget ----------------------------------------------------------------------------------
async def test_soft_forget_keeps_a_recoverable_backup_for_the_retention_period(client, clock):
    memory_id = await store(client, "The user's locker number is 52")
    clock.advance(hours=3)
    body = await call(client, "forget_memory", memory_id=memory_id, reason="privacy")
    assert body["deletion_type"] == "soft"
    assert at(body["deleted_at"]) == clock.now()
    assert at(body["recoverable_until"]) == clock.now() + timedelta(days=30)
    assert body["backup_id"]
    assert await recall(client, "locker") == []
    assert await listed(client) == []
    [deleted] = await listed(client, filters={"status": ["deleted"]})
    assert (deleted["memory_id"], deleted["status"], deleted["version"]) == (memory_id, "deleted", 2)


@pytest.mark.parametrize("days", [0, 7, 365])
async def test_soft_forget_is_recoverable_until_now_plus_the_retention_asked_for(client, clock, days):
    memory_id = await store(client, "The user's gym is on Elm Street")
    body = await call(client, "forget_memory", memory_id=memory_id, retention_period_days=days)
    assert at(body["recoverable_until"]) == clock.now() + timedelta(days=days)


async def test_hard_forget_removes_the_memory_from_every_status(client):
    memory_id = await store(client, "The user's passport number is X123")
    body = await call(client, "forget_memory", memory_id=memory_id, hard_delete=True, reason="privacy")
    assert (body["deletion_type"], body["recoverable_until"], body["backup_id"]) == ("hard", None, None)
    assert await listed(client, filters=EVERY_STATUS) == []
    assert await recall(client, "passport") == []
    stats = await call(client, "get_memory_stats", scope="global", metrics=["deletion_rate"])
    assert stats["statistics"]["deletion_rate"]["hard_deletes"] == 1


async def test_hard_forget_of_a_soft_forgotten_memory_removes_it_for_good(client):
    memory_id = await store(client, "The user's old phone number")
    await call(client, "forget_memory", memory_id=memory_id)
    body = await call(client, "forget_memory", memory_id=memory_id, hard_delete=True)
    assert body["deletion_type"] == "hard"
    assert await listed(client, filters=EVERY_STATUS) == []


@pytest.mark.parametrize("hard", [False, True])
async def test_forget_with_cascade_forgets_linked_memories_too(client, hard):
    a = await store(client, "The user has a sister called Ana")
    b = await store(client, "Ana lives in Berlin", related_memory_ids=[a])
    c = await store(client, "The user has a brother called Tom")
    body = await call(client, "forget_memory", memory_id=b, cascade_related=True, hard_delete=hard)
    assert body["related_memories_affected"] == 1
    assert [m["memory_id"] for m in await listed(client)] == [c]
    deleted = {m["memory_id"] for m in await listed(client, filters={"status": ["deleted"]})}
    assert deleted == (set() if hard else {a, b})


async def test_forget_without_cascade_leaves_linked_memories_alone(client):
    a = await store(client, "The user has a sister called Ana")
    b = await store(client, "Ana lives in Berlin", related_memory_ids=[a])
    body = await call(client, "forget_memory", memory_id=b)
    assert body["related_memories_affected"] == 0
    assert [m["memory_id"] for m in await listed(client)] == [a]


async def test_store_links_related_memories_both_ways(client):
    a = await store(client, "The user has a sister called Ana")
    body = await call(client, "store_memory", content="Ana lives in Berlin", related_memory_ids=[a, a])
    assert body["links_created"] == 1
    assert (await one(client, a))["stats"]["link_count"] == 1
    assert (await one(client, body["memory_id"]))["stats"]["link_count"] == 1


async def test_storing_the_content_of_an_expired_memory_again_is_not_a_duplicate(client, clock):
    await store(client, "Gate code 7734", metadata={"expires_at": iso(clock.now() + timedelta(hours=1))})
    clock.advance(hours=2)
    again = await store(client, "Gate code 7734")
    assert [m["memory_id"] for m in await recall(client, "gate")] == [again]


async def test_storing_the_content_of_a_forgotten_memory_again_is_not_a_duplicate(client):
    first = await store(client, "The user is vegan")
    await call(client, "forget_memory", memory_id=first)
    again = await store(client, "The user is vegan")
    assert [m["memory_id"] for m in await listed(client)] == [again]


async def test_the_same_content_for_two_users_is_not_a_duplicate(client):
    await store(client, "Prefers metric units", context={"user_id": "u1"})
    await store(client, "Prefers metric units", context={"user_id": "u2"})
    assert len(await listed(client)) == 2


# -- list ------------------------------------------------------------------------------------
async def test_list_status_filter_chooses_between_active_and_deleted(client):
    kept = await store(client, "The user likes jazz")
    gone = await store(client, "The user likes polka")
    await call(client, "forget_memory", memory_id=gone)
    assert [m["memory_id"] for m in await listed(client)] == [kept]
    assert [m["memory_id"] for m in await listed(client, filters={"status": ["deleted"]})] == [gone]
    both = await listed(client, filters={"status": ["active", "deleted"]})
    assert {(m["memory_id"], m["status"]) for m in both} == {(kept, "active"), (gone, "deleted")}


@pytest.fixture
async def varied(client, clock) -> None:
    """Four memories whose six sortable fields all differ, in differing orders."""
    ids = {}
    for word, importance, padding in [("ant", 0.3, 0), ("bee", 0.9, 21), ("cicada", 0.1, 14), ("dragonfly", 0.6, 7)]:
        clock.advance(hours=1)
        ids[word] = await store(client, f"Insect {word}" + "!" * padding, metadata={"importance": importance})
    for word in ("cicada", "ant"):
        clock.advance(hours=1)
        await call(client, "update_memory", memory_id=ids[word], updates={"access_level": "public"})
    for word, times in (("cicada", 2), ("bee", 1), ("dragonfly", 3)):
        for _ in range(times):
            clock.advance(hours=1)
            await recall(client, word)


def sort_key(memory: dict[str, Any], field: str) -> Any:
    if field == "content_length":
        return memory["stats"]["content_length"]
    return at(memory[field]) if field.endswith("_at") or field == "last_accessed" else memory[field]


@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize(
    "field", ["created_at", "updated_at", "last_accessed", "importance", "access_count", "content_length"]
)
async def test_list_sorts_by_each_field_in_both_orders(client, varied, field, order):
    memories = await listed(client, sort={"field": field, "order": order}, include_stats=True)
    values = [sort_key(m, field) for m in memories]
    assert len(set(values)) == 4, values  # the seed has no ties, so the order is fully checked
    assert values == sorted(values, reverse=order == "desc")


async def test_list_sorts_newest_first_by_default(client, clock):
    first = await store(client, "First note")
    clock.advance(minutes=1)
    second = await store(client, "Second note")
    assert [m["memory_id"] for m in await listed(client)] == [second, first]


@pytest.mark.parametrize(
    ("sort", "importance"),
    [
        ({"field": "created_at", "order": "desc"}, None),
        ({"field": "created_at", "order": "asc"}, None),
        ({"field": "importance", "order": "desc"}, 0.5),  # every row ties: the cursor must still move on
    ],
    ids=["newest first", "oldest first", "all tied"],
)
async def test_cursor_pagination_walks_every_row_once_while_memories_are_stored(client, clock, sort, importance):
    metadata = {"importance": importance} if importance is not None else {}
    originals = []
    for i in range(7):
        clock.advance(minutes=1)
        originals.append(await store(client, f"Original note {i}", metadata=metadata))
    seen: list[str] = []
    pagination: dict[str, Any] = {"limit": 3}
    for page in range(10):
        body = await call(client, "list_memories", sort=sort, pagination=pagination)
        seen += [m["memory_id"] for m in body["memories"]]
        if not body["pagination"]["has_more"]:
            assert body["pagination"]["next_cursor"] is None
            break
        pagination = {"limit": 3, "cursor": body["pagination"]["next_cursor"]}
        clock.advance(minutes=1)
        await store(client, f"Note stored between pages {page}", metadata=metadata)
    assert len(seen) == len(set(seen)), "a row came twice"
    assert set(originals) <= set(seen)


async def test_offset_pagination_gives_the_next_offset_until_the_last_page(client, clock):
    for i in range(5):
        clock.advance(minutes=1)
        await store(client, f"Paged note {i}")
    first = await call(client, "list_memories", pagination={"limit": 2})
    assert (first["total_count"], first["returned_count"]) == (5, 2)
    assert first["pagination"]["has_more"] is True
    assert first["pagination"]["next_offset"] == 2
    last = await call(client, "list_memories", pagination={"limit": 2, "offset": 4})
    assert (last["returned_count"], last["pagination"]) == (
        1,
        {"has_more": False, "next_cursor": None, "next_offset": None},
    )


async def test_list_without_content_gives_only_metadata(client):
    await store(client, "A secret recipe for bread", metadata={"tags": ["baking"]})
    [memory] = await listed(client, include_content=False)
    assert "content" not in memory
    assert memory["memory_id"] and "baking" in memory["tags"]
    [with_content] = await listed(client)
    assert with_content["content"] == "A secret recipe for bread"
    assert "stats" not in with_content


async def test_list_with_stats_reports_length_links_and_days(client, clock):
    a = await store(client, "The user's car is a red Fiat")
    await store(client, "The Fiat needs new tyres", related_memory_ids=[a])
    clock.advance(days=3)
    stats = (await one(client, a))["stats"]
    assert stats == {
        "content_length": len("The user's car is a red Fiat"),
        "link_count": 1,
        "days_since_creation": 3,
        "days_since_access": 3,
    }
    await recall(client, "car")
    assert (await one(client, a))["stats"]["days_since_access"] == 0


# -- stats -----------------------------------------------------------------------------------
@pytest.fixture
async def population(client, clock) -> None:
    """Two facts of u1 in conversation c1 (three days old), one preference of u2 in c2 (today)."""
    three_days_ago = iso(clock.now() - timedelta(days=3))
    for content in ("Water boils at 100 degrees", "The user was born in 1990"):
        await store(
            client,
            content,
            context={"user_id": "u1", "conversation_id": "c1", "timestamp": three_days_ago},
            metadata={"category": "fact", "importance": 0.8},
        )
    await store(
        client,
        "The user prefers window seats",
        context={"user_id": "u2", "conversation_id": "c2"},
        metadata={"category": "preference", "importance": 0.2},
    )


@pytest.mark.parametrize(
    ("scope", "scope_id", "total"),
    [
        ("global", None, 3),
        ("user", None, 3),
        ("user", "u1", 2),
        ("user", "u2", 1),
        ("conversation", "c1", 2),
        ("conversation", "c2", 1),
        ("category", "fact", 2),
        ("category", "preference", 1),
    ],
)
async def test_stats_count_only_the_memories_of_their_scope(client, population, scope, scope_id, total):
    args = {"scope": scope} if scope_id is None else {"scope": scope, "scope_id": scope_id}
    body = await call(client, "get_memory_stats", **args)
    assert (body["scope"], body["scope_id"]) == (scope, scope_id)
    assert body["statistics"]["count"]["total"] == total


@pytest.mark.parametrize(
    "metrics", [["count"], ["health_score", "storage_size"], ["access_patterns", "growth_rate", "deletion_rate"]]
)
async def test_stats_return_only_the_metrics_asked_for(client, population, metrics):
    body = await call(client, "get_memory_stats", scope="global", metrics=metrics)
    assert set(body["statistics"]) == set(metrics)
    assert "trends" not in body


async def test_stats_return_every_metric_when_none_are_named(client, population):
    body = await call(client, "get_memory_stats", scope="global")
    assert set(body["statistics"]) == set(METRICS)


@pytest.mark.parametrize("granularity", ["hour", "day", "week", "month"])
async def test_stats_trends_end_at_the_current_count_for_each_granularity(client, population, granularity):
    body = await call(client, "get_memory_stats", scope="global", include_trends=True, granularity=granularity)
    series = body["trends"]["memory_count"]
    values = [point["value"] for point in series]
    assert values[-1] == body["statistics"]["count"]["total"] == 3
    assert values == sorted(values), "a count of memories created by then never falls"
    assert all(point["date"] for point in series)
    assert len({point["date"] for point in series}) == len(series)


async def test_daily_trend_shows_when_memories_were_created(client, population, clock):
    body = await call(client, "get_memory_stats", scope="global", include_trends=True)
    by_day = {point["date"]: point["value"] for point in body["trends"]["memory_count"]}
    today = clock.now().date()
    assert by_day[str(today - timedelta(days=4))] == 0
    assert by_day[str(today - timedelta(days=3))] == 2
    assert by_day[str(today)] == 3


async def test_stats_health_score_factors_lie_in_0_1(client, population):
    await recall(client, "water")
    health = (await call(client, "get_memory_stats", scope="global", metrics=["health_score"]))["statistics"][
        "health_score"
    ]
    assert set(health["factors"]) == {
        "deduplication",
        "categorization_accuracy",
        "access_distribution",
        "storage_efficiency",
    }
    assert all(0.0 <= value <= 1.0 for value in health["factors"].values())
    assert 0.0 <= health["overall"] <= 1.0
    assert health["factors"]["access_distribution"] == pytest.approx(1 / 3, abs=1e-3)


async def test_stats_count_soft_and_hard_deletes_apart(client, population):
    ids = [m["memory_id"] for m in await listed(client)]
    await call(client, "forget_memory", memory_id=ids[0])
    await call(client, "forget_memory", memory_id=ids[1], hard_delete=True)
    stats = (await call(client, "get_memory_stats", scope="global", metrics=["count", "deletion_rate"]))["statistics"]
    assert (stats["count"]["total"], stats["count"]["active"], stats["count"]["deleted"]) == (2, 1, 1)
    assert (stats["deletion_rate"]["soft_deletes"], stats["deletion_rate"]["hard_deletes"]) == (1, 1)


async def test_stats_distributions_describe_the_active_memories(client, population):
    stats = (
        await call(
            client, "get_memory_stats", scope="global", metrics=["category_distribution", "importance_distribution"]
        )
    )["statistics"]
    assert stats["category_distribution"] == {"fact": 2, "preference": 1}
    assert stats["importance_distribution"] == {"high": 2, "medium": 0, "low": 1}


async def test_stats_access_patterns_follow_recalls(client, population):
    [water] = await recall(client, "water")
    await recall(client, "water")
    await recall(client, "window")
    patterns = (await call(client, "get_memory_stats", scope="global", metrics=["access_patterns"]))["statistics"][
        "access_patterns"
    ]
    assert patterns["total_recalls"] == 3
    assert patterns["unique_memories_accessed"] == 2
    assert (patterns["most_accessed_memory_id"], patterns["most_accessed_count"]) == (water["memory_id"], 2)


async def test_stats_time_range_counts_only_memories_created_inside_it(client, population, clock):
    body = await call(
        client,
        "get_memory_stats",
        scope="global",
        time_range={"start": iso(clock.now() - timedelta(days=1)), "end": iso(clock.now())},
        metrics=["count"],
    )
    assert body["statistics"]["count"]["total"] == 1
    assert at(body["time_range"]["start"]) == clock.now() - timedelta(days=1)


async def test_a_refused_forget_purges_nothing_even_what_has_passed_its_retention(client, server):
    gone = (await call(client, "store_memory", content="A note kept for no time at all"))["memory_id"]
    await call(client, "forget_memory", memory_id=gone, retention_period_days=0)  # recoverable until now
    refused = await client.call_tool("forget_memory", {"memory_id": gone})  # already deleted: 404
    assert refused.is_error
    assert server.service.storage.get(gone) is not None  # still there until a call that is carried out
