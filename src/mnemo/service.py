"""The domain operations of mnemo: the only place with business rules.

The service receives its storage and clock; it never imports a driver or a transport, so the
same operations serve every MCP profile, the CLI and Python programs.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from mnemo import enrich, ranking
from mnemo.clock import Clock, SystemClock
from mnemo.errors import Conflict, InvalidInput, NotFound, QuotaExceeded, ScopeNotFound, TooComplex
from mnemo.model import (
    DEFAULT_RETENTION_DAYS,
    MAX_CONTENT_CHARS,
    MAX_PAGE,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_REASON_DETAILS_CHARS,
    MAX_RETENTION_DAYS,
    MAX_TAGS,
    AccessLevel,
    Backup,
    Category,
    Change,
    Context,
    ForgetReason,
    Memory,
    Status,
    as_utc,
    new_id,
    normalise_tags,
)
from mnemo.query import Filters, Position, Sort, SortField
from mnemo.storage import Granularity, GroupKey, Storage
from mnemo.words import search_terms

MAX_FILTER_VALUES = 100  # tags + categories + access levels in one query (beyond: 413)
MAX_TREND_BUCKETS = 1_000
CANDIDATE_POOL = 200  # text hits ranked per recall, before paging
MAX_CONFLICT_RETRIES = 5
CLOCK_SKEW = timedelta(minutes=5)  # how far ahead a client's clock may be when it dates a memory
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
DEFAULT_TREND_BUCKETS = {"hour": 48, "day": 30, "week": 26, "month": 24}


class _Unset:
    """Marks an argument the caller did not give, where ``None`` is a meaningful value."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True, slots=True)
class DateRange:
    start: datetime | None = None
    end: datetime | None = None

    def __post_init__(self) -> None:
        if self.start and self.end and as_utc(self.start) > as_utc(self.end):
            raise InvalidInput("date range start is after its end", start=str(self.start), end=str(self.end))


@dataclass(frozen=True, slots=True)
class TagEdit:
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    replace: tuple[str, ...] | None = None

    def apply(self, tags: tuple[str, ...]) -> tuple[str, ...]:
        base = tags if self.replace is None else normalise_tags(self.replace)
        removed = set(normalise_tags(self.remove))
        return tuple(t for t in normalise_tags(base + self.add) if t not in removed)


@dataclass(frozen=True, slots=True)
class StoreResult:
    memory: Memory
    auto_tags: list[str]
    links_created: int


@dataclass(frozen=True, slots=True)
class RecallHit:
    memory: Memory
    scores: ranking.Scores


@dataclass(frozen=True, slots=True)
class RecallResult:
    hits: list[RecallHit]
    total: int
    execution_time_ms: float


@dataclass(frozen=True, slots=True)
class UpdateResult:
    memory: Memory
    updated_fields: list[str]
    previous_version_id: str | None


@dataclass(frozen=True, slots=True)
class ForgetResult:
    memory_id: str
    deletion_type: str  # soft | hard
    deleted_at: datetime
    recoverable_until: datetime | None
    related_affected: int
    backup_id: str | None


@dataclass(frozen=True, slots=True)
class MemoryStats:
    content_length: int
    link_count: int
    days_since_creation: int
    days_since_access: int


@dataclass(frozen=True, slots=True)
class ListPage:
    memories: list[Memory]
    total: int
    has_more: bool
    next_cursor: str | None
    next_offset: int | None
    stats: dict[str, MemoryStats] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StatsReport:
    scope: str
    scope_id: str | None
    start: datetime
    end: datetime
    statistics: dict[str, Any]
    trends: dict[str, list[dict[str, Any]]] | None
    generated_at: datetime


STATUS_NAMES = {"active": Status.ACTIVE, "archived": Status.ARCHIVED, "deleted": Status.FORGOTTEN}
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


def _check_length(name: str, value: str | None, maximum: int) -> None:
    if value is not None and len(value) > maximum:
        raise InvalidInput(f"{name} is {len(value)} characters long; at most {maximum} are allowed", field=name)


def _check_content(content: str) -> None:
    if not content.strip():
        raise InvalidInput("content must not be empty", field="content")
    _check_length("content", content, MAX_CONTENT_CHARS)


def _check_unit(name: str, value: float | None) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise InvalidInput(f"{name} must be between 0 and 1, not {value}", field=name)


