"""Writing memories: store, update and forget, each checked and recorded as a new version."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from mnemo import bounds
from mnemo.access import rules as access
from mnemo.access.caller import viewer
from mnemo.embed import Vectors
from mnemo.engine import path_rules as paths
from mnemo.engine.checks import check_content, check_type, check_unit, checked_category
from mnemo.engine.embeddings import EmbeddingOperations
from mnemo.engine.results import UNSET, ForgetResult, StoreResult, TagEdit, UpdateResult
from mnemo.errors import Conflict, Duplicate, InvalidInput, NotFound, QuotaExceeded
from mnemo.model import (
    DEFAULT_RETENTION_DAYS,
    MAX_CONTENT_CHARS,
    MAX_RETENTION_DAYS,
    MAX_TAGS,
    AccessLevel,
    Backup,
    Change,
    Context,
    ForgetReason,
    Memory,
    Status,
    canonical_category,
    new_id,
    normalise_tags,
    subject_key,
)
from mnemo.query import Filters
from mnemo.search import enrich
from mnemo.search.twins import NewText

# How long an update that met another writer is computed again from the memory as it now is, each
# time after a random pause that doubles (up to a cap). On PostgreSQL a read and a write are several
# round trips apart: 32 writers appending to one memory through two servers, retried at once, kept
# colliding (a third of them gave up after 12 tries); the random pauses spread them out.
CONFLICT_RETRY_S = 30.0
CONFLICT_PAUSE_S = (0.002, 0.25)  # the first pause's ceiling, and the largest
CLOCK_SKEW = timedelta(minutes=5)  # how far ahead a client's clock may be when it dates a memory
UPDATABLE_STATUSES = (Status.ACTIVE, Status.ARCHIVED, Status.OUTDATED)  # forgetting is forget()'s


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory ``prepare_store`` checked, completed and embedded, not yet compared with the store."""

    memory: Memory
    change: Change
    related: list[str]  # the memories it links to
    extra_tags: list[str]  # the tags derived from its words
    vectors: Vectors | None  # its vector as one row; None without one (then embed_error says why, if it failed)
    embed_error: Exception | None
    unique: bool  # a duplicate of a memory held is not stored (on_duplicate is not "allow")


def _status_change(status: Status, reason: str | None) -> dict[str, Any]:
    """The fields a status change sets: an outdated memory keeps why it was superseded."""
    if status is Status.OUTDATED:
        return {"status": status, "forget_reason": ForgetReason.OUTDATED.value, "forget_details": reason}
    return {"status": status, "forget_reason": None, "forget_details": None}


def _reason_text(reason: str, details: str | None) -> str:
    return reason if not details else f"{reason}: {details}"


