"""Profile ``shared``: spec 003, one memory space that many agents write to.

Every tool answers with text: JSON, or markdown where the caller picks ``response_format``. So no
tool declares an ``outputSchema``: one tool's answer is JSON or markdown at the caller's choice,
which no fixed schema describes, and a ``-> str`` annotation would make the SDK advertise a bogus
``{"result": string}`` wrapper (``structured_output=False`` keeps it out). Every answer is capped
at CHARACTER_LIMIT characters with a visible notice: markdown is cut after the last whole entry
that fits, JSON stays valid by dropping entries from the end and saying so in ``truncated`` and
``truncation_message``. Errors are ``{"success": false, "error": "..."}`` as a tool error.
"""

# No ``from __future__ import annotations``: the tools' annotations are evaluated where they are
# defined, so their descriptions can name the configured word limit.
import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field, StrictBool

from mnemo import errors
from mnemo.engine.service import MemoryService
from mnemo.engine.shared_space import (
    MAX_AGENT_CHARS,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    MAX_TAGS,
    TOP,
    Entries,
    Health,
    SharedSpace,
    SpaceStats,
    priority_of,
    word_count,
)
from mnemo.model import Memory, to_iso
from mnemo.profiles import Listed, Profile, hints, run

CHARACTER_LIMIT = 25_000
NOTICE_ROOM = 300  # characters kept free for the truncation notice

Priority = Literal["low", "medium", "high"]
ResponseFormat = Literal["markdown", "json"]
EntryId = Annotated[str, Field(description="UUID of the entry")]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description=f"Max entries to return (1-{MAX_LIMIT})")] | None
Tags = Annotated[list[str], Field(max_length=MAX_TAGS)]


# -- formatting --------------------------------------------------------------------------------
def _json(body: dict[str, Any]) -> str:
    return json.dumps(body, indent=2, ensure_ascii=False)


def _entry(m: Memory) -> dict[str, Any]:
    return {
        "entry_id": m.id,
        "timestamp": to_iso(m.created_at),
        "agent_name": m.agent_name,
        "content": m.content,
        "word_count": word_count(m.content),
        "tags": list(m.all_tags),
        "priority": priority_of(m).value,
        "metadata": m.metadata,
        "updated_at": None if m.updated_at == m.created_at else to_iso(m.updated_at),
    }


def _block(m: Memory, max_words: int) -> str:
    return (
        f"## Entry {m.entry_number}: {m.agent_name}\n"
        f"**ID**: `{m.id}`\n"
        f"**Time**: {to_iso(m.created_at)}\n"
        f"**Words**: {word_count(m.content)}/{max_words}\n"
        f"**Priority**: {priority_of(m).value}\n"
        f"**Tags**: {', '.join(m.all_tags) or 'none'}\n\n"
        f"{m.content}\n\n---\n\n"
    )


