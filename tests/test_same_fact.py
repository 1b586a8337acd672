"""same_fact: the words that make two close sentences different facts, and the rewrites that do not."""

from __future__ import annotations

import itertools

import pytest

from mnemo.search.same_fact import _RecentTexts, difference, words_of
from one_slot_apart import DISTINCT, REWRITES


@pytest.mark.parametrize(("kind", "first", "second"), DISTINCT, ids=[k for k, _, _ in DISTINCT])
def test_a_fact_one_word_apart_is_a_different_fact(kind, first, second):
    assert difference(first, second) is not None
    assert difference(second, first) is not None


@pytest.mark.parametrize(("kind", "first", "second"), REWRITES, ids=[k for k, _, _ in REWRITES])
def test_a_light_rewrite_leaves_nothing_that_tells_the_two_apart(kind, first, second):
    assert difference(first, second) is None


@pytest.mark.parametrize(
    ("first", "second", "kind"),
    [
        ("Stand-up on Monday with Liam", "Stand-up on Friday with Dmitri", "date"),
        ("Emma eats meat", "Emma does not eat meat", "negation"),
        ("Emma doesn't eat meat", "Emma never eats meat", None),
        ("Liam reports to Dmitri", "Dmitri reports to Liam", "order"),
        ("Liam owes Dmitri fifty euros", "Dmitri owes Liam fifty euros", "order"),
        ("The meeting moved from 3pm to 5pm", "The meeting moved from 5pm to 3pm", "order"),
        ("Migrating from MySQL to Postgres", "Migrating from Postgres to MySQL", "order"),
        ("Emma likes jazz", "Emma dislikes jazz", "antonym"),
        ("Emma reads every pull request", "Emma reads every other pull request", "quantity"),
        ("Zoe: gym mornings only", "Zoe: gym evenings only", "time"),
        ("Emma was the tech lead", "Emma is the tech lead", "tense"),
        ("Upgrade to Python 3.11", "Upgrade to Python 3.12", "number"),
        ("Upgrade to v2", "Upgrade to v3", "number"),
        ("Emma is vegetarian", "The user is vegetarian", "name"),
        ("My sister lives in Berlin", "Her sister lives in Berlin", "owner"),
        ("Task done in May", "Task done in June", "date"),
    ],
)
def test_the_kind_of_word_that_makes_the_difference_is_named(first, second, kind):
    assert difference(first, second) == kind


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Run 5km every Monday", "Run 5 km every Monday"),
        ("We run three replicas", "We run 3 replicas"),
        ("The budget is 12,000 euros", "The budget is 12000 euros"),
        ("On Monday, Liam meets Dmitri.", "Liam meets Dmitri on Monday"),
        ("EMMA IS LACTOSE INTOLERANT", "Emma is lactose intolerant."),
        ("Emma has the sync each Monday", "Emma has the sync every Monday"),
        ("Emma wants a window seat", "Emma would like a window seat"),
        ("Emma can't drive", "Emma cannot drive"),
        ("Emma is lactose intolerant (as mentioned before)", "Emma is lactose intolerant"),
        ("The meeting is at 3pm on Fridays", "On Fridays the meeting is at 3 pm"),
    ],
)
def test_the_same_fact_written_otherwise_shows_no_difference(first, second):
    assert difference(first, second) is None


def test_may_is_a_month_only_when_capitalised():
    kinds = {w.key: w.kind for w in words_of("Emma may travel in May")}
    assert [w.kind for w in words_of("Emma may travel")][1] == "modal"
    assert kinds["may"] == "date"  # the later, capitalised one wins in this dict


def test_the_analyses_kept_for_comparison_stay_within_their_budget_of_characters():
    recent = _RecentTexts(characters=1_000, longest=200)
    notes = [f"Emma moved the review to day {n} of the quarter" for n in range(100)]
    for first, second in itertools.pairwise(notes):
        assert recent.get(first).words == words_of(first)
        recent.get(second)
    assert recent.size() <= 1_000
    assert 0 < len(recent) <= 1_000 // len(notes[0])
    assert recent.get(notes[-1]) is recent.get(notes[-1])  # the latest are held
    long_text = "Emma " * 100
    recent.get(long_text)
    assert recent.get(long_text) is not recent.get(long_text)  # longer than `longest`: not kept
    assert recent.size() <= 1_000
