"""The stretch of time a question is about, read from its words: "on 13 October 2023", "in July
2023", "last summer", "a year ago", "last Friday". Recall counts whether a memory was made in that
stretch (its created_at), since what someone said or did on a day is stored that day.

English only; a question with no such words has no stretch. Seasons are the northern ones.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
            ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
            ("october", "oct"), ("november", "nov"), ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}  # fmt: skip
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month of each
WEEKDAYS = {
    name: number
    for number, name in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
}
UNITS = {"day": timedelta(days=1), "week": timedelta(weeks=1), "month": timedelta(days=30), "year": timedelta(days=365)}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10}

_MONTH = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d{2})"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY} {_MONTH},? {_YEAR}\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH} {_DAY},? {_YEAR}\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},? {_YEAR}\b", re.IGNORECASE)
_YEAR_ALONE = re.compile(rf"\b{_YEAR}\b")
_AGO = re.compile(r"\b(\d+|" + "|".join(NUMBERS) + r") (day|week|month|year)s? ago\b", re.IGNORECASE)
_LAST_OR_THIS = re.compile(
    rf"\b(last|this|past) (year|month|week|{'|'.join(SEASONS)}|{'|'.join(MONTHS)})\b", re.IGNORECASE
)
_DAY_WORD = re.compile(r"\b(yesterday|today)\b", re.IGNORECASE)
_LAST_WEEKDAY = re.compile(rf"\blast ({'|'.join(WEEKDAYS)})\b", re.IGNORECASE)


def _month_start(year: int, month: int) -> datetime:
    return datetime(year + (month - 1) // 12, (month - 1) % 12 + 1, 1, tzinfo=UTC)


def _day(year: int, month: int, day: int) -> tuple[datetime, datetime] | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None
    return start - timedelta(days=1), start + timedelta(days=2)  # a day either side: clocks and late nights


def _last_or_this(which: str, unit: str, now: datetime) -> tuple[datetime, datetime]:
    this_month = _month_start(now.year, now.month)
    if unit == "year":
        year = now.year - (which != "this")
        return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    if unit == "month":
        start = this_month if which == "this" else _month_start(now.year, now.month - 1)
        return start, _month_start(start.year, start.month + 1)
    if unit == "week":
        return (now - timedelta(days=7), now) if which == "this" else (now - timedelta(days=14), now)
    first = SEASONS.get(unit) or MONTHS[unit]
    length = 3 if unit in SEASONS else 1
    # The latest such stretch that has begun ("this") or ended ("last") by now.
    start = _month_start(now.year, first)
    while (start > now) if which == "this" else (_month_start(start.year, start.month + length) > this_month):
        start = _month_start(start.year - 1, start.month)
    return start, _month_start(start.year, start.month + length)


def stretch(question: str, now: datetime) -> tuple[datetime, datetime] | None:
    """[start, end) of the time the question names, or None when it names none."""
    if match := _DAY_MONTH_YEAR.search(question):
        return _day(int(match[3]), MONTHS[match[2].lower()], int(match[1]))
    if match := _MONTH_DAY_YEAR.search(question):
        return _day(int(match[3]), MONTHS[match[1].lower()], int(match[2]))
    if match := _MONTH_YEAR.search(question):
        start = _month_start(int(match[2]), MONTHS[match[1].lower()])
        return start, _month_start(start.year, start.month + 1)
    if match := _AGO.search(question):
        count = int(match[1]) if match[1].isdigit() else NUMBERS[match[1].lower()]
        unit = UNITS[match[2].lower()]
        try:
            return now - unit * (count + 0.5), now - unit * max(count - 0.5, 0)
        except OverflowError:  # "100000 years ago" is before any date: it names no stretch a memory is in
            return None
    if match := _LAST_OR_THIS.search(question):
        return _last_or_this(match[1].lower(), match[2].lower(), now)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if match := _DAY_WORD.search(question):
        start = today - timedelta(days=1) if match[1].lower() == "yesterday" else today
        return start, start + timedelta(days=1)
    if match := _LAST_WEEKDAY.search(question):  # the latest such day before today
        start = today - timedelta(days=(today.weekday() - WEEKDAYS[match[1].lower()] - 1) % 7 + 1)
        return start, start + timedelta(days=1)
    if match := _YEAR_ALONE.search(question):
        year = int(match[1])
        return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    return None
