"""The vocabulary the service uses to ask storage for memories: filters, sorting, paging."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum

from mnemo import bounds
from mnemo.errors import InvalidInput
from mnemo.model import Status


class SortField(StrEnum):
    CREATED_AT = "created_at"
    UPDATED_AT = "updated_at"
    ACCESSED_AT = "last_accessed"
    IMPORTANCE = "importance"
    ACCESS_COUNT = "access_count"
    CONTENT_LENGTH = "content_length"


@dataclass(frozen=True, slots=True)
class TextMatch:
    """A literal substring that content, agent name or a tag must contain (spec 003's search).

    Without ``case_sensitive``, both sides are compared case-folded (Unicode-aware: "STRASSE"
    finds "Straße").
    """

    text: str
    case_sensitive: bool = False


def fold_case(text: str) -> str:
    """How a case-insensitive TextMatch compares text: width-normalised and case-folded."""
    return unicodedata.normalize("NFKC", text).casefold()


@dataclass(frozen=True, slots=True)
class Filters:
    """Conditions that all hold (AND); a field left ``None`` does not filter.

    ``now`` is when expiry is judged: memories whose ``expires_at`` has passed are left out
    unless ``include_expired``.
    """

    now: datetime
    statuses: tuple[Status, ...] | None = (Status.ACTIVE,)
    ids: tuple[str, ...] | None = None
    categories: tuple[str, ...] | None = None  # canonical (spec 004) categories; labels map onto them
    labels: tuple[str, ...] | None = None  # categories exactly as stored (spec 000's own labels)
    tags_any: tuple[str, ...] | None = None
    tags_all: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    user_id: str | None = None
    conversation_id: str | None = None
    subject_key: str | None = None
    agent_names: tuple[str, ...] | None = None
    has_agent: bool | None = None  # True: only entries an agent signed (spec 003's shared space)
    access_levels: tuple[str, ...] | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    importance_min: float | None = None
    importance_max: float | None = None
    importance_below: float | None = None  # strictly below (spec 004's auto-archive "low_importance")
    importance_bands: tuple[str, ...] | None = None  # high / medium / low (model.importance_band)
    accessed_before: datetime | None = None
    expired_before: datetime | None = None  # memories whose expires_at is at or before this (with include_expired)
    updated_after: datetime | None = None  # strictly after (a sync's modified_since)
    changed_from: int | None = None  # change number at or above (a sync's changes since its last)
    archive_ids: tuple[str, ...] | None = None
    contains: TextMatch | None = None
    include_expired: bool = False
    # Only memories this user owns, or shared/public ones (None: all). The engine passes who is
    # asking: what the authenticated caller of the running call may read (``mnemo.access.caller.viewer``).
    visible_to: str | None = None

    def __post_init__(self) -> None:
        # Every query reaches storage through here: a caller's values are bounded before SQL sees them.
        lists = (self.categories, self.labels, self.tags_any, self.tags_all, self.types, self.agent_names,
                 self.access_levels, self.importance_bands)  # fmt: skip
        contains = None if self.contains is None else self.contains.text
        bounds.filter_values(lists, (self.user_id, self.conversation_id, self.subject_key, contains))

    @property
    def selects_by_attribute(self) -> bool:
        """True when more than status and expiry decide: such filters may keep few memories."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name not in _NOT_ATTRIBUTES)


_NOT_ATTRIBUTES = {"now", "statuses", "include_expired", "visible_to"}


@dataclass(frozen=True, slots=True)
class Sort:
    field: SortField = SortField.CREATED_AT
    descending: bool = True


@dataclass(frozen=True, slots=True)
class Position:
    """Where a keyset page ends: the sort value and row key of its last memory."""

    value: str | float | int
    key: int


@dataclass(frozen=True, slots=True)
class RankFields:
    """What ranking needs of a memory beyond its relevance; reading only these keeps recall cheap."""

    updated_at: datetime
    importance: float
    access_count: int
    created_at: datetime
    user_id: str | None
    subject_key: str | None


@dataclass(frozen=True, slots=True)
class StoredText:
    """Whose a memory is and what it says: what the near-duplicate check compares, read alone."""

    memory_id: str
    user_id: str | None
    subject_key: str | None
    content: str


@dataclass(frozen=True, slots=True)
class TextHit:
    memory_id: str
    key: int  # the memory's storage key
    score: float  # BM25, higher is better
    length: int  # the memory's content, in characters


@dataclass(frozen=True, slots=True)
class Follower:
    """A memory that follows another in its session (``Storage.following_in_session``)."""

    key: int  # the memory's storage key
    length: int  # its content, in characters


@dataclass(frozen=True, slots=True)
class DateRange:
    start: datetime | None = None
    end: datetime | None = None

    def __post_init__(self) -> None:
        # In UTC and within the dates a store can hold: a range compares as text in the database.
        start = bounds.maybe_when("date_range.start", self.start)
        end = bounds.maybe_when("date_range.end", self.end)
        if start and end and start > end:
            raise InvalidInput("date range start is after its end", start=str(self.start), end=str(self.end))
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
