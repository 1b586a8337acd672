"""The search-quality harness (benchmarks/recall_quality.py) computes its metrics exactly.

It runs on a hand-made data file of two haystacks whose rankings are plain enough to know in
advance: a relevant memory ranked second, a filtered query, a missed second relevant memory, a
negative query that matches nothing and one that matches a word.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.search import enrich

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
HARNESS = BENCHMARKS / "recall_quality.py"


def load_benchmark(name: str) -> ModuleType:
    """The script benchmarks/``name``.py as a module (it puts its folder on the path for its siblings)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


rq = load_benchmark("recall_quality")
rm = importlib.import_module("recall_metrics")  # beside the harness, on the path it put its folder on

MEMORIES_1 = [
    {"id": "a1", "content": "Noah takes cello lessons.", "subject": "Noah", "category": "skill",
     "created_at": "2026-01-01T10:00:00Z", "user_id": "u1", "tags": ["music"], "importance": 0.5},
    {"id": "a2", "content": "Noah started playing the cello last autumn at the community music school near the park "
     "together with his best friend from class.", "subject": "Noah", "category": "history",
     "created_at": "2025-12-31T10:00:00Z", "user_id": "u1"},  # older than a1: not taken for its update
    {"id": "a3", "content": "Emma is allergic to peanuts.", "subject": "Emma", "category": "restriction",
     "created_at": "2026-01-03T10:00:00Z", "user_id": "u1"},
    {"id": "a4", "content": "Emma is allergic to peanuts.", "subject": "Emma", "category": "restriction",
     "created_at": "2026-01-04T10:00:00Z", "user_id": "u2", "metadata": {"source": "school form"}},
    {"id": "a5", "content": "Noah takes cello lessons.", "subject": "Noah", "category": "skill",
     "created_at": "2026-01-05T10:00:00Z", "user_id": "u1"},
]  # fmt: skip
QUERIES_1 = [
    {"id": "q1", "query": "cello lessons", "relevant": ["a2"], "kind": "paraphrase"},
    {"id": "q2", "query": "peanuts allergic", "relevant": ["a4"], "kind": "filtered", "filters": {"user_id": "u2"}},
    {"id": "q3", "query": "What is Liam's blood type?", "relevant": [], "kind": "negative"},
]
MEMORIES_2 = [
    {"id": "b1", "content": "The deploy freeze starts in November.", "created_at": "2025-10-01T09:00:00"},
    {"id": "b2", "content": "Billing cutover planned for March.", "created_at": "2025-10-02T09:00:00"},
    {"id": "b3", "content": "The team adopted PostgreSQL.", "created_at": "2025-10-03T09:00:00"},
]
QUERIES_2 = [
    {"id": "q4", "query": "billing cutover", "relevant": ["b2", "b3"], "kind": "paraphrase", "as_of": "2026-02-01"},
    {"id": "q5", "query": "deploy freeze", "relevant": [], "kind": "negative"},
]
DATA: dict[str, Any] = {
    "name": "tiny",
    "haystacks": [
        {"id": "h1", "memories": MEMORIES_1, "queries": QUERIES_1},
        {"id": "h2", "memories": MEMORIES_2, "queries": QUERIES_2},
    ],
}

RANK_2 = 1 / math.log2(3)  # the discounted gain of a hit at rank 2


@pytest.fixture
def data_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(DATA), encoding="utf-8")
    yield path


def _by_id(outcomes: list[Any]) -> dict[str, Any]:
    return {o.query_id: o for o in outcomes}


def test_a_relevant_memory_ranked_second_gives_mrr_one_half_and_counts_from_recall_at_5():
    assert rm.recall_at(["b"], ["a", "b", "c"], 1) == 0.0
    assert rm.recall_at(["b"], ["a", "b", "c"], 5) == 1.0
    assert rm.reciprocal_rank(["b"], ["a", "b", "c"]) == 0.5
    assert rm.ndcg_at(["b"], ["a", "b", "c"], 10) == pytest.approx(RANK_2)


def test_recall_at_k_is_the_share_of_relevant_memories_and_ndcg_ideal_caps_at_k():
    assert rm.recall_at(["a", "b", "c", "d"], ["a", "x", "c"], 10) == 0.5
    assert rm.reciprocal_rank(["a"], []) == 0.0
    assert rm.ndcg_at(["a", "b"], ["a", "b"], 10) == 1.0
    # Twelve relevant memories, all ten returned ones relevant: ideal is ten hits, so nDCG is 1.
    many = [f"m{i}" for i in range(12)]
    assert rm.ndcg_at(many, many[:10], 10) == pytest.approx(1.0)


