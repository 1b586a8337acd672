"""benchmarks/rule_ablation.py switches one rule off at a time, and puts every rule back after."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from mnemo.search import searcher
from test_recall_quality_harness import DATA, load_benchmark  # the harness's hand-made data

ablation = load_benchmark("rule_ablation")
harness = importlib.import_module("recall_quality")  # beside it, on the path it put its folder on


def test_each_rule_names_constants_the_search_layer_has_and_is_put_back_after():
    before = {name: getattr(searcher, name) for rule in ablation.RULES for name in rule.off}
    for rule in ablation.RULES:
        with ablation.switched_off(rule):
            assert all(getattr(searcher, name) == value for name, value in rule.off.items())
            assert any(getattr(searcher, name) != before[name] for name in rule.off)
    assert {name: getattr(searcher, name) for name in before} == before


def test_with_every_rule_on_it_measures_what_recall_quality_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MNEMO_EMBEDDER", "none")
    rules = [r for r in ablation.RULES if r.name in ("words", "name-only")]
    results = ablation.ablate(DATA, rules, tmp_path)
    expected = ablation.metrics(harness.evaluate(DATA).relevance)
    assert results["all"] == expected
    assert set(results) == {"all", "words", "name-only"}
    assert all(m.queries == expected.queries for m in results.values())
