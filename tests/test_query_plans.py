"""How SQLite reaches the rows of a query: plans that stay fast at 1,000,000 memories.

SQLite keeps no statistics on a store, so its planner goes by the shape of a query alone, and a
plan found on a small store is the plan at any size.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest

from mnemo.clock import ManualClock
from mnemo.engine.service import MemoryService
from mnemo.model import AccessLevel, Context, Status
from mnemo.query import Filters, Sort, SortField
from mnemo.storage.sqlite import DB_FILENAME, SQLiteStorage

T = TypeVar("T")


def _traced(
    tmp_path: Path, clock: ManualClock, fill: Callable[[MemoryService], object], call: Callable[[SQLiteStorage], T]
) -> tuple[T, list[str]]:
    """Fill a new store, then make one call on its storage with its SQL recorded (values in place):
    the call's answer and the statements."""
    storage = SQLiteStorage(tmp_path / "store")
    statements: list[str] = []
    try:
        fill(MemoryService(storage, clock))
        storage._connection().set_trace_callback(statements.append)
        return call(storage), statements
    finally:
        storage.close()


def _plan(tmp_path: Path, statement: str) -> list[str]:
    """SQLite's plan of a statement on the store, a step an item."""
    with closing(sqlite3.connect(tmp_path / "store" / DB_FILENAME)) as db:
        return [row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}")]


def _page_of(statements: list[str]) -> str:
    """The statement that read a page."""
    (select,) = [s for s in statements if s.startswith("SELECT") and "ORDER BY" in s]
    return select


@pytest.mark.parametrize("field", list(SortField))
def test_a_sorted_page_of_given_ids_looks_them_up(tmp_path: Path, clock: ManualClock, field: SortField):
    # A search's matches sorted by a field (spec 000's query_memories with sort_by): walking the
    # status index in that order went through most of 1,000,000 memories to find 200 (145 ms).
    chosen: list[str] = []

    def fill(service: MemoryService) -> None:
        stored = [service.store(f"note {n} about the garden", importance=n / 10, context=Context(user_id="u1"))
                  for n in range(10)]  # fmt: skip
        chosen.extend(result.memory.id for result in stored[2:8])

    rows, statements = _traced(
        tmp_path,
        clock,
        fill,
        lambda storage: storage.select(Filters(now=clock.now(), ids=tuple(chosen)), Sort(field, True), 4),
    )
    assert {m.id for m, _ in rows} <= set(chosen) and len(rows) == 4
    plan = _plan(tmp_path, _page_of(statements))
    assert plan[0].startswith("SEARCH m USING INDEX sqlite_autoindex_memories_1 (id=?)"), plan


def _plan_of_page(tmp_path: Path, clock: ManualClock, rare: int, **filters: object) -> tuple[int, list[str]]:
    """How many memories a page of 20 sorted by importance holds, and its plan, of 40 memories of
    which ``rare`` are labelled "goal" and kept by "u1" (the others "instruction", "u2")."""

    def fill(service: MemoryService) -> None:
        for n in range(40):
            one = n < rare
            service.store(f"note {n} about the garden", category="goal" if one else "instruction",
                          context=Context(user_id="u1" if one else "u2"))  # fmt: skip

    page = Filters(now=clock.now(), **filters)  # type: ignore[arg-type]
    rows, statements = _traced(
        tmp_path, clock, fill, lambda storage: storage.select(page, Sort(SortField.IMPORTANCE, True), 20)
    )
    return len(rows), _plan(tmp_path, _page_of(statements))


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({"labels": ("goal",)}, "memories_category"),
        ({"categories": ("goal",)}, "memories_category"),
        ({"user_id": "u1"}, "memories_user"),
    ],
)
def test_a_sorted_page_of_few_matches_reads_them_from_the_filter_s_index(
    tmp_path: Path, clock: ManualClock, filters: dict[str, object], index: str
):
    # At 1,000,000 memories, walking the sort order's index to find the 282 of a category read
    # 1.5 s, and 2.3 s to find none; their own index and a sort of them, about 1 ms.
    found, plan = _plan_of_page(tmp_path, clock, 3, **filters)
    assert found == 3
    assert plan[0].startswith(f"SEARCH m USING INDEX {index}") and "TEMP B-TREE" in plan[-1], plan