def test_metrics_average_only_over_queries_with_answers_and_count_rejected_negatives():
    outcomes = [
        rm.Outcome("q1", "paraphrase", ("b",), ("a", "b"), (1.0, 0.5), 1.0),
        rm.Outcome("q2", "negative", (), ("c",), (0.69,), 1.0),
        rm.Outcome("q3", "negative", (), ("c",), (0.7,), 1.0),
        rm.Outcome("q4", "negative", (), (), (), 1.0),
    ]
    m = rm.metrics(outcomes)
    assert (m.queries, m.answered, m.negatives) == (4, 1, 3)
    assert (m.recall_at_1, m.recall_at_5, m.mrr) == (0.0, 1.0, 0.5)
    assert m.negatives_rejected == pytest.approx(2 / 3)  # 0.69 and nothing are rejected; 0.7 is not
    assert rm.metrics(outcomes[1:]).recall_at_5 is None


def test_category_labels_are_compared_through_the_documented_map_with_confusion_counts():
    report = rq.category_report(
        [("restriction", "instruction"), ("restriction", "fact"), ("history", "event"), ("fact", "fact")]
    )
    assert report.accuracy == 0.75
    assert report.confusion == {
        "fact": {"fact": 1},
        "history": {"event": 1},
        "restriction": {"instruction": 1, "fact": 1},
    }
    with pytest.raises(ValueError, match="no entry in CATEGORY_MAP"):
        rq.category_report([("mood", "fact")])


def test_query_filters_become_recall_arguments_with_the_category_mapped():
    assert rq.recall_filters({"user_id": "u1", "subject": "Emma", "category": "restriction"}) == {
        "user_id": "u1",
        "subject": "Emma",
        "categories": ["instruction"],
    }
    assert rq.recall_filters({}) == {"user_id": None, "subject": None, "categories": None}
    with pytest.raises(ValueError, match="unknown filters"):
        rq.recall_filters({"tag": "x"})


