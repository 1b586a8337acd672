"""What the engine accepts: every bound on a date, number, size or text that enters it. No I/O here.

A value is checked here before anything is written or asked of storage, so every profile and
the CLI get the same refusals (``InvalidInput``, or ``TooComplex`` for too many filter values),
and nothing is stored that the engine could not read back. The README's "Limits" table lists
these; profiles may also state them in their input schemas.

Reading is the other half: ``stored_time`` reads any date text a store holds, even one written
by an older version outside these bounds, so no stored row can make a read fail.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from mnemo.errors import InvalidInput, TooComplex
from mnemo.model import (
    MAX_CATEGORY_CHARS,
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_REASON_DETAILS_CHARS,
    MAX_TAGS,
    as_utc,
)

# Dates: what a fixed-width ISO 8601 UTC text holds and sorts correctly, and what Python's
# datetime arithmetic (recency, expiry, trend buckets) can handle.
MIN_TIME = datetime(1970, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
_RANGE = "1970-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z"

MAX_OFFSET = 100_000  # deeper pages: list's cursor; recall and query examine 3 x (offset + limit) candidates
MAX_SQL_INT = 2**63 - 1  # SQLite's INTEGER
MAX_TAG_CHARS = 100
MAX_SUBJECT_CHARS = 200
MAX_NAME_CHARS = 100  # an agent's name (spec 003's agent_name)
MAX_ID_CHARS = 256  # memory, entry, user, conversation and session ids
MAX_RELATED = 100  # related_memory_ids of one store call
MAX_FILTER_VALUES = 100  # the values of every list filter of one query together (beyond: QUERY_TOO_COMPLEX)
MAX_FILTER_CHARS = MAX_QUERY_CHARS  # one filter value (a tag, a category, an agent name, a user id...)
MAX_METADATA_CHARS = 10_000  # metadata as compact JSON
MAX_METADATA_DEPTH = 10  # objects and arrays nested in metadata
# Any list argument: longer ones are refused before their items are read, so no request can make
# an error per item (the engine's own limits on each list are lower and give the spec's errors).
MAX_LIST_ITEMS = 1_000

# The most characters of each text field, by its name in the engine's operations.
FIELD_CHARS = {
    "content": MAX_CONTENT_CHARS,
    "category": MAX_CATEGORY_CHARS,
    "subject": MAX_SUBJECT_CHARS,
    "agent_name": MAX_NAME_CHARS,
    "user_id": MAX_ID_CHARS,
    "conversation_id": MAX_ID_CHARS,
    "session_id": MAX_ID_CHARS,
    "memory_id": MAX_ID_CHARS,
    "query": MAX_QUERY_CHARS,
    "search": MAX_QUERY_CHARS,
    "reason": MAX_REASON_CHARS,
    "reason_details": MAX_REASON_DETAILS_CHARS,
}

# NUL ends strings in C code that reads the database; a lone surrogate cannot be encoded as UTF-8,
# so the store could not write it and a client could not receive it. Both are refused.
_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def text(field: str, value: str | None, max_chars: int) -> None:
    """A text of at most ``max_chars`` characters with no NUL and no lone surrogate (``None`` passes)."""
    if value is None:
        return
    if len(value) > max_chars:
        raise InvalidInput(f"{field} is {len(value)} characters long; at most {max_chars} are allowed", field=field)
    if _UNSAFE.search(value):
        raise InvalidInput(f"{field} contains a NUL character or an unpaired surrogate", field=field)


def texts(field: str, values: Iterable[str], max_chars: int) -> None:
    for value in values:
        text(field, value, max_chars)


def fields(**values: str | None) -> None:
    """Text fields named as in FIELD_CHARS, each within its bound."""
    for name, value in values.items():
        text(name, value, FIELD_CHARS[name])


def listed(field: str, values: Sequence[str], most: int, max_chars: int) -> None:
    """At most ``most`` values of at most ``max_chars`` characters each."""
    if len(values) > most:
        raise InvalidInput(f"at most {most} {field} are allowed, {len(values)} were given", field=field)
    texts(field, values, max_chars)


def tags(values: Sequence[str], most: int = MAX_TAGS) -> None:
    listed("tags", values, most, MAX_TAG_CHARS)


def when(field: str, value: datetime) -> datetime:
    """The moment in UTC, if it lies between MIN_TIME and MAX_TIME (naive times are UTC)."""
    try:
        moment = as_utc(value)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-14:00, past the last representable moment
        moment = None
    if moment is None or not MIN_TIME <= moment <= MAX_TIME:
        raise InvalidInput(f"{field} must lie between {_RANGE} (UTC), not {value.isoformat()}", field=field)
    return moment


def maybe_when(field: str, value: datetime | None) -> datetime | None:
    return None if value is None else when(field, value)


def offset(value: int, field: str = "offset") -> None:
    if not 0 <= value <= MAX_OFFSET:
        raise InvalidInput(f"{field} must be between 0 and {MAX_OFFSET:,}; page further with a cursor", field=field)


def sql_value(field: str, value: object) -> None:
    """A value SQLite can compare: an int within INTEGER, a finite float, or a bounded text."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput(f"{field} holds a value of an unexpected kind", field=field)
    if isinstance(value, int) and not -MAX_SQL_INT - 1 <= value <= MAX_SQL_INT:
        raise InvalidInput(f"{field} holds an integer out of range", field=field)
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{field} holds a number that is not finite", field=field)
    if isinstance(value, str):
        text(field, value, MAX_FILTER_CHARS)


