"""Spec 004's statistics: counts, sizes, distributions, rates, health and trends of a scope.

Every number is computed from the store; none is a constant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from mnemo.access import rules as access
from mnemo.access.caller import viewer
from mnemo.errors import InvalidInput, ScopeNotFound
from mnemo.model import Category, Memory, Status, as_utc
from mnemo.query import DateRange, Filters, Sort, SortField
from mnemo.storage import Granularity, GroupKey, Storage

MAX_TREND_BUCKETS = 1_000
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
DEFAULT_TREND_BUCKETS = {"hour": 48, "day": 30, "week": 26, "month": 24}
METRICS = (
    "count",
    "storage_size",
    "category_distribution",
    "importance_distribution",
    "access_patterns",
    "growth_rate",
    "recall_frequency",
    "consolidation_rate",
    "deletion_rate",
    "health_score",
)


@dataclass(frozen=True, slots=True)
class StatsReport:
    scope: str
    scope_id: str | None
    start: datetime
    end: datetime
    statistics: dict[str, Any]
    trends: dict[str, list[dict[str, Any]]] | None
    generated_at: datetime


def report(
    storage: Storage,
    now: datetime,
    *,
    scope: str = "user",
    scope_id: str | None = None,
    time_range: DateRange = DateRange(),
    metrics: Sequence[str] | None = None,
    include_trends: bool = False,
    granularity: str = "day",
) -> StatsReport:
    """Spec 004's statistics of one scope: the metrics asked for, and trends if asked."""
    wanted = list(dict.fromkeys(metrics)) if metrics else list(METRICS)
    unknown = [m for m in wanted if m not in METRICS]
    if unknown:
        raise InvalidInput(f"unknown metric {', '.join(unknown)}", field="metrics")
    if granularity not in DEFAULT_TREND_BUCKETS:
        raise InvalidInput(f"unknown granularity {granularity!r}", field="granularity")
    scope_filters = _scope_filters(storage, scope, scope_id, now)
    end = as_utc(time_range.end) if time_range.end else now
    # Unasked, the window starts at the first memory, or at its end if every memory is dated later.
    start = as_utc(time_range.start) if time_range.start else min(_earliest(storage, scope_filters) or now, end)
    if start > end:
        raise InvalidInput("time_range start is after its end", field="time_range")
    every = replace(scope_filters, created_from=start, created_to=end)
    calculator = _Metrics(storage, every, start, end)
    statistics = {name: getattr(calculator, name)() for name in wanted}
    trends = None
    if include_trends:
        trends = {"memory_count": _trend(storage, scope_filters, granularity, time_range, now)}
    return StatsReport(scope, scope_id, start, end, statistics, trends, now)


def _scope_filters(storage: Storage, scope: str, scope_id: str | None, now: datetime) -> Filters:
    base = Filters(now=now, statuses=None, include_expired=True, visible_to=viewer())
    match scope:
        case "global":
            return base
        case "user":
            # Without an id, "user" is the caller; a local (stdio) caller owns the whole store.
            access.check_scope(scope_id, "scope_id")
            filters = replace(base, user_id=scope_id or viewer())
        case "conversation":
            if not scope_id:
                raise InvalidInput("scope 'conversation' needs a scope_id", field="scope_id")
            filters = replace(base, conversation_id=scope_id)
        case "category":
            if scope_id is None or scope_id not in Category.__members__.values():
                raise InvalidInput("scope 'category' needs a scope_id naming a category", field="scope_id")
            return replace(base, categories=(scope_id,))
        case _:
            raise InvalidInput(f"unknown scope {scope!r}", field="scope")
    if scope_id is not None and storage.count(filters) == 0:
        raise ScopeNotFound(f"no memories in {scope} {scope_id!r}", scope=scope, scope_id=scope_id)
    return filters


def _earliest(storage: Storage, filters: Filters) -> datetime | None:
    first = storage.select(filters, Sort(SortField.CREATED_AT, descending=False), 1)
    return first[0][0].created_at if first else None


def _trend(
    storage: Storage, filters: Filters, granularity: str, window: DateRange, now: datetime
) -> list[dict[str, Any]]:
    """Memories in scope at the end of each bucket (created by then)."""
    unit = Granularity(granularity)
    end = as_utc(window.end) if window.end else now
    start = (
        as_utc(window.start)
        if window.start
        else _step(_bucket_start(end, unit), unit, 1 - DEFAULT_TREND_BUCKETS[granularity])
    )
    buckets = [_bucket_start(start, unit)]
    while (following := _step(buckets[-1], unit, 1)) <= end:
        buckets.append(following)
        if len(buckets) > MAX_TREND_BUCKETS:
            raise InvalidInput(
                f"the time range spans more than {MAX_TREND_BUCKETS} {granularity}s; narrow it or coarsen "
                "the granularity",
                field="granularity",
            )
    before = storage.count(replace(filters, created_to=buckets[0] - timedelta(microseconds=1)))
    created = dict(storage.created_histogram(replace(filters, created_from=buckets[0], created_to=end), unit))
    series: list[dict[str, Any]] = []
    running = before
    for bucket in buckets:
        label = _bucket_label(bucket, unit)
        running += created.get(label, 0)
        series.append({"date": label, "value": running})
    return series


