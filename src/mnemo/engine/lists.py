"""Lists of memories: filtered pages with cursors, spec 000's query, statistics and the overview."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from mnemo import bounds
from mnemo.access import rules as access
from mnemo.access.caller import viewer
from mnemo.engine.base import ServiceBase
from mnemo.engine.checks import check_page, check_type, check_unit
from mnemo.engine.results import ListPage, MemoryStats
from mnemo.engine.stats import Overview, StatsReport, overview, report
from mnemo.errors import InvalidInput
from mnemo.model import ImportanceBand, Status, subject_key
from mnemo.query import DateRange, Filters, Position, Sort
from mnemo.search.words import search_terms

MAX_LIST_PAGE = 1_000  # list pages may be longer than recall's (spec 003 reads up to 1,000 entries)
# A search (spec 000's query) returns every match, not a top few: it examines more candidates.
CANDIDATE_POOL = 200
# From this relevance a memory matches a query's search text (spec 000). On agent-memory-dev (400
# memories, 150 questions) it keeps 78% of the right answers among ~10 matches a question
# (benchmarks/fit_relevance.py prints both).
SEARCH_MATCH = 0.3

STATUS_NAMES = {
    "active": Status.ACTIVE,
    "archived": Status.ARCHIVED,
    "deleted": Status.FORGOTTEN,
    "outdated": Status.OUTDATED,
}


class ListOperations(ServiceBase):
    def _filters(
        self, now: datetime, *, categories: Sequence[str] | None = None, labels: Sequence[str] | None = None,
        types: Sequence[str] | None = None, tags: Sequence[str] | None = None, all_tags: Sequence[str] | None = None,
        importance_bands: Sequence[str] | None = None, date_range: DateRange = DateRange(),
        importance_min: float | None = None, importance_max: float | None = None, user_id: str | None = None,
        conversation_id: str | None = None, subject: str | None = None, agent_names: Sequence[str] | None = None,
        signed_only: bool = False, access_levels: Sequence[str] | None = None, statuses: Sequence[str] = ("active",),
        include_expired: bool = False,
    ) -> Filters:  # fmt: skip
        """The storage filters of a list, query or overview, after checking each value."""
        access.check_scope(user_id)
        check_unit("importance_range.min", importance_min)
        check_unit("importance_range.max", importance_max)
        if importance_min is not None and importance_max is not None and importance_min > importance_max:
            raise InvalidInput("importance_range.min is greater than its max", field="importance_range")
        unknown = [s for s in statuses if s not in STATUS_NAMES]
        if unknown:
            raise InvalidInput(f"unknown status {', '.join(unknown)}", field="status")
        bad_bands = [b for b in importance_bands or () if b not in ImportanceBand.__members__.values()]
        if bad_bands:
            raise InvalidInput(f"unknown importance {', '.join(bad_bands)}", field="importance")
        for memory_type in types or ():
            check_type(memory_type)
        return Filters(
            now=now,
            statuses=tuple(dict.fromkeys(STATUS_NAMES[s] for s in statuses)),
            categories=tuple(categories) if categories else None,
            labels=tuple(labels) if labels else None,
            types=tuple(types) if types else None,
            tags_any=tuple(tags) if tags else None,
            tags_all=tuple(all_tags) if all_tags else None,
            importance_bands=tuple(importance_bands) if importance_bands else None,
            agent_names=tuple(agent_names) if agent_names else None,
            has_agent=True if signed_only else None,
            include_expired=include_expired,
            created_from=date_range.start,
            created_to=date_range.end,
            importance_min=importance_min,
            importance_max=importance_max,
            user_id=user_id,
            conversation_id=conversation_id,
            subject_key=subject_key(subject) if subject else None,
            access_levels=tuple(access_levels) if access_levels else None,
            visible_to=viewer(),
        )

    # -- list --------------------------------------------------------------------------
    def list(
        self,
        *,
        categories: Sequence[str] | None = None,
        labels: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        all_tags: Sequence[str] | None = None,
        importance_bands: Sequence[str] | None = None,
        date_range: DateRange = DateRange(),
        importance_min: float | None = None,
        importance_max: float | None = None,
        user_id: str | None = None,
        conversation_id: str | None = None,
        subject: str | None = None,
        agent_names: Sequence[str] | None = None,
        signed_only: bool = False,
        access_levels: Sequence[str] | None = None,
        statuses: Sequence[str] = ("active",),
        include_expired: bool = False,
        sort: Sort = Sort(),
        limit: int | None = 20,
        offset: int = 0,
        cursor: str | None = None,
        include_stats: bool = False,
    ) -> ListPage:
        """A page of memories that pass every filter, in the sort's order.

        ``categories`` are spec 004's (labels map onto them), ``labels`` exact stored ones;
        ``tags`` matches any of them, ``all_tags`` every one; ``signed_only`` keeps the entries an
        agent signed (spec 003's space). ``limit=None`` returns every match.
        """
        if limit is not None:
            check_page(limit, offset, MAX_LIST_PAGE)
        else:
            bounds.offset(offset)
        if cursor is not None and offset:
            raise InvalidInput("give either an offset or a cursor, not both", field="pagination")
        after = self._decode_cursor(cursor, sort) if cursor is not None else None
        now = self.clock.now()
        filters = self._filters(
            now, categories=categories, labels=labels, types=types, tags=tags, all_tags=all_tags,
            importance_bands=importance_bands, date_range=date_range, importance_min=importance_min,
            importance_max=importance_max, user_id=user_id, conversation_id=conversation_id, subject=subject,
            agent_names=agent_names, signed_only=signed_only, access_levels=access_levels, statuses=statuses,
            include_expired=include_expired,
        )  # fmt: skip
        rows = self.storage.select(filters, sort, None if limit is None else limit + 1, offset if after is None else 0,
                                   after)  # fmt: skip
        has_more = limit is not None and len(rows) > limit
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
        bounds.sql_value("cursor", position.value)  # a forged cursor must not reach SQL with what it cannot hold
        bounds.sql_value("cursor", position.key)
        return position

    # -- query: filters with an optional search (spec 000) -----------------------------
    def query(
        self,
        search: str | None = None,
        *,
        types: Sequence[str] | None = None,
        labels: Sequence[str] | None = None,
        all_tags: Sequence[str] | None = None,
        importance_bands: Sequence[str] | None = None,
        statuses: Sequence[str] = ("active",),
        sort: Sort | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> ListPage:
        """A page of the memories that pass every filter and, given a ``search``, match it.

        A memory matches a search when its calibrated relevance (words and meaning, as recall
        weighs them) reaches SEARCH_MATCH; matches count as accessed, as recall's results do.
        ``sort=None`` puts the best matches first, or lists newest first when there is no search.
        ``total`` counts every match among the candidates examined (CANDIDATE_POOL per channel).
        """
        check_page(limit, offset)
        if search is None or not search.strip():
            return self.list(types=types, labels=labels, all_tags=all_tags, importance_bands=importance_bands,
                             statuses=statuses, sort=sort or Sort(), limit=limit, offset=offset)  # fmt: skip
        now = self.clock.now()
        filters = self._filters(
            now, labels=labels, types=types, all_tags=all_tags, importance_bands=importance_bands, statuses=statuses
        )
        bounds.fields(search=search)
        found = self.searcher.find(search, search_terms(search), filters, max(CANDIDATE_POOL, 3 * (offset + limit)))
        matches = sorted((c for c in found.candidates if c.relevance >= SEARCH_MATCH), key=lambda c: -c.relevance)
        ids = [c.memory_id for c in matches]
        if sort is None:
            memories = self.storage.get_many(ids[offset : offset + limit])
        else:
            rows = self.storage.select(replace(filters, ids=tuple(ids)), sort, limit, offset) if ids else []
            memories = [m for m, _ in rows]
        seen = self._seen(memories, now)
        has_more = offset + len(seen) < len(ids)
        return ListPage(seen, len(ids), has_more, None, offset + len(seen) if has_more else None)

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
        return report(
            self.storage,
            self.clock.now(),
            scope=scope,
            scope_id=scope_id,
            time_range=time_range,
            metrics=metrics,
            include_trends=include_trends,
            granularity=granularity,
        )

    def overview(
        self, *, subject: str | None = None, statuses: Sequence[str] = ("active",), signed_only: bool = False
    ) -> Overview:
        """The counts specs 000, 001 and 003 report: by type, band, category, subject, agent, tag."""
        filters = self._filters(self.clock.now(), subject=subject, statuses=statuses, signed_only=signed_only)
        return overview(self.storage, filters)
