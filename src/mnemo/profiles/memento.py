"""Profile ``memento``: spec 001, subject-centred facts (store, search, recent, update, stats).

Spec 001's eight categories are filed under spec 004's (``model.MEMENTO_CATEGORIES``), so every
memory of the store shows here, whichever profile stored it. The memento view of a store is its
active memories, plus the outdated ones, which stay readable (recent list, update) but are never
searched and are counted apart in the stats; memories other profiles archived or deleted are not
shown. Errors are ``{"error": {"code", "message"}}`` tool errors with the spec's five codes.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import AfterValidator, BaseModel, Field, StrictBool

from mnemo import errors
from mnemo.engine.service import MemoryService
from mnemo.model import (
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_TAGS,
    MEMENTO_CATEGORIES,
    Memory,
    Status,
    memento_category,
    to_iso,
)
from mnemo.profiles import Omitted, Profile, counts_access, hints, run
from mnemo.search import ranking

# The spec's enum, in its order; the same names as model.MEMENTO_CATEGORIES (a test checks).
MementoCategory = Literal["preference", "restriction", "fact", "skill", "relationship", "goal", "history", "context"]


def _named(subject: str) -> str:
    if not subject.strip():
        raise ValueError("a subject must name someone or something; it is blank")
    return subject


# A subject is a name: " Emma " and "emma" are the subject first stored as "Emma"; blank is no name.
Subject = Annotated[str, Field(min_length=1), AfterValidator(_named)]
SHOWN_STATUSES = ("active", "outdated")

# Only relevance ranks a search: the spec's threshold and order are both on relevance_score.
_BY_RELEVANCE = ranking.Weights(semantic_similarity=1.0, recency=0.0, importance=0.0, access_frequency=0.0)


# -- outputs -------------------------------------------------------------------------------
class MementoMemory(BaseModel):
    """A memory as spec 001 shows it. subject and confidence are null on memories stored without them."""

    id: str
    content: str
    subject: str | None
    category: MementoCategory
    tags: list[str]
    confidence: float | None
    created_at: str


class StoredMemory(MementoMemory):
    already_stored: bool = Field(description="True when the same fact was already stored; nothing new was written")


class FoundMemory(MementoMemory):
    relevance_score: float


class RecordedMemory(MementoMemory):
    status: str = Field(description="active, or outdated: superseded, no longer searched")
    outdated_reason: str | None
    updated_at: str


class SearchResult(BaseModel):
    memories: list[FoundMemory]


class RecentResult(BaseModel):
    memories: list[RecordedMemory]


class StatsResult(BaseModel):
    total_memories: int = Field(description="Current memories (outdated ones are counted in outdated_memories)")
    by_category: dict[str, int]
    by_subject: dict[str, int]
    oldest_memory: str | None
    newest_memory: str | None
    outdated_memories: int


def _shown(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "content": memory.content,
        "subject": memory.subject,
        "category": memento_category(memory.category),
        "tags": list(memory.all_tags),
        "confidence": memory.confidence,
        "created_at": to_iso(memory.created_at),
    }


def _recorded(memory: Memory) -> RecordedMemory:
    outdated = memory.status is Status.OUTDATED
    return RecordedMemory(
        **_shown(memory),
        status=memory.status.value,
        outdated_reason=memory.forget_details if outdated else None,
        updated_at=to_iso(memory.updated_at),
    )


# -- errors --------------------------------------------------------------------------------
# Most specific first. A busy store is the spec's "too many requests"; a crash, which the spec has
# no code for, is reported as the storage failure it most likely is.
_ERRORS: list[tuple[type[errors.MnemoError], str]] = [
    (errors.NotFound, "MEMORY_NOT_FOUND"),
    (errors.InvalidInput, "INVALID_PARAMETER"),
    (errors.Forbidden, "INVALID_PARAMETER"),  # the spec has no permission code: a read-only key's write
    (errors.Duplicate, "INVALID_PARAMETER"),
    (errors.TooComplex, "INVALID_PARAMETER"),
    (errors.EmbeddingError, "EMBEDDING_ERROR"),
    (errors.Locked, "RATE_LIMIT"),
    (errors.RateLimited, "RATE_LIMIT"),
    (errors.KeyReused, "INVALID_PARAMETER"),
    (errors.Conflict, "STORAGE_ERROR"),
    (errors.QuotaExceeded, "STORAGE_ERROR"),
    (errors.CorruptedData, "STORAGE_ERROR"),
    (errors.StorageError, "STORAGE_ERROR"),
    (errors.MnemoError, "STORAGE_ERROR"),
]


def error_code(error: errors.MnemoError) -> str:
    return next(code for kind, code in _ERRORS if isinstance(error, kind))


def error_result(error: errors.MnemoError, now: datetime) -> CallToolResult:
    """Spec 001's error object, as a tool error the model can read; details (e.g. ids) when there are any."""
    body: dict[str, object] = {"code": error_code(error), "message": error.message}
    if error.details:
        body["details"] = error.details
    return CallToolResult(content=[TextContent(type="text", text=json.dumps({"error": body}))], is_error=True)