def _largest_fitting(render: Callable[[int], str], most: int) -> int:
    """The largest n in [0, most] whose rendering fits CHARACTER_LIMIT (rendering grows with n)."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if len(render(middle)) <= CHARACTER_LIMIT:
            low = middle
        else:
            high = middle - 1
    return low


def _notice(shown: int, total: int, what: str = "entries") -> str:
    return (
        f"Response truncated at {CHARACTER_LIMIT:,} characters: {shown} of {total} {what} shown "
        "(text cut short ends with [...]). Use limit, filters or get_memory to see the rest."
    )


def _cut(text: str, keep: int) -> str:
    return text if keep >= len(text) else text[:keep] + " [...]"


def _markdown(head: str, blocks: list[str], total: int) -> str:
    """The head and as many whole entries as fit; an entry alone too long to fit is cut short."""
    text = head + "".join(blocks)
    if len(text) <= CHARACTER_LIMIT:
        return text
    budget = CHARACTER_LIMIT - NOTICE_ROOM
    kept = _largest_fitting(lambda n: head + "".join(blocks[:n]) + " " * NOTICE_ROOM, len(blocks))
    body = head + "".join(blocks[:kept])
    if kept == 0 and blocks:
        body += _cut(blocks[0], budget - len(body) - len(" [...]\n\n")) + "\n\n"
        kept = 1
    return body[:budget] + f"> **{_notice(kept, total)}**\n"


def _json_capped(body: dict[str, Any], key: str, total: int, what: str = "entries") -> str:
    """``body`` as JSON; when too long, items of ``body[key]`` (a list, a dict, or one entry) are dropped
    from the end, or the content of the only entry left is cut, and the answer says so."""
    text = _json(body)
    if len(text) <= CHARACTER_LIMIT:
        return text
    value = body[key]
    single = key == "entry"
    mapping = isinstance(value, dict) and not single
    items: list[Any] = [value] if single else list(value.items()) if mapping else list(value)

    def pack(kept: list[Any]) -> Any:
        if single:
            return kept[0] if kept else None
        return dict(kept) if mapping else kept

    def render(kept: list[Any]) -> str:
        notice = _notice(len(kept), total, what)
        return _json({**body, key: pack(kept), "truncated": True, "truncation_message": notice})

    kept = _largest_fitting(lambda n: render(items[:n]), len(items))
    first = items[0] if items else None
    if kept == 0 and isinstance(first, dict) and "content" in first:

        def with_content(n: int) -> list[Any]:
            return [{**first, "content": _cut(first["content"], n)}]

        text = render(with_content(_largest_fitting(lambda n: render(with_content(n)), len(first["content"]))))
    else:
        text = render(items[:kept])
    return text if len(text) <= CHARACTER_LIMIT else _short_strings(json.loads(text))


def _shortened(value: Any, most: int) -> Any:
    if isinstance(value, str):
        return _cut(value, most)
    if isinstance(value, list):
        return [_shortened(item, most) for item in value]
    if isinstance(value, dict):
        return {_cut(key, most): _shortened(item, most) for key, item in value.items()}
    return value


def _short_strings(body: dict[str, Any]) -> str:
    """The last resort for what no dropping of entries made fit (a stored entry's huge tags or
    metadata): every long text is cut, shorter and shorter, until the answer fits."""
    most = CHARACTER_LIMIT
    while len(text := _json(_shortened(body, most))) > CHARACTER_LIMIT and most > 0:
        most //= 2
    return text


def _entries_out(found: Entries, response_format: str, head: str, max_words: int, extra: dict[str, Any]) -> str:
    if response_format == "json":
        return _json_capped({**extra, "entries": [_entry(m) for m in found.entries]}, "entries", found.total)
    return _markdown(head, [_block(m, max_words) for m in found.entries], found.total)


def _stats_json(s: SpaceStats) -> dict[str, Any]:
    by_count = sorted(s.by_agent.items(), key=lambda pair: (-pair[1], pair[0]))
    return {
        "success": True,
        "total_entries": s.total_entries,
        "total_words": s.total_words,
        "average_words_per_entry": round(s.total_words / s.total_entries, 1) if s.total_entries else 0.0,
        "agent_activity": dict(by_count),
        "top_agents": [[name, n] for name, n in by_count[:TOP]],
        "tag_usage": dict(s.tag_usage),
        "top_tags": [[tag, n] for tag, n in s.tag_usage[:TOP]],
        "priority_distribution": s.by_priority,
        "date_range": {
            "earliest": to_iso(s.earliest) if s.earliest else None,
            "latest": to_iso(s.latest) if s.latest else None,
        },
        "storage_size_bytes": s.storage_bytes,
        "storage_size_kb": round(s.storage_bytes / 1024, 2),
        "max_entries": s.max_entries,
        "entries_until_rotation": s.entries_until_rotation,
    }


def _stats_markdown(body: dict[str, Any]) -> str:
    ranked = "".join(f"{i}. {name}: {n}\n" for i, (name, n) in enumerate(body["top_agents"], 1)) or "none\n"
    tags = "".join(f"{i}. {tag}: {n}\n" for i, (tag, n) in enumerate(body["top_tags"], 1)) or "none\n"
    priorities = ", ".join(f"{band} {n}" for band, n in body["priority_distribution"].items())
    dates = body["date_range"]
    return (
        "# Shared Memory Statistics\n\n"
        f"- **Total entries**: {body['total_entries']} of {body['max_entries']} "
        f"({body['entries_until_rotation']} until rotation)\n"
        f"- **Total words**: {body['total_words']} (average {body['average_words_per_entry']} per entry)\n"
        f"- **Priorities**: {priorities}\n"
        f"- **Date range**: {dates['earliest'] or '-'} to {dates['latest'] or '-'}\n"
        f"- **Storage size**: {body['storage_size_kb']} KB ({body['storage_size_bytes']} bytes)\n\n"
        f"## Top agents\n\n{ranked}\n## Top tags\n\n{tags}"
    )


def _health_json(health: Health) -> dict[str, Any]:
    failing = health.failing
    return {
        "success": not failing,
        "timestamp": to_iso(health.at),
        "checks": {
            name: {"status": "ok" if check.ok else "error", **check.facts, "message": check.message}
            for name, check in health.checks.items()
        },
        "message": "All systems operational" if not failing else f"Health check failed: {', '.join(failing)}",
    }


# -- errors ------------------------------------------------------------------------------------
def error_result(error: errors.MnemoError, now: datetime) -> CallToolResult:
    """Spec 003's one error shape, as a tool error the model can read."""
    body = {"success": False, "error": error.message}
    return CallToolResult(content=[TextContent(type="text", text=_json(body))], is_error=True)


