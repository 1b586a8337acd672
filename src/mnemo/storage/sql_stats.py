"""The statistics whose SQL is the same on every SQL backend (the rest: sqlite_stats, postgres_stats)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from mnemo.query import Filters
from mnemo.storage import Granularity, GroupKey, sql
from mnemo.storage.sql_base import SQLBase


class SQLStatistics(SQLBase):
    _bucket_expr: ClassVar[dict[Granularity, str]]  # created_at per bucket of a histogram, as text

    def group_count(self, filters: Filters, key: GroupKey) -> dict[str, int]:
        where, params = sql.where(filters, self._dialect)
        group, label = sql.GROUP_EXPR[key]
        rows = self._rows(f"SELECT {label}, COUNT(*) FROM memories m WHERE {where} GROUP BY {group} ORDER BY 1", params)
        return {str(k): int(n) for k, n in rows if k is not None}  # memories without the attribute are not a group

    def tag_counts(self, filters: Filters, limit: int | None = None) -> list[tuple[str, int]]:
        """Tags of the memories the filters keep, most used first (ties by name, byte-wise)."""
        where, params = sql.where(filters, self._dialect)
        rows = self._rows(
            "SELECT t.tag, COUNT(*) AS n FROM memory_tags t JOIN memories m ON m.rowid = t.memory_rowid"
            f" WHERE {where} GROUP BY t.tag ORDER BY n DESC, t.tag {self._dialect.binary} LIMIT ?",
            [*params, self._dialect.no_limit if limit is None else limit],
        )
        return [(tag, int(n)) for tag, n in rows]

    def duplicate_count(self, filters: Filters) -> int:
        """How many memories repeat the words of an earlier one (same words, any order) for the same user."""
        where, params = sql.where(filters, self._dialect)
        return int(
            self._one(
                "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM memories m"
                f" WHERE {where} GROUP BY m.word_signature, m.user_id HAVING COUNT(*) > 1) AS d",
                params,
            )
        )

    def created_histogram(self, filters: Filters, granularity: Granularity) -> list[tuple[str, int]]:
        where, params = sql.where(filters, self._dialect)
        bucket = self._bucket_expr[granularity]
        rows = self._rows(f"SELECT {bucket} AS b, COUNT(*) FROM memories m WHERE {where} GROUP BY b ORDER BY b", params)
        return [(b, int(n)) for b, n in rows]

    def change_counts(self, start: datetime, end: datetime, memory_filters: Filters) -> dict[str, int]:
        """Changes per action in a time window, for the user/conversation/categories of the filters."""
        t = self._dialect.time
        clauses = ["changed_at BETWEEN ? AND ?"]
        params: list[Any] = [t(start), t(end)]
        for column, value in (
            ("user_id", memory_filters.user_id),
            ("conversation_id", memory_filters.conversation_id),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if memory_filters.categories is not None:
            categories = memory_filters.categories
            clauses.append(
                f"COALESCE(category, 'custom') IN ({', '.join('?' * len(categories))})" if categories else "1 = 0"
            )
            params.extend(memory_filters.categories)
        rows = self._rows(
            f"SELECT action, COUNT(*) FROM versions WHERE {' AND '.join(clauses)} GROUP BY action", params
        )
        return {action: int(n) for action, n in rows}
