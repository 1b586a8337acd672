"""The stretch of time a question names, read from its words (pure function, no store)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mnemo.search.when import stretch

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def day(year: int, month: int, d: int) -> datetime:
    return datetime(year, month, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What painting did Melanie show on October 13, 2023?", day(2023, 10, 12), day(2023, 10, 15)),
        ("What did Gina find on 1 February, 2023?", day(2023, 1, 31), day(2023, 2, 3)),
        ("What did they paint in July 2023?", day(2023, 7, 1), day(2023, 8, 1)),
        ("What setback did she face in Dec 2023?", day(2023, 12, 1), day(2024, 1, 1)),
        ("How many times did she go to the beach in 2023?", day(2023, 1, 1), day(2024, 1, 1)),
        ("What did the dentist do for Emma last summer?", day(2025, 6, 1), day(2025, 9, 1)),
        ("What procedure did the dog have last November?", day(2025, 11, 1), day(2025, 12, 1)),
        ("What went wrong in production last month?", day(2026, 2, 1), day(2026, 3, 1)),
        ("Who was her best friend at the start of this year?", day(2026, 1, 1), day(2027, 1, 1)),
        ("Where were we last year?", day(2025, 1, 1), day(2026, 1, 1)),
    ],
)
def test_a_question_that_names_a_time_gives_its_stretch(question: str, start: datetime, end: datetime):
    assert stretch(question, NOW) == (start, end)


def test_ago_counts_back_from_now_half_a_unit_either_side():
    start, end = stretch("Which editor was I using a year ago?", NOW)  # type: ignore[misc]
    assert (NOW - start).days == 547 and (NOW - end).days == 182
    start, end = stretch("Where did she move from 4 years ago?", NOW)  # type: ignore[misc]
    assert start.year == 2021 and end.year == 2022


def test_last_summer_asked_in_summer_is_the_summer_before():
    assert stretch("last summer", datetime(2026, 7, 15, tzinfo=UTC)) == (day(2025, 6, 1), day(2025, 9, 1))


def test_yesterday_and_today_are_days_of_now():
    assert stretch("What did I eat yesterday?", NOW) == (day(2026, 2, 28), day(2026, 3, 1))
    assert stretch("Anything due today?", NOW) == (day(2026, 3, 1), day(2026, 3, 2))


@pytest.mark.parametrize("question", ["What is Liam's blood type?", "Is the meeting at 9:30?", "room 2201", ""])
def test_a_question_that_names_no_time_has_no_stretch(question: str):
    assert stretch(question, NOW) is None


def test_an_impossible_date_names_no_day():
    assert stretch("What happened on 31 February 2023?", NOW) is None


def test_last_friday_is_the_latest_friday_before_today():
    sunday = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    assert stretch("What did we ship last Friday?", sunday) == (day(2026, 2, 27), day(2026, 2, 28))
    friday = datetime(2026, 2, 27, 9, 0, tzinfo=UTC)
    assert stretch("What did we ship last Friday?", friday) == (day(2026, 2, 20), day(2026, 2, 21))