def _bucket_start(when: datetime, unit: Granularity) -> datetime:
    day = when.replace(hour=0, minute=0, second=0, microsecond=0)
    match unit:
        case Granularity.HOUR:
            return when.replace(minute=0, second=0, microsecond=0)
        case Granularity.DAY:
            return day
        case Granularity.WEEK:
            return day - timedelta(days=day.weekday())
        case Granularity.MONTH:
            return day.replace(day=1)


def _step(when: datetime, unit: Granularity, n: int) -> datetime:
    """``n`` buckets on (or back); past the last representable moment, that moment (no bucket starts there)."""
    try:
        return _stepped(when, unit, n)
    except (OverflowError, ValueError):
        return datetime.max.replace(tzinfo=when.tzinfo) if n > 0 else datetime.min.replace(tzinfo=when.tzinfo)


def _stepped(when: datetime, unit: Granularity, n: int) -> datetime:
    match unit:
        case Granularity.HOUR:
            return when + timedelta(hours=n)
        case Granularity.DAY:
            return when + timedelta(days=n)
        case Granularity.WEEK:
            return when + timedelta(weeks=n)
        case Granularity.MONTH:
            months = when.year * 12 + when.month - 1 + n
            return when.replace(year=months // 12, month=months % 12 + 1)


def _bucket_label(when: datetime, unit: Granularity) -> str:
    return when.strftime("%Y-%m-%dT%H:00:00Z") if unit is Granularity.HOUR else when.strftime("%Y-%m-%d")


class _Metrics:
    """One method per metric of spec 004; each reads only what it needs."""

    def __init__(self, storage: Storage, filters: Filters, start: datetime, end: datetime) -> None:
        self.storage = storage
        self.every = filters  # all statuses, created in the window
        self.live = replace(filters, statuses=(Status.ACTIVE,))
        self.start = start
        self.end = end
        self.days = max((end - start).total_seconds() / 86400, 1.0)

    def count(self) -> dict[str, int]:
        by_status = self.storage.group_count(self.every, GroupKey.STATUS)
        return {
            "total": sum(by_status.values()),
            "active": by_status.get(Status.ACTIVE, 0),
            "archived": by_status.get(Status.ARCHIVED, 0),
            "deleted": by_status.get(Status.FORGOTTEN, 0),
            "outdated": by_status.get(Status.OUTDATED, 0),
        }

    def storage_size(self) -> dict[str, int]:
        totals = self.storage.totals(self.every)
        return {
            "total_bytes": totals.content_bytes,
            "average_memory_bytes": totals.content_bytes // totals.count if totals.count else 0,
            "embeddings_bytes": self.storage.vector_bytes(self.every),
            "database_file_bytes": self.storage.size_bytes(),
        }

    def category_distribution(self) -> dict[str, int]:
        return self.storage.group_count(self.live, GroupKey.CATEGORY)

    def importance_distribution(self) -> dict[str, int]:
        bands = self.storage.group_count(self.live, GroupKey.IMPORTANCE_BAND)
        return {band: bands.get(band, 0) for band in ("high", "medium", "low")}

    def access_patterns(self) -> dict[str, Any]:
        totals = self.storage.totals(self.live)
        top = self.storage.select(self.live, Sort(SortField.ACCESS_COUNT), 1)
        most = top[0][0] if top and top[0][0].access_count > 0 else None
        return {
            "total_recalls": totals.access_total,
            "unique_memories_accessed": totals.accessed_count,
            "average_recalls_per_memory": round(totals.access_total / totals.count, 2) if totals.count else 0.0,
            "most_accessed_memory_id": most.id if most else None,
            "most_accessed_count": most.access_count if most else 0,
        }

    def growth_rate(self) -> dict[str, Any]:
        middle = self.start + (self.end - self.start) / 2
        first = self.storage.count(replace(self.every, created_to=middle))
        second = self.storage.count(replace(self.every, created_from=middle))
        # Halves shorter than a day say more about the clock than about growth.
        if self.days < 2:
            change, trend = 0.0, "insufficient_data"
        else:
            change = (second - first) / first * 100 if first else (100.0 if second else 0.0)
            trend = "increasing" if change > 5 else "decreasing" if change < -5 else "stable"
        return {
            "memories_per_day": round((first + second) / self.days, 2),
            "trend": trend,
            "percent_change": round(change, 1),
        }

    def recall_frequency(self) -> dict[str, Any]:
        pattern = self.storage.event_pattern("recall", self.start, self.end)
        peak_hour = max(pattern.by_hour, key=pattern.by_hour.__getitem__) if pattern.by_hour else None
        peak_day = max(pattern.by_weekday, key=pattern.by_weekday.__getitem__) if pattern.by_weekday else None
        return {
            "daily_average": round(pattern.total / self.days, 2),
            "peak_hour": peak_hour,
            "peak_day": WEEKDAYS[peak_day] if peak_day is not None else None,
        }

    def consolidation_rate(self) -> dict[str, Any]:
        changes = self.storage.change_counts(self.start, self.end, self.every)
        merged = changes.get("consolidated", 0)
        total = self.storage.count(self.every)
        return {
            "consolidations_per_week": round(changes.get("consolidate", 0) / (self.days / 7), 2),
            "memories_consolidated": merged,
            "consolidation_ratio": round(merged / total, 3) if total else 0.0,
        }

    def deletion_rate(self) -> dict[str, Any]:
        changes = self.storage.change_counts(self.start, self.end, self.every)
        soft, hard = changes.get("forget", 0), changes.get("hard_delete", 0)
        ever = self.storage.count(self.every) + hard
        return {
            "deletions_per_week": round((soft + hard) / (self.days / 7), 2),
            "soft_deletes": soft,
            "hard_deletes": hard,
            "deletion_ratio": round((soft + hard) / ever, 3) if ever else 0.0,
        }

    def health_score(self) -> dict[str, Any]:
        """Four factors in [0, 1], each computed from the data; overall is their mean.

        - deduplication: share of active memories that do not repeat the words of another (same
          content words in any order, for the same user).
        - categorization_accuracy: share of active memories filed under a specific category
          (not ``custom``), i.e. that enrichment or the caller could place.
        - access_distribution: share of active memories recalled at least once: memory that is
          never used is dead weight.
        - storage_efficiency: share of stored content bytes that belong to active memories rather
          than to deleted, outdated or archived ones still held.
        An empty scope scores 1.0 on every factor: nothing in it is unhealthy.
        """
        live = self.storage.totals(self.live)
        held = self.storage.totals(self.every)
        categories = self.storage.group_count(self.live, GroupKey.CATEGORY)
        factors = {
            "deduplication": 1 - self.storage.duplicate_count(self.live) / live.count if live.count else 1.0,
            "categorization_accuracy": (1 - categories.get(Category.CUSTOM, 0) / live.count if live.count else 1.0),
            "access_distribution": live.accessed_count / live.count if live.count else 1.0,
            "storage_efficiency": live.content_bytes / held.content_bytes if held.content_bytes else 1.0,
        }
        rounded = {name: round(value, 3) for name, value in factors.items()}
        return {"overall": round(sum(factors.values()) / len(factors), 3), "factors": rounded}


# -- the summary that specs 000, 001 and 003 report ------------------------------------------
TOP_TAGS = 10


@dataclass(frozen=True, slots=True)
class Overview:
    """Counts of the memories some filters keep, and of the same memories in every other status."""

    count: int
    by_status: dict[str, int]  # active, archived, outdated (never forgotten ones)
    by_type: dict[str, int]
    by_importance: dict[str, int]  # high / medium / low bands
    by_category: dict[str, int]  # spec 004's categories
    by_subject: dict[str, int]  # by subject as first spelt
    by_agent: dict[str, int]
    top_tags: list[tuple[str, int]]  # most used first, TOP_TAGS of them
    oldest: datetime | None
    newest: datetime | None
    most_accessed: Memory | None
    content_bytes: int
    storage_bytes: int  # the whole store on disk, measured


def overview(storage: Storage, filters: Filters) -> Overview:
    oldest = storage.select(filters, Sort(SortField.CREATED_AT, descending=False), 1)
    newest = storage.select(filters, Sort(SortField.CREATED_AT, descending=True), 1)
    busiest = storage.select(filters, Sort(SortField.ACCESS_COUNT, descending=True), 1)
    totals = storage.totals(filters)
    alive = replace(filters, statuses=(Status.ACTIVE, Status.ARCHIVED, Status.OUTDATED))
    return Overview(
        count=totals.count,
        by_status=storage.group_count(alive, GroupKey.STATUS),
        by_type=storage.group_count(filters, GroupKey.TYPE),
        by_importance=storage.group_count(filters, GroupKey.IMPORTANCE_BAND),
        by_category=storage.group_count(filters, GroupKey.CATEGORY),
        by_subject=storage.group_count(filters, GroupKey.SUBJECT),
        by_agent=storage.group_count(filters, GroupKey.AGENT),
        top_tags=storage.tag_counts(filters, TOP_TAGS),
        oldest=oldest[0][0].created_at if oldest else None,
        newest=newest[0][0].created_at if newest else None,
        most_accessed=busiest[0][0] if busiest and busiest[0][0].access_count > 0 else None,
        content_bytes=totals.content_bytes,
        storage_bytes=storage.size_bytes(),
    )