# -- tools ---------------------------------------------------------------------------------
def register(server: MCPServer, service: MemoryService) -> None:
    # Idempotent: storing the same fact again returns the memory already stored
    @server.tool(annotations=hints("Store memory", read_only=False, destructive=False, idempotent=True))
    async def store_memory(
        content: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_CONTENT_CHARS,
                description="The fact or memory to store. Should be a clear, standalone statement.",
            ),
        ],
        subject: Annotated[
            Subject, Field(description="The primary subject this memory is about (e.g., 'Antonia', 'Liam', 'Gordon')")
        ],
        category: Annotated[MementoCategory, Field(description="Category of the memory")],
        tags: Annotated[
            list[str],
            Field(
                max_length=MAX_TAGS,
                description="Optional tags for additional categorization (e.g., ['food', 'allergy'], "
                "['math', 'calculus'])",
            ),
        ]
        | Omitted = None,
        confidence: Annotated[
            float,
            Field(
                ge=0,
                le=1,
                description="Confidence level in this memory (0-1). Default 1.0 for explicitly stated facts, "
                "lower for inferred information.",
            ),
        ] = 1.0,
    ) -> StoredMemory:
        """Store a new fact or memory about a person, preference, or situation. Use this when you learn something new that should be remembered for future conversations.

        Storing the same fact about the same subject again returns the memory already stored
        (already_stored: true) instead of a copy.
        """  # noqa: E501  # the spec's description, verbatim
        result = await run(
            service.store,
            content,
            subject=subject,
            category=MEMENTO_CATEGORIES[category][0].value,
            tags=tags or (),
            confidence=confidence,
            auto_tag=False,  # spec 001's tags are the caller's
            on_duplicate="return",
        )
        return StoredMemory(**_shown(result.memory), already_stored=result.existing)

    @server.tool(annotations=counts_access("Search memories"))
    async def search_memories(
        query: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="Natural language query to search for")
        ],
        subject_filter: Annotated[
            Subject, Field(description="Optional: Filter results to memories about a specific subject")
        ]
        | Omitted = None,
        category_filter: Annotated[
            MementoCategory, Field(description="Optional: Filter results to a specific category")
        ]
        | Omitted = None,
        limit: Annotated[int, Field(ge=1, le=20, description="Maximum number of results to return")] = 5,
        threshold: Annotated[float, Field(ge=0, le=1, description="Minimum similarity score for results (0-1)")] = 0.7,
    ) -> SearchResult:
        """Search for relevant memories based on a query. Use this to recall information about subjects, preferences, or past context.

        Results are ordered by relevance_score, a calibrated 0-1 relevance; outdated memories are not searched.
        """  # noqa: E501  # the spec's description, verbatim
        result = await run(
            service.recall,
            query,
            subject=subject_filter,
            categories=[c.value for c in MEMENTO_CATEGORIES[category_filter]] if category_filter else None,
            weights=_BY_RELEVANCE,
            limit=limit,
            min_relevance=threshold,
        )
        return SearchResult(
            memories=[
                FoundMemory(**_shown(h.memory), relevance_score=round(h.scores.semantic_similarity, 4))
                for h in result.hits
            ]
        )

    @server.tool(annotations=hints("List recent memories", read_only=True, destructive=False, idempotent=True))
    async def list_recent_memories(
        limit: Annotated[int, Field(ge=1, le=50, description="Number of recent memories to retrieve")] = 10,
        subject_filter: Annotated[Subject, Field(description="Optional: Filter to memories about a specific subject")]
        | Omitted = None,
    ) -> RecentResult:
        """List the most recently stored memories. Useful for reviewing what was just learned or stored.

        Newest first; memories marked outdated are listed too, with status "outdated" and the reason.
        """
        page = await run(service.list, subject=subject_filter, statuses=SHOWN_STATUSES, limit=limit)
        return RecentResult(memories=[_recorded(m) for m in page.memories])

    # Not destructive: the previous content is kept in the memory's history
    # Idempotent: the same update again changes nothing
    @server.tool(annotations=hints("Update memory", read_only=False, destructive=False, idempotent=True))
    async def update_memory(
        memory_id: Annotated[str, Field(description="ID of the memory to update")],
        new_content: Annotated[
            str, Field(min_length=1, max_length=MAX_CONTENT_CHARS, description="Updated content for the memory")
        ]
        | Omitted = None,
        mark_outdated: Annotated[
            StrictBool, Field(description="If true, mark as outdated rather than updating content")
        ]
        | Omitted = None,
        reason: Annotated[
            str, Field(max_length=MAX_REASON_CHARS, description="Reason for the update or why it's outdated")
        ]
        | Omitted = None,
    ) -> RecordedMemory:
        """Update an existing memory when information changes or becomes outdated.

        Give either new_content or mark_outdated=true (not both). An outdated memory is no longer
        searched but stays listed, with its reason.
        """
        if new_content is None and not mark_outdated:
            raise errors.InvalidInput("give new_content, or mark_outdated=true", field="new_content")
        if new_content is not None and mark_outdated:
            raise errors.InvalidInput(
                "give new_content or mark_outdated=true, not both: an outdated memory is marked rather than updated",
                field="mark_outdated",
            )
        result = await run(
            service.update,
            memory_id,
            content=new_content,
            status=Status.OUTDATED if mark_outdated else None,
            reason=reason,
        )
        return _recorded(result.memory)

    @server.tool(annotations=hints("Memory statistics", read_only=True, destructive=False, idempotent=True))
    async def get_memory_stats(
        subject_filter: Annotated[Subject, Field(description="Optional: Get stats for a specific subject only")]
        | Omitted = None,
    ) -> StatsResult:
        """Get statistics about the stored memories for a subject or overall system.

        Counts are of current memories; outdated_memories counts those marked outdated.
        """
        seen = await run(service.overview, subject=subject_filter)
        by_category = dict.fromkeys(MEMENTO_CATEGORIES, 0)
        for category, count in seen.by_category.items():
            by_category[memento_category(category)] += count
        return StatsResult(
            total_memories=seen.count,
            by_category=by_category,
            by_subject=seen.by_subject,
            oldest_memory=to_iso(seen.oldest) if seen.oldest else None,
            newest_memory=to_iso(seen.newest) if seen.newest else None,
            outdated_memories=seen.by_status.get(Status.OUTDATED, 0),
        )


INSTRUCTIONS = """\
Memento remembers facts about people, their preferences and situations across conversations.
Store one fact per memory with store_memory (subject and category required); find them with
search_memories; review what was just stored with list_recent_memories; when a fact changes, give
update_memory new_content, or mark_outdated=true with a reason; get_memory_stats gives counts.
Errors come back as {"error": {"code", "message"}}.

When to store memories:
- Store when users explicitly share facts about themselves or others
- Store when users correct previous information
- Store when learning about preferences, restrictions, or important context
- Store conclusions from successful interactions (e.g., "This meal plan worked well")

When to search memories:
- Before making recommendations that depend on preferences or restrictions
- When users reference past conversations or context
- When personalizing responses for specific individuals
- When users ask "Do you remember..." or similar queries

Memory content best practices:
- Keep memories atomic - one fact per memory
- Use clear, unambiguous language
- Include relevant context in the content itself
- Maintain consistent subject naming (e.g., always "Emma", not sometimes "Emma" and sometimes "Gordon's daughter")
"""

PROFILE = Profile(
    name="memento",
    spec="001-memento.md",
    instructions=INSTRUCTIONS,
    register=register,
    error_result=error_result,
)
