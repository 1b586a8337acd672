"""SQL of a SQLite store's statistics, over one connection; ``where``/``params`` come from
``sql.where`` (over alias ``m``). The PostgreSQL backend answers the same (postgres_stats.py)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from mnemo.model import to_iso
from mnemo.storage import EventPattern, Granularity, Totals

BUCKET_EXPR = {
    Granularity.HOUR: "strftime('%Y-%m-%dT%H:00:00Z', m.created_at)",
    Granularity.DAY: "date(m.created_at)",
    Granularity.WEEK: "date(m.created_at, 'weekday 0', '-6 days')",
    Granularity.MONTH: "strftime('%Y-%m-01', m.created_at)",
}


def totals(db: sqlite3.Connection, where: str, params: list[Any]) -> Totals:
    row = db.execute(
        "SELECT COUNT(*), COALESCE(SUM(length(CAST(m.content AS BLOB))), 0),"
        " COALESCE(SUM(m.access_count), 0), COALESCE(SUM(m.access_count > 0), 0),"
        f" COALESCE(MAX(m.access_count), 0) FROM memories m WHERE {where}",
        params,
    ).fetchone()
    return Totals(*row)


def event_pattern(db: sqlite3.Connection, kind: str, start: datetime, end: datetime) -> EventPattern:
    rows = db.execute(
        "SELECT CAST(strftime('%H', at) AS INTEGER), CAST(strftime('%w', at) AS INTEGER), COUNT(*)"
        " FROM events WHERE kind = ? AND at BETWEEN ? AND ? GROUP BY 1, 2",
        (kind, to_iso(start), to_iso(end)),
    ).fetchall()
    by_hour: dict[int, int] = {}
    by_weekday: dict[int, int] = {}
    for hour, sunday_first, n in rows:
        by_hour[hour] = by_hour.get(hour, 0) + n
        weekday = (sunday_first - 1) % 7  # SQLite counts from Sunday; Python from Monday
        by_weekday[weekday] = by_weekday.get(weekday, 0) + n
    return EventPattern(sum(by_hour.values()), by_hour, by_weekday)
