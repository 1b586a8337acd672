"""What the SQL backends share: the memories row and its Memory, and Filters as a WHERE clause.

Both backends lay ``memories`` out alike (``rowid`` is the storage key; tags, auto_tags and
metadata are JSON text). They differ in how a parameter is marked (``?`` or ``%s``), how a time
is held (ISO text or ``timestamptz``) and how a literal substring is found; a ``Dialect`` says
which. Snapshots (a memory's state in its history and backups) are JSON with ISO times in both,
so a history moves between backends as it is.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from mnemo.bounds import stored_time
from mnemo.model import (
    CATEGORY_ALIASES,
    IMPORTANCE_HIGH_MIN,
    IMPORTANCE_MEDIUM_MIN,
    READABLE_BY_ALL,
    AccessLevel,
    Category,
    Change,
    Context,
    Memory,
    Status,
    to_iso,
)
from mnemo.query import Filters, SortField, StoredText, fold_case
from mnemo.storage import GroupKey

COLUMNS = (
    "id, path, content, content_length, signature, word_signature, type, category, subject, subject_key,"
    " tags, auto_tags, importance, confidence, agent_name, entry_number, metadata, user_id, conversation_id,"
    " session_id,"
    " access_level, owner, expires_at, status, archive_tier, forget_reason, forget_details,"
    " forgotten_at, recoverable_until, created_at, updated_at, accessed_at, access_count, version,"
    " content_packed, archive_id, archived_at, archive_file"
)
COLUMN_NAMES = tuple(c.strip() for c in COLUMNS.split(","))
SELECT = f"SELECT m.rowid, {', '.join('m.' + c for c in COLUMN_NAMES)} FROM memories m"

SORT_COLUMNS = {
    SortField.CREATED_AT: "created_at",
    SortField.UPDATED_AT: "updated_at",
    SortField.ACCESSED_AT: "accessed_at",
    SortField.IMPORTANCE: "importance",
    SortField.ACCESS_COUNT: "access_count",
    SortField.CONTENT_LENGTH: "content_length",
}
# model.canonical_category in SQL: the spec 004 category a stored label is filed under.
CANONICAL_CATEGORY = "CASE WHEN m.category IN ({}) THEN m.category {} ELSE 'custom' END".format(
    ", ".join(f"'{c.value}'" for c in Category),
    " ".join(f"WHEN m.category = '{label}' THEN '{c.value}'" for label, c in CATEGORY_ALIASES.items()),
)


_NAMED_CATEGORIES = frozenset(c.value for c in Category if c is not Category.CUSTOM)


def labels_filed_under(categories: Sequence[str]) -> list[str] | None:
    """The stored labels that CANONICAL_CATEGORY files under these named categories (each itself
    and its spec 001 aliases); None when "custom" or a name it never gives is among them."""
    if not set(categories) <= _NAMED_CATEGORIES:
        return None
    return [*categories, *(label for label, c in CATEGORY_ALIASES.items() if c.value in categories)]


IMPORTANCE_BAND = (
    f"CASE WHEN m.importance >= {IMPORTANCE_HIGH_MIN} THEN 'high'"
    f" WHEN m.importance >= {IMPORTANCE_MEDIUM_MIN} THEN 'medium' ELSE 'low' END"
)
# The bands low, medium and high, in order, as ranges of importance: [lowest, below), None unbounded.
_BAND_RANGES = {
    "low": (None, IMPORTANCE_MEDIUM_MIN),
    "medium": (IMPORTANCE_MEDIUM_MIN, IMPORTANCE_HIGH_MIN),
    "high": (IMPORTANCE_HIGH_MIN, None),
}


def bands_as_range(f: Filters) -> Filters:
    """The filters with importance bands that make one range (not low and high alone) written as
    that range, which an importance index serves: a count then reads the band's memories alone,
    where the CASE reads every memory's (80 ms for 300,692 of 1,000,000, against ~16). Else as they
    are. For a page only when it is sorted by importance: one sorted by another field would read
    the whole range (770-1,070 ms for a band of 300,000), where the CASE is tested as it walks."""
    bands = f.importance_bands
    own_bounds = (f.importance_min, f.importance_max, f.importance_below)
    if not bands or any(bound is not None for bound in own_bounds) or not set(bands) <= set(_BAND_RANGES):
        return f
    order = list(_BAND_RANGES)
    chosen = sorted({order.index(band) for band in bands})
    if chosen[-1] - chosen[0] + 1 != len(chosen):
        return f
    lowest, below = _BAND_RANGES[order[chosen[0]]][0], _BAND_RANGES[order[chosen[-1]]][1]
    return replace(f, importance_bands=None, importance_min=lowest, importance_below=below)


# How to group, and what to call each group: one subject is one key, shown as it was first spelt.
GROUP_EXPR = {
    GroupKey.STATUS: ("m.status", "m.status"),
    GroupKey.CATEGORY: (CANONICAL_CATEGORY, CANONICAL_CATEGORY),
    GroupKey.TYPE: ("m.type", "m.type"),
    GroupKey.IMPORTANCE_BAND: (IMPORTANCE_BAND, IMPORTANCE_BAND),
    GroupKey.SUBJECT: ("m.subject_key", "MIN(m.subject)"),
    GroupKey.AGENT: ("m.agent_name", "m.agent_name"),
}


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one backend's SQL differs where the shared pieces meet it."""

    mark: str  # a parameter's placeholder
    time: Callable[[datetime], Any]  # a time as a parameter or column value
    read_time: Callable[[Any], datetime]  # a time column's value as read back
    # SQL that is true when text (a SQL expression) contains the parameter; folded: both case-folded
    contains: Callable[[str, bool], str]
    no_limit: int | None  # a LIMIT that keeps every row
    binary: str  # what makes ORDER BY of text byte-wise (code point order), as SQLite's default is
    unindexed: str  # put before a column, keeps the planner from reaching rows through its indexes

    def marks(self, n: int) -> str:
        """``n`` placeholders, for ``IN (...)``."""
        return ", ".join([self.mark] * n)