class MemoryService:
    def __init__(
        self,
        storage: Storage,
        clock: Clock | None = None,
        *,
        recency_half_life_days: float = 30.0,
        max_memories: int | None = None,
        actor: str = "mnemo",
    ) -> None:
        self.storage = storage
        self.clock = clock or SystemClock()
        self.recency_half_life_days = recency_half_life_days
        self.max_memories = max_memories
        self.actor = actor
        storage.purge_due(self.clock.now())

    def _change(self, memory: Memory, action: str, actor: str | None, reason: str | None = None,
                previous: Memory | None = None) -> Change:  # fmt: skip
        return Change(
            id=new_id(),
            memory_id=memory.id,
            version=memory.version,
            action=action,
            actor=actor or memory.context.user_id or self.actor,
            at=self.clock.now(),
            reason=reason,
            previous=previous,
        )

    # -- store -------------------------------------------------------------------------
    def store(
        self,
        content: str,
        *,
        context: Context = Context(),
        timestamp: datetime | None = None,
        category: str | None = None,
        tags: Sequence[str] = (),
        importance: float | None = None,
        access_level: AccessLevel = AccessLevel.PRIVATE,
        expires_at: datetime | None = None,
        related_memory_ids: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        auto_tag: bool = True,
        actor: str | None = None,
    ) -> StoreResult:
        now = self.clock.now()
        _check_content(content)
        given_tags = normalise_tags(tuple(tags))
        if len(given_tags) > MAX_TAGS:
            raise InvalidInput(f"at most {MAX_TAGS} tags are allowed, {len(given_tags)} were given", field="tags")
        _check_unit("importance", importance)
        if category is not None and category not in Category.__members__.values():
            raise InvalidInput(f"unknown category {category!r}", field="category")
        if expires_at is not None and as_utc(expires_at) <= now:
            raise InvalidInput("expires_at is in the past", field="expires_at")
        if timestamp is not None and as_utc(timestamp) > now + CLOCK_SKEW:
            raise InvalidInput("context.timestamp is in the future", field="context.timestamp")
        related = list(dict.fromkeys(related_memory_ids))
        self._require_existing(related)
        if self.max_memories is not None:
            held = self.storage.count(Filters(now=now, statuses=(Status.ACTIVE, Status.ARCHIVED), include_expired=True))
            if held >= self.max_memories:
                raise QuotaExceeded(
                    f"store {self.storage.name!r} holds its quota of {self.max_memories} memories",
                    quota=self.max_memories,
                )

        detected = Category(category) if category else enrich.detect_category(content)
        extra_tags = enrich.auto_tags(content, given_tags)
        created = as_utc(timestamp) if timestamp else now
        memory = Memory(
            id=new_id(),
            content=content,
            created_at=created,
            updated_at=created,
            accessed_at=created,
            store=self.storage.name,
            category=detected.value,
            tags=given_tags,
            auto_tags=tuple(extra_tags) if auto_tag else (),
            importance=importance if importance is not None else enrich.estimate_importance(content, detected),
            metadata=dict(metadata or {}),
            context=context,
            access_level=AccessLevel(access_level),
            owner=context.user_id,
            expires_at=as_utc(expires_at) if expires_at else None,
        )
        self.storage.insert(memory, self._change(memory, "create", actor), related, unique_content=True)
        return StoreResult(memory, extra_tags if auto_tag else [], len(related))

    def _require_existing(self, memory_ids: Sequence[str]) -> list[Memory]:
        found = [m for m in self.storage.get_many(memory_ids) if m.status is not Status.FORGOTTEN]
        missing = sorted(set(memory_ids) - {m.id for m in found})
        if missing:
            raise NotFound(f"no memory with id {', '.join(missing)}", memory_ids=missing)
        return found

    def get(self, memory_id: str) -> Memory:
        memory = self.storage.get(memory_id)
        if memory is None:
            raise NotFound(f"no memory with id {memory_id}", memory_id=memory_id)
        return memory

    def history(self, memory_id: str) -> list[Change]:
        self.get(memory_id)
        return self.storage.history(memory_id)

    # -- recall ------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        *,
        categories: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        date_range: DateRange = DateRange(),
        min_importance: float | None = None,
        user_id: str | None = None,
        conversation_id: str | None = None,
        access_levels: Sequence[str] | None = None,
        weights: ranking.Weights = ranking.Weights(),
        decay: ranking.Decay = ranking.Decay.EXPONENTIAL,
        limit: int = 10,
        offset: int = 0,
        include_archived: bool = False,
    ) -> RecallResult:
        started = time.perf_counter()
        if not query.strip():
            raise InvalidInput("query must not be empty", field="query")
        _check_length("query", query, MAX_QUERY_CHARS)
        _check_unit("min_importance", min_importance)
        self._check_page(limit, offset)
        values = len(categories or ()) + len(tags or ()) + len(access_levels or ())
        if values > MAX_FILTER_VALUES:
            raise TooComplex(f"the filters name {values} values; at most {MAX_FILTER_VALUES} are allowed")
        now = self.clock.now()
        filters = Filters(
            now=now,
            statuses=(Status.ACTIVE, Status.ARCHIVED) if include_archived else (Status.ACTIVE,),
            categories=tuple(categories) if categories else None,
            tags_any=tuple(tags) if tags else None,
            created_from=date_range.start,
            created_to=date_range.end,
            importance_min=min_importance,
            user_id=user_id,
            conversation_id=conversation_id,
            access_levels=tuple(access_levels) if access_levels else None,
        )
        terms = search_terms(query)
        hits = self.storage.search_text(terms, filters, max(CANDIDATE_POOL, 3 * (offset + limit)))
        total = self.storage.count_text(terms, filters) if hits else 0
        memories = {m.id: m for m in self.storage.get_many([h.memory_id for h in hits])}
        max_access = self.storage.max_access_count() if hits else 0
        relevance = ranking.normalise_relevance([h.score for h in hits])
        ranked = sorted(
            (
                RecallHit(memory, self._score(memory, rel, weights, decay, now, max_access))
                for hit, rel in zip(hits, relevance, strict=True)
                if (memory := memories.get(hit.memory_id)) is not None
            ),
            key=lambda h: h.scores.combined,
            reverse=True,
        )[offset : offset + limit]
        if ranked:
            self.storage.record_recall([h.memory.id for h in ranked], now)
            ranked = [
                RecallHit(h.memory.evolve(access_count=h.memory.access_count + 1, accessed_at=now), h.scores)
                for h in ranked
            ]
        return RecallResult(ranked, total, (time.perf_counter() - started) * 1000)

    def _score(
        self, memory: Memory, relevance: float, weights: ranking.Weights, decay: ranking.Decay,
        now: datetime, max_access: int,
    ) -> ranking.Scores:  # fmt: skip
        age_days = (now - memory.updated_at).total_seconds() / 86400
        return ranking.score(
            weights,
            relevance,
            ranking.recency(age_days, self.recency_half_life_days, decay),
            memory.importance,
            ranking.access_frequency(memory.access_count, max_access),
        )

    @staticmethod
    def _check_page(limit: int, offset: int) -> None:
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}", field="limit")
        if offset < 0:
            raise InvalidInput("offset must not be negative", field="offset")

    # -- update ------------------------------------------------------------------------
    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        category: str | None = None,
        tags: TagEdit | None = None,
        importance: float | None = None,
        access_level: AccessLevel | None = None,
        expires_at: datetime | None = UNSET,
        reason: str | None = None,
        merge_strategy: str = "replace",
        expected_version: int | None = None,
        actor: str | None = None,
    ) -> UpdateResult:
        if (
            content is None
            and category is None
            and tags is None
            and importance is None
            and (access_level is None and expires_at is UNSET)
        ):
            raise InvalidInput("no updates provided: give at least one field to change", field="updates")
        if content is not None:
            _check_content(content)
        if category is not None and category not in Category.__members__.values():
            raise InvalidInput(f"unknown category {category!r}", field="category")
        _check_unit("importance", importance)
        _check_length("reason", reason, MAX_REASON_CHARS)
        if merge_strategy not in ("replace", "append", "prepend"):
            raise InvalidInput(f"unknown merge_strategy {merge_strategy!r}", field="merge_strategy")
        if expires_at not in (UNSET, None) and as_utc(expires_at) <= self.clock.now():
            raise InvalidInput("expires_at is in the past", field="expires_at")

        # Optimistic concurrency: compute from what was read, write only if it is still current.
        # A caller that named the version it read gets a conflict; otherwise re-read and re-apply.
        for _attempt in range(MAX_CONFLICT_RETRIES):
            current = self.get(memory_id)
            if current.status is Status.FORGOTTEN:
                raise NotFound(f"memory {memory_id} has been deleted", memory_id=memory_id)
            if expected_version is not None and current.version != expected_version:
                raise Conflict(
                    f"memory {memory_id} is at version {current.version}, not {expected_version}",
                    memory_id=memory_id,
                    current_version=current.version,
                )
            changes = self._apply_updates(
                current, content, merge_strategy, category, tags, importance, access_level, expires_at
            )
            changed = {k: v for k, v in changes.items() if getattr(current, k) != v}
            if not changed:
                return UpdateResult(current, [], None)
            now = self.clock.now()
            updated = current.evolve(**changed, version=current.version + 1, updated_at=now)
            change = self._change(updated, "update", actor, reason, previous=current)
            try:
                self.storage.save([(updated, change)])
            except Conflict:
                if expected_version is not None:
                    raise
                continue
            return UpdateResult(updated, [k for k in changed if k != "auto_tags"], change.id)
        raise Conflict(f"memory {memory_id} kept changing while being updated", memory_id=memory_id)

    @staticmethod
    def _apply_updates(
        current: Memory, content: str | None, merge_strategy: str, category: str | None, tags: TagEdit | None,
        importance: float | None, access_level: AccessLevel | None, expires_at: datetime | None,
    ) -> dict[str, Any]:  # fmt: skip
        """The fields an update sets, computed from the memory as it is now."""
        changes: dict[str, Any] = {}
        # An explicit tag edit applies to the tags the memory shows, and makes them all the caller's.
        user_tags = current.tags if tags is None else tags.apply(current.all_tags)
        if len([t for t in user_tags if t not in current.auto_tags]) > MAX_TAGS:
            raise InvalidInput(f"at most {MAX_TAGS} tags are allowed", field="tags")
        auto = current.auto_tags if tags is None else ()
        if content is not None:
            merged = {
                "replace": content,
                "append": f"{current.content}\n{content}",
                "prepend": f"{content}\n{current.content}",
            }[merge_strategy]
            _check_length("content", merged, MAX_CONTENT_CHARS)
            changes["content"] = merged
            if auto:  # tags derived from the old words must not outlive them
                auto = tuple(enrich.auto_tags(merged, user_tags, limit=len(auto)))
        if tags is not None:
            changes["tags"] = user_tags
        changes["auto_tags"] = auto
        if category is not None:
            changes["category"] = category
        if importance is not None:
            changes["importance"] = importance
        if access_level is not None:
            changes["access_level"] = AccessLevel(access_level)
        if expires_at is not UNSET:
            changes["expires_at"] = as_utc(expires_at) if expires_at else None
        return changes

    # -- forget ------------------------------------------------------------------------
    def forget(
        self,
        memory_id: str,
        *,
        reason: str = ForgetReason.USER_REQUEST,
        reason_details: str | None = None,
        hard_delete: bool = False,
        retention_period_days: int = DEFAULT_RETENTION_DAYS,
        cascade_related: bool = False,
        actor: str | None = None,
    ) -> ForgetResult:
        if reason not in ForgetReason.__members__.values():
            raise InvalidInput(f"unknown reason {reason!r}", field="reason")
        _check_length("reason_details", reason_details, MAX_REASON_DETAILS_CHARS)
        if not 0 <= retention_period_days <= MAX_RETENTION_DAYS:
            raise InvalidInput(
                f"retention_period_days must be between 0 and {MAX_RETENTION_DAYS}",
                field="retention_period_days",
            )
        now = self.clock.now()
        self.storage.purge_due(now)
        primary = self.get(memory_id)
        if primary.status is Status.FORGOTTEN and not hard_delete:
            raise NotFound(f"memory {memory_id} is already deleted", memory_id=memory_id)
        targets = [primary, *self._related(primary)] if cascade_related else [primary]
        why = reason if not reason_details else f"{reason}: {reason_details}"

        if hard_delete:
            changes = [self._change(m.evolve(version=m.version + 1), "hard_delete", actor, why) for m in targets]
            self.storage.purge([m.id for m in targets], changes)
            return ForgetResult(memory_id, "hard", now, None, len(targets) - 1, None)

        until = now + timedelta(days=retention_period_days)
        saved: list[tuple[Memory, Change]] = []
        backups: list[Backup] = []
        for memory in targets:
            forgotten = memory.evolve(
                status=Status.FORGOTTEN,
                forget_reason=reason,
                forget_details=reason_details,
                forgotten_at=now,
                recoverable_until=until,
                version=memory.version + 1,
                updated_at=now,
            )
            saved.append((forgotten, self._change(forgotten, "forget", actor, why, previous=memory)))
            backups.append(Backup(new_id(), memory, now, until))
        self.storage.save(saved, backups)
        return ForgetResult(memory_id, "soft", now, until, len(targets) - 1, backups[0].id)

    def _related(self, start: Memory) -> list[Memory]:
        """Every memory reachable from ``start`` through links, either way, not yet forgotten."""
        seen = {start.id}
        frontier = [start.id]
        found: list[Memory] = []
        while frontier:
            neighbours = {n for mid in frontier for n in self.storage.linked_ids(mid)} - seen
            seen |= neighbours
            fresh = [m for m in self.storage.get_many(sorted(neighbours)) if m.status is not Status.FORGOTTEN]
            found.extend(fresh)
            frontier = [m.id for m in fresh]
        return found

    # -- list --------------------------------------------------------------------------
    def list(
        self,
        *,
        categories: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        date_range: DateRange = DateRange(),
        importance_min: float | None = None,
        importance_max: float | None = None,
        user_id: str | None = None,
        conversation_id: str | None = None,
        access_levels: Sequence[str] | None = None,
        statuses: Sequence[str] = ("active",),
        sort: Sort = Sort(),
        limit: int = 20,
        offset: int = 0,
        cursor: str | None = None,
        include_stats: bool = False,
    ) -> ListPage:
        self._check_page(limit, offset)
        _check_unit("importance_range.min", importance_min)
        _check_unit("importance_range.max", importance_max)
        if importance_min is not None and importance_max is not None and importance_min > importance_max:
            raise InvalidInput("importance_range.min is greater than its max", field="importance_range")
        unknown = [s for s in statuses if s not in STATUS_NAMES]
        if unknown:
            raise InvalidInput(f"unknown status {', '.join(unknown)}", field="status")
        if cursor is not None and offset:
            raise InvalidInput("give either an offset or a cursor, not both", field="pagination")
        after = self._decode_cursor(cursor, sort) if cursor is not None else None
        now = self.clock.now()
        filters = Filters(
            now=now,
            statuses=tuple(dict.fromkeys(STATUS_NAMES[s] for s in statuses)),
            categories=tuple(categories) if categories else None,
            tags_any=tuple(tags) if tags else None,
            created_from=date_range.start,
            created_to=date_range.end,
            importance_min=importance_min,
            importance_max=importance_max,
            user_id=user_id,
            conversation_id=conversation_id,
            access_levels=tuple(access_levels) if access_levels else None,
        )
        rows = self.storage.list(filters, sort, limit + 1, offset if after is None else 0, after)
        has_more = len(rows) > limit
        rows = rows[:limit]
        memories = [m for m, _ in rows]
        stats: dict[str, MemoryStats] = {}
        if include_stats:
            links = self.storage.link_counts([m.id for m in memories])
            stats = {
                m.id: MemoryStats(
                    m.content_length,
                    links.get(m.id, 0),
                    (now - m.created_at).days,
                    (now - m.accessed_at).days,
                )
                for m in memories
            }
        return ListPage(
            memories=memories,
            total=self.storage.count(filters),
            has_more=has_more,
            next_cursor=self._encode_cursor(sort, rows[-1][1]) if has_more else None,
            next_offset=offset + len(rows) if has_more and after is None else None,
            stats=stats,
        )

    @staticmethod
    def _encode_cursor(sort: Sort, position: Position) -> str:
        raw = json.dumps({"f": sort.field.value, "d": sort.descending, "v": position.value, "k": position.key})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def _decode_cursor(cursor: str, sort: Sort) -> Position:
        try:
            raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            position = Position(raw["v"], int(raw["k"]))
            same_order = raw["f"] == sort.field.value and raw["d"] == sort.descending
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise InvalidInput("the cursor is not one this server gave out", field="cursor") from exc
        if not same_order:
            raise InvalidInput("the cursor belongs to a different sort order", field="cursor")
        return position

    # -- stats -------------------------------------------------------------------------
    def stats(
        self,
        *,
        scope: str = "user",
        scope_id: str | None = None,
        time_range: DateRange = DateRange(),
        metrics: Sequence[str] | None = None,
        include_trends: bool = False,
        granularity: str = "day",
    ) -> StatsReport:
        now = self.clock.now()
        wanted = list(dict.fromkeys(metrics)) if metrics else list(METRICS)
        unknown = [m for m in wanted if m not in METRICS]
        if unknown:
            raise InvalidInput(f"unknown metric {', '.join(unknown)}", field="metrics")
        if granularity not in DEFAULT_TREND_BUCKETS:
            raise InvalidInput(f"unknown granularity {granularity!r}", field="granularity")
        scope_filters = self._scope_filters(scope, scope_id, now)
        start = as_utc(time_range.start) if time_range.start else self._earliest(scope_filters) or now
        end = as_utc(time_range.end) if time_range.end else now
        if start > end:
            raise InvalidInput("time_range start is after its end", field="time_range")
        every = _replace_filters(scope_filters, created_from=start, created_to=end)
        calculator = _StatsCalculator(self.storage, every, start, end)
        statistics = {name: getattr(calculator, name)() for name in wanted}
        trends = None
        if include_trends:
            trends = {"memory_count": self._trend(scope_filters, granularity, time_range, now)}
        return StatsReport(scope, scope_id, start, end, statistics, trends, now)

    def _scope_filters(self, scope: str, scope_id: str | None, now: datetime) -> Filters:
        base = Filters(now=now, statuses=None, include_expired=True)
        match scope:
            case "global":
                return base
            case "user":
                # Without an id, "user" is the caller; a local (stdio) caller owns the whole store.
                filters = _replace_filters(base, user_id=scope_id)
            case "conversation":
                if not scope_id:
                    raise InvalidInput("scope 'conversation' needs a scope_id", field="scope_id")
                filters = _replace_filters(base, conversation_id=scope_id)
            case "category":
                if scope_id not in Category.__members__.values():
                    raise InvalidInput("scope 'category' needs a scope_id naming a category", field="scope_id")
                return _replace_filters(base, categories=(scope_id,))
            case _:
                raise InvalidInput(f"unknown scope {scope!r}", field="scope")
        if scope_id is not None and self.storage.count(filters) == 0:
            raise ScopeNotFound(f"no memories in {scope} {scope_id!r}", scope=scope, scope_id=scope_id)
        return filters

    def _earliest(self, filters: Filters) -> datetime | None:
        first = self.storage.list(filters, Sort(SortField.CREATED_AT, descending=False), 1)
        return first[0][0].created_at if first else None

    def _trend(self, filters: Filters, granularity: str, window: DateRange, now: datetime) -> list[dict[str, Any]]:
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
        before = self.storage.count(_replace_filters(filters, created_to=buckets[0] - timedelta(microseconds=1)))
        created = dict(
            self.storage.created_histogram(_replace_filters(filters, created_from=buckets[0], created_to=end), unit)
        )
        series: list[dict[str, Any]] = []
        running = before
        for bucket in buckets:
            label = _bucket_label(bucket, unit)
            running += created.get(label, 0)
            series.append({"date": label, "value": running})
        return series


