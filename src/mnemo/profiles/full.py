"""Profile ``full``: spec 004, the memory system (store, recall, update, forget, list, stats).

Inputs follow the spec's JSON Schemas (limits, enums, defaults); outputs are its objects plus
``api_version``; errors are its common error object, returned as a tool error the model reads.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field, StrictBool

from mnemo import errors
from mnemo.access.caller import request_id
from mnemo.bounds import MAX_OFFSET
from mnemo.engine.results import UNSET
from mnemo.engine.service import MemoryService
from mnemo.model import (
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_REASON_DETAILS_CHARS,
    MAX_RETENTION_DAYS,
    Context,
    canonical_category,
    new_id,
    to_iso,
)
from mnemo.profiles import Listed, Omitted, Profile, counts_access, full_lifecycle, hints, run
from mnemo.profiles.full_schemas import (
    API_VERSION,
    ForgetMemoryResult,
    ImportanceRange,
    ListFilters,
    ListMemoriesResult,
    ListSort,
    MemoryStatsResult,
    Metric,
    Pagination,
    PaginationOut,
    Ranking,
    RecalledMemory,
    RecallFilters,
    RecallMemoriesResult,
    ScoresOut,
    StoreContext,
    StoreMemoryResult,
    StoreMetadata,
    TimeRange,
    TimeRangeOut,
    UpdateMemoryResult,
    Updates,
    context_out,
    listed_memory,
)
from mnemo.query import DateRange, Sort, SortField
from mnemo.search import ranking

# -- errors --------------------------------------------------------------------------------
_ERRORS: list[tuple[type[errors.MnemoError], str, int]] = [
    (errors.InvalidInput, "INVALID_INPUT", 400),
    (errors.Forbidden, "PERMISSION_DENIED", 403),
    (errors.ScopeNotFound, "SCOPE_NOT_FOUND", 404),
    (errors.NotFound, "MEMORY_NOT_FOUND", 404),
    (errors.Duplicate, "DUPLICATE_MEMORY", 409),
    (errors.CallInProgress, "CALL_IN_PROGRESS", 409),
    (errors.LeaseLost, "CALL_IN_PROGRESS", 409),
    (errors.SyncConflicts, "SYNC_CONFLICTS", 409),
    (errors.SyncInProgress, "SYNC_IN_PROGRESS", 423),
    (errors.RateLimited, "RATE_LIMIT_EXCEEDED", 429),
    (errors.AnswerLost, "IDEMPOTENT_ANSWER_LOST", 409),
    (errors.KeyReused, "IDEMPOTENCY_KEY_REUSED", 422),
    (errors.Conflict, "CONCURRENT_MODIFICATION", 409),
    (errors.TooDissimilar, "MEMORIES_TOO_DISSIMILAR", 409),
    (errors.AlreadyArchived, "ALREADY_ARCHIVED", 409),
    (errors.AlreadyActive, "ALREADY_ACTIVE", 409),
    (errors.Unprocessable, "UNPROCESSABLE", 422),
    (errors.OperationFailed, "OPERATION_FAILED", 500),
    (errors.ArchiveQuotaExceeded, "ARCHIVE_QUOTA_EXCEEDED", 507),
    (errors.TooComplex, "QUERY_TOO_COMPLEX", 413),
    (errors.Locked, "MEMORY_LOCKED", 423),
    (errors.QuotaExceeded, "STORAGE_QUOTA_EXCEEDED", 507),
    (errors.EmbeddingError, "EMBEDDING_ERROR", 503),
    (errors.CorruptedData, "STORAGE_ERROR", 500),
    (errors.Unavailable, "STORAGE_UNAVAILABLE", 503),
    (errors.StorageError, "STORAGE_ERROR", 500),
]


def error_result(error: errors.MnemoError, now: datetime) -> CallToolResult:
    """Spec 004's common error object, as a tool error the model can read."""
    code, status = next(((c, s) for kind, c, s in _ERRORS if isinstance(error, kind)), ("INTERNAL_ERROR", 500))
    if isinstance(error, errors.EmbeddingError) and "memory_ids" in error.details:
        status = 500  # store/update: the spec files a failed embedding under storage failure
    body = {
        "api_version": API_VERSION,
        "success": False,
        "error": {
            "code": code,
            "message": error.message,
            "status": status,
            "details": error.details,
            "timestamp": to_iso(now),
            "request_id": request_id() or new_id(),
        },
    }
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], is_error=True)


