"""Recall: the memories most relevant to a query, ranked by relevance, recency, importance and use."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from mnemo import bounds
from mnemo.access import rules as access
from mnemo.access.caller import viewer
from mnemo.engine.base import ServiceBase
from mnemo.engine.checks import check_page, check_unit
from mnemo.engine.results import RecallHit, RecallResult
from mnemo.errors import InvalidInput
from mnemo.model import Status, subject_key
from mnemo.query import DateRange, Filters, RankFields
from mnemo.search import ranking
from mnemo.search.candidate import Candidate
from mnemo.search.words import search_terms

# Candidates taken from words and from meaning each, per recall. Relevance does not depend on the
# other candidates, so a smaller pool only loses memories outside both top lists: 50 instead of
# 200 left the dev sets' R@5/R@10 as they were (LoCoMo 0.632/0.730 -> 0.630/0.729) and cut recall
# at 100,000 memories from 24/30 to 10/15 ms p50/p95.
RECALL_POOL = 50
# Below this calibrated relevance a candidate that shares no word with the query is not a result
# at all (a cosine under ~0.01). Unrelated sentences reach a cosine of ~0.12 with this model, but a
# floor there cut agent-memory-dev's R@10 from 0.91 to 0.90 (filtered queries: 1.00 to 0.69), and
# one at a cosine of 0.05 to 0.912 (0.875): low-scored results stay, shown with their relevance.
MIN_RELEVANCE = 0.03


def inherited(fields: RankFields, candidate: Candidate, every: Mapping[int, RankFields]) -> RankFields:
    """An update's priors with the importance and use of the memory it updates, where those are higher.

    How important a fact is and how often it is needed belong to the fact, not to the note that
    last stated it: the update of a rule recalled weekly should not rank below the rule it replaced.
    """
    older = every.get(candidate.updates) if candidate.updates is not None else None
    if older is None:
        return fields
    return replace(
        fields,
        importance=max(fields.importance, older.importance),
        access_count=max(fields.access_count, older.access_count),
    )


class RecallOperations(ServiceBase):
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
        subject: str | None = None,
        access_levels: Sequence[str] | None = None,
        weights: ranking.Weights = ranking.Weights(),
        decay: ranking.Decay = ranking.Decay.EXPONENTIAL,
        limit: int = 10,
        offset: int = 0,
        include_archived: bool = False,
        min_relevance: float = 0.0,
    ) -> RecallResult:
        """The memories most relevant to the query, ranked by the weighted factors.

        A memory is a result only when its calibrated relevance reaches ``min_relevance`` (spec
        001's threshold); outdated and forgotten memories are never recalled.
        """
        started = time.perf_counter()
        if not query.strip():
            raise InvalidInput("query must not be empty", field="query")
        bounds.fields(query=query)
        check_unit("min_importance", min_importance)
        check_unit("min_relevance", min_relevance)
        check_page(limit, offset)
        access.check_scope(user_id, "filters.user_id")
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
            subject_key=subject_key(subject) if subject else None,
            access_levels=tuple(access_levels) if access_levels else None,
            visible_to=viewer(),
        )
        pool = max(RECALL_POOL, 3 * (offset + limit))
        found = self.searcher.find(query, search_terms(query), filters, pool, followers=True)
        relevant = [
            c for c in found.candidates if c.relevance >= min_relevance and (c.text > 0 or c.relevance >= MIN_RELEVANCE)
        ]
        fields = self.storage.rank_fields([c.key for c in relevant])
        top = self.storage.max_access_count() if relevant else 0  # the store's most recalled memory's count
        best = max((c.relevance for c in relevant), default=0.0)
        newest = max((f.updated_at for f in fields.values()), default=now)
        ranked = sorted(
            (
                (
                    c.memory_id,
                    self._score(inherited(f, c, fields), c.relevance, best, weights, decay, newest, top),
                )
                for c in relevant
                if (f := fields.get(c.key)) is not None
            ),
            key=lambda pair: pair[1].combined,
            reverse=True,
        )
        page = ranked[offset : offset + limit]
        memories = {m.id: m for m in self._seen(self.storage.get_many([memory_id for memory_id, _ in page]), now)}
        hits = [RecallHit(memories[memory_id], s) for memory_id, s in page if memory_id in memories]
        elapsed = (time.perf_counter() - started) * 1000
        return RecallResult(hits, len(ranked), elapsed, found.warnings, found.embedded)

    def _score(
        self, memory: RankFields, relevance: float, best: float, weights: ranking.Weights, decay: ranking.Decay,
        newest: datetime, max_access: int,
    ) -> ranking.Scores:  # fmt: skip
        age_days = (newest - memory.updated_at).total_seconds() / 86400
        return ranking.score(
            weights,
            relevance,
            best,
            ranking.recency(age_days, self.recency_half_life_days, decay),
            memory.importance,
            ranking.access_frequency(memory.access_count, max_access),
        )