def _sqlite_contains(text: str, folded: bool) -> str:
    # instr, not LIKE: the needle is literal (no wildcards), and LIKE folds ASCII case only.
    return f"instr(mnemo_fold({text}), ?) > 0" if folded else f"instr({text}, ?) > 0"


SQLITE = Dialect("?", to_iso, stored_time, _sqlite_contains, -1, "", "+")


def _maybe(read: Callable[[Any], datetime], value: Any) -> datetime | None:
    return None if value is None else read(value)


def json_value(text: str) -> Any:
    """Stored JSON; NaN or Infinity an older version let in read as null, which JSON can carry."""
    return json.loads(text, parse_constant=lambda _name: None)


def row_values(m: Memory, dialect: Dialect = SQLITE) -> tuple[Any, ...]:
    """The row of a memory. A glacier memory's content is kept compressed, a deep-archived one's not
    at all (it is in its archive file); their length and signatures stay those of the content."""
    content, packed = m.content, None
    if m.archive_tier == "glacier":
        content, packed = "", zlib.compress(m.content.encode("utf-8", "surrogatepass"), 9)
    elif m.archive_tier == "deep_archive":
        content = ""
    t = dialect.time

    def maybe(when: datetime | None) -> Any:
        return None if when is None else t(when)

    return (
        m.id, m.path, content, m.content_length, m.signature, m.word_signature, m.type, m.category,
        m.subject, m.subject_key, json.dumps(list(m.tags)), json.dumps(list(m.auto_tags)), m.importance,
        m.confidence, m.agent_name, m.entry_number, json.dumps(m.metadata), m.context.user_id,
        m.context.conversation_id, m.context.session_id,
        m.access_level.value, m.owner, maybe(m.expires_at), m.status.value, m.archive_tier,
        m.forget_reason, m.forget_details, maybe(m.forgotten_at), maybe(m.recoverable_until),
        t(m.created_at), t(m.updated_at), t(m.accessed_at), m.access_count, m.version,
        packed, m.archive_id, maybe(m.archived_at), m.archive_file,
    )  # fmt: skip


def unpacked(content: str, content_packed: bytes | None) -> str:
    """A memory's content: a glacier memory's is compressed in ``content_packed``."""
    return content if content_packed is None else zlib.decompress(content_packed).decode("utf-8", "surrogatepass")


# The columns of memories (as m) that StoredText needs, after the rowid.
STORED_TEXT_COLUMNS = "m.rowid, m.id, m.user_id, m.subject_key, m.content, m.content_packed"


def stored_texts(rows: Sequence[Sequence[Any]]) -> dict[int, StoredText]:
    """Rows laid out as STORED_TEXT_COLUMNS, by key."""
    return {
        key: StoredText(memory_id, user, subject, unpacked(content, packed))
        for key, memory_id, user, subject, content, packed in rows
    }


