"""Which subjects a query names, and the query without their names (pure functions, no store)."""

from __future__ import annotations

from mnemo.search.focus import possible_names, without_names


def test_possible_names_are_the_query_word_runs_as_subject_keys_without_stop_words_alone():
    names = possible_names("What is Liam's blood type?")
    assert {"liam", "blood", "type", "liam blood", "blood type", "liam blood type", "is liam"} <= set(names)
    assert "what" not in names and "what is" not in names  # stop words alone name nothing
    assert "liam's" not in names and "s" not in names


def test_possible_names_cover_names_of_several_words_and_fold_their_case():
    assert "zoe park" in possible_names("Where does ZOE PARK live?")


def test_without_names_takes_out_the_name_and_its_possessive_whatever_its_case():
    assert without_names("What is Liam's blood type?", ["liam"]) == "What is blood type?"
    assert without_names("what is LIAM\u2019s blood type", ["liam"]) == "what is blood type"
    assert without_names("Who are Zoe Park's parents?", ["zoe park", "zoe"]) == "Who are parents?"


def test_without_names_leaves_words_that_merely_contain_a_name():
    assert without_names("Is William allergic to cats?", ["liam"]) == "Is William allergic to cats?"


def test_a_query_that_is_only_a_name_stays_whole():
    assert without_names("Liam?", ["liam"]) == "Liam?"
    assert without_names("What about Liam", []) == "What about Liam"
