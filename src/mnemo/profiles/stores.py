"""Profile ``stores``: spec 002, path-addressed memories in named stores (add, get, update,
remove, move, list, prune).

Every call names its store, which the registry (``mnemo stores add NAME PATH``; ``default`` is
always there) maps to a folder. A memory lives at a path ``category/sub/name`` (rules in
``mnemo.engine.path_rules``); categories exist by being part of a path. Memories stored without a path, by
other profiles, are not shown here. Results are JSON objects shaped as the reference server's
(cortex); errors are MCP protocol errors: the request fails with a JSON-RPC error whose code is
INVALID_PARAMS (-32602) for what the caller can fix (bad input, no such store or memory, a path
already taken) and INTERNAL_ERROR (-32603) for failures of the server or its storage.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, NoReturn

from mcp import MCPError
from mcp.server import MCPServer
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import BaseModel, Field, StrictBool

from mnemo import errors
from mnemo.engine.named_stores import NamedStores
from mnemo.engine.path_rules import MAX_PATH_CHARS
from mnemo.engine.results import UNSET
from mnemo.model import MAX_CONTENT_CHARS, MAX_TAGS, Memory, to_iso
from mnemo.profiles import Omitted, Profile, hints, run

CHARS_PER_TOKEN = 4  # the usual rough measure for English text, as the reference server estimates

Store = Annotated[str, Field(min_length=1, description="Store name (required), as registered with `mnemo stores add`")]
MemoryPath = Annotated[
    str, Field(min_length=1, max_length=MAX_PATH_CHARS, description="Memory path in category/slug format")
]
Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)]
Tags = Annotated[list[str], Field(max_length=MAX_TAGS)]
IncludeExpired = Annotated[StrictBool, Field(description="Include expired memories")]


def _absent_if_none(value: object) -> bool:
    return value is None


def _iso(when: datetime | None) -> str | None:
    return None if when is None else to_iso(when)


# -- outputs -------------------------------------------------------------------------------
class AddMemoryResult(BaseModel):
    message: str
    store: str
    path: str
    created_at: str


class MemoryMetadata(BaseModel):
    created_at: str
    updated_at: str
    tags: list[str]
    expires_at: str | None = Field(None, exclude_if=_absent_if_none)


class GetMemoryResult(BaseModel):
    path: str
    content: str
    metadata: MemoryMetadata


class UpdateMemoryResult(BaseModel):
    message: str
    path: str
    updated_fields: list[str]
    updated_at: str
    expires_at: str | None


class RemoveMemoryResult(BaseModel):
    message: str
    path: str
    recoverable_until: str | None = Field(description="Until when the removed memory can still be restored")


class MoveMemoryResult(BaseModel):
    message: str
    from_path: str
    to_path: str


class ListedMemory(BaseModel):
    path: str
    token_estimate: int = Field(description=f"Rough size in tokens (characters / {CHARS_PER_TOKEN})")
    tags: list[str]
    updated_at: str
    expires_at: str | None = Field(None, exclude_if=_absent_if_none)
    is_expired: bool


class Subcategory(BaseModel):
    path: str
    memory_count: int = Field(description="Memories in this category and all below it")


class ListMemoriesResult(BaseModel):
    category: str = Field(description='The category listed; "all" for the root')
    count: int
    memories: list[ListedMemory]
    subcategories: list[Subcategory]


class PrunedMemory(BaseModel):
    path: str
    expires_at: str


class PruneMemoriesResult(BaseModel):
    pruned_count: int
    pruned: list[PrunedMemory]


def _path(memory: Memory) -> str:
    assert memory.path is not None  # the path tools only ever find memories that have one
    return memory.path


def _listed(memory: Memory, now: datetime) -> ListedMemory:
    return ListedMemory(
        path=_path(memory),
        token_estimate=math.ceil(len(memory.content) / CHARS_PER_TOKEN),
        tags=list(memory.tags),
        updated_at=to_iso(memory.updated_at),
        expires_at=_iso(memory.expires_at),
        is_expired=memory.is_expired(now),
    )


# -- errors --------------------------------------------------------------------------------
_CALLER_CAN_FIX = (
    errors.InvalidInput, errors.Forbidden, errors.NotFound, errors.Conflict, errors.Duplicate, errors.TooComplex,
    errors.RateLimited, errors.KeyReused, errors.LeaseLost,
)  # fmt: skip


def error_result(error: errors.MnemoError, now: datetime) -> NoReturn:
    """Spec 002 fails the request itself: an MCP protocol error, not a tool result."""
    code = INVALID_PARAMS if isinstance(error, _CALLER_CAN_FIX) else INTERNAL_ERROR
    raise MCPError(code, error.message, {"code": error.code, **error.details})


# -- tools ---------------------------------------------------------------------------------
# Paths are unique, so repeating a call with the same arguments changes nothing more: every tool
# is idempotent (a repeated add or move is refused, a repeated remove finds nothing).


def register_stores(server: MCPServer, stores: NamedStores) -> None:
    @server.tool(annotations=hints("Add memory", read_only=False, destructive=False, idempotent=True))
    async def add_memory(
        store: Store,
        path: MemoryPath,
        content: Annotated[Content, Field(description="Memory content")],
        tags: Annotated[Tags, Field(description="Optional tags for categorization")] | Omitted = None,
        expires_at: Annotated[datetime, Field(description="Optional expiration date (ISO 8601)")] | Omitted = None,
    ) -> AddMemoryResult:
        """Create a new memory with auto-creation of stores and categories."""
        memory = await run(stores.add, store, path, content, tags or (), expires_at)
        return AddMemoryResult(
            message=f"Memory created at {path}", store=store, path=path, created_at=to_iso(memory.created_at)
        )

    @server.tool(annotations=hints("Get memory", read_only=True, destructive=False, idempotent=True))
    async def get_memory(store: Store, path: MemoryPath, include_expired: IncludeExpired = False) -> GetMemoryResult:
        """Retrieve memory content and metadata."""
        memory = await run(stores.get, store, path, include_expired=include_expired)
        return GetMemoryResult(
            path=path,
            content=memory.content,
            metadata=MemoryMetadata(
                created_at=to_iso(memory.created_at),
                updated_at=to_iso(memory.updated_at),
                tags=list(memory.tags),
                expires_at=_iso(memory.expires_at),
            ),
        )

    @server.tool(annotations=hints("Update memory", read_only=False, destructive=False, idempotent=True))
    async def update_memory(
        store: Store,
        path: MemoryPath,
        content: Annotated[Content, Field(description="New memory content")] | Omitted = None,
        tags: Annotated[Tags, Field(description="New tags (replaces existing)")] | Omitted = None,
        expires_at: Annotated[datetime, Field(description="New expiration date (ISO 8601)")] | Omitted = None,
        clear_expiry: Annotated[StrictBool, Field(description="Remove expiration date")] = False,
    ) -> UpdateMemoryResult:
        """Update memory content or metadata; give at least one of content, tags, expires_at, clear_expiry."""
        if clear_expiry and expires_at is not None:
            raise errors.InvalidInput("give expires_at or clear_expiry, not both", field="clear_expiry")
        expiry = None if clear_expiry else expires_at if expires_at is not None else UNSET
        result = await run(stores.update, store, path, content=content, tags=tags, expires_at=expiry)
        return UpdateMemoryResult(
            message=f"Memory updated at {path}",
            path=path,
            updated_fields=result.updated_fields,
            updated_at=to_iso(result.memory.updated_at),
            expires_at=_iso(result.memory.expires_at),
        )

    @server.tool(annotations=hints("Remove memory", read_only=False, destructive=True, idempotent=True))
    async def remove_memory(store: Store, path: MemoryPath) -> RemoveMemoryResult:
        """Delete a memory. It stays restorable for 30 days, and its path is free at once."""
        result = await run(stores.remove, store, path)
        return RemoveMemoryResult(
            message=f"Memory removed at {path}", path=path, recoverable_until=_iso(result.recoverable_until)
        )

    @server.tool(annotations=hints("Move memory", read_only=False, destructive=False, idempotent=True))
    async def move_memory(
        store: Store,
        from_path: Annotated[MemoryPath, Field(description="Source memory path")],
        to_path: Annotated[MemoryPath, Field(description="Destination memory path")],
    ) -> MoveMemoryResult:
        """Move or rename a memory; the destination must be free."""
        await run(stores.move, store, from_path, to_path)
        return MoveMemoryResult(
            message=f"Memory moved from {from_path} to {to_path}", from_path=from_path, to_path=to_path
        )

    @server.tool(annotations=hints("List memories", read_only=True, destructive=False, idempotent=True))
    async def list_memories(
        store: Store,
        category: Annotated[
            str, Field(max_length=MAX_PATH_CHARS, description="Category path to list (the root if omitted)")
        ]
        | Omitted = None,
        include_expired: IncludeExpired = False,
    ) -> ListMemoriesResult:
        """List the memories in a category and its sub-categories, one level deep."""
        level = await run(stores.list_level, store, category, include_expired=include_expired)
        return ListMemoriesResult(
            category=level.category or "all",
            count=len(level.memories),
            memories=[_listed(m, level.now) for m in level.memories],
            subcategories=[Subcategory(path=p, memory_count=n) for p, n in level.subcategories.items()],
        )

    @server.tool(annotations=hints("Prune memories", read_only=False, destructive=True, idempotent=True))
    async def prune_memories(store: Store) -> PruneMemoriesResult:
        """Delete all expired memories of the store (restorable for 30 days); returns how many and which."""
        pruned = await run(stores.prune, store)
        return PruneMemoriesResult(
            pruned_count=len(pruned),
            pruned=[PrunedMemory(path=_path(m), expires_at=to_iso(m.expires_at)) for m in pruned if m.expires_at],
        )


INSTRUCTIONS = (
    "mnemo keeps memories in named stores (list them with `mnemo stores list`; `default` always exists). "
    "Every tool needs the store's name. A memory lives at a path such as project/decisions/database: "
    "segments of letters, digits, '-', '_' and '.', separated by '/'; every segment but the last is a "
    "category, created as needed. Use add_memory for a new memory, get_memory to read one, update_memory "
    "to change its content, tags or expiry, move_memory to rename it, remove_memory to delete it, "
    "list_memories to browse a category (or the root) and prune_memories to delete expired memories. "
    "Failures are protocol errors: invalid params for what you can fix (bad input, unknown store or "
    "path, path taken), internal errors otherwise."
)

PROFILE = Profile(
    name="stores",
    spec="002-memory-stores.md",
    instructions=INSTRUCTIONS,
    register=None,
    error_result=error_result,
    register_stores=register_stores,
)
