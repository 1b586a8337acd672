"""``mnemo export``: every active memory of a store as JSON lines, which ``mnemo import`` reads back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from mnemo.access.caller import viewer
from mnemo.engine.service import MemoryService
from mnemo.model import Memory, Status, to_iso
from mnemo.query import Filters, Sort, SortField
from mnemo.transfer.formats import EXPORT_FORMAT, EXPORT_VERSION

PAGE = 500


def exported(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "content": memory.content,
        "category": memory.category,
        "subject": memory.subject,
        "tags": list(memory.tags),
        "auto_tags": list(memory.auto_tags),
        "importance": memory.importance,
        "confidence": memory.confidence,
        "type": memory.type,
        "access_level": memory.access_level.value,
        "expires_at": to_iso(memory.expires_at) if memory.expires_at else None,
        "metadata": memory.metadata,
        "agent_name": memory.agent_name,
        "path": memory.path,
        "created_at": to_iso(memory.created_at),
        "updated_at": to_iso(memory.updated_at),
        "context": {
            "user_id": memory.context.user_id,
            "conversation_id": memory.context.conversation_id,
            "session_id": memory.context.session_id,
        },
    }


def export_lines(service: MemoryService) -> Iterator[str]:
    """A header line, then one line per active memory, oldest first, read a page at a time."""
    now = service.clock.now()
    filters = Filters(now=now, statuses=(Status.ACTIVE,), include_expired=True, visible_to=viewer())
    total = service.storage.count(filters)
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "store": service.storage.name,
        "exported_at": to_iso(datetime.now(UTC)),
        "count": total,
    }
    yield json.dumps(header, ensure_ascii=False)
    after = None
    sort = Sort(SortField.CREATED_AT, descending=False)
    while page := service.storage.select(filters, sort, PAGE, after=after):
        for memory, position in page:
            yield json.dumps(exported(memory), ensure_ascii=False)
            after = position