def _replace_filters(filters: Filters, **changes: Any) -> Filters:
    return replace(filters, **changes)


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


class _StatsCalculator:
    """One method per metric of spec 004; each reads only what it needs."""

    def __init__(self, storage: Storage, filters: Filters, start: datetime, end: datetime) -> None:
        self.storage = storage
        self.every = filters  # all statuses, created in the window
        self.live = _replace_filters(filters, statuses=(Status.ACTIVE,))
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
            "embeddings_bytes": 0,  # recall is by words; no vectors are stored yet
            "database_file_bytes": self.storage.size_bytes(),
        }

    def category_distribution(self) -> dict[str, int]:
        return self.storage.group_count(self.live, GroupKey.CATEGORY)

    def importance_distribution(self) -> dict[str, int]:
        bands = self.storage.group_count(self.live, GroupKey.IMPORTANCE_BAND)
        return {band: bands.get(band, 0) for band in ("high", "medium", "low")}

    def access_patterns(self) -> dict[str, Any]:
        totals = self.storage.totals(self.live)
        top = self.storage.list(self.live, Sort(SortField.ACCESS_COUNT), 1)
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
        first = self.storage.count(_replace_filters(self.every, created_to=middle))
        second = self.storage.count(_replace_filters(self.every, created_from=middle))
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