def memory(row: Sequence[Any], store: str, dialect: Dialect = SQLITE, offset: int = 1) -> Memory:
    """Build a Memory from a row laid out as ``SELECT`` (rowid first, skipped by ``offset``)."""
    (id_, path, content, _length, _signature, _word_signature, type_, category, subject, _subject_key, tags,
     auto_tags, importance, confidence, agent_name, entry_number, metadata, user_id, conversation_id, session_id,
     access_level, owner, expires_at, status, archive_tier, forget_reason, forget_details, forgotten_at,
     recoverable_until, created_at, updated_at, accessed_at, access_count, version, content_packed, archive_id,
     archived_at, archive_file) = tuple(row)[offset:]  # fmt: skip
    content = unpacked(content, content_packed)
    read = dialect.read_time
    return Memory(
        id=id_, store=store, path=path, content=content, type=type_, category=category, subject=subject,
        tags=tuple(json.loads(tags)), auto_tags=tuple(json.loads(auto_tags)), importance=importance,
        confidence=confidence, agent_name=agent_name, entry_number=entry_number, metadata=json_value(metadata),
        context=Context(user_id, conversation_id, session_id), access_level=AccessLevel(access_level),
        owner=owner, expires_at=_maybe(read, expires_at), status=Status(status), archive_tier=archive_tier,
        forget_reason=forget_reason, forget_details=forget_details, forgotten_at=_maybe(read, forgotten_at),
        recoverable_until=_maybe(read, recoverable_until), created_at=read(created_at),
        updated_at=read(updated_at), accessed_at=read(accessed_at),
        access_count=access_count, version=version, archive_id=archive_id, archived_at=_maybe(read, archived_at),
        archive_file=archive_file,
    )  # fmt: skip


def snapshot(m: Memory) -> str:
    """A memory's state as JSON (ISO times), its content in the clear whatever its tier."""
    values = dict(zip(COLUMN_NAMES, row_values(m.evolve(archive_tier=None)), strict=True))
    return json.dumps(values | {"archive_tier": m.archive_tier})


def from_snapshot(text: str, store: str) -> Memory:
    values = json_value(text)  # a snapshot from before a column existed has no value for it
    return memory(tuple(values.get(column) for column in COLUMN_NAMES), store, offset=0)


AGENT_TEXT = "COALESCE(m.agent_name, '')"


def change_values(change: Change, memory: Memory | None, time: Callable[[datetime], Any] = to_iso) -> tuple[Any, ...]:
    """The versions row of a change; without the memory (a purge's record) no user, conversation or category."""
    context = (None, None, None) if memory is None else (
        memory.context.user_id, memory.context.conversation_id, memory.category)  # fmt: skip
    previous = None if change.previous is None else snapshot(change.previous)
    return (change.id, change.memory_id, change.version, change.action, change.actor, change.reason,
            time(change.at), *context, previous)  # fmt: skip


def change(row: Sequence[Any], store: str, read_time: Callable[[Any], datetime] = stored_time) -> Change:
    """A Change from ``id, memory_id, version, action, actor, changed_at, reason, previous``."""
    return Change(id=row[0], memory_id=row[1], version=row[2], action=row[3], actor=row[4], at=read_time(row[5]),
                  reason=row[6], previous=None if row[7] is None else from_snapshot(row[7], store))  # fmt: skip


def tag_lookup(marks: str, key: str = "m.rowid", alias: str = "t") -> str:
    """SQL true when the memory of ``key`` has one of the tags ``marks`` stand for, looked up by
    that key in ``memory_tags`` (its own alias: several may be ANDed)."""
    return f"EXISTS (SELECT 1 FROM memory_tags {alias} WHERE {alias}.memory_rowid = {key} AND {alias}.tag IN ({marks}))"


