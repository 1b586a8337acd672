"""SQL of a PostgreSQL store's statistics, over one connection; ``where``/``params`` come from
``sql.where`` (over alias ``m``). The answers are those of the SQLite backend, value for value."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from mnemo.query import Filters
from mnemo.storage import EventPattern, Granularity, GroupKey, Totals, sql

_BUCKET_EXPR = {
    Granularity.HOUR: 'to_char(m.created_at, \'YYYY-MM-DD"T"HH24:00:00"Z"\')',
    Granularity.DAY: "to_char(m.created_at, 'YYYY-MM-DD')",
    Granularity.WEEK: "to_char(date_trunc('week', m.created_at), 'YYYY-MM-DD')",  # weeks start on Monday
    Granularity.MONTH: "to_char(m.created_at, 'YYYY-MM-01')",
}


def _rows(db: psycopg.Connection, query: str, params: list[Any]) -> list[tuple[Any, ...]]:
    return db.execute(query, params).fetchall()  # type: ignore[arg-type]  # built from constants


def totals(db: psycopg.Connection, where: str, params: list[Any]) -> Totals:
    (row,) = _rows(
        db,
        "SELECT COUNT(*), COALESCE(SUM(octet_length(m.content)), 0)::bigint,"
        " COALESCE(SUM(m.access_count), 0)::bigint, COUNT(*) FILTER (WHERE m.access_count > 0),"
        f" COALESCE(MAX(m.access_count), 0) FROM memories m WHERE {where}",
        params,
    )
    return Totals(*(int(value) for value in row))


def group_count(db: psycopg.Connection, where: str, params: list[Any], key: GroupKey) -> dict[str, int]:
    group, label = sql.GROUP_EXPR[key]
    rows = _rows(db, f"SELECT {label}, COUNT(*) FROM memories m WHERE {where} GROUP BY {group} ORDER BY 1", params)
    return {str(k): int(n) for k, n in rows if k is not None}  # memories without the attribute are not a group


def tag_counts(db: psycopg.Connection, where: str, params: list[Any], limit: int | None) -> list[tuple[str, int]]:
    """Tags of the memories the filters keep, most used first (ties by name, byte-wise)."""
    rows = _rows(
        db,
        "SELECT t.tag, COUNT(*) AS n FROM memory_tags t JOIN memories m ON m.rowid = t.memory_rowid"
        f' WHERE {where} GROUP BY t.tag ORDER BY n DESC, t.tag COLLATE "C" LIMIT %s',
        [*params, limit],
    )
    return [(tag, int(n)) for tag, n in rows]


def duplicate_count(db: psycopg.Connection, where: str, params: list[Any]) -> int:
    """How many memories repeat the words of an earlier one (same words, any order) for the same user."""
    ((count,),) = _rows(
        db,
        "SELECT COALESCE(SUM(n - 1), 0)::bigint FROM (SELECT COUNT(*) AS n FROM memories m"
        f" WHERE {where} GROUP BY m.word_signature, m.user_id HAVING COUNT(*) > 1) AS d",
        params,
    )
    return int(count)


def created_histogram(
    db: psycopg.Connection, where: str, params: list[Any], granularity: Granularity
) -> list[tuple[str, int]]:
    bucket = _BUCKET_EXPR[granularity]
    rows = _rows(db, f"SELECT {bucket} AS b, COUNT(*) FROM memories m WHERE {where} GROUP BY b ORDER BY b", params)
    return [(b, int(n)) for b, n in rows]


def event_pattern(db: psycopg.Connection, kind: str, start: datetime, end: datetime) -> EventPattern:
    rows = _rows(
        db,
        "SELECT extract(hour FROM at)::int, extract(isodow FROM at)::int - 1, COUNT(*)"
        " FROM events WHERE kind = %s AND at BETWEEN %s AND %s GROUP BY 1, 2",
        [kind, start, end],
    )
    by_hour: dict[int, int] = {}
    by_weekday: dict[int, int] = {}
    for hour, weekday, n in rows:  # isodow - 1: Monday is 0, as in Python
        by_hour[hour] = by_hour.get(hour, 0) + int(n)
        by_weekday[weekday] = by_weekday.get(weekday, 0) + int(n)
    return EventPattern(sum(by_hour.values()), by_hour, by_weekday)


def change_counts(db: psycopg.Connection, start: datetime, end: datetime, memory_filters: Filters) -> dict[str, int]:
    """Changes per action in a time window, for the user/conversation/categories of the filters."""
    clauses = ["changed_at BETWEEN %s AND %s"]
    params: list[Any] = [start, end]
    for column, value in (
        ("user_id", memory_filters.user_id),
        ("conversation_id", memory_filters.conversation_id),
    ):
        if value is not None:
            clauses.append(f"{column} = %s")
            params.append(value)
    if memory_filters.categories is not None:
        clauses.append("COALESCE(category, 'custom') = ANY(%s)")
        params.append(list(memory_filters.categories))
    rows = _rows(db, f"SELECT action, COUNT(*) FROM versions WHERE {' AND '.join(clauses)} GROUP BY action", params)
    return {action: int(n) for action, n in rows}