class MemoryOperations(EmbeddingOperations):
    # -- store -------------------------------------------------------------------------
    def store(
        self, content: str, *, on_duplicate: Literal["raise", "return", "allow"] = "raise", **fields: Any
    ) -> StoreResult:
        """Save a new memory; its category, tags and importance are derived when not given. The
        fields are ``prepare_store``'s.

        ``memory_id`` keeps a given id (an import of mnemo's own export): one already held is a
        duplicate of that memory. ``vector`` is the content's embedding by ``embed_many``, when the
        caller embedded many contents at once (bulk import); otherwise it is computed here.

        The same content (or the same meaning, when vectors are on) already stored for the same
        user and subject is a ``Duplicate``, or with ``on_duplicate="return"`` that memory is
        returned (``StoreResult.existing``) and nothing is written; ``"allow"`` stores it again.
        ``agent_name`` signs the memory and numbers it (spec 003's shared space). ``path`` puts it
        at a free path (spec 002; checked by ``add_at``), or the store refuses it with ``Conflict``.
        """
        prepared = self.prepare_store(content, on_duplicate=on_duplicate, **fields)
        return prepared if isinstance(prepared, StoreResult) else self.write_new(prepared, on_duplicate)

    def prepare_store(
        self,
        content: str,
        *,
        context: Context = Context(),
        timestamp: datetime | None = None,
        category: str | None = None,
        subject: str | None = None,
        tags: Sequence[str] = (),
        importance: float | None = None,
        confidence: float | None = None,
        type: str | None = None,
        access_level: AccessLevel = AccessLevel.PRIVATE,
        expires_at: datetime | None = None,
        related_memory_ids: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        auto_tag: bool = True,
        on_duplicate: Literal["raise", "return", "allow"] = "raise",
        agent_name: str | None = None,
        path: str | None = None,
        actor: str | None = None,
        reason: str | None = None,
        memory_id: str | None = None,
        vector: Vectors | None = None,
    ) -> NewMemory | StoreResult:
        """Everything ``store`` does before it compares the memory with the store and writes it: the
        checks (an ``InvalidInput``, ``NotFound`` or ``Forbidden`` refuses it), the derived fields and
        the vector. A ``memory_id`` already held gives that memory's ``StoreResult`` (or ``Duplicate``)."""
        now = self.clock.now()
        check_content(content)
        given_tags = normalise_tags(tuple(tags))
        bounds.tags(given_tags)
        check_unit("importance", importance)
        check_unit("confidence", confidence)
        category = checked_category(category)
        check_type(type)
        context = access.own_context(context)
        bounds.fields(subject=subject, agent_name=agent_name, user_id=context.user_id,
                      conversation_id=context.conversation_id, session_id=context.session_id)  # fmt: skip
        bounds.listed("related_memory_ids", related_memory_ids, bounds.MAX_RELATED, bounds.MAX_ID_CHARS)
        if path is not None:
            paths.check_path(path)
        metadata = bounds.metadata(dict(metadata or {}))
        subject = self._subject_spelling(subject)
        expires_at = bounds.maybe_when("expires_at", expires_at)
        if expires_at is not None and expires_at <= now:
            raise InvalidInput("expires_at is in the past", field="expires_at")
        timestamp = bounds.maybe_when("context.timestamp", timestamp)
        if timestamp is not None and timestamp > now + CLOCK_SKEW:
            raise InvalidInput("context.timestamp is in the future", field="context.timestamp")
        related = list(dict.fromkeys(related_memory_ids))
        self._require_existing(related)
        if memory_id is not None:
            bounds.text("memory_id", memory_id, bounds.MAX_ID_CHARS)
            if not memory_id.strip() or not memory_id.isprintable():
                raise InvalidInput("memory_id must be a printable, non-blank id", field="memory_id")
            if self.storage.get(memory_id) is not None:
                if on_duplicate == "raise":
                    raise Duplicate(f"memory {memory_id} is already stored", existing_id=memory_id)
                return self.existing(memory_id)
        if self.max_memories is not None:
            held = self.storage.count(
                Filters(now=now, statuses=(Status.ACTIVE, Status.ARCHIVED), include_expired=True, visible_to=viewer())
            )
            if held >= self.max_memories:
                raise QuotaExceeded(
                    f"store {self.storage.name!r} holds its quota of {self.max_memories} memories",
                    quota=self.max_memories,
                )

        vectors: Vectors | None
        # A vector given was computed for the store's model by embed_many, which checked once for
        # the batch that the store's vectors are that model's (a query a memory, otherwise).
        if vector is not None and self.embedder is not None and vector.shape == (self.embedder.dimension,):
            vectors, embed_error = vector[None, :], None
        else:
            vectors, embed_error = self._try_embed([content])
        vector = None if vectors is None else vectors[0]
        detected = category or self.categories.detect(content, vector).value
        extra_tags = enrich.auto_tags(content, given_tags) if auto_tag else []
        created = timestamp or now
        memory = Memory(
            id=memory_id or new_id(),
            content=content,
            created_at=created,
            updated_at=created,
            accessed_at=created,
            store=self.storage.name,
            category=detected,
            subject=subject,
            type=type,
            tags=given_tags,
            auto_tags=tuple(extra_tags),
            importance=importance
            if importance is not None
            else enrich.estimate_importance(content, canonical_category(detected)),
            confidence=confidence,
            metadata=metadata,
            agent_name=agent_name,
            path=path,
            context=context,
            access_level=AccessLevel(access_level),
            owner=context.user_id,
            expires_at=expires_at,
        )
        return NewMemory(
            memory, self.change(memory, "create", actor, reason, at=now), related, extra_tags, vectors, embed_error,
            unique=on_duplicate != "allow",
        )  # fmt: skip

    def write_new(self, new: NewMemory, on_duplicate: Literal["raise", "return", "allow"] = "raise") -> StoreResult:
        """Store a prepared memory unless the store holds its content or meaning already (see ``store``)."""
        try:
            if new.vectors is not None and new.unique:
                self._refuse_near_duplicate(new.memory, new.vectors[0])
            memory = self.storage.insert(
                new.memory, new.change, new.related, unique_content=new.unique,
                numbered=new.memory.agent_name is not None,
            )  # fmt: skip
        except Duplicate as duplicate:
            if on_duplicate == "raise":
                raise
            return self.existing(duplicate.existing_id)
        embedded = self._save_vectors([memory], new.vectors, new.embed_error)
        return StoreResult(memory, new.extra_tags, len(new.related), embedded)

    def existing(self, memory_id: str) -> StoreResult:
        """What storing a duplicate of this memory gives when the caller asked for the memory held."""
        return StoreResult(self.get(memory_id), [], 0, embedded=False, existing=True)

    def _refuse_near_duplicate(self, memory: Memory, vector: Vectors) -> None:
        (twin,) = self.searcher.near_duplicates(
            [NewText(vector, memory.content, memory.context.user_id, memory.subject_key)],
            self.clock.now(),
            visible_to=viewer(),
        )
        if twin is not None and twin.memory_id is not None:
            raise Duplicate(
                f"a memory with the same meaning is already stored as {twin.memory_id} (similarity {twin.cosine:.3f})",
                existing_id=twin.memory_id,
                similarity=round(twin.cosine, 4),
            )

    def _require_existing(self, memory_ids: Sequence[str]) -> list[Memory]:
        found = [m for m in self.storage.get_many(memory_ids) if m.status is not Status.FORGOTTEN]
        missing = sorted(set(memory_ids) - {m.id for m in found})
        if missing:
            raise NotFound(f"no memory with id {', '.join(missing)}", memory_ids=missing)
        return found

    def _subject_spelling(self, subject: str | None) -> str | None:
        """A subject as this store first spelt it: "emma" and " Emma " become the "Emma" already known."""
        if subject is None or not subject.strip():
            return None
        return self.storage.subject_spelling(subject_key(subject)) or " ".join(subject.split())

    # -- update ------------------------------------------------------------------------
    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        category: str | None = None,
        tags: TagEdit | None = None,
        importance: float | None = None,
        type: str | None = None,
        metadata: dict[str, Any] | None = None,
        status: Status | None = None,
        access_level: AccessLevel | None = None,
        expires_at: datetime | None = UNSET,
        path: str | None = None,
        reason: str | None = None,
        merge_strategy: str = "replace",
        expected_version: int | None = None,
        actor: str | None = None,
    ) -> UpdateResult:
        """Change some fields of a memory; each change is a new version with its reason.

        ``status`` moves a memory between active, archived and outdated (superseded: readable, not
        recalled); the reason of an outdating is kept on the memory as well as in its history.
        ``metadata`` replaces the memory's metadata; ``path`` moves it (spec 002; see ``move``).
        """
        given = (content, category, tags, importance, type, metadata, status, access_level, path)
        if all(value is None for value in given) and expires_at is UNSET:
            raise InvalidInput("no updates provided: give at least one field to change", field="updates")
        if content is not None:
            check_content(content)
        category = checked_category(category)
        check_type(type)
        if status is not None and status not in UPDATABLE_STATUSES:
            raise InvalidInput(f"status can be set to {', '.join(UPDATABLE_STATUSES)}, not {status}", field="status")
        check_unit("importance", importance)
        bounds.fields(reason=reason)
        if merge_strategy not in ("replace", "append", "prepend"):
            raise InvalidInput(f"unknown merge_strategy {merge_strategy!r}", field="merge_strategy")
        for part in (tags.add, tags.remove, tags.replace or ()) if tags is not None else ():
            bounds.tags(part)  # an edit names no more tags than a memory may hold
        if metadata is not None:
            metadata = bounds.metadata(dict(metadata))
        if path is not None:
            paths.check_path(path)
        if expires_at not in (UNSET, None):
            expires_at = bounds.when("expires_at", expires_at)
            if expires_at <= self.clock.now():
                raise InvalidInput("expires_at is in the past", field="expires_at")

        # Optimistic concurrency: compute from what was read, write only if it is still current.
        # A caller that named the version it read gets a conflict; otherwise re-read and re-apply.
        give_up, pause = time.monotonic() + CONFLICT_RETRY_S, CONFLICT_PAUSE_S[0]
        while True:
            current = self.get(memory_id)
            if current.status is Status.FORGOTTEN:
                raise NotFound(f"memory {memory_id} has been deleted", memory_id=memory_id)
            if expected_version is not None and current.version != expected_version:
                raise Conflict(
                    f"memory {memory_id} is at version {current.version}, not {expected_version}",
                    memory_id=memory_id,
                    current_version=current.version,
                )
            changes = self._apply_updates(
                current, content, merge_strategy, category, tags, importance, access_level, expires_at
            )
            if type is not None:
                changes["type"] = type
            if metadata is not None:
                changes["metadata"] = dict(metadata)
            if path is not None:
                changes["path"] = path
            if status is not None:
                changes.update(_status_change(status, reason))
            changed = {k: v for k, v in changes.items() if getattr(current, k) != v}
            if not changed:
                access.check_writable(current)  # a caller who may not write it is not told it is done
                return UpdateResult(current, [], None)
            now = self.clock.now()
            updated = current.evolve(**changed, version=current.version + 1, updated_at=now)
            change = self.change(updated, "update", actor, reason, previous=current)
            try:
                self.storage.save([(updated, change)])
            except Conflict:
                if expected_version is not None:
                    raise
                if time.monotonic() > give_up:
                    raise Conflict(f"memory {memory_id} kept changing while being updated",
                                   memory_id=memory_id) from None  # fmt: skip
                time.sleep(random.uniform(0, pause))
                pause = min(pause * 2, CONFLICT_PAUSE_S[1])
                continue
            embedded = self._embed([updated]) if "content" in changed else False
            return UpdateResult(updated, [k for k in changed if k != "auto_tags"], change.id, embedded)

    @staticmethod
    def _apply_updates(
        current: Memory, content: str | None, merge_strategy: str, category: str | None, tags: TagEdit | None,
        importance: float | None, access_level: AccessLevel | None, expires_at: datetime | None,
    ) -> dict[str, Any]:  # fmt: skip
        """The fields an update sets, computed from the memory as it is now."""
        changes: dict[str, Any] = {}
        # An explicit tag edit applies to the tags the memory shows, and makes them all the caller's.
        user_tags = current.tags if tags is None else tags.apply(current.all_tags)
        if len([t for t in user_tags if t not in current.auto_tags]) > MAX_TAGS:
            raise InvalidInput(f"at most {MAX_TAGS} tags are allowed", field="tags")
        auto = current.auto_tags if tags is None else ()
        if content is not None:
            merged = {
                "replace": content,
                "append": f"{current.content}\n{content}",
                "prepend": f"{content}\n{current.content}",
            }[merge_strategy]
            bounds.text("content", merged, MAX_CONTENT_CHARS)
            changes["content"] = merged
            if auto:  # tags derived from the old words must not outlive them
                auto = tuple(enrich.auto_tags(merged, user_tags, limit=len(auto)))
        if tags is not None:
            changes["tags"] = user_tags
        changes["auto_tags"] = auto
        if category is not None:
            changes["category"] = category
        if importance is not None:
            changes["importance"] = importance
        if access_level is not None:
            changes["access_level"] = AccessLevel(access_level)
        if expires_at is not UNSET:
            changes["expires_at"] = expires_at
        return changes

    # -- forget ------------------------------------------------------------------------
    def forget(
        self,
        memory_id: str,
        *,
        reason: str = ForgetReason.USER_REQUEST,
        reason_details: str | None = None,
        hard_delete: bool = False,
        retention_period_days: int = DEFAULT_RETENTION_DAYS,
        cascade_related: bool = False,
        actor: str | None = None,
    ) -> ForgetResult:
        if reason not in ForgetReason.__members__.values():
            raise InvalidInput(f"unknown reason {reason!r}", field="reason")
        bounds.fields(reason_details=reason_details)
        if not 0 <= retention_period_days <= MAX_RETENTION_DAYS:
            raise InvalidInput(
                f"retention_period_days must be between 0 and {MAX_RETENTION_DAYS}",
                field="retention_period_days",
            )
        now = self.clock.now()
        primary = self.get(memory_id)
        if primary.status is Status.FORGOTTEN and not hard_delete:
            raise NotFound(f"memory {memory_id} is already deleted", memory_id=memory_id)
        # Memories past their retention go now, not before the call is known to be valid: a refused
        # call changes nothing.
        self.storage.purge_due(now)
        primary = self.get(memory_id)
        # a cascade follows links into the caller's own memories only: a teammate's shared memory stays
        related = [m for m in self._related(primary) if access.in_own_space(m)] if cascade_related else []
        targets = [primary, *related]
        why = _reason_text(reason, reason_details)

        if hard_delete:
            changes = [self.change(m.evolve(version=m.version + 1), "hard_delete", actor, why) for m in targets]
            self.storage.purge([m.id for m in targets], changes)
            return ForgetResult(memory_id, "hard", now, None, len(targets) - 1, None)

        until, backups = self.forget_softly(targets, reason, reason_details, retention_period_days, actor)
        return ForgetResult(memory_id, "soft", now, until, len(targets) - 1, backups[0].id)

    def forget_softly(
        self, memories: Sequence[Memory], reason: str, reason_details: str | None = None,
        retention_period_days: int = DEFAULT_RETENTION_DAYS, actor: str | None = None,
    ) -> tuple[datetime, list[Backup]]:  # fmt: skip
        """Soft-delete memories as read, in one transaction (``Conflict`` if one changed since).

        Each stays recoverable, with a backup of its state, until the returned time.
        """
        now = self.clock.now()
        until = now + timedelta(days=retention_period_days)
        why = _reason_text(reason, reason_details)
        saved: list[tuple[Memory, Change]] = []
        backups: list[Backup] = []
        for memory in memories:
            forgotten = memory.evolve(
                status=Status.FORGOTTEN,
                forget_reason=reason,
                forget_details=reason_details,
                forgotten_at=now,
                recoverable_until=until,
                path=None,  # a forgotten memory gives up its path (its backup keeps it)
                version=memory.version + 1,
                updated_at=now,
            )
            saved.append((forgotten, self.change(forgotten, "forget", actor, why, previous=memory)))
            backups.append(Backup(new_id(), memory, now, until))
        self.storage.save(saved, backups)
        return until, backups

    def _related(self, start: Memory) -> list[Memory]:
        """Every memory reachable from ``start`` through links, either way, not yet forgotten."""
        seen = {start.id}
        frontier = [start.id]
        found: list[Memory] = []
        while frontier:
            neighbours = {n for mid in frontier for n in self.storage.linked_ids(mid)} - seen
            seen |= neighbours
            fresh = [m for m in self.storage.get_many(sorted(neighbours)) if m.status is not Status.FORGOTTEN]
            found.extend(fresh)
            frontier = [m.id for m in fresh]
        return found