def test_a_whole_run_over_two_haystacks_gives_the_metrics_worked_out_by_hand(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MNEMO_EMBEDDER", "none")  # the hand-worked ranks are those of words alone
    run = rq.evaluate(DATA)
    assert (run.haystacks, run.memories, run.duplicates) == (2, 8, 1)
    outcomes = _by_id(run.relevance)
    assert outcomes["q1"].ranked.index(outcomes["q1"].relevant[0]) == 1  # ranked second
    assert len(outcomes["q2"].ranked) == 1  # the other user's identical memory is filtered out
    assert outcomes["q3"].ranked == ()
    m = rm.metrics(run.relevance)
    # Answered: q1 (rank 2), q2 (rank 1), q4 (one of two relevant, at rank 1).
    assert m.answered == 3
    assert m.recall_at_1 == pytest.approx((0 + 1 + 0.5) / 3)
    assert m.recall_at_5 == pytest.approx((1 + 1 + 0.5) / 3)
    assert m.recall_at_10 == pytest.approx((1 + 1 + 0.5) / 3)
    assert m.mrr == pytest.approx((0.5 + 1 + 1) / 3)
    assert m.ndcg_at_10 == pytest.approx((RANK_2 + 1 + 1 / (1 + RANK_2)) / 3)
    # q3 matches no word, so it is rejected; q5 matches "deploy freeze" and counts by its best hit.
    assert outcomes["q3"].rejected
    q5_rejected = max(outcomes["q5"].similarities, default=0.0) < rm.NEGATIVE_THRESHOLD
    assert m.negatives_rejected == (1 + q5_rejected) / 2
    kinds = rm.by_kind(run.relevance)
    assert kinds["negative"].recall_at_5 is None
    assert kinds["paraphrase"].mrr == pytest.approx((0.5 + 1) / 2)


def test_category_accuracy_counts_detected_categories_of_every_labelled_memory_duplicates_included(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("MNEMO_EMBEDDER", "none")  # expected categories below are those of the rules alone
    run = rq.evaluate(DATA, limit_haystacks=1)
    assert run.duplicates == 1
    labelled = [m for m in MEMORIES_1 if m.get("category")]
    rules_alone = enrich.CategoryDetector(None).detect
    expected = [rules_alone(m["content"]).value == rq.CATEGORY_MAP[m["category"]] for m in labelled]
    report = rq.category_report(run.categories)
    assert report.labelled == len(labelled)
    assert report.accuracy == pytest.approx(sum(expected) / len(expected))


def test_an_exact_duplicate_maps_to_the_id_of_the_memory_already_stored(tmp_path: Path):
    clock = ManualClock(rq.parse_time(MEMORIES_1[0]["created_at"]))
    service = open_service(Settings(home=tmp_path / "home"), clock=clock)
    try:
        loaded = rq.load_haystack(service, clock, MEMORIES_1)
    finally:
        service.storage.close()
    assert loaded.duplicates == 1
    assert loaded.ids["a5"] == loaded.ids["a1"]
    assert loaded.ids["a3"] != loaded.ids["a4"]  # same words, another user: not a duplicate
    assert clock.now() == rq.parse_time(MEMORIES_1[-1]["created_at"])


def _answers(outcomes: list[Any]) -> list[tuple[str, list[bool], tuple[float, ...]]]:
    """Each query's ranking as which hits are right, with their relevance (ids differ from load to load)."""
    return [(o.query_id, [hit in o.relevant for hit in o.ranked], o.similarities) for o in outcomes]


def test_kept_stores_answer_as_freshly_loaded_ones_and_reload_when_the_memories_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("MNEMO_EMBEDDER", "none")
    fresh = rq.evaluate(DATA)
    first = rq.evaluate(DATA, stores=tmp_path)
    again = rq.evaluate(DATA, stores=tmp_path)
    assert (first.kept, again.kept) == (0, 2)
    for run in (first, again):  # each run asks a copy: the default pass's access counts never carry over
        assert _answers(run.default) == _answers(fresh.default)
        assert _answers(run.relevance) == _answers(fresh.relevance)
        assert run.categories == fresh.categories and run.duplicates == fresh.duplicates
    changed = json.loads(json.dumps(DATA))
    changed["haystacks"][1]["memories"][2]["content"] = "The team adopted SQLite."
    rerun = rq.evaluate(changed, stores=tmp_path)
    assert rerun.kept == 1  # the first haystack's, unchanged


def test_kept_stores_are_refused_for_postgresql(tmp_path: Path):
    with pytest.raises(ValueError, match="SQLite"):
        rq.evaluate(DATA, postgres="postgresql://nowhere/none", stores=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_kinds_and_limit_haystacks_select_the_queries_asked():
    assert [o.query_id for o in rq.evaluate(DATA, kinds=["negative"]).relevance] == ["q3", "q5"]
    assert [o.query_id for o in rq.evaluate(DATA, limit_haystacks=1).default] == ["q1", "q2", "q3"]


def test_an_as_of_date_means_the_end_of_that_day_and_naive_times_mean_utc():
    assert rq.end_of_day("2026-02-01").isoformat() == "2026-02-01T23:59:59+00:00"
    assert rq.parse_time("2025-10-01T09:00:00").isoformat() == "2025-10-01T09:00:00+00:00"


def test_json_flag_prints_exactly_one_json_object_with_both_rankings(data_file: Path):
    done = subprocess.run(
        [sys.executable, str(HARNESS), "--data", str(data_file), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(done.stdout)  # fails on anything but one JSON document
    required = {
        "recall_at_1",
        "recall_at_5",
        "recall_at_10",
        "mrr",
        "ndcg_at_10",
        "negatives_rejected",
        "category_accuracy",
        "by_kind",
        "queries",
        "memories",
        "latency_ms",
        "weights",
        "default_weights",
    }
    assert required <= set(report)
    assert report["queries"] == 5 and report["memories"] == 8
    assert report["mrr"] == round((0.5 + 1 + 1) / 3, 4)
    assert set(report["latency_ms"]) == {"p50", "p95"}
    assert report["weights"].startswith("relevance only")
    assert report["default_weights"]["queries"] == 5
    assert set(report["by_kind"]) == {"paraphrase", "filtered", "negative"}


def test_the_table_names_both_rankings_and_the_category_confusion():
    table = rq.report_table(rq.evaluate(DATA))
    assert "Relevance only" in table and "Default weights" in table
    assert "restriction" in table and "Category accuracy" in table


def test_extra_queries_join_the_haystack_they_name(data_file: Path, tmp_path: Path):
    extra = tmp_path / "extra.json"
    asked = [{"id": "x1", "query": "What is Emma's shoe size?", "relevant": [], "kind": "negative", "why": "-"}]
    extra.write_text(json.dumps({"haystack": "h2", "queries": asked}), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(HARNESS), "--data", str(data_file), "--extra-queries", str(extra), "--json",
         "--kinds", "negative"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report["queries"] == 3  # q3 and q5, and x1 asked in h2


def test_the_reliability_curve_counts_the_answerable_queries_hits_by_band_of_relevance():
    import reliability  # beside the harness, which put its folder on the path

    outcomes = [
        rm.Outcome("q1", "paraphrase", ("a",), ("a", "b", "c"), (0.95, 0.9, 0.2), 1.0),
        rm.Outcome("q2", "paraphrase", ("d",), ("e", "d"), (0.75, 0.7), 1.0),
        rm.Outcome("q3", "negative", (), ("f",), (0.99,), 1.0),  # no right answer: not counted
    ]
    bands = {(band.low, band.high): (band.hits, band.right) for band in reliability.curve(outcomes)}
    assert bands == {(0.0, 0.3): (1, 0), (0.3, 0.5): (0, 0), (0.5, 0.7): (0, 0), (0.7, 0.9): (2, 1), (0.9, 1.0): (2, 1)}
    assert "0.7-0.9         2  0.500" in "\n".join(reliability.table(outcomes))