# -- tools ---------------------------------------------------------------------------------
def register(server: MCPServer, service: MemoryService) -> None:
    _register_core(server, service)
    full_lifecycle.register(server, service)


def _register_core(server: MCPServer, service: MemoryService) -> None:
    @server.tool(annotations=hints("Store memory", read_only=False, destructive=False, idempotent=False))
    async def store_memory(
        content: Annotated[
            str, Field(min_length=1, max_length=MAX_CONTENT_CHARS, description="The memory content to store")
        ],
        context: StoreContext | Omitted = Field(None, description="Contextual information about the memory"),
        metadata: StoreMetadata | Omitted = Field(None, description="Additional metadata for the memory"),
        related_memory_ids: Listed[str] | Omitted = Field(None, description="IDs of related memories to link"),
    ) -> StoreMemoryResult:
        """Store new information with automatic categorization, tagging, and metadata enrichment."""
        ctx = context or StoreContext()
        meta = metadata or StoreMetadata()
        result = await run(
            service.store,
            content,
            context=Context(ctx.user_id, ctx.conversation_id, ctx.session_id),
            timestamp=ctx.timestamp,
            category=meta.category,
            tags=meta.tags or (),
            importance=meta.importance,
            access_level=meta.access_level,
            expires_at=meta.expires_at,
            related_memory_ids=related_memory_ids or (),
        )
        m = result.memory
        return StoreMemoryResult(
            memory_id=m.id,
            content=m.content,
            category=canonical_category(m.category).value,
            auto_tags=result.auto_tags,
            importance=m.importance,
            embeddings_generated=result.embedded,
            created_at=to_iso(m.created_at),
            links_created=result.links_created,
        )

    @server.tool(annotations=counts_access("Recall memories"))
    async def recall_memories(
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="Semantic search query")],
        filters: RecallFilters | Omitted = Field(None, description="Filtering criteria"),
        ranking: Ranking | Omitted = Field(None, description="Ranking configuration"),
        limit: Annotated[int, Field(ge=1, le=100, description="Maximum number of results")] = 10,
        offset: Annotated[int, Field(ge=0, le=MAX_OFFSET, description="Pagination offset")] = 0,
        include_archived: Annotated[StrictBool, Field(description="Include archived memories")] = False,
    ) -> RecallMemoriesResult:
        """Search across memories with multi-factor ranking based on relevance, recency, importance and use.

        Each result carries its per-factor scores. Recall counts as an access of each returned memory.
        """
        f = filters or RecallFilters()
        rank = ranking or Ranking()
        result = await run(
            service.recall,
            query,
            categories=f.categories,
            tags=f.tags,
            date_range=f.date_range.value() if f.date_range else DateRange(),
            min_importance=f.min_importance,
            user_id=f.user_id,
            conversation_id=f.conversation_id,
            access_levels=f.access_level,
            weights=rank.weights.value() if rank.weights else _DEFAULT_WEIGHTS,
            decay=_DECAYS[rank.recency_decay],
            limit=limit,
            offset=offset,
            include_archived=include_archived,
        )
        return RecallMemoriesResult(
            query=query,
            total_results=result.total,
            returned_count=len(result.hits),
            memories=[
                RecalledMemory(
                    memory_id=h.memory.id,
                    content=h.memory.content,
                    category=canonical_category(h.memory.category).value,
                    tags=list(h.memory.all_tags),
                    importance=h.memory.importance,
                    created_at=to_iso(h.memory.created_at),
                    last_accessed=to_iso(h.memory.accessed_at),
                    access_count=h.memory.access_count,
                    scores=ScoresOut(
                        semantic_similarity=round(h.scores.semantic_similarity, 4),
                        recency=round(h.scores.recency, 4),
                        importance=round(h.scores.importance, 4),
                        access_frequency=round(h.scores.access_frequency, 4),
                        combined=round(h.scores.combined, 4),
                    ),
                    context=context_out(h.memory),
                )
                for h in result.hits
            ],
            execution_time_ms=round(result.execution_time_ms, 2),
            warnings=result.warnings or None,
        )

    @server.tool(annotations=hints("Update memory", read_only=False, destructive=False, idempotent=False))
    async def update_memory(
        memory_id: Annotated[str, Field(description="ID of the memory to update")],
        updates: Annotated[Updates, Field(description="Fields to update")],
        reason: Annotated[str, Field(max_length=MAX_REASON_CHARS, description="Reason for the update (audit trail)")]
        | Omitted = None,
        merge_strategy: Annotated[
            Literal["replace", "append", "prepend"],
            Field(description="How to merge content if both old and new exist"),
        ] = "replace",
        expected_version: Annotated[
            int,
            Field(
                ge=1,
                description="Optional: the version you read; if the memory has moved on since, the update is "
                "refused with a 409 instead of overwriting someone else's change",
            ),
        ]
        | Omitted = None,
    ) -> UpdateMemoryResult:
        """Modify existing memory content, metadata, or relationships with full version history tracking."""
        tags = updates.tags
        result = await run(
            service.update,
            memory_id,
            content=updates.content,
            category=updates.category,
            tags=tags.value() if tags else None,
            importance=updates.importance,
            access_level=updates.access_level,
            expires_at=updates.expires_at if "expires_at" in updates.model_fields_set else UNSET,
            reason=reason,
            merge_strategy=merge_strategy,
            expected_version=expected_version,
        )
        return UpdateMemoryResult(
            memory_id=result.memory.id,
            version=result.memory.version,
            updated_fields=result.updated_fields,
            embeddings_regenerated=result.embeddings_regenerated,
            previous_version_id=result.previous_version_id,
            updated_at=to_iso(result.memory.updated_at),
        )

    @server.tool(annotations=hints("Forget memory", read_only=False, destructive=True, idempotent=False))
    async def forget_memory(
        memory_id: Annotated[str, Field(description="ID of the memory to forget")],
        reason: Annotated[
            Literal["user_request", "privacy", "outdated", "incorrect", "duplicate", "expired", "other"],
            Field(description="Reason for forgetting"),
        ] = "user_request",
        reason_details: Annotated[
            str, Field(max_length=MAX_REASON_DETAILS_CHARS, description="Additional details about the reason")
        ]
        | Omitted = None,
        hard_delete: Annotated[StrictBool, Field(description="Permanently delete (cannot be recovered)")] = False,
        retention_period_days: Annotated[
            int,
            Field(
                ge=0,
                le=MAX_RETENTION_DAYS,
                description="Days to retain before permanent deletion (only if hard_delete=false)",
            ),
        ] = 30,
        cascade_related: Annotated[StrictBool, Field(description="Also forget related memories")] = False,
    ) -> ForgetMemoryResult:
        """Soft delete a memory with reason tracking, allowing recovery until its retention ends.

        hard_delete removes the content, its index entries and its saved versions for good.
        """
        result = await run(
            service.forget,
            memory_id,
            reason=reason,
            reason_details=reason_details,
            hard_delete=hard_delete,
            retention_period_days=retention_period_days,
            cascade_related=cascade_related,
        )
        return ForgetMemoryResult(
            memory_id=result.memory_id,
            deletion_type=result.deletion_type,  # type: ignore[arg-type]
            deleted_at=to_iso(result.deleted_at),
            recoverable_until=to_iso(result.recoverable_until) if result.recoverable_until else None,
            related_memories_affected=result.related_affected,
            backup_id=result.backup_id,
        )

    @server.tool(annotations=hints("List memories", read_only=True, destructive=False, idempotent=True))
    async def list_memories(
        filters: ListFilters | Omitted = None,
        sort: ListSort | Omitted = None,
        pagination: Pagination | Omitted = None,
        include_content: Annotated[
            StrictBool, Field(description="Include full content (false returns only metadata)")
        ] = True,
        include_stats: Annotated[StrictBool, Field(description="Include statistics for each memory")] = False,
    ) -> ListMemoriesResult:
        """Browse memories with filtering, sorting, and offset or cursor pagination."""
        f = filters or ListFilters()
        s = sort or ListSort()
        p = pagination or Pagination()
        importance = f.importance_range or ImportanceRange()
        page = await run(
            service.list,
            categories=f.categories,
            tags=f.tags,
            date_range=f.date_range.value() if f.date_range else DateRange(),
            importance_min=importance.min,
            importance_max=importance.max,
            user_id=f.user_id,
            conversation_id=f.conversation_id,
            access_levels=f.access_level,
            statuses=f.status,
            sort=Sort(SortField(s.field), descending=s.order == "desc"),
            limit=p.limit,
            offset=p.offset,
            cursor=p.cursor,
            include_stats=include_stats,
        )
        return ListMemoriesResult(
            total_count=page.total,
            returned_count=len(page.memories),
            memories=[listed_memory(m, include_content, page.stats.get(m.id)) for m in page.memories],
            pagination=PaginationOut(
                has_more=page.has_more, next_cursor=page.next_cursor, next_offset=page.next_offset
            ),
        )

    @server.tool(annotations=hints("Memory statistics", read_only=True, destructive=False, idempotent=True))
    async def get_memory_stats(
        scope: Annotated[
            Literal["global", "user", "conversation", "category"], Field(description="Scope of statistics")
        ] = "user",
        scope_id: Annotated[str, Field(description="ID for the scope (user_id, conversation_id, etc.)")]
        | Omitted = None,
        time_range: TimeRange | Omitted = None,
        metrics: Annotated[Listed[Metric], Field(description="Specific metrics to retrieve (all if not specified)")]
        | Omitted = None,
        include_trends: Annotated[StrictBool, Field(description="Include trend analysis over time")] = False,
        granularity: Annotated[
            Literal["hour", "day", "week", "month"], Field(description="Time granularity for trends")
        ] = "day",
    ) -> MemoryStatsResult:
        """Retrieve usage metrics, health indicators, and analytics about the memory system."""
        window = time_range or TimeRange()
        report = await run(
            service.stats,
            scope=scope,
            scope_id=scope_id,
            time_range=DateRange(window.start, window.end),
            metrics=metrics,
            include_trends=include_trends,
            granularity=granularity,
        )
        return MemoryStatsResult(
            scope=report.scope,
            scope_id=report.scope_id,
            time_range=TimeRangeOut(start=to_iso(report.start), end=to_iso(report.end)),
            statistics=report.statistics,
            trends=report.trends,
            generated_at=to_iso(report.generated_at),
        )


_DEFAULT_WEIGHTS = ranking.Weights()
_DECAYS = {d.value: d for d in ranking.Decay}

INSTRUCTIONS = (
    "mnemo keeps memories across sessions. Store one clear, standalone fact, preference, instruction or "
    "lesson per memory with store_memory (give user_id and conversation_id in context when you know them). "
    "Before answering anything that depends on what you were told earlier, call recall_memories with a "
    "natural-language query. Use update_memory when a fact changes (give a reason), forget_memory when it is "
    "wrong or the user asks you to forget it, list_memories to browse and get_memory_stats for an overview. "
    "Errors come back as JSON with success=false and an error.code you can act on."
)

PROFILE = Profile(
    name="full",
    spec="004-memory-system.md",
    instructions=INSTRUCTIONS,
    register=register,
    error_result=error_result,
)
