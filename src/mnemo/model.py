"""The Memory record and its value types. No I/O here.

One ``Memory`` holds the union of the five specs' fields, so every profile is a view of the
same data: ``type`` is spec 000's, ``subject``/``confidence`` 001's, ``path`` 002's,
``agent_name``/``entry_number`` 003's, and the rest spec 004's.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from mnemo.search.words import STOPWORDS, words


class Status(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
    FORGOTTEN = "forgotten"  # soft-deleted, recoverable until ``recoverable_until``
    OUTDATED = "outdated"  # superseded (spec 001), readable but not searched


class Category(StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    INSTRUCTION = "instruction"
    CONTEXT = "context"
    RELATIONSHIP = "relationship"
    SKILL = "skill"
    GOAL = "goal"
    EVENT = "event"
    CUSTOM = "custom"


# Spec 004's categories are the canonical ones. A memory may carry another label (spec 000 lets
# callers name their own, e.g. "pattern"); it is filed under the canonical category it maps to.
MAX_CATEGORY_CHARS = 50

# Spec 001's eight categories, each with the spec 004 categories it stands for; the first is the
# one a memory is filed under. "custom" has no name of its own in spec 001, so it shows as "context".
MEMENTO_CATEGORIES: dict[str, tuple[Category, ...]] = {
    "preference": (Category.PREFERENCE,),
    "restriction": (Category.INSTRUCTION,),
    "fact": (Category.FACT,),
    "skill": (Category.SKILL,),
    "relationship": (Category.RELATIONSHIP,),
    "goal": (Category.GOAL,),
    "history": (Category.EVENT,),
    "context": (Category.CONTEXT, Category.CUSTOM),
}
_MEMENTO_NAMES = {category: name for name, categories in MEMENTO_CATEGORIES.items() for category in categories}
# Spec 001's names that are not spec 004's ("restriction", "history") are labels of their own.
CATEGORY_ALIASES = {name: cs[0] for name, cs in MEMENTO_CATEGORIES.items() if name not in Category.__members__.values()}


def canonical_category(label: str | None) -> Category:
    if label is None:
        return Category.CUSTOM
    if label in Category.__members__.values():
        return Category(label)
    return CATEGORY_ALIASES.get(label, Category.CUSTOM)


def memento_category(label: str | None) -> str:
    """The spec 001 name of a stored label: "instruction" shows as "restriction", "custom" as "context"."""
    return _MEMENTO_NAMES[canonical_category(label)]


class MemoryType(StrEnum):
    """Spec 000's kinds of memory."""

    CORE = "core"
    LEARNING = "learning"
    TASK = "task"


class AccessLevel(StrEnum):
    PUBLIC = "public"
    PRIVATE = "private"
    SHARED = "shared"


READABLE_BY_ALL = (AccessLevel.SHARED.value, AccessLevel.PUBLIC.value)  # any authenticated user reads these


class ForgetReason(StrEnum):
    USER_REQUEST = "user_request"
    PRIVACY = "privacy"
    OUTDATED = "outdated"
    INCORRECT = "incorrect"
    DUPLICATE = "duplicate"
    EXPIRED = "expired"
    OTHER = "other"


class ImportanceBand(StrEnum):
    """The three-level importance of specs 000 and 003, mapped onto the 0-1 scale."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


IMPORTANCE_HIGH_MIN = 0.7
IMPORTANCE_MEDIUM_MIN = 0.4
# The importance a band stands for when a caller names only the band (specs 000 and 003).
BAND_IMPORTANCE = {ImportanceBand.HIGH: 0.8, ImportanceBand.MEDIUM: 0.5, ImportanceBand.LOW: 0.2}


def importance_band(importance: float) -> ImportanceBand:
    if importance >= IMPORTANCE_HIGH_MIN:
        return ImportanceBand.HIGH
    if importance >= IMPORTANCE_MEDIUM_MIN:
        return ImportanceBand.MEDIUM
    return ImportanceBand.LOW


# Limits of spec 004 (the `full` profile); other profiles narrow them in their own schemas.
MAX_CONTENT_CHARS = 50_000
MAX_TAGS = 20
MAX_QUERY_CHARS = 1_000
MAX_REASON_CHARS = 500
MAX_REASON_DETAILS_CHARS = 1_000
MAX_RETENTION_DAYS = 365
DEFAULT_RETENTION_DAYS = 30
MAX_PAGE = 100


def new_id() -> str:
    return str(uuid.uuid4())


def to_iso(when: datetime) -> str:
    """ISO 8601, UTC, fixed width (years padded to four digits, which strftime's %Y does not do):
    sorts as text in the database exactly as it sorts in time."""
    return as_utc(when).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def from_iso(text: str) -> datetime:
    return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


def as_utc(when: datetime) -> datetime:
    """Naive datetimes are taken to be UTC, which is what MCP clients mean by them."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")


