"""Business rules of the service, on real SQLite files."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mnemo.clock import ManualClock
from mnemo.engine.results import TagEdit
from mnemo.engine.service import MemoryService
from mnemo.errors import Conflict, Duplicate, InvalidInput, NotFound, QuotaExceeded
from mnemo.model import Context, Status
from mnemo.query import Sort, SortField
from mnemo.search import ranking

pytestmark = pytest.mark.every_backend  # the storage contract: SQLite and PostgreSQL


def test_exact_duplicates_are_recognised_through_case_spacing_and_edge_punctuation(service: MemoryService):
    first = service.store("Emma is lactose intolerant.")
    with pytest.raises(Duplicate) as caught:
        service.store("  emma   is LACTOSE intolerant ")
    assert caught.value.existing_id == first.memory.id


def test_the_same_content_for_another_user_is_not_a_duplicate(service: MemoryService):
    service.store("Prefers dark mode", context=Context(user_id="ann"))
    service.store("Prefers dark mode", context=Context(user_id="bob"))
    assert service.list(limit=10).total == 2


def test_a_forgotten_memory_no_longer_blocks_storing_its_content_again(service: MemoryService):
    first = service.store("Lives in Lisbon")
    service.forget(first.memory.id)
    again = service.store("Lives in Lisbon")
    assert again.memory.id != first.memory.id


def test_soft_deleted_memories_are_purged_for_good_when_their_retention_ends(
    service: MemoryService, clock: ManualClock
):
    kept = service.store("Plays the cello")
    result = service.forget(kept.memory.id, retention_period_days=7)
    assert service.storage.backup(result.backup_id or "") is not None
    clock.advance(days=8)
    service.forget(service.store("Something else to forget").memory.id)  # any forget runs the purge
    assert service.storage.get(kept.memory.id) is None
    assert service.storage.backup(result.backup_id or "") is None


def test_an_update_computed_from_a_stale_version_is_refused(service: MemoryService):
    memory = service.store("Works at Acme").memory
    service.update(memory.id, content="Works at Initech")
    with pytest.raises(Conflict):
        service.update(memory.id, content="Works at Globex", expected_version=memory.version)
    assert service.get(memory.id).content == "Works at Initech"


def test_updating_with_the_same_values_writes_no_new_version(service: MemoryService):
    memory = service.store("Speaks Portuguese", importance=0.5).memory
    result = service.update(memory.id, importance=0.5)
    assert result.updated_fields == []
    assert service.get(memory.id).version == 1
    assert len(service.history(memory.id)) == 1


def test_tag_edits_replace_then_add_then_remove(service: MemoryService):
    memory = service.store("Runs marathons", tags=["sport", "running"], auto_tag=False).memory
    updated = service.update(memory.id, tags=TagEdit(add=("health",), remove=("sport",), replace=("sport", "fitness")))
    assert updated.memory.tags == ("fitness", "health")


def test_auto_tags_follow_the_content_when_it_changes(service: MemoryService):
    memory = service.store("Goes hiking every weekend in the hills").memory
    assert "hiking" in memory.auto_tags
    updated = service.update(memory.id, content="Goes swimming every weekend at the lake").memory
    assert "hiking" not in updated.all_tags
    assert service.recall("hiking").total == 0
    assert service.recall("swimming").total == 1


def test_content_merged_past_the_limit_is_refused_and_nothing_changes(service: MemoryService):
    memory = service.store("a" * 40_000).memory
    with pytest.raises(InvalidInput):
        service.update(memory.id, content="b" * 20_000, merge_strategy="append")
    assert service.get(memory.id).content == "a" * 40_000


def test_cascade_follows_links_in_both_directions_and_transitively(service: MemoryService):
    a = service.store("Project Falcon starts in March").memory
    b = service.store("Falcon's budget is 2M", related_memory_ids=[a.id]).memory
    c = service.store("Falcon budget owner is Dana", related_memory_ids=[b.id]).memory
    unrelated = service.store("Office closes at six").memory
    result = service.forget(a.id, cascade_related=True)
    assert result.related_affected == 2
    assert {service.get(m.id).status for m in (a, b, c)} == {Status.FORGOTTEN}
    assert service.get(unrelated.id).status is Status.ACTIVE


def test_hard_delete_of_a_soft_deleted_memory_removes_it_for_good(service: MemoryService):
    memory = service.store("Secret: the code is 4711").memory
    service.forget(memory.id)
    result = service.forget(memory.id, hard_delete=True, reason="privacy")
    assert result.deletion_type == "hard"
    with pytest.raises(NotFound):
        service.get(memory.id)
    assert all(change.previous is None for change in service.storage.history(memory.id))


def test_cursor_pages_stay_valid_while_memories_are_added(service: MemoryService, clock: ManualClock):
    for i in range(5):
        service.store(f"memory number {i}")
        clock.advance(minutes=1)
    first = service.list(limit=2, sort=Sort(SortField.CREATED_AT, descending=True))
    service.store("a newer memory arrives between pages")
    second = service.list(limit=2, cursor=first.next_cursor)
    third = service.list(limit=2, cursor=second.next_cursor)
    seen = [m.content for page in (first, second, third) for m in page.memories]
    assert seen == [f"memory number {i}" for i in (4, 3, 2, 1, 0)]
    assert not third.has_more


def test_a_cursor_from_another_sort_order_is_refused(service: MemoryService):
    for i in range(3):
        service.store(f"note {i}")
    page = service.list(limit=1, sort=Sort(SortField.IMPORTANCE))
    with pytest.raises(InvalidInput):
        service.list(limit=1, cursor=page.next_cursor)


def test_the_quota_refuses_new_memories_once_reached(settings, clock):
    from mnemo.app import open_service

    limited = open_service(settings.model_copy(update={"max_memories": 2}), clock=clock)
    limited.store("one")
    limited.store("two")
    with pytest.raises(QuotaExceeded):
        limited.store("three")
    limited.storage.close()


def test_expired_memories_are_left_out_of_recall_and_list(service: MemoryService, clock: ManualClock):
    service.store("Temporary door code 1234", expires_at=clock.now() + timedelta(hours=1))
    assert service.recall("door code").total == 1
    clock.advance(hours=2)
    assert service.recall("door code").total == 0
    assert service.list().total == 0


def test_recency_is_one_half_at_the_half_life_for_every_decay():
    for decay in ranking.Decay:
        assert ranking.recency(30, 30, decay) == pytest.approx(0.5)
        assert ranking.recency(0, 30, decay) == pytest.approx(1.0)


def test_weights_that_do_not_sum_to_one_are_invalid():
    with pytest.raises(InvalidInput):
        ranking.Weights(0.6, 0.1, 0.3, 0.1)


def test_health_factors_follow_the_data(service: MemoryService):
    service.store("User prefers dark mode")
    service.store("Dark mode: user prefers")  # same words, other order: a loose duplicate
    service.store("zxq")  # nothing to categorise
    health = service.stats(scope="global", metrics=["health_score"]).statistics["health_score"]
    assert health["factors"]["deduplication"] == pytest.approx(2 / 3, abs=1e-3)
    assert health["factors"]["categorization_accuracy"] == pytest.approx(2 / 3, abs=1e-3)
    assert health["factors"]["access_distribution"] == 0
    service.recall("dark mode")
    health = service.stats(scope="global", metrics=["health_score"]).statistics["health_score"]
    assert health["factors"]["access_distribution"] == pytest.approx(2 / 3, abs=1e-3)


def test_trends_count_memories_per_bucket_cumulatively(service: MemoryService, clock: ManualClock):
    service.store("first day memory")
    clock.advance(days=2)
    service.store("third day memory")
    report = service.stats(scope="global", include_trends=True, granularity="day")
    series = report.trends["memory_count"] if report.trends else []
    assert series[-1]["value"] == 2
    assert [point["value"] for point in series[-3:]] == [1, 1, 2]


def test_subjects_match_whatever_their_case_and_spacing(service: MemoryService):
    service.store("Is lactose intolerant", subject=" Emma ")
    service.store("Plays the drums", subject="Liam")
    assert [m.subject for m in service.list(subject="emma").memories] == ["Emma"]
    assert service.recall("lactose", subject="EMMA").total == 1
    assert service.recall("lactose", subject="Liam").total == 0


def test_one_subject_keeps_the_spelling_it_was_first_stored_with(service: MemoryService):
    service.store("Emma is lactose intolerant", subject="Emma")
    later = service.store("Emma plays the violin", subject="  emma ")
    assert later.memory.subject == "Emma"
    assert service.list(subject="EMMA").total == 2
    assert service.overview().by_subject == {"Emma": 2}


def test_the_same_content_about_another_subject_is_not_a_duplicate(service: MemoryService):
    service.store("Likes pizza", subject="Emma")
    service.store("Likes pizza", subject="Jake")
    with pytest.raises(Duplicate):
        service.store("likes pizza", subject="jake")


def test_a_duplicate_can_return_the_memory_already_stored_instead_of_failing(service: MemoryService):
    first = service.store("Emma is lactose intolerant", subject="Emma")
    again = service.store("Emma is lactose intolerant.", subject="emma", on_duplicate="return")
    assert again.existing and again.memory.id == first.memory.id
    assert service.list().total == 1


def test_a_label_of_the_callers_own_is_kept_and_filed_under_custom(service: MemoryService):
    memory = service.store("Retries help with flaky network calls", category="pattern").memory
    assert memory.category == "pattern"
    assert [m.id for m in service.list(labels=["pattern"]).memories] == [memory.id]
    assert [m.id for m in service.list(categories=["custom"]).memories] == [memory.id]
    assert service.overview().by_category == {"custom": 1}


def test_spec_001_category_names_are_filed_under_spec_004_ones(service: MemoryService):
    service.store("Emma must not eat dairy", category="restriction")
    assert service.list(categories=["instruction"]).total == 1


def test_each_category_lists_the_labels_filed_under_it(service: MemoryService):
    from mnemo.model import CATEGORY_ALIASES, Category, canonical_category

    labels = [c.value for c in Category if c is not Category.CUSTOM] + list(CATEGORY_ALIASES) + ["pattern"]
    filed = {
        service.store(f"note {n} about {label}", category=label).memory.id: canonical_category(label).value
        for n, label in enumerate(labels)
    }
    for asked in [[c.value] for c in Category] + [["goal", "instruction"], ["custom", "fact"], ["nonsense"]]:
        listed = {m.id for m in service.list(categories=asked, limit=None).memories}
        assert listed == {memory_id for memory_id, category in filed.items() if category in asked}, asked


def test_each_set_of_importance_bands_lists_the_memories_in_them(service: MemoryService):
    from itertools import combinations

    from mnemo.model import ImportanceBand, importance_band

    banded = {
        service.store(f"note {n} about the garden", importance=importance).memory.id: importance_band(importance).value
        for n, importance in enumerate([0.0, 0.2, 0.39999, 0.4, 0.55, 0.69999, 0.7, 0.85, 1.0])
    }
    names = [b.value for b in ImportanceBand]
    for asked in [list(c) for k in range(1, 4) for c in combinations(names, k)]:
        listed = service.list(importance_bands=asked, limit=None)
        assert {m.id for m in listed.memories} == {i for i, band in banded.items() if band in asked}, asked
        assert listed.total == len(listed.memories)


def test_an_outdated_memory_keeps_why_and_is_no_longer_recalled(service: MemoryService):
    memory = service.store("Emma lives in Porto").memory
    result = service.update(memory.id, status=Status.OUTDATED, reason="moved to Lisbon")
    assert result.memory.status is Status.OUTDATED and result.memory.forget_details == "moved to Lisbon"
    assert service.recall("where does Emma live").hits == []
    assert service.get(memory.id).content == "Emma lives in Porto"
    assert service.list(statuses=["outdated"]).total == 1


def test_type_metadata_and_archiving_are_updates_like_any_other(service: MemoryService):
    memory = service.store("Use ruff for linting", type="core").memory
    result = service.update(memory.id, type="learning", metadata={"source": "review"}, status=Status.ARCHIVED)
    assert set(result.updated_fields) == {"type", "metadata", "status"}
    assert service.list(types=["learning"], statuses=["archived"]).total == 1
    with pytest.raises(InvalidInput):
        service.update(memory.id, type="hobby")
    with pytest.raises(InvalidInput):
        service.update(memory.id, status=Status.FORGOTTEN)


def test_the_overview_counts_types_bands_tags_and_finds_the_most_accessed(service: MemoryService):
    a = service.store("Prefers pytest", type="core", importance=0.9, tags=["python", "testing"]).memory
    service.store("Deploy on Fridays is risky", type="learning", importance=0.1, tags=["python"])
    service.recall("pytest")
    summary = service.overview()
    assert summary.count == 2
    assert summary.by_type == {"core": 1, "learning": 1}
    assert summary.by_importance == {"high": 1, "low": 1}
    assert summary.top_tags[0] == ("python", 2)
    assert summary.most_accessed is not None and summary.most_accessed.id == a.id
    assert summary.storage_bytes > 0


def test_a_new_memory_is_created_at_the_moment_its_create_record_names(settings, clock: ManualClock):
    from datetime import datetime

    from mnemo.app import open_service

    class Ticking(ManualClock):
        """Moves a second at every reading, as a slow first embedding would between two readings."""

        def now(self) -> datetime:
            self.advance(seconds=1)
            return super().now()

    service = open_service(settings, clock=Ticking(clock.now()))
    try:
        memory = service.store("Keeps the spare key under the blue pot").memory
        assert [change.at for change in service.storage.history(memory.id)] == [memory.created_at]
    finally:
        service.storage.close()