# -- tools -------------------------------------------------------------------------------------
def register(server: MCPServer, service: MemoryService) -> None:
    space = SharedSpace(service)
    max_words = space.limits.max_words

    @server.tool(
        annotations=hints("Add memory", read_only=False, destructive=False, idempotent=False), structured_output=False
    )
    async def add_memory(
        agent_name: Annotated[
            str, Field(min_length=1, max_length=MAX_AGENT_CHARS, description="Name of the agent (1-100 chars)")
        ],
        content: Annotated[str, Field(min_length=1, description=f"Memory content (max {max_words} words)")],
        tags: Annotated[Tags, Field(description=f"Tags for categorization (max {MAX_TAGS})")] = [],  # noqa: B006
        priority: Annotated[Priority, Field(description='Priority: "low", "medium", "high"')] = "medium",
        metadata: Annotated[dict[str, Any], Field(description="Custom metadata (any JSON object)")] = {},  # noqa: B006
    ) -> str:
        """Add a new memory entry to the shared memory space.

        Every agent that shares this space sees it. The same content may be posted again; each post
        is its own entry with the next entry number.
        """
        added = await run(space.add, agent_name, content, tags=tags, priority=priority, metadata=metadata)
        m = added.entry
        return _json(
            {
                "success": True,
                "entry_id": m.id,
                "entry_number": m.entry_number,
                "timestamp": to_iso(m.created_at),
                "agent_name": m.agent_name,
                "word_count": word_count(m.content),
                "tags": list(m.all_tags),
                "priority": priority_of(m).value,
                "message": f"Memory entry #{m.entry_number} added successfully by {m.agent_name}",
            }
        )

    @server.tool(
        annotations=hints("Read memory", read_only=True, destructive=False, idempotent=True), structured_output=False
    )
    async def read_memory(
        response_format: Annotated[ResponseFormat, Field(description='"markdown" or "json"')] = "markdown",
        limit: Limit = None,
        agent_filter: Annotated[str | None, Field(description="Filter by agent name")] = None,
        tags: Annotated[Listed[str] | None, Field(description="Filter by tags (AND logic)")] = None,
        priority: Annotated[Priority | None, Field(description="Filter by priority level")] = None,
        sort_order: Annotated[
            Literal["chronological", "reverse", "priority"],
            Field(description='"chronological", "reverse" (newest first), "priority" (high first)'),
        ] = "chronological",
    ) -> str:
        """Read memory entries with filtering and sorting.

        total_entries counts every entry that matches; entries holds the first `limit` of them.
        """
        found = await run(space.read, agent=agent_filter, tags=tags, priority=priority, order=sort_order, limit=limit)
        head = f"# Shared Memory\n\nTotal entries: {found.total}\n\n"
        return _entries_out(found, response_format, head, max_words, {"total_entries": found.total})

    @server.tool(
        annotations=hints("Update memory", read_only=False, destructive=False, idempotent=True), structured_output=False
    )
    async def update_memory(
        entry_id: EntryId,
        content: Annotated[str, Field(min_length=1, description=f"New content (max {max_words} words)")] | None = None,
        tags: Annotated[Tags, Field(description="New tags (replaces existing)")] | None = None,
        priority: Annotated[Priority, Field(description="New priority level")] | None = None,
        metadata: Annotated[dict[str, Any], Field(description="New metadata (replaces existing)")] | None = None,
    ) -> str:
        """Update an existing memory entry. Only specified fields are updated."""
        updated = await run(space.update, entry_id, content=content, tags=tags, priority=priority, metadata=metadata)
        return _json(
            {
                "success": True,
                "entry_id": updated.entry.id,
                "updated_fields": updated.fields,
                "updated_at": to_iso(updated.entry.updated_at),
                "message": f"Entry {updated.entry.id} updated successfully",
            }
        )

    @server.tool(
        annotations=hints("Delete memory", read_only=False, destructive=True, idempotent=True), structured_output=False
    )
    async def delete_memory(entry_id: EntryId) -> str:
        """Delete a specific memory entry by ID."""
        deleted = await run(space.delete, entry_id)
        return _json(
            {
                "success": True,
                "entry_id": deleted.entry.id,
                "agent_name": deleted.entry.agent_name,
                "deleted_at": to_iso(deleted.deleted_at),
                "remaining_entries": deleted.remaining,
                "message": f"Entry {deleted.entry.id} deleted successfully",
            }
        )

    @server.tool(
        annotations=hints("Get memory", read_only=True, destructive=False, idempotent=True), structured_output=False
    )
    async def get_memory(
        entry_id: EntryId,
        response_format: Annotated[ResponseFormat, Field(description='"markdown" or "json"')] = "json",
    ) -> str:
        """Retrieve a single memory entry by its ID."""
        entry = await run(space.get, entry_id)
        if response_format == "json":
            return _json_capped({"success": True, "entry": _entry(entry)}, "entry", 1)
        return _markdown("", [_block(entry, max_words)], 1)

    @server.tool(
        annotations=hints("Search memory", read_only=True, destructive=False, idempotent=True), structured_output=False
    )
    async def search_memory(
        query: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="Search query (1-200 chars)")
        ],
        case_sensitive: Annotated[StrictBool, Field(description="Case-sensitive search")] = False,
        response_format: Annotated[ResponseFormat, Field(description='"markdown" or "json"')] = "markdown",
        limit: Limit = None,
    ) -> str:
        """Search memory entries for a query string across content, agent names, and tags.

        Entries containing the query come first, oldest first. When the search is not case-sensitive and
        the server has an embedding model, entries that mean the same (without the exact words) follow.
        """
        found = await run(space.search, query, case_sensitive=case_sensitive, limit=limit)
        meaning = f" ({found.by_meaning} of them found by meaning)" if found.by_meaning else ""
        head = f'# Search Results: "{query}"\n\nFound {found.total} entries{meaning}\n\n'
        extra = {"success": True, "query": query, "total_results": found.total}
        return _entries_out(found, response_format, head, max_words, extra)

    @server.tool(
        annotations=hints("Memory statistics", read_only=True, destructive=False, idempotent=True),
        structured_output=False,
    )
    async def get_memory_stats(
        response_format: Annotated[ResponseFormat, Field(description='"markdown" or "json"')] = "json",
    ) -> str:
        """Get comprehensive statistics about the shared memory; sizes are measured on disk."""
        body = _stats_json(await run(space.stats))
        if response_format == "markdown":
            return _markdown(_stats_markdown(body), [], 0)
        return _json_capped(body, "tag_usage", len(body["tag_usage"]), "tags")  # thousands of tags may not fit

    @server.tool(
        annotations=hints("Clear memory", read_only=False, destructive=True, idempotent=True), structured_output=False
    )
    async def clear_memory(
        confirm: Annotated[StrictBool, Field(description="Must be true to proceed")],
    ) -> str:
        """Clear all memory entries. Creates a backup file first, restorable with `mnemo restore-backup FILE`."""
        cleared = await run(space.clear, confirm)
        backed_up = "Backup created." if cleared.backup else "Nothing to back up."
        return _json(
            {
                "success": True,
                "entries_cleared": cleared.count,
                "cleared_at": to_iso(cleared.cleared_at),
                "message": f"Successfully cleared {cleared.count} memory entries. {backed_up}",
                # Relative to the store's folder: a caller is not shown where the server keeps its files.
                "backup_file": f"{cleared.backup.parent.name}/{cleared.backup.name}" if cleared.backup else None,
            }
        )

    @server.tool(
        annotations=hints("Health check", read_only=True, destructive=False, idempotent=True), structured_output=False
    )
    async def health_check() -> str:
        """Check the health of the memory system: store file, write lock, database integrity, backups."""
        return _json(_health_json(await run(space.health)))


INSTRUCTIONS = (
    "A memory space shared by many agents. Sign every entry with your agent_name; keep each entry short "
    "(the word limit is in add_memory's description) and tag it consistently (lowercase, e.g. in-progress). "
    "Priority: high = needs attention now, medium = normal, low = done or for the record. Read what others "
    "wrote with read_memory (filter by agent, tags, priority) or search_memory; update_memory when a task's "
    "state changes; delete_memory what is obsolete. get_memory_stats shows how close the space is to rotation "
    "(the oldest entries move to an archive). clear_memory needs confirm=true and writes a backup first. Every "
    'answer is JSON or markdown; failures are {"success": false, "error": "..."}.'
)

PROFILE = Profile(
    name="shared",
    spec="003-shared-memory.md",
    instructions=INSTRUCTIONS,
    register=register,
    error_result=error_result,
)
