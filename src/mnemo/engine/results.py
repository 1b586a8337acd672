"""What the engine's operations return, and the values callers pass to describe an edit."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mnemo.model import Memory, normalise_tags
from mnemo.search import ranking


class _Unset:
    """Marks an argument the caller did not give, where ``None`` is a meaningful value."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


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
    embedded: bool  # a vector was stored with it (False when recall runs on words only)
    existing: bool = False  # the memory was already stored (on_duplicate="return"): nothing was written


@dataclass(frozen=True, slots=True)
class RecallHit:
    memory: Memory
    scores: ranking.Scores


@dataclass(frozen=True, slots=True)
class RecallResult:
    hits: list[RecallHit]
    total: int  # relevant memories among the candidates examined (RECALL_POOL per channel)
    execution_time_ms: float
    warnings: list[str] = field(default_factory=list)
    embedded: bool = False  # the query was embedded: meaning took part


@dataclass(frozen=True, slots=True)
class UpdateResult:
    memory: Memory
    updated_fields: list[str]
    previous_version_id: str | None
    embeddings_regenerated: bool = False


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
