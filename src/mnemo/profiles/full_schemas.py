"""Spec 004's tool inputs and outputs (its JSON Schemas, limits, enums and defaults), for ``full``.

Outputs are the spec's objects plus ``api_version``; ``full_lifecycle``'s share the same base.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mnemo.bounds import MAX_OFFSET
from mnemo.engine.results import MemoryStats, TagEdit
from mnemo.engine.stats import METRICS
from mnemo.model import (
    MAX_CONTENT_CHARS,
    MAX_TAGS,
    Memory,
    canonical_category,
    to_iso,
)
from mnemo.profiles import Listed, Omitted
from mnemo.query import DateRange
from mnemo.search import ranking

API_VERSION = "1.0.0"

Category = Literal["fact", "preference", "instruction", "context", "relationship", "skill", "goal", "event", "custom"]
AccessLevel = Literal["public", "private", "shared"]
Unit = Annotated[float, Field(ge=0, le=1)]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StoreContext(_Input):
    conversation_id: str | Omitted = Field(None, description="Unique identifier for the conversation")
    user_id: str | Omitted = Field(None, description="User identifier")
    session_id: str | Omitted = Field(None, description="Session identifier")
    timestamp: datetime | Omitted = Field(None, description="ISO 8601 timestamp (auto-generated if not provided)")


class StoreMetadata(_Input):
    category: Category | Omitted = Field(None, description="Manual category override (auto-detected if not provided)")
    tags: Annotated[list[str], Field(max_length=MAX_TAGS)] | Omitted = Field(None, description="User-defined tags")
    importance: Unit | Omitted = Field(None, description="Importance score (0-1, auto-calculated if not provided)")
    access_level: AccessLevel = Field("private", description="Access control level")
    expires_at: datetime | Omitted = Field(None, description="Optional expiration timestamp")


class DateRangeInput(_Input):
    start: datetime | Omitted = None
    end: datetime | Omitted = None

    def value(self) -> DateRange:
        return DateRange(self.start, self.end)


class RecallFilters(_Input):
    categories: Listed[Category] | Omitted = Field(None, description="Filter by categories")
    tags: Listed[str] | Omitted = Field(None, description="Filter by tags (OR operation)")
    date_range: DateRangeInput | Omitted = None
    min_importance: Unit | Omitted = None
    user_id: str | Omitted = Field(None, description="Filter by user")
    conversation_id: str | Omitted = Field(None, description="Filter by conversation")
    access_level: Listed[AccessLevel] | Omitted = None


class RankingWeights(_Input):
    """Weights you leave out count as 0 once you give any; all four must sum to 1.0."""

    semantic_similarity: Unit = 0.5
    recency: Unit = 0.2
    importance: Unit = 0.2
    access_frequency: Unit = 0.1

    def value(self) -> ranking.Weights:
        given = {name: getattr(self, name) for name in self.model_fields_set}
        return ranking.Weights(**{name: given.get(name, 0.0) for name in type(self).model_fields})


class Ranking(_Input):
    weights: RankingWeights | Omitted = Field(None, description="Weights for ranking factors (must sum to 1.0)")
    recency_decay: Literal["linear", "exponential", "logarithmic"] = Field(
        "exponential", description="Decay function for recency"
    )


class TagOperations(_Input):
    add: Listed[str] | Omitted = None
    remove: Listed[str] | Omitted = None
    replace: Listed[str] | Omitted = None

    def value(self) -> TagEdit:
        replace = None if self.replace is None else tuple(self.replace)
        return TagEdit(tuple(self.add or ()), tuple(self.remove or ()), replace)


class Updates(_Input):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    content: Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)] | Omitted = Field(
        None, description="Updated content (will regenerate embeddings)"
    )
    category: Category | Omitted = None
    tags: TagOperations | Omitted = None
    importance: Unit | Omitted = None
    access_level: AccessLevel | Omitted = None
    expires_at: datetime | None = None


class ImportanceRange(_Input):
    min: Unit | Omitted = None
    max: Unit | Omitted = None


class ListFilters(_Input):
    categories: Listed[Category] | Omitted = None
    tags: Listed[str] | Omitted = None
    date_range: DateRangeInput | Omitted = None
    importance_range: ImportanceRange | Omitted = None
    user_id: str | Omitted = None
    conversation_id: str | Omitted = None
    access_level: Listed[AccessLevel] | Omitted = None
    status: Listed[Literal["active", "archived", "deleted"]] = ["active"]


class ListSort(_Input):
    field: Literal["created_at", "updated_at", "last_accessed", "importance", "access_count", "content_length"] = (
        "created_at"
    )
    order: Literal["asc", "desc"] = "desc"


class Pagination(_Input):
    limit: Annotated[int, Field(ge=1, le=100)] = 20
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET)] = 0
    cursor: str | Omitted = Field(None, description="Cursor for cursor-based pagination (alternative to offset)")


class TimeRange(_Input):
    start: datetime | Omitted = None
    end: datetime | Omitted = None


Metric = Literal[METRICS]  # type: ignore[valid-type]  # the service's list is the spec's enum


# -- outputs -------------------------------------------------------------------------------
class Output(BaseModel):
    api_version: str = API_VERSION
    success: bool = True


def _absent_if_none(value: object) -> bool:
    return value is None


class ContextOut(BaseModel):
    conversation_id: str | None = Field(None, exclude_if=_absent_if_none)
    user_id: str | None = Field(None, exclude_if=_absent_if_none)
    session_id: str | None = Field(None, exclude_if=_absent_if_none)


def context_out(memory: Memory) -> ContextOut:
    c = memory.context
    return ContextOut(conversation_id=c.conversation_id, user_id=c.user_id, session_id=c.session_id)


class StoreMemoryResult(Output):
    memory_id: str
    content: str
    category: str
    auto_tags: list[str]
    importance: float
    embeddings_generated: bool
    created_at: str
    links_created: int


class ScoresOut(BaseModel):
    semantic_similarity: float
    recency: float
    importance: float
    access_frequency: float
    combined: float


class RecalledMemory(BaseModel):
    memory_id: str
    content: str
    category: str
    tags: list[str]
    importance: float
    created_at: str
    last_accessed: str
    access_count: int
    scores: ScoresOut
    context: ContextOut


class RecallMemoriesResult(Output):
    query: str
    total_results: int
    returned_count: int
    memories: list[RecalledMemory]
    execution_time_ms: float
    warnings: list[str] | None = Field(
        None, exclude_if=_absent_if_none, description="Why recall was degraded, if it was"
    )


class UpdateMemoryResult(Output):
    memory_id: str
    version: int
    updated_fields: list[str]
    embeddings_regenerated: bool
    previous_version_id: str | None
    updated_at: str


class ForgetMemoryResult(Output):
    memory_id: str
    deletion_type: Literal["soft", "hard"]
    deleted_at: str
    recoverable_until: str | None
    related_memories_affected: int
    backup_id: str | None


class MemoryStatsOut(BaseModel):
    content_length: int
    link_count: int
    days_since_creation: int
    days_since_access: int


class ListedMemory(BaseModel):
    memory_id: str
    content: str | None = Field(None, exclude_if=_absent_if_none)
    category: str
    tags: list[str]
    importance: float
    created_at: str
    updated_at: str
    last_accessed: str
    access_count: int
    version: int
    access_level: str
    status: str
    context: ContextOut
    stats: MemoryStatsOut | None = Field(None, exclude_if=_absent_if_none)


class PaginationOut(BaseModel):
    has_more: bool
    next_cursor: str | None
    next_offset: int | None


class ListMemoriesResult(Output):
    total_count: int
    returned_count: int
    memories: list[ListedMemory]
    pagination: PaginationOut


class TimeRangeOut(BaseModel):
    start: str
    end: str


class MemoryStatsResult(Output):
    scope: str
    scope_id: str | None
    time_range: TimeRangeOut
    statistics: dict[str, Any]
    trends: dict[str, list[dict[str, Any]]] | None = Field(None, exclude_if=_absent_if_none)
    generated_at: str


def listed_memory(m: Memory, include_content: bool = True, stats: MemoryStats | None = None) -> ListedMemory:
    """A memory as list_memories shows it (and the REST API's memory resource)."""
    return ListedMemory(
        memory_id=m.id,
        content=m.content if include_content else None,
        category=canonical_category(m.category).value,
        tags=list(m.all_tags),
        importance=m.importance,
        created_at=to_iso(m.created_at),
        updated_at=to_iso(m.updated_at),
        last_accessed=to_iso(m.accessed_at),
        access_count=m.access_count,
        version=m.version,
        access_level=m.access_level.value,
        status="deleted" if m.status == "forgotten" else m.status.value,
        context=context_out(m),
        stats=_stats_out(stats),
    )


def _stats_out(stats: MemoryStats | None) -> MemoryStatsOut | None:
    if stats is None:
        return None
    return MemoryStatsOut(
        content_length=stats.content_length,
        link_count=stats.link_count,
        days_since_creation=stats.days_since_creation,
        days_since_access=stats.days_since_access,
    )