def where(
    f: Filters, dialect: Dialect = SQLITE, by_key: bool = False, tags_probed: bool = False
) -> tuple[str, list[Any]]:
    """The SQL condition (over alias ``m``) for a Filters value, and its parameters. ``by_key``: the
    memories are best reached by their keys (a tag's list of them), as they are when ids are given.
    ``tags_probed``: each memory's tags are looked up as it is read, not tested against a list of
    every tagged memory built first (for a walk that stops early: a page)."""
    mark, t = dialect.mark, dialect.time
    clauses: list[str] = []
    params: list[Any] = []

    def among(column: str, values: Sequence[Any]) -> None:
        clauses.append(f"{column} IN ({dialect.marks(len(values))})" if values else "1 = 0")
        params.extend(values)

    def compare(condition: str, value: Any) -> None:
        clauses.append(condition.replace("?", mark))
        params.append(value)

    if f.statuses is not None:
        # Given ids, look them up: SQLite, which keeps no statistics, walked a status's index in
        # the sort order through most of 1,000,000 memories to find a search's 200 (145 ms, not 2).
        unindexed = dialect.unindexed if by_key or f.ids is not None else ""
        among(f"{unindexed}m.status", [s.value for s in f.statuses])
    if f.ids is not None:
        among("m.id", f.ids)
    if f.categories is not None:
        if (labels := labels_filed_under(f.categories)) is not None:
            among("m.category", labels)  # which the label's index serves, where the CASE is read row by row
        else:
            among(CANONICAL_CATEGORY, f.categories)
    if f.labels is not None:
        among("m.category", f.labels)
    if f.agent_names is not None:
        among("m.agent_name", f.agent_names)
    if f.has_agent is not None:
        clauses.append(f"m.agent_name IS {'NOT ' if f.has_agent else ''}NULL")
    if f.types is not None:
        among("m.type", f.types)
    if f.access_levels is not None:
        among("m.access_level", f.access_levels)
    if f.visible_to is not None:
        readable = ", ".join(repr(level) for level in READABLE_BY_ALL)
        compare(f"(m.owner = ? OR m.access_level IN ({readable}))", f.visible_to)
    for column, value in (
        ("m.user_id", f.user_id),
        ("m.conversation_id", f.conversation_id),
        ("m.subject_key", f.subject_key),
    ):
        if value is not None:
            compare(f"{column} = ?", value)
    for condition, when in (
        ("m.created_at >= ?", f.created_from),
        ("m.created_at <= ?", f.created_to),
        ("m.accessed_at < ?", f.accessed_before),
        ("m.updated_at > ?", f.updated_after),
        ("(m.expires_at IS NOT NULL AND m.expires_at <= ?)", f.expired_before),
    ):
        if when is not None:
            compare(condition, t(when))
    for condition, number in (
        ("m.importance >= ?", f.importance_min),
        ("m.importance <= ?", f.importance_max),
        ("m.importance < ?", f.importance_below),
        ("m.change_number >= ?", f.changed_from),
    ):
        if number is not None:
            compare(condition, number)
    if f.archive_ids is not None:
        among("m.archive_id", f.archive_ids)
    if f.importance_bands is not None:
        among(IMPORTANCE_BAND, f.importance_bands)
    if f.contains is not None:
        folded = not f.contains.case_sensitive
        needle = fold_case(f.contains.text) if folded else f.contains.text
        content, agent, tag = (dialect.contains(text, folded) for text in ("m.content", AGENT_TEXT, "tag"))
        clauses.append(f"({content} OR {agent} OR m.rowid IN (SELECT memory_rowid FROM memory_tags WHERE {tag}))")
        params.extend([needle] * 3)

    def tagged(marks: str) -> str:
        return (
            tag_lookup(marks)
            if tags_probed
            else f"m.rowid IN (SELECT memory_rowid FROM memory_tags WHERE tag IN ({marks}))"
        )

    if f.tags_any:
        clauses.append(tagged(dialect.marks(len(f.tags_any))))
        params.extend(f.tags_any)
    for tag in f.tags_all or ():
        clauses.append(tagged(mark))
        params.append(tag)
    if not f.include_expired:
        compare("(m.expires_at IS NULL OR m.expires_at > ?)", t(f.now))
    return (" AND ".join(clauses) or "1 = 1"), params


def rare_and_common(counts: dict[str, int], cap: int) -> tuple[list[str], list[str]]:
    """Split search terms by how many memories contain each (counted up to ``cap + 1``): the rarest,
    while together they match at most ``cap`` memories, and the common rest (both in given order).

    A word search ranks every memory that holds a rare term, and only the newest ``cap`` of those
    that hold common terms alone: an OR of words that each match much of a store would otherwise
    score most of it.
    """
    rare: list[str] = []
    for term in sorted(counts, key=counts.__getitem__):
        if sum(counts[t] for t in rare) + counts[term] > cap:
            break
        rare.append(term)
    return [t for t in counts if t in rare], [t for t in counts if t not in rare]
