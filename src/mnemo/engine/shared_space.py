"""Spec 003's shared space: the memories agents signed, as one board many agents write to.

An entry is a memory with an ``agent_name`` (and the entry number the store gave it). The space's
rules cover only those: the word limit, rotation past ``max_entries`` and clearing never touch a
memory another profile wrote, while every profile can read what is written here.

Design choices a caller should know:
- The same content may be posted twice (agents repeat a status); each post is its own entry.
- Rotation archives, never drops: the oldest entries past ``max_entries`` get status archived,
  tier "rotated", and a line in ``archive/`` beside the store (``space_files``).
- ``clear`` writes a restorable backup file first, then soft-deletes the entries.
- Search is literal (substring of content, agent name or a tag); when it is not case-sensitive
  and an embedding model is on, entries whose meaning matches (calibrated relevance ≥ 0.7) follow.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from mnemo import bounds
from mnemo.access.caller import user_id, viewer
from mnemo.access.rules import check_may_write, check_writable, in_own_space
from mnemo.engine import space_files
from mnemo.engine.results import TagEdit
from mnemo.engine.service import MemoryService
from mnemo.errors import Conflict, EmbeddingError, InvalidInput, MnemoError, NotFound, StorageError, reason_of
from mnemo.model import (
    BAND_IMPORTANCE,
    AccessLevel,
    Change,
    ForgetReason,
    ImportanceBand,
    Memory,
    Status,
    importance_band,
    new_id,
    normalise_tags,
)
from mnemo.query import Filters, Sort, SortField, TextMatch
from mnemo.search.words import search_terms

log = logging.getLogger("mnemo.shared_space")  # the name its log lines carry, kept when the module moved

MAX_AGENT_CHARS = 100
MAX_TAGS = 10
MAX_QUERY_CHARS = 200
MAX_LIMIT = 1_000
MEANING_RELEVANCE = 0.7  # search adds meaning matches from this calibrated relevance ("probably an answer")
MEANING_POOL = 200
LOCK_TIMEOUT_S = 10.0  # spec 003's file-lock timeout, for the health check
TOP = 10  # agents and tags in the stats' top lists
MAX_RETRIES = 5  # re-reads when another process changed an entry while rotating or clearing


class Order(StrEnum):
    CHRONOLOGICAL = "chronological"
    REVERSE = "reverse"
    PRIORITY = "priority"


_SORTS = {
    Order.CHRONOLOGICAL: Sort(SortField.CREATED_AT, descending=False),
    Order.REVERSE: Sort(SortField.CREATED_AT, descending=True),
    Order.PRIORITY: Sort(SortField.IMPORTANCE, descending=True),
}


def word_count(text: str) -> int:
    """Words are what whitespace separates."""
    return len(text.split())


def priority_of(memory: Memory) -> ImportanceBand:
    return importance_band(memory.importance)


@dataclass(frozen=True, slots=True)
class Added:
    entry: Memory
    rotated: list[Memory]  # entries this add pushed into the archive


@dataclass(frozen=True, slots=True)
class Entries:
    entries: list[Memory]
    total: int  # entries that match, of which ``entries`` are the first ``limit``
    by_meaning: int = 0  # search: how many of the total were found by meaning, after the literal ones


@dataclass(frozen=True, slots=True)
class Updated:
    entry: Memory
    fields: list[str]  # the fields the caller set, in the spec's order


@dataclass(frozen=True, slots=True)
class Deleted:
    entry: Memory
    deleted_at: datetime
    remaining: int


@dataclass(frozen=True, slots=True)
class SpaceStats:
    total_entries: int
    total_words: int
    by_agent: dict[str, int]
    tag_usage: list[tuple[str, int]]  # most used first
    by_priority: dict[str, int]  # low, medium, high
    earliest: datetime | None
    latest: datetime | None
    storage_bytes: int  # the store's database on disk, measured
    max_entries: int
    entries_until_rotation: int


@dataclass(frozen=True, slots=True)
class Cleared:
    count: int
    cleared_at: datetime
    backup: Path | None  # None when there was nothing to back up


@dataclass(frozen=True, slots=True)
class Restored:
    restored: int
    already_present: int
    rotated: int


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool
    message: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Health:
    at: datetime
    checks: dict[str, Check]  # storage_file, file_locking, json_parsing, backup_system, embeddings

    @property
    def failing(self) -> list[str]:
        return [name for name, check in self.checks.items() if not check.ok]


class SharedSpace:
    """The operations of spec 003 over one service's store."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service
        self.storage = service.storage
        self.limits = service.shared_limits

    # -- helpers -------------------------------------------------------------------------
    def _space(self, **conditions: Any) -> Filters:
        """The active entries agents signed, with more conditions if given."""
        # Over HTTP each user has a space of their own: the entries they (their agents) wrote.
        return Filters(now=self.service.clock.now(), statuses=(Status.ACTIVE,), has_agent=True, user_id=viewer(),
                       visible_to=viewer(), **conditions)  # fmt: skip

    @property
    def _folder(self) -> Path:
        if self.limits.folder is None:
            raise StorageError("this store has no folder for the shared space's backups and archive")
        return self.limits.folder

    def _check_words(self, content: str) -> None:
        count = word_count(content)
        if count == 0:
            raise InvalidInput("content must not be empty", field="content")
        if count > self.limits.max_words:
            raise InvalidInput(
                f"content has {count} words; at most {self.limits.max_words} are allowed", field="content"
            )

    @staticmethod
    def _checked_tags(tags: Sequence[str]) -> tuple[str, ...]:
        cleaned = normalise_tags(tuple(tags))
        if len(cleaned) > MAX_TAGS:
            raise InvalidInput(f"at most {MAX_TAGS} tags are allowed, {len(cleaned)} were given", field="tags")
        return cleaned

    @staticmethod
    def _band(priority: str) -> ImportanceBand:
        if priority not in ImportanceBand.__members__.values():
            raise InvalidInput(f"priority must be low, medium or high, not {priority!r}", field="priority")
        return ImportanceBand(priority)

    @staticmethod
    def _check_limit(limit: int | None) -> None:
        if limit is not None and not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}", field="limit")

    # -- entries -------------------------------------------------------------------------
    def add(
        self,
        agent_name: str,
        content: str,
        *,
        tags: Sequence[str] = (),
        priority: str = ImportanceBand.MEDIUM,
        metadata: dict[str, Any] | None = None,
    ) -> Added:
        """Post an entry signed by an agent; it gets the store's next entry number.

        Past ``max_entries`` active entries, the oldest are rotated into the archive.
        """
        agent = agent_name.strip()
        if not 1 <= len(agent) <= MAX_AGENT_CHARS:
            raise InvalidInput(f"agent_name must be 1 to {MAX_AGENT_CHARS} characters", field="agent_name")
        self._check_words(content)
        result = self.service.store(
            content,
            tags=self._checked_tags(tags),
            importance=BAND_IMPORTANCE[self._band(priority)],
            metadata=metadata or {},
            access_level=AccessLevel.SHARED,
            auto_tag=False,  # the space shows the tags its agents chose
            on_duplicate="allow",  # agents post the same status twice; each post is an entry
            agent_name=agent,
            actor=agent,
        )
        return Added(result.memory, self._rotate())

    def get(self, entry_id: str) -> Memory:
        bounds.text("entry_id", entry_id, bounds.MAX_ID_CHARS)
        try:
            uuid.UUID(entry_id)
        except ValueError as exc:
            raise InvalidInput(f"invalid entry_id format: {entry_id!r} is not a UUID", field="entry_id") from exc
        memory = self.storage.get(entry_id)
        if memory is None or memory.agent_name is None or memory.status is Status.FORGOTTEN or not in_own_space(memory):
            raise NotFound(f"no entry {entry_id} in the shared memory", memory_id=entry_id)
        if memory.status is not Status.ACTIVE:
            where = " (rotated into the archive)" if memory.archive_tier == "rotated" else ""
            raise NotFound(f"entry {entry_id} is {memory.status.value}{where}, not in the shared memory")
        return memory

    def read(
        self,
        *,
        agent: str | None = None,
        tags: Sequence[str] | None = None,
        priority: str | None = None,
        order: str = Order.CHRONOLOGICAL,
        limit: int | None = None,
    ) -> Entries:
        """Entries of one agent, with every tag given, of one priority, in the order asked."""
        self._check_limit(limit)
        if order not in Order.__members__.values():
            raise InvalidInput(f"sort_order must be {', '.join(Order)}, not {order!r}", field="sort_order")
        filters = self._space(
            agent_names=(agent,) if agent is not None else None,
            tags_all=tuple(tags) if tags else None,
            importance_bands=(self._band(priority).value,) if priority is not None else None,
        )
        rows = self.storage.select(filters, _SORTS[Order(order)], limit)
        return Entries([m for m, _ in rows], self.storage.count(filters))

    def update(
        self,
        entry_id: str,
        *,
        content: str | None = None,
        tags: Sequence[str] | None = None,
        priority: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Updated:
        """Set the fields given; tags and metadata are replaced. Setting what is already there changes nothing."""
        given = {"content": content, "tags": tags, "priority": priority, "metadata": metadata}
        fields = [name for name, value in given.items() if value is not None]
        if not fields:
            raise InvalidInput("no updates provided: give content, tags, priority or metadata", field="updates")
        if content is not None:
            self._check_words(content)
        new_tags = self._checked_tags(tags) if tags is not None else None
        band = self._band(priority) if priority is not None else None
        current = self.get(entry_id)
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = content
        if new_tags is not None:
            changes["tags"] = TagEdit(replace=new_tags)
        if band is not None and priority_of(current) is not band:  # keep a finer importance within its band
            changes["importance"] = BAND_IMPORTANCE[band]
        if metadata is not None:
            changes["metadata"] = metadata
        if not changes:
            check_writable(current)  # what would change nothing is still no reader's to do
            return Updated(current, fields)
        return Updated(self.service.update(entry_id, **changes).memory, fields)

    def delete(self, entry_id: str) -> Deleted:
        """Soft-delete an entry (recoverable like any forgotten memory).

        Deleting twice is the same result (spec 003 calls it idempotent): while the deleted entry
        is still held, a second delete changes nothing and answers as the first did.
        """
        bounds.text("entry_id", entry_id, bounds.MAX_ID_CHARS)
        held = self.storage.get(entry_id)
        if held is not None and held.agent_name is not None and held.status is Status.FORGOTTEN and in_own_space(held):
            check_writable(held)
            deleted_at = held.forgotten_at or held.updated_at
            return Deleted(held, deleted_at, self.storage.count(self._space()))
        entry = self.get(entry_id)
        result = self.service.forget(entry_id, reason=ForgetReason.USER_REQUEST, reason_details="delete_memory")
        return Deleted(entry, result.deleted_at, self.storage.count(self._space()))

    def search(self, query: str, *, case_sensitive: bool = False, limit: int | None = None) -> Entries:
        """Entries whose content, agent name or a tag contains the query, oldest first; then, when
        not case-sensitive and a model is on, entries that mean it, most relevant first."""
        if not query.strip():
            raise InvalidInput("query must not be blank", field="query")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidInput(f"query is {len(query)} characters; at most {MAX_QUERY_CHARS}", field="query")
        self._check_limit(limit)
        literal = self._space(contains=TextMatch(query, case_sensitive))
        rows = self.storage.select(literal, _SORTS[Order.CHRONOLOGICAL], limit)
        entries = [m for m, _ in rows]
        total = self.storage.count(literal)
        by_meaning = [] if case_sensitive else self._meaning_matches(query, literal)
        room = len(by_meaning) if limit is None else max(0, limit - len(entries))
        return Entries(entries + by_meaning[:room], total + len(by_meaning), len(by_meaning))

    def _meaning_matches(self, query: str, literal: Filters) -> list[Memory]:
        """Entries the model finds relevant that the literal search did not match, best first."""
        if self.service.embedder is None:
            return []
        try:
            found = self.service.searcher.find(query, search_terms(query), self._space(), MEANING_POOL)
        except EmbeddingError as exc:  # the literal results still answer the query
            log.warning("search_memory used literal matching only: %s", exc.message)
            return []
        if not found.embedded:
            return []
        relevant = sorted((c for c in found.candidates if c.relevance >= MEANING_RELEVANCE), key=lambda c: -c.relevance)
        matched = set(self.storage.keys_passing([c.key for c in relevant], literal))
        return self.storage.get_many([c.memory_id for c in relevant if c.key not in matched])

    # -- the space as a whole --------------------------------------------------------------
    def stats(self) -> SpaceStats:
        space = self._space()
        overview = self.service.overview(signed_only=True)
        words = sum(word_count(m.content) for m, _ in self.storage.select(space, _SORTS[Order.CHRONOLOGICAL], None))
        return SpaceStats(
            total_entries=overview.count,
            total_words=words,
            by_agent=overview.by_agent,
            tag_usage=self.storage.tag_counts(space),
            by_priority={band.value: overview.by_importance.get(band.value, 0) for band in reversed(ImportanceBand)},
            earliest=overview.oldest,
            latest=overview.newest,
            storage_bytes=overview.storage_bytes,
            max_entries=self.limits.max_entries,
            entries_until_rotation=max(0, self.limits.max_entries - overview.count),
        )

    def _rotate(self) -> list[Memory]:
        """Archive the oldest entries past ``max_entries``: status archived, tier "rotated", a line in archive/."""
        for _attempt in range(MAX_RETRIES):
            space = self._space()
            excess = self.storage.count(space) - self.limits.max_entries
            if excess <= 0:
                return []
            oldest = [m for m, _ in self.storage.select(space, _SORTS[Order.CHRONOLOGICAL], excess)]
            now = self.service.clock.now()
            changes = []
            for memory in oldest:
                archived = memory.evolve(
                    status=Status.ARCHIVED, archive_tier="rotated", version=memory.version + 1, updated_at=now
                )
                reason = f"rotated: the shared space holds more than {self.limits.max_entries} entries"
                changes.append((archived, Change(new_id(), memory.id, archived.version, "archive", self.service.actor,
                                                 now, reason, previous=memory)))  # fmt: skip
            try:
                self.storage.save(changes)
            except Conflict:  # another process rotated or changed one of them: look again
                continue
            space_files.append_archive(self._folder, [m for m, _ in changes], now)
            return [m for m, _ in changes]
        raise Conflict("the shared space kept changing while its oldest entries were being rotated")

    def clear(self, confirm: bool) -> Cleared:
        """Back every entry up to a file, then soft-delete them all; only with ``confirm``."""
        check_may_write()  # before anything: a reader's space may look empty, or be backed up for nothing
        if confirm is not True:
            raise InvalidInput(
                "Confirmation required: call clear_memory with confirm=true to clear every entry "
                "(a backup is written first)",
                field="confirm",
            )
        for _attempt in range(MAX_RETRIES):
            entries = [m for m, _ in self.storage.select(self._space(), _SORTS[Order.CHRONOLOGICAL], None)]
            now = self.service.clock.now()
            if not entries:  # an empty backup would only push a useful one out of the ten kept
                return Cleared(0, now, None)
            backup = space_files.write_backup(self._folder, self.storage.name, entries, now, user_id())
            try:
                self.service.forget_softly(entries, ForgetReason.USER_REQUEST, "clear_memory")
            except Conflict:
                backup.unlink(missing_ok=True)
                continue
            return Cleared(len(entries), now, backup)
        raise Conflict("the shared space kept changing while it was being cleared")

    def restore_backup(self, path: Path) -> Restored:
        """Put back the entries of a clear's backup file: deleted or purged ones return as they were saved."""
        saved = space_files.read_backup(path)
        now = self.service.clock.now()
        restored = present = 0
        for entry in saved:
            current = self.storage.get(entry.id)
            if current is not None and current.status is not Status.FORGOTTEN:
                present += 1
                continue
            version = 1 + (current.version if current is not None else entry.version)
            back = replace(
                entry,
                store=self.storage.name,
                status=Status.ACTIVE,
                archive_tier=None,
                forget_reason=None,
                forget_details=None,
                forgotten_at=None,
                recoverable_until=None,
                version=version,
                updated_at=now,
            )
            change = Change(new_id(), entry.id, version, "restore", self.service.actor, now, f"restored from {path}",
                            previous=current)  # fmt: skip
            if current is None:
                self.storage.insert(back, change)
            else:
                self.storage.save([(back, change)])
            restored += 1
        self.service.embed_pending()  # purged entries lost their vectors
        return Restored(restored, present, len(self._rotate()))

    def health(self) -> Health:
        """Each check really runs: the store file, its write lock, SQLite's integrity check, the backup folder."""
        return Health(
            self.service.clock.now(),
            {
                "storage_file": self._check_file(),
                "file_locking": self._check_lock(),
                "json_parsing": self._check_integrity(),
                "backup_system": self._check_backups(),
                "embeddings": self._check_embeddings(),
            },
        )

    def _check_file(self) -> Check:
        store = self.storage.store_file()
        facts = {"store": self.storage.name, "path": store.path, "exists": store.exists, "size_bytes": store.size_bytes}
        return Check(store.exists, "store file present" if store.exists else "the store file is missing", facts)

    def _check_lock(self) -> Check:
        try:
            self.storage.check_write_lock(LOCK_TIMEOUT_S)
        except MnemoError as exc:
            return Check(False, f"could not take the store's write lock: {exc.message}")
        return Check(True, "File locking operational: the store's write lock was taken and released")

    def _check_integrity(self) -> Check:
        what = "database integrity check (SQLite PRAGMA quick_check; the store is a database, not a JSON file)"
        try:
            problems = self.storage.check_integrity()
            count = self.storage.count(self._space())
        except MnemoError as exc:
            return Check(False, f"{what} failed: {exc.message}", {"entry_count": None})
        if problems:
            return Check(False, f"{what} found problems: {'; '.join(problems[:5])}", {"entry_count": count})
        return Check(True, f"{what} passed", {"entry_count": count})

    def _check_backups(self) -> Check:
        directory = space_files.backup_dir(self._folder)
        facts = {"backup_dir": directory.name, "backup_count": len(space_files.backups(self._folder))}
        # Written to for real: permission bits say nothing when running as root.
        probe_in = directory if directory.exists() else directory.parent
        try:
            if directory.exists() and not directory.is_dir():
                raise NotADirectoryError(f"{directory.name} is a file, not a folder")
            with tempfile.TemporaryFile(dir=probe_in):
                pass
        except OSError as exc:
            return Check(False, f"backups cannot be written: {reason_of(exc)}", facts)
        return Check(True, "backup folder writable", facts)

    def _check_embeddings(self) -> Check:
        searcher = self.service.searcher
        problem = searcher.vectors_state()
        model = self.service.embedder.name if self.service.embedder is not None else None
        facts = {"meaning_search": problem is None, "model": model}
        return Check(True, problem or f"meaning search is on ({model})", facts)