def test_a_sorted_page_of_many_matches_walks_the_sort_order(tmp_path: Path, clock: ManualClock):
    found, plan = _plan_of_page(tmp_path, clock, 3, labels=("instruction",))
    assert found == 20
    assert plan == ["SEARCH m USING INDEX memories_status_importance (status=?)"], plan


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({"labels": ("goal",)}, "memories_category"),
        ({"types": ("task",)}, "memories_type"),
        ({"subject_key": "emma"}, "memories_subject"),
        ({"access_levels": ("shared",)}, "memories_access_level"),
        ({"conversation_id": "c1"}, "memories_conversation"),
        ({"agent_names": ("scout",)}, "memories_agent"),
        ({"user_id": "u1"}, "memories_user"),
    ],
)
def test_a_list_s_total_counts_its_matches_from_their_index_alone(
    tmp_path: Path, clock: ManualClock, filters: dict[str, object], index: str
):
    # Each match's expiry read from its row: 310,808 of one label at 1,000,000 memories took
    # 220-240 ms to count; from the index, which holds it, 17-18 ms.
    def fill(service: MemoryService) -> None:
        service.store("note about the garden", category="goal", type="task", subject="Emma", agent_name="scout",
                      context=Context(user_id="u1", conversation_id="c1"), access_level=AccessLevel.SHARED)  # fmt: skip

    counted, _, plan = _count_and_plan(tmp_path, clock, fill, filters)
    assert counted == 1
    assert len(plan) == 1 and plan[0].startswith(f"SEARCH m USING COVERING INDEX {index} "), plan


def _count_and_plan(
    tmp_path: Path, clock: ManualClock, fill: Callable[[MemoryService], None], filters: dict[str, object]
) -> tuple[int, str, list[str]]:
    """Fill a new store, then count the memories that pass the filters: the count, its SQL (with
    its values in place) and SQLite's plan of it."""
    counting = Filters(**{"now": clock.now(), "visible_to": None, **filters})  # type: ignore[arg-type]
    counted, statements = _traced(tmp_path, clock, fill, lambda storage: storage.count(counting))
    (select,) = [s for s in statements if s.startswith("SELECT COUNT(*)")]
    return counted, select, _plan(tmp_path, select)


def _tagged(service: MemoryService) -> None:
    """60 memories of user u1: 2 tagged "rare", all "common" and "everyday"."""
    for n in range(60):
        tags = ["common", "everyday", "rare"] if n < 2 else ["common", "everyday"]
        service.store(f"note {n} about the garden", tags=tags, context=Context(user_id="u1"))


# With a viewer more than the tags decides (see below for tags alone).
@pytest.mark.parametrize(
    "filters", [{"tags_any": ("rare",), "visible_to": "u1"}, {"tags_all": ("common", "rare"), "visible_to": "u1"}]
)
def test_a_count_of_the_few_memories_with_a_tag_reads_them_through_the_tag_s_list(
    tmp_path: Path, clock: ManualClock, filters: dict[str, object]
):
    # Walking the status index through 1,000,000 memories, each tested against the tag's list,
    # took 138-198 ms to count the 28,850 with a tag, 60 ms to count none; by their keys 48-146 and 0.
    counted, select, plan = _count_and_plan(tmp_path, clock, _tagged, filters)
    assert counted == 2
    assert plan[0] == "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)", plan
    if "tags_all" in filters:  # the tag fewer memories have is read first
        assert select.index("'rare'") < select.index("'common'")


def test_a_count_of_the_many_memories_with_a_tag_and_a_viewer_walks_an_index(tmp_path: Path, clock: ManualClock):
    counted, _, plan = _count_and_plan(tmp_path, clock, _tagged, {"tags_any": ("common",), "visible_to": "u1"})
    assert counted == 60
    assert plan[0].startswith("SEARCH m USING INDEX memories_status_") and plan[0].endswith("(status=?)"), plan


@pytest.mark.parametrize(
    ("tags", "passing"),
    [
        ({"tags_any": ("common",)}, 60),
        ({"tags_any": ("rare", "common")}, 60),
        ({"tags_all": ("rare",)}, 2),
        ({"tags_all": ("common", "rare")}, 2),
    ],
)
def test_a_count_of_tags_alone_is_their_list_less_the_memories_that_fail_status_or_expiry(
    tmp_path: Path, clock: ManualClock, tags: dict[str, object], passing: int
):
    # A tag of 109,573 memories of 1,000,000 counted walking the status index 290-320 ms; its list
    # less the few memories that fail (none there), 10.5 ms. Here 4 of 304 fail: 2 forgotten, 2 expired.
    def fill(service: MemoryService) -> None:
        _tagged_among_others(service)
        for n in range(4):
            service.store(f"passing note {n} about the pond", tags=["common", "rare"],
                          expires_at=clock.now() + timedelta(hours=n + 1))  # fmt: skip
        listed = service.list(tags=["common"], limit=100).memories
        service.forget(listed[0].id)  # the last passing note
        service.forget(listed[-1].id)  # the first note, also rare
        clock.advance(hours=2.5)  # two of the passing notes have expired: one is left

    def count(storage: SQLiteStorage) -> int:
        filters = Filters(now=clock.now(), visible_to=None, **tags)  # type: ignore[arg-type]
        counted = storage.count(filters)
        storage._connection().set_trace_callback(None)
        for statuses in ((Status.ACTIVE,), (Status.FORGOTTEN,), (Status.ACTIVE, Status.FORGOTTEN), (), None):
            for include_expired in (False, True):
                other = replace(filters, statuses=statuses, include_expired=include_expired)
                assert storage.count(other) == len(storage.keys_matching(other)), other
        return counted

    counted, statements = _traced(tmp_path, clock, fill, count)
    assert counted == passing
    counting = [s for s in statements if s.startswith("SELECT count(*) FROM (SELECT m.rowid FROM memories m")]
    assert counting and not [s for s in statements if s.startswith("SELECT COUNT(*) FROM memories m")]
    plan = _plan(tmp_path, counting[0])
    assert not [step for step in plan if step.startswith(("SCAN m", "SCAN t"))], plan  # no table read whole
    probes = [step for step in plan if step.startswith("SEARCH t")]  # each failing memory's tags, by its key
    assert probes and all("memory_rowid=?" in step for step in probes), plan