def normalise_text(text: str) -> str:
    """Case, width, spacing and edge punctuation do not make two memories different."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _EDGE_PUNCT.sub("", _SPACE.sub(" ", folded).strip())


def subject_key(subject: str) -> str:
    """ "emma", " Emma " and "EMMA" are one subject."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", subject)).strip().casefold()


def content_signature(text: str) -> str:
    """The key of exact-duplicate detection: a hash of the normalised text."""
    return hashlib.sha256(normalise_text(text).encode()).hexdigest()[:32]


def word_signature(text: str) -> str:
    """The key of loose-duplicate detection: the set of content words, whatever their order."""
    content = sorted({w for w in words(text) if w not in STOPWORDS})
    return hashlib.sha256(" ".join(content).encode()).hexdigest()[:32]


def normalise_tags(tags: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Tags are trimmed and de-duplicated, keeping the caller's order and case."""
    seen: dict[str, None] = {}
    for tag in tags:
        cleaned = tag.strip()
        if cleaned:
            seen.setdefault(cleaned, None)
    return tuple(seen)


@dataclass(frozen=True, slots=True)
class Context:
    user_id: str | None = None
    conversation_id: str | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    id: str
    content: str
    created_at: datetime
    updated_at: datetime
    accessed_at: datetime
    store: str = "default"
    path: str | None = None
    type: str | None = None
    category: str | None = None
    subject: str | None = None
    tags: tuple[str, ...] = ()  # the caller's
    auto_tags: tuple[str, ...] = ()  # derived from the content; recomputed when it changes
    importance: float = 0.5
    confidence: float | None = None
    agent_name: str | None = None
    entry_number: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    context: Context = Context()
    access_level: AccessLevel = AccessLevel.PRIVATE
    owner: str | None = None
    expires_at: datetime | None = None
    status: Status = Status.ACTIVE
    archive_tier: str | None = None  # where an archived memory's content is held (spec 004's tiers)
    archive_id: str | None = None
    archived_at: datetime | None = None
    archive_file: str | None = None  # deep_archive: "<file name>:<sha256>" of the file holding its content
    forget_reason: str | None = None
    forget_details: str | None = None
    forgotten_at: datetime | None = None
    recoverable_until: datetime | None = None
    access_count: int = 0
    version: int = 1

    @property
    def signature(self) -> str:
        return content_signature(self.content)

    @property
    def subject_key(self) -> str | None:
        return None if self.subject is None else subject_key(self.subject)

    @property
    def all_tags(self) -> tuple[str, ...]:
        return normalise_tags(self.tags + self.auto_tags)

    @property
    def word_signature(self) -> str:
        return word_signature(self.content)

    @property
    def content_length(self) -> int:
        return len(self.content)

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def evolve(self, **changes: Any) -> Memory:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Change:
    """One row of a memory's history: who changed it, when, why, and what it was before."""

    id: str
    memory_id: str
    version: int  # the memory's version after this change
    action: str  # create | update | forget | hard_delete | ...
    actor: str
    at: datetime
    reason: str | None = None
    previous: Memory | None = None


@dataclass(frozen=True, slots=True)
class Backup:
    """A memory's state saved before a destructive operation, kept until ``keep_until``."""

    id: str
    memory: Memory
    created_at: datetime
    keep_until: datetime
