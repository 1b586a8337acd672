"""SQL of a PostgreSQL store's statistics, over one connection; ``where``/``params`` come from
``sql.where`` (over alias ``m``). The answers are those of the SQLite backend, value for value."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from mnemo.storage import EventPattern, Granularity, Totals
from mnemo.storage.access_tally import Counts, Recalls

BUCKET_EXPR = {
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


def write_access(db: psycopg.Connection, counts: Counts, recalls: Recalls) -> None:
    """Add recalls' accesses to their memories' counts, and their events. The memories are updated in
    one order (by id), so two servers' writes wait for each other rather than deadlock."""
    ids = sorted(counts)
    db.execute(
        "UPDATE memories m SET access_count = m.access_count + a.n, accessed_at = a.at"
        " FROM unnest(%s::text[], %s::int[], %s::timestamptz[]) AS a(id, n, at) WHERE m.id = a.id",
        (ids, [counts[i][0] for i in ids], [counts[i][1] for i in ids]),
    )
    db.execute(
        "INSERT INTO events (kind, at, count) SELECT 'recall', e.at, e.n"
        " FROM unnest(%s::timestamptz[], %s::int[]) AS e(at, n)",
        ([at for at, _ in recalls], [n for _, n in recalls]),
    )