def _tagged_among_others(service: MemoryService) -> None:
    """300 memories: _tagged's 60 and 240 untagged."""
    _tagged(service)
    for n in range(240):
        service.store(f"untagged note {n} about the orchard")


def test_a_page_of_the_few_memories_with_a_tag_reads_them_by_key_and_sorts_them(tmp_path: Path, clock: ManualClock):
    # At 1,000,000 memories a page of the one memory with a tag walked the order through them all (97 ms).
    page = Filters(now=clock.now(), tags_any=("rare",))
    rows, statements = _traced(
        tmp_path, clock, _tagged_among_others, lambda storage: storage.select(page, Sort(SortField.CREATED_AT, True), 5)
    )
    assert len(rows) == 2 and all("rare" in memory.tags for memory, _ in rows)
    plan = _plan(tmp_path, _page_of(statements))
    assert plan[0] == "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)" and "TEMP B-TREE" in plan[-1], plan


def test_a_page_of_the_many_memories_with_a_tag_walks_the_order_looking_each_one_s_tags_up(
    tmp_path: Path, clock: ManualClock
):
    # A list of every memory with the tag was built before the walk: 28 ms of a page at 1,000,000
    # memories for a tag 202,902 have, where the walk reads about a hundred (0.1 ms).
    page = Filters(now=clock.now(), tags_any=("common",))
    rows, statements = _traced(
        tmp_path, clock, _tagged_among_others, lambda storage: storage.select(page, Sort(SortField.CREATED_AT, True), 5)
    )
    assert len(rows) == 5 and all("common" in memory.tags for memory, _ in rows)
    plan = _plan(tmp_path, _page_of(statements))
    assert plan[0].startswith("SEARCH m USING INDEX memories_status_created (status=?)"), plan
    assert not [step for step in plan if step.startswith("LIST SUBQUERY")], plan
    assert "SEARCH t USING PRIMARY KEY (tag=? AND memory_rowid=?)" in plan, plan


def test_the_custom_category_is_found_from_the_index_of_what_each_label_is_filed_under(
    tmp_path: Path, clock: ManualClock
):
    # "custom" is every label but the named ones: at 1,000,000 memories its page and total read
    # every memory (3.0 s to find none), 0.1 ms from memories_filed_under.
    filed: dict[str, str] = {}

    def fill(service: MemoryService) -> None:
        for n, label in enumerate(["pattern", "goal", "Zebra", "instruction", "restriction", "custom", "fact"] * 6):
            filed[service.store(f"note {n} about the garden", category=label).memory.id] = label

    page = Filters(now=clock.now(), categories=("custom",), visible_to=None)
    (rows, counted), statements = _traced(
        tmp_path,
        clock,
        fill,
        lambda storage: (storage.select(page, Sort(SortField.IMPORTANCE, True), 20), storage.count(page)),
    )
    custom = {i for i, label in filed.items() if label in {"pattern", "Zebra", "custom"}}
    assert {m.id for m, _ in rows} == custom and counted == len(custom) == 18
    (total,) = [s for s in statements if s.startswith("SELECT COUNT(*) FROM memories m")]
    for statement in (_page_of(statements), total):
        plan = _plan(tmp_path, statement)
        assert plan[0].startswith("SEARCH m USING INDEX memories_filed_under (<expr>=?"), plan