def filter_values(lists: Sequence[Sequence[str] | None], single: Sequence[str | None]) -> None:
    """The values of one query's filters: at most MAX_FILTER_VALUES in all, each a bounded text."""
    count = sum(len(values) for values in lists if values is not None)
    if count > MAX_FILTER_VALUES:
        raise TooComplex(
            f"the filters name {count} values; at most {MAX_FILTER_VALUES} are allowed", limit=MAX_FILTER_VALUES
        )
    for values in lists:
        texts("filters", values or (), MAX_FILTER_CHARS)
    texts("filters", (value for value in single if value is not None), MAX_FILTER_CHARS)


def metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Free JSON metadata that reads back as it was given: finite numbers, safe texts, bounded size and depth."""
    if not isinstance(value, dict):
        raise InvalidInput("metadata must be a JSON object", field="metadata")
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:  # iterative: a deeply nested value must not exhaust the interpreter's stack
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_METADATA_DEPTH:
                raise InvalidInput(f"metadata nests deeper than {MAX_METADATA_DEPTH} levels", field="metadata")
            if isinstance(item, dict):
                for key in item:
                    if not isinstance(key, str):
                        raise InvalidInput("metadata keys must be strings", field="metadata")
                    text("metadata", key, MAX_METADATA_CHARS)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput("metadata holds NaN or Infinity, which JSON cannot carry", field="metadata")
        elif isinstance(item, str):
            text("metadata", item, MAX_METADATA_CHARS)
        elif item is not None and not isinstance(item, bool | int | float):
            raise InvalidInput(f"metadata holds a {type(item).__name__}, which is not JSON", field="metadata")
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    if size > MAX_METADATA_CHARS:
        raise InvalidInput(
            f"metadata is {size} characters as JSON; at most {MAX_METADATA_CHARS} are allowed", field="metadata"
        )
    return value


_STORED = re.compile(r"(-?\d+)-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")


def stored_time(text: str) -> datetime:
    """A date as a store holds it, read leniently: out-of-range or malformed values are clamped, not raised.

    Older versions stored years before 1000 unpadded ("999-01-01T...") and accepted years past 9999
    after conversion; reading such a row must not fail.
    """
    try:
        moment = as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except (ValueError, OverflowError):
        match = _STORED.match(text.strip())
        if match is None:
            return MIN_TIME
        year = int(match[1])
        if year < MIN_TIME.year:
            return MIN_TIME
        if year > MAX_TIME.year:
            return MAX_TIME
        try:
            month, day, hour, minute, second = (int(part) for part in match.groups()[1:6])
            fraction = int((match[7] or "0").ljust(6, "0"))
            moment = datetime(year, month, day, hour, minute, second, fraction, tzinfo=UTC)
        except ValueError:  # a day or hour that does not exist
            return MIN_TIME
    return min(max(moment, MIN_TIME), MAX_TIME)
