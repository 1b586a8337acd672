"""Profile ``agent``: spec 000, the agent memory server (typed memories, query, archive, stats).

Inputs follow the spec's JSON Schemas; every tool answers with one memory shape (``AgentMemory``);
errors are ``{"error": {"code", "message"}}`` with the spec's seven codes, as a tool error.

Choices the spec leaves open:
- Storing content that is already stored (same words, or the same meaning when vectors are on)
  writes nothing and returns the stored memory with ``created: false``: an agent that
  re-remembers a fact gets its memory back rather than an error or a copy.
- ``query_memories`` with ``search`` keeps the memories that match it in words or meaning; unless
  ``sort_by`` is given, the best matches come first. Memories found by a search count as accessed.
- A memory stored through another profile shows ``type: null`` and the tags and category it has.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field, StrictBool

from mnemo import errors
from mnemo.bounds import MAX_OFFSET
from mnemo.engine.results import TagEdit
from mnemo.engine.service import MemoryService
from mnemo.model import BAND_IMPORTANCE, ImportanceBand, Memory, Status, importance_band, to_iso
from mnemo.profiles import Listed, Omitted, Profile, counts_access, hints, run
from mnemo.query import Sort, SortField

UUID4 = "^[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}$"

MemoryType = Literal["core", "learning", "task"]
Band = Literal["high", "medium", "low"]
MemoryId = Annotated[str, Field(pattern=UUID4)]
Content = Annotated[str, Field(min_length=1, max_length=5000)]
CategoryLabel = Annotated[str, Field(max_length=50)]
Tags = Annotated[list[Annotated[str, Field(max_length=30)]], Field(max_length=10)]
SortBy = Literal["created_at", "updated_at", "accessed_at", "importance", "access_count"]

_SORT_FIELDS = {
    "created_at": SortField.CREATED_AT,
    "updated_at": SortField.UPDATED_AT,
    "accessed_at": SortField.ACCESSED_AT,
    "importance": SortField.IMPORTANCE,
    "access_count": SortField.ACCESS_COUNT,
}
_FIELD_NAMES = {"status": "archived"}  # the service's field name → the spec's, where they differ


# -- outputs -------------------------------------------------------------------------------
class AgentMemory(BaseModel):
    """A memory as every tool of this profile shows it."""

    id: str
    type: MemoryType | None
    content: str
    category: str | None
    tags: list[str]
    importance: Band
    created_at: str
    updated_at: str
    accessed_at: str
    access_count: int
    archived: bool


def _memory(m: Memory) -> AgentMemory:
    return AgentMemory(
        id=m.id,
        type=m.type,  # type: ignore[arg-type]  # the service accepts only spec 000's types
        content=m.content,
        category=m.category,
        tags=list(m.all_tags),
        importance=importance_band(m.importance).value,
        created_at=to_iso(m.created_at),
        updated_at=to_iso(m.updated_at),
        accessed_at=to_iso(m.accessed_at),
        access_count=m.access_count,
        archived=m.status is Status.ARCHIVED,
    )


def _importance(band: Band | None) -> float | None:
    return None if band is None else BAND_IMPORTANCE[ImportanceBand(band)]


class StoreMemoryResult(BaseModel):
    id: str = Field(description="UUID of the stored memory")
    created: bool = Field(description="True if new memory was created, false if existing was updated")
    memory: AgentMemory = Field(description="The complete stored memory object")


class QueryMemoriesResult(BaseModel):
    memories: list[AgentMemory] = Field(description="Array of matching memories")
    total: int = Field(description="Total number of matching memories (before pagination)")
    limit: int
    offset: int
    has_more: bool = Field(description="True if more results available")


class UpdateMemoryResult(BaseModel):
    memory: AgentMemory = Field(description="The updated memory object")
    updated_fields: list[str] = Field(description="List of fields that were updated")


class DeleteMemoryResult(BaseModel):
    success: bool
    action: Literal["archived", "deleted"] = Field(description="Action performed")
    id: str = Field(description="UUID of the affected memory")


class ByType(BaseModel):
    core: int
    learning: int
    task: int


class ByImportance(BaseModel):
    high: int
    medium: int
    low: int


class TagCount(BaseModel):
    tag: str
    count: int


class MemoryStatsResult(BaseModel):
    total_memories: int = Field(description="Total number of non-archived memories")
    by_type: ByType
    by_importance: ByImportance
    archived_count: int
    total_storage_kb: float = Field(description="Total storage used in kilobytes")
    oldest_memory: str | None = Field(description="Timestamp of oldest memory")
    newest_memory: str | None = Field(description="Timestamp of newest memory")
    most_accessed: AgentMemory | None = Field(description="The memory with highest access count")
    top_tags: list[TagCount] = Field(description="Top 10 most used tags")


# -- errors --------------------------------------------------------------------------------
# The first kind an error is an instance of gives its code; anything else is INTERNAL_ERROR.
_ERRORS: list[tuple[type[errors.MnemoError], str]] = [
    (errors.InvalidInput, "INVALID_INPUT"),
    (errors.Forbidden, "PERMISSION_ERROR"),
    (errors.TooComplex, "INVALID_INPUT"),
    (errors.Duplicate, "INVALID_INPUT"),  # store_memory returns the existing memory instead
    (errors.NotFound, "NOT_FOUND"),
    (errors.QuotaExceeded, "LIMIT_EXCEEDED"),
    (errors.RateLimited, "LIMIT_EXCEEDED"),
    (errors.KeyReused, "INVALID_INPUT"),
    (errors.CorruptedData, "CORRUPTED_DATA"),
    (errors.StorageError, "STORAGE_ERROR"),
    (errors.Locked, "STORAGE_ERROR"),  # another writer held the store past the busy timeout
    (errors.Conflict, "STORAGE_ERROR"),  # other writers kept changing the memory; retrying helps
    (errors.LeaseLost, "STORAGE_ERROR"),  # a retry of the call runs it: retrying gets its answer
]


def error_result(error: errors.MnemoError, now: datetime) -> CallToolResult:
    """Spec 000's error object, as a tool error the model can read.

    An embedding failure has no code of its own in spec 000: it is an INTERNAL_ERROR, whose
    message says whether the memory was stored all the same.
    """
    code = next((c for kind, c in _ERRORS if isinstance(error, kind)), "INTERNAL_ERROR")
    body = {"error": {"code": code, "message": error.message}}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], is_error=True)


# -- tools ---------------------------------------------------------------------------------
def register(server: MCPServer, service: MemoryService) -> None:
    # Idempotent: the same content again returns the memory already stored.
    @server.tool(annotations=hints("Store memory", read_only=False, destructive=False, idempotent=True))
    async def store_memory(
        type: Annotated[MemoryType, Field(description="Type of memory to store")],
        content: Annotated[Content, Field(description="The memory content")],
        category: Annotated[
            CategoryLabel, Field(description="Optional category (e.g., 'preference', 'fact', 'pattern')")
        ]
        | Omitted = None,
        tags: Annotated[Tags, Field(description="Optional tags for categorization")] | Omitted = None,
        # Absent, not "medium", when an update leaves importance as it is; the schema shows the spec's default.
        importance: Annotated[Band, Field(description="Memory importance level")] | Omitted = Field(
            None, json_schema_extra={"default": "medium"}
        ),
        id: Annotated[MemoryId, Field(description="Memory ID for updates (omit for new memories)")] | Omitted = None,
    ) -> StoreMemoryResult:
        """Store a new memory or update an existing one. Memories persist across sessions and help maintain context.

        With an id, that memory is updated: its content and type, and each other field given;
        storing content that is already stored returns that memory with created=false.
        """
        if id is not None:
            updated = await run(
                service.update,
                id,
                content=content,
                type=type,
                category=category,
                tags=None if tags is None else TagEdit(replace=tuple(tags)),
                importance=_importance(importance),
            )
            return StoreMemoryResult(id=updated.memory.id, created=False, memory=_memory(updated.memory))
        stored = await run(
            service.store,
            content,
            type=type,
            category=category,
            tags=tags or (),
            importance=_importance(importance or "medium"),
            auto_tag=False,
            on_duplicate="return",
        )
        return StoreMemoryResult(id=stored.memory.id, created=not stored.existing, memory=_memory(stored.memory))

    @server.tool(annotations=counts_access("Query memories"))
    async def query_memories(
        type: Annotated[MemoryType, Field(description="Filter by memory type")] | Omitted = None,
        tags: Annotated[Listed[str], Field(description="Filter by tags (AND logic)")] | Omitted = None,
        search: Annotated[
            str,
            Field(
                max_length=200,
                description="Search text in memory content: matches its words or its meaning; "
                "results come best match first unless sort_by is given",
            ),
        ]
        | Omitted = None,
        importance: Annotated[Band, Field(description="Filter by importance level")] | Omitted = None,
        category: Annotated[str, Field(description="Filter by category")] | Omitted = None,
        archived: Annotated[StrictBool, Field(description="Include archived memories")] = False,
        limit: Annotated[int, Field(ge=1, le=100, description="Maximum number of results")] = 10,
        offset: Annotated[
            int, Field(ge=0, le=MAX_OFFSET, description="Number of results to skip (for pagination)")
        ] = 0,
        sort_by: Annotated[
            SortBy, Field(description="Field to sort by (default accessed_at; with search, by relevance)")
        ]
        | Omitted = Field(None, json_schema_extra={"default": "accessed_at"}),
        sort_order: Annotated[Literal["asc", "desc"], Field(description="Sort order")] = "desc",
    ) -> QueryMemoriesResult:
        """Query and filter stored memories, with sorting and pagination."""
        # The spec's default order is accessed_at; a search without sort_by is ordered by relevance.
        sort = (
            None if sort_by is None and search else Sort(_SORT_FIELDS[sort_by or "accessed_at"], sort_order == "desc")
        )
        page = await run(
            service.query,
            search,
            types=[type] if type else None,
            labels=[category] if category is not None else None,
            all_tags=tags,
            importance_bands=[importance] if importance else None,
            statuses=("active", "archived") if archived else ("active",),
            sort=sort,
            limit=limit,
            offset=offset,
        )
        return QueryMemoriesResult(
            memories=[_memory(m) for m in page.memories],
            total=page.total,
            limit=limit,
            offset=offset,
            has_more=page.has_more,
        )

    @server.tool(annotations=hints("Update memory", read_only=False, destructive=False, idempotent=True))
    async def update_memory(
        id: Annotated[MemoryId, Field(description="UUID of the memory to update")],
        content: Annotated[Content, Field(description="Updated content")] | Omitted = None,
        category: CategoryLabel | Omitted = None,
        tags: Tags | Omitted = None,
        importance: Band | Omitted = None,
        archived: Annotated[StrictBool, Field(description="Archive or unarchive the memory")] | Omitted = None,
    ) -> UpdateMemoryResult:
        """Update an existing memory: each field given replaces the memory's (tags as a whole)."""
        result = await run(
            service.update,
            id,
            content=content,
            category=category,
            tags=None if tags is None else TagEdit(replace=tuple(tags)),
            importance=_importance(importance),
            status=None if archived is None else Status.ARCHIVED if archived else Status.ACTIVE,
        )
        return UpdateMemoryResult(
            memory=_memory(result.memory),
            updated_fields=[_FIELD_NAMES.get(name, name) for name in result.updated_fields],
        )

    @server.tool(annotations=hints("Delete memory", read_only=False, destructive=True, idempotent=True))
    async def delete_memory(
        id: Annotated[MemoryId, Field(description="UUID of the memory to delete")],
        permanent: Annotated[StrictBool, Field(description="If false (default), archives instead of deleting")] = False,
    ) -> DeleteMemoryResult:
        """Delete or archive a memory: archived memories leave queries but can be restored."""
        if permanent:
            await run(service.forget, id, hard_delete=True)
            return DeleteMemoryResult(success=True, action="deleted", id=id)
        await run(service.update, id, status=Status.ARCHIVED)
        return DeleteMemoryResult(success=True, action="archived", id=id)

    @server.tool(annotations=hints("Memory statistics", read_only=True, destructive=False, idempotent=True))
    async def get_memory_stats() -> MemoryStatsResult:
        """Get statistics about stored memories."""
        o = await run(service.overview)
        return MemoryStatsResult(
            total_memories=o.count,
            by_type=ByType(**{t: o.by_type.get(t, 0) for t in ByType.model_fields}),
            by_importance=ByImportance(**{b: o.by_importance.get(b, 0) for b in ByImportance.model_fields}),
            archived_count=o.by_status.get(Status.ARCHIVED, 0),
            total_storage_kb=round(o.storage_bytes / 1024, 2),
            oldest_memory=to_iso(o.oldest) if o.oldest else None,
            newest_memory=to_iso(o.newest) if o.newest else None,
            most_accessed=_memory(o.most_accessed) if o.most_accessed else None,
            top_tags=[TagCount(tag=tag, count=count) for tag, count in o.top_tags],
        )


INSTRUCTIONS = (
    "Memories persist across sessions. Use store_memory for something worth keeping: type 'core' for lasting "
    "facts and preferences about the user or project, 'learning' for lessons and patterns you discovered, "
    "'task' for the state of ongoing work; one standalone statement per memory, with tags and importance. "
    "Before relying on earlier context, call query_memories (search finds words or meaning; filter by type, "
    "tags, category, importance). Use update_memory when a memory changes or a task is done (archived=true), "
    "delete_memory to archive (or permanent=true to erase) one that is wrong, and get_memory_stats for an "
    "overview. Errors come back as JSON {error: {code, message}}."
)

PROFILE = Profile(
    name="agent",
    spec="000-agent-memory-server.md",
    instructions=INSTRUCTIONS,
    register=register,
    error_result=error_result,
)