_NEW_YEAR = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("filters", "searched"),
    [
        ({"importance_min": 0.7}, "memories_status_importance (status=? AND importance>?)"),
        ({"created_from": _NEW_YEAR}, "memories_status_created (status=? AND created_at>?)"),
        ({"accessed_before": _NEW_YEAR}, "memories_status_accessed (status=? AND accessed_at<?)"),
        ({"updated_after": _NEW_YEAR}, "memories_status_updated (status=? AND updated_at>?)"),
        # Bands (spec 000's importance "high") that make one range are counted as that range; low
        # and high together stay a CASE of importance, which the index holds too.
        ({"importance_bands": ("high",)}, "memories_status_importance (status=? AND importance>?)"),
        ({"importance_bands": ("medium",)}, "memories_status_importance (status=? AND importance>? AND importance<?)"),
        ({"importance_bands": ("low", "medium")}, "memories_status_importance (status=? AND importance<?)"),
        ({"importance_bands": ("low", "high")}, "memories_status_importance (status=?)"),
    ],
)
def test_a_total_over_a_range_counts_from_the_range_s_index_alone(
    tmp_path: Path, clock: ManualClock, filters: dict[str, object], searched: str
):
    # Each match read from the table for its expiry: a week's 27,575 of 1,000,000 memories took
    # 57-83 ms to count, 1.5-2.1 from the index; the 300,526 of importance "high" 340-1,050 ms, 99-183
    # from the index as a CASE, and 16.4-21.6 as a range.
    def fill(service: MemoryService) -> None:
        for n in range(10):
            service.store(f"note {n} about the garden", importance=n / 10)

    _, _, plan = _count_and_plan(tmp_path, clock, fill, filters)
    assert plan == [f"SEARCH m USING COVERING INDEX {searched}"], plan


@pytest.mark.parametrize(
    ("field", "searched"),
    [
        (SortField.IMPORTANCE, "memories_status_importance (status=? AND importance>? AND importance<?)"),
        # By another field the band stays a CASE, tested as the page walks that field's order: as a
        # range, the whole band (300,000 of 1,000,000 memories) was read and sorted (770-1,070 ms).
        (SortField.CREATED_AT, "memories_status_created (status=?)"),
    ],
)
def test_a_page_of_an_importance_band_sorted_by_importance_reads_the_band_s_range(
    tmp_path: Path, clock: ManualClock, field: SortField, searched: str
):
    # Spec 000's importance "medium" by importance walked the index from the top through every
    # "high" memory first: 43-48 ms at 1,000,000, 19-22 from the range.
    def fill(service: MemoryService) -> None:
        for n in range(10):
            service.store(f"note {n} about the garden", importance=n / 10)

    page = Filters(now=clock.now(), importance_bands=("medium",))
    rows, statements = _traced(tmp_path, clock, fill, lambda storage: storage.select(page, Sort(field, True), 2))
    assert [memory.importance for memory, _ in rows] == [0.6, 0.5]  # the newest are the most important too
    plan = _plan(tmp_path, _page_of(statements))
    assert plan == [f"SEARCH m USING INDEX {searched}"], plan


@pytest.mark.parametrize(
    ("filters", "searched"),
    [
        ({"user_id": "u1"}, "memories_user (user_id=? AND status=?)"),
        ({"conversation_id": "c1"}, "memories_conversation (conversation_id=? AND status=?)"),
        ({"agent_names": ("scout",)}, "memories_agent (agent_name=? AND status=?)"),
    ],
)
def test_a_page_of_one_owner_s_newest_memories_reads_their_index_in_order(
    tmp_path: Path, clock: ManualClock, filters: dict[str, object], searched: str
):
    # The status index by creation was the only one in the page's whole order (creation, rowid):
    # walking it and testing each memory's user took 8.9 ms for 20 of 1,000,000; 0.08 ms from the user's.
    def fill(service: MemoryService) -> None:
        for n in range(60):  # a third each the owner's: many enough that the page walks an order
            one = n % 3 == 0
            owners = Context(user_id="u1" if one else "u2", conversation_id="c1" if one else "c2")
            service.store(f"note {n} about the garden", agent_name="scout" if one else "other", context=owners)

    page = Filters(now=clock.now(), visible_to=None, **filters)  # type: ignore[arg-type]
    rows, statements = _traced(
        tmp_path, clock, fill, lambda storage: storage.select(page, Sort(SortField.CREATED_AT, True), 5)
    )
    assert len(rows) == 5
    plan = _plan(tmp_path, _page_of(statements))
    assert plan == [f"SEARCH m USING INDEX {searched}"], plan


def test_a_count_of_one_user_s_memories_with_a_label_reads_the_label_s_index(tmp_path: Path, clock: ManualClock):
    # Priced alike, the index created last is read: the label's (at 1,000,000 memories, a user's
    # 9,959 read for a label none of them has took 71-93 ms; the label's 0.1-0.7 ms).
    def fill(service: MemoryService) -> None:
        for n in range(20):
            service.store(f"note {n} about the garden", category="goal" if n < 2 else "instruction",
                          context=Context(user_id="u1"))  # fmt: skip

    counted, _, plan = _count_and_plan(tmp_path, clock, fill, {"user_id": "u1", "labels": ("skill",)})
    assert counted == 0
    assert plan == ["SEARCH m USING INDEX memories_category (category=? AND status=?)"], plan
