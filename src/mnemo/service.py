"""The domain operations of mnemo: the only place with business rules.

The service receives its storage and clock; it never imports a driver or a transport, so the
same operations serve every MCP profile, the CLI and Python programs.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from mnemo import access, bounds, enrich, paths, ranking
from mnemo.clock import Clock, SystemClock
from mnemo.embed import Embedder, Vectors
from mnemo.errors import (
    Conflict,
    CorruptedData,
    Duplicate,
    EmbeddingError,
    InvalidInput,
    NotFound,
    QuotaExceeded,
    StorageError,
)
from mnemo.lifecycle.settings import LifecycleSettings
from mnemo.model import (
    DEFAULT_RETENTION_DAYS,
    MAX_CONTENT_CHARS,
    MAX_PAGE,
    MAX_RETENTION_DAYS,
    MAX_TAGS,
    AccessLevel,
    Backup,
    Change,
    Context,
    ForgetReason,
    ImportanceBand,
    Memory,
    MemoryType,
    Status,
    canonical_category,
    new_id,
    normalise_tags,
    subject_key,
    to_iso,
)
from mnemo.query import DateRange, Filters, Position, RankFields, Sort
from mnemo.search import Candidate, Searcher
from mnemo.space_limits import SharedLimits
from mnemo.stats import Overview, StatsReport, overview, report
from mnemo.storage import Storage
from mnemo.vector_layers import GRAPH_FROM
from mnemo.words import search_terms

MAX_LIST_PAGE = 1_000  # list pages may be longer than recall's (spec 003 reads up to 1,000 entries)
# Candidates taken from words and from meaning each, per recall. Relevance does not depend on the
# other candidates, so a smaller pool only loses memories outside both top lists: 50 instead of
# 200 left the dev sets' R@5/R@10 as they were (LoCoMo 0.632/0.730 -> 0.630/0.729) and cut recall
# at 100,000 memories from 24/30 to 10/15 ms p50/p95.
RECALL_POOL = 50
# A search (spec 000's query) returns every match, not a top few: it examines more candidates.
CANDIDATE_POOL = 200
# Below this calibrated relevance a candidate that shares no word with the query is not a result
# at all (a cosine under ~0.01). Unrelated sentences reach a cosine of ~0.12 with this model, but a
# floor there cut agent-memory-dev's R@10 from 0.91 to 0.90 (filtered queries: 1.00 to 0.69), and
# one at a cosine of 0.05 to 0.912 (0.875): low-scored results stay, shown with their relevance.
MIN_RELEVANCE = 0.03
# From this relevance a memory matches a query's search text (spec 000). On agent-memory-dev (400
# memories, 150 questions) it keeps 78% of the right answers among ~10 matches a question
# (benchmarks/fit_relevance.py prints both).
SEARCH_MATCH = 0.3
# How often an update that met another writer is computed again from the memory as it now is. On
# PostgreSQL a read and a write are several round trips apart, so four processes appending to one
# memory under load exhausted 5 now and then (tests/test_concurrency.py); retrying is cheap.
MAX_CONFLICT_RETRIES = 12
CLOCK_SKEW = timedelta(minutes=5)  # how far ahead a client's clock may be when it dates a memory


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


STATUS_NAMES = {
    "active": Status.ACTIVE,
    "archived": Status.ARCHIVED,
    "deleted": Status.FORGOTTEN,
    "outdated": Status.OUTDATED,
}
UPDATABLE_STATUSES = (Status.ACTIVE, Status.ARCHIVED, Status.OUTDATED)  # forgetting is forget()'s
AT_PATH_STATUSES = (Status.ACTIVE, Status.ARCHIVED, Status.OUTDATED)  # a forgotten memory holds no path


def _status_change(status: Status, reason: str | None) -> dict[str, Any]:
    """The fields a status change sets: an outdated memory keeps why it was superseded."""
    if status is Status.OUTDATED:
        return {"status": status, "forget_reason": ForgetReason.OUTDATED.value, "forget_details": reason}
    return {"status": status, "forget_reason": None, "forget_details": None}


def _reason_text(reason: str, details: str | None) -> str:
    return reason if not details else f"{reason}: {details}"


def _check_content(content: str) -> None:
    if not content.strip():
        raise InvalidInput("content must not be empty", field="content")
    bounds.fields(content=content)


def _checked_category(category: str | None) -> str | None:
    """Spec 004's categories, or a caller's own label of up to MAX_CATEGORY_CHARS (spec 000)."""
    if category is None:
        return None
    label = category.strip()
    if not label:
        raise InvalidInput("category must not be empty", field="category")
    bounds.fields(category=label)
    return label


def _check_type(memory_type: str | None) -> None:
    if memory_type is not None and memory_type not in MemoryType.__members__.values():
        raise InvalidInput(
            f"unknown type {memory_type!r}; choose one of {', '.join(t.value for t in MemoryType)}", field="type"
        )


def _check_unit(name: str, value: float | None) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise InvalidInput(f"{name} must be between 0 and 1, not {value}", field=name)


def inherited(fields: RankFields, candidate: Candidate, every: Mapping[int, RankFields]) -> RankFields:
    """An update's priors with the importance and use of the memory it updates, where those are higher.

    How important a fact is and how often it is needed belong to the fact, not to the note that
    last stated it: the update of a rule recalled weekly should not rank below the rule it replaced.
    """
    older = every.get(candidate.updates) if candidate.updates is not None else None
    if older is None:
        return fields
    return replace(
        fields,
        importance=max(fields.importance, older.importance),
        access_count=max(fields.access_count, older.access_count),
    )


class MemoryService:
    def __init__(
        self,
        storage: Storage,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        categories: enrich.CategoryDetector | None = None,
        *,
        recency_half_life_days: float = 30.0,
        max_memories: int | None = None,
        vector_graph_from: int = GRAPH_FROM,
        shared_limits: SharedLimits | None = None,
        lifecycle: LifecycleSettings | None = None,
        actor: str = "mnemo",
    ) -> None:
        self.storage: Storage = cast(Storage, access.ScopedStorage(storage))  # reads by id: the caller's view
        self.shared_limits = shared_limits or SharedLimits()  # what spec 003's shared space over this store allows
        self.lifecycle = lifecycle or LifecycleSettings()  # what mnemo.lifecycle's operations are set up with
        self.clock = clock or SystemClock()
        self.recency_half_life_days = recency_half_life_days
        self.max_memories = max_memories
        self.actor = actor
        self.embedder = embedder
        self.searcher = Searcher(storage, embedder, vector_graph_from)
        self.categories = categories or enrich.CategoryDetector(embedder)
        # A damaged store, or one from a newer mnemo, still gets a service, whose every operation
        # reports why to its caller.
        with suppress(CorruptedData, StorageError):
            if embedder is not None and storage.vector_model() is None:
                storage.reset_vectors(embedder.name)  # a store's first model is the one it meets first
            storage.purge_due(self.clock.now())

    def change(self, memory: Memory, action: str, actor: str | None, reason: str | None = None,
               previous: Memory | None = None, at: datetime | None = None) -> Change:  # fmt: skip
        """The record of a write to ``memory``; Forbidden if the running call's caller may not write it."""
        access.check_writable(memory)
        return Change(
            id=new_id(),
            memory_id=memory.id,
            version=memory.version,
            action=action,
            actor=actor or memory.context.user_id or self.actor,
            at=at or self.clock.now(),
            reason=reason,
            previous=previous,
        )

    # -- store -------------------------------------------------------------------------
    def store(
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
    ) -> StoreResult:
        """Save a new memory; its category, tags and importance are derived when not given.

        ``memory_id`` keeps a given id (an import of mnemo's own export): one already held is a
        duplicate of that memory. ``vector`` is the content's embedding when the caller embedded
        many contents at once (bulk import); otherwise it is computed here.

        The same content (or the same meaning, when vectors are on) already stored for the same
        user and subject is a ``Duplicate``, or with ``on_duplicate="return"`` that memory is
        returned (``StoreResult.existing``) and nothing is written; ``"allow"`` stores it again.
        ``agent_name`` signs the memory and numbers it (spec 003's shared space). ``path`` puts it
        at a free path (spec 002; checked by ``add_at``), or the store refuses it with ``Conflict``.
        """
        now = self.clock.now()
        _check_content(content)
        given_tags = normalise_tags(tuple(tags))
        bounds.tags(given_tags)
        _check_unit("importance", importance)
        _check_unit("confidence", confidence)
        category = _checked_category(category)
        _check_type(type)
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
                return StoreResult(self.get(memory_id), [], 0, embedded=False, existing=True)
        if self.max_memories is not None:
            held = self.storage.count(Filters(now=now, statuses=(Status.ACTIVE, Status.ARCHIVED), include_expired=True))
            if held >= self.max_memories:
                raise QuotaExceeded(
                    f"store {self.storage.name!r} holds its quota of {self.max_memories} memories",
                    quota=self.max_memories,
                )

        vectors: Vectors | None
        if vector is not None and self.embedder is not None and self.searcher.vectors_state() is None:
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
        unique = on_duplicate != "allow"
        try:
            if vector is not None and unique:
                self._refuse_near_duplicate(memory, vector)
            memory = self.storage.insert(
                memory, self.change(memory, "create", actor, reason, at=now), related, unique_content=unique,
                numbered=agent_name is not None,
            )  # fmt: skip
        except Duplicate as duplicate:
            if on_duplicate == "raise":
                raise
            return StoreResult(self.get(duplicate.existing_id), [], 0, embedded=False, existing=True)
        embedded = self._save_vectors([memory], vectors, embed_error)
        return StoreResult(memory, extra_tags, len(related), embedded)

    def _refuse_near_duplicate(self, memory: Memory, vector: Vectors) -> None:
        twin = self.searcher.near_duplicate(
            vector, memory.content, memory.context.user_id, memory.subject_key, self.clock.now()
        )
        if twin is not None:
            raise Duplicate(
                f"a memory with the same meaning is already stored as {twin[0]} (similarity {twin[1]:.3f})",
                existing_id=twin[0],
                similarity=round(twin[1], 4),
            )

    # -- embeddings --------------------------------------------------------------------
    def _try_embed(self, texts: Sequence[str]) -> tuple[Vectors | None, Exception | None]:
        """Vectors for the texts; (None, None) when this store does not use vectors; the error if the model failed."""
        if self.embedder is None or self.searcher.vectors_state() is not None:
            return None, None
        try:
            return self.embedder.embed_documents(texts), None
        except Exception as exc:  # whatever the model does, the memory itself must still be saved
            return None, exc

    def _save_vectors(self, memories: Sequence[Memory], vectors: Vectors | None, error: Exception | None) -> bool:
        """Store vectors for memories already saved; False if this store does not use vectors.

        The memories are saved first, so a failing model loses nothing: they stay searchable by
        words, the caller gets EmbeddingError naming them, and ``embed_pending`` embeds them later.
        """
        if error is not None:
            raise EmbeddingError(
                f"the memory was stored but could not be embedded ({error}); it is searchable by words and "
                "will be embedded later",
                memory_ids=[m.id for m in memories],
            ) from error
        if vectors is None:
            return False
        self.storage.put_vectors([(m.id, v.astype("<f4").tobytes()) for m, v in zip(memories, vectors, strict=True)])
        return True

    def _embed(self, memories: Sequence[Memory]) -> bool:
        return self._save_vectors(memories, *self._try_embed([m.content for m in memories]))

    def embed_pending(self, batch: int = 64) -> int:
        """Embed memories that have no vector yet (stored while the model failed); returns how many."""
        done = 0
        while self.embedder is not None and (pending := self.storage.unembedded(batch)):
            self._embed(pending)
            done += len(pending)
        return done

    def warm_up(self) -> None:
        """Load the model and embed what is pending; run in the background when a server starts."""
        load = getattr(self.embedder, "load", None)
        if load is not None:
            load()
        self.categories.load()
        self.embed_pending()

    def reindex(self, progress: Callable[[int, int], None] | None = None, batch: int = 64) -> int:
        """Re-embed every memory with the configured model, replacing vectors of any other."""
        if self.embedder is None:
            raise EmbeddingError("no embedding model is configured")
        self.storage.reset_vectors(self.embedder.name)
        total = self.storage.count(Filters(now=self.clock.now(), statuses=(Status.ACTIVE, Status.ARCHIVED),
                                           include_expired=True))  # fmt: skip
        done = 0
        while pending := self.storage.unembedded(batch):
            self._embed(pending)
            done += len(pending)
            if progress is not None:
                progress(done, total)
        return done

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

    def get(self, memory_id: str) -> Memory:
        bounds.fields(memory_id=memory_id)
        memory = self.storage.get(memory_id)
        if memory is None:
            raise NotFound(f"no memory with id {memory_id}", memory_id=memory_id)
        return memory

    def history(self, memory_id: str) -> list[Change]:
        self.get(memory_id)
        return self.storage.history(memory_id)

    # -- recall ------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        *,
        categories: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        date_range: DateRange = DateRange(),
        min_importance: float | None = None,
        user_id: str | None = None,
        conversation_id: str | None = None,
        subject: str | None = None,
        access_levels: Sequence[str] | None = None,
        weights: ranking.Weights = ranking.Weights(),
        decay: ranking.Decay = ranking.Decay.EXPONENTIAL,
        limit: int = 10,
        offset: int = 0,
        include_archived: bool = False,
        min_relevance: float = 0.0,
    ) -> RecallResult:
        """The memories most relevant to the query, ranked by the weighted factors.

        A memory is a result only when its calibrated relevance reaches ``min_relevance`` (spec
        001's threshold); outdated and forgotten memories are never recalled.
        """
        started = time.perf_counter()
        if not query.strip():
            raise InvalidInput("query must not be empty", field="query")
        bounds.fields(query=query)
        _check_unit("min_importance", min_importance)
        _check_unit("min_relevance", min_relevance)
        self._check_page(limit, offset)
        access.check_scope(user_id, "filters.user_id")
        now = self.clock.now()
        filters = Filters(
            now=now,
            statuses=(Status.ACTIVE, Status.ARCHIVED) if include_archived else (Status.ACTIVE,),
            categories=tuple(categories) if categories else None,
            tags_any=tuple(tags) if tags else None,
            created_from=date_range.start,
            created_to=date_range.end,
            importance_min=min_importance,
            user_id=user_id,
            conversation_id=conversation_id,
            subject_key=subject_key(subject) if subject else None,
            access_levels=tuple(access_levels) if access_levels else None,
        )
        pool = max(RECALL_POOL, 3 * (offset + limit))
        found = self.searcher.find(query, search_terms(query), filters, pool)
        relevant = [
            c for c in found.candidates if c.relevance >= min_relevance and (c.text > 0 or c.relevance >= MIN_RELEVANCE)
        ]
        fields = self.storage.rank_fields([c.key for c in relevant])
        top = self.storage.max_access_count() if relevant else 0  # the store's most recalled memory's count
        best = max((c.relevance for c in relevant), default=0.0)
        newest = max((f.updated_at for f in fields.values()), default=now)
        ranked = sorted(
            (
                (
                    c.memory_id,
                    self._score(inherited(f, c, fields), c.relevance, best, weights, decay, newest, top),
                )
                for c in relevant
                if (f := fields.get(c.key)) is not None
            ),
            key=lambda pair: pair[1].combined,
            reverse=True,
        )
        page = ranked[offset : offset + limit]
        memories = {m.id: m for m in self._seen(self.storage.get_many([memory_id for memory_id, _ in page]), now)}
        hits = [RecallHit(memories[memory_id], s) for memory_id, s in page if memory_id in memories]
        elapsed = (time.perf_counter() - started) * 1000
        return RecallResult(hits, len(ranked), elapsed, found.warnings, found.embedded)

    def _seen(self, memories: list[Memory], now: datetime) -> list[Memory]:
        """Count memories given back to a caller as accessed; returns them as they now are."""
        if memories:
            self.storage.record_recall([m.id for m in memories], now)
        return [m.evolve(access_count=m.access_count + 1, accessed_at=now) for m in memories]

    def _score(
        self, memory: RankFields, relevance: float, best: float, weights: ranking.Weights, decay: ranking.Decay,
        newest: datetime, max_access: int,
    ) -> ranking.Scores:  # fmt: skip
        age_days = (newest - memory.updated_at).total_seconds() / 86400
        return ranking.score(
            weights,
            relevance,
            best,
            ranking.recency(age_days, self.recency_half_life_days, decay),
            memory.importance,
            ranking.access_frequency(memory.access_count, max_access),
        )

    @staticmethod
    def _check_page(limit: int, offset: int, maximum: int = MAX_PAGE) -> None:
        if not 1 <= limit <= maximum:
            raise InvalidInput(f"limit must be between 1 and {maximum}", field="limit")
        bounds.offset(offset)

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
            _check_content(content)
        category = _checked_category(category)
        _check_type(type)
        if status is not None and status not in UPDATABLE_STATUSES:
            raise InvalidInput(f"status can be set to {', '.join(UPDATABLE_STATUSES)}, not {status}", field="status")
        _check_unit("importance", importance)
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
        for _attempt in range(MAX_CONFLICT_RETRIES):
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
                return UpdateResult(current, [], None)
            now = self.clock.now()
            updated = current.evolve(**changed, version=current.version + 1, updated_at=now)
            change = self.change(updated, "update", actor, reason, previous=current)
            try:
                self.storage.save([(updated, change)])
            except Conflict:
                if expected_version is not None:
                    raise
                continue
            embedded = self._embed([updated]) if "content" in changed else False
            return UpdateResult(updated, [k for k in changed if k != "auto_tags"], change.id, embedded)
        raise Conflict(f"memory {memory_id} kept changing while being updated", memory_id=memory_id)

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

    def _filters(
        self, now: datetime, *, categories: Sequence[str] | None = None, labels: Sequence[str] | None = None,
        types: Sequence[str] | None = None, tags: Sequence[str] | None = None, all_tags: Sequence[str] | None = None,
        importance_bands: Sequence[str] | None = None, date_range: DateRange = DateRange(),
        importance_min: float | None = None, importance_max: float | None = None, user_id: str | None = None,
        conversation_id: str | None = None, subject: str | None = None, agent_names: Sequence[str] | None = None,
        signed_only: bool = False, access_levels: Sequence[str] | None = None, statuses: Sequence[str] = ("active",),
        include_expired: bool = False,
    ) -> Filters:  # fmt: skip
        """The storage filters of a list, query or overview, after checking each value."""
        access.check_scope(user_id)
        _check_unit("importance_range.min", importance_min)
        _check_unit("importance_range.max", importance_max)
        if importance_min is not None and importance_max is not None and importance_min > importance_max:
            raise InvalidInput("importance_range.min is greater than its max", field="importance_range")
        unknown = [s for s in statuses if s not in STATUS_NAMES]
        if unknown:
            raise InvalidInput(f"unknown status {', '.join(unknown)}", field="status")
        bad_bands = [b for b in importance_bands or () if b not in ImportanceBand.__members__.values()]
        if bad_bands:
            raise InvalidInput(f"unknown importance {', '.join(bad_bands)}", field="importance")
        for memory_type in types or ():
            _check_type(memory_type)
        return Filters(
            now=now,
            statuses=tuple(dict.fromkeys(STATUS_NAMES[s] for s in statuses)),
            categories=tuple(categories) if categories else None,
            labels=tuple(labels) if labels else None,
            types=tuple(types) if types else None,
            tags_any=tuple(tags) if tags else None,
            tags_all=tuple(all_tags) if all_tags else None,
            importance_bands=tuple(importance_bands) if importance_bands else None,
            agent_names=tuple(agent_names) if agent_names else None,
            has_agent=True if signed_only else None,
            include_expired=include_expired,
            created_from=date_range.start,
            created_to=date_range.end,
            importance_min=importance_min,
            importance_max=importance_max,
            user_id=user_id,
            conversation_id=conversation_id,
            subject_key=subject_key(subject) if subject else None,
            access_levels=tuple(access_levels) if access_levels else None,
        )

    # -- list --------------------------------------------------------------------------
    def list(
        self,
        *,
        categories: Sequence[str] | None = None,
        labels: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        all_tags: Sequence[str] | None = None,
        importance_bands: Sequence[str] | None = None,
        date_range: DateRange = DateRange(),
        importance_min: float | None = None,
        importance_max: float | None = None,
        user_id: str | None = None,
        conversation_id: str | None = None,
        subject: str | None = None,
        agent_names: Sequence[str] | None = None,
        signed_only: bool = False,
        access_levels: Sequence[str] | None = None,
        statuses: Sequence[str] = ("active",),
        include_expired: bool = False,
        sort: Sort = Sort(),
        limit: int | None = 20,
        offset: int = 0,
        cursor: str | None = None,
        include_stats: bool = False,
    ) -> ListPage:
        """A page of memories that pass every filter, in the sort's order.

        ``categories`` are spec 004's (labels map onto them), ``labels`` exact stored ones;
        ``tags`` matches any of them, ``all_tags`` every one; ``signed_only`` keeps the entries an
        agent signed (spec 003's space). ``limit=None`` returns every match.
        """
        if limit is not None:
            self._check_page(limit, offset, MAX_LIST_PAGE)
        else:
            bounds.offset(offset)
        if cursor is not None and offset:
            raise InvalidInput("give either an offset or a cursor, not both", field="pagination")
        after = self._decode_cursor(cursor, sort) if cursor is not None else None
        now = self.clock.now()
        filters = self._filters(
            now, categories=categories, labels=labels, types=types, tags=tags, all_tags=all_tags,
            importance_bands=importance_bands, date_range=date_range, importance_min=importance_min,
            importance_max=importance_max, user_id=user_id, conversation_id=conversation_id, subject=subject,
            agent_names=agent_names, signed_only=signed_only, access_levels=access_levels, statuses=statuses,
            include_expired=include_expired,
        )  # fmt: skip
        rows = self.storage.select(filters, sort, None if limit is None else limit + 1, offset if after is None else 0,
                                   after)  # fmt: skip
        has_more = limit is not None and len(rows) > limit
        rows = rows[:limit]
        memories = [m for m, _ in rows]
        stats: dict[str, MemoryStats] = {}
        if include_stats:
            links = self.storage.link_counts([m.id for m in memories])
            stats = {
                m.id: MemoryStats(
                    m.content_length,
                    links.get(m.id, 0),
                    (now - m.created_at).days,
                    (now - m.accessed_at).days,
                )
                for m in memories
            }
        return ListPage(
            memories=memories,
            total=self.storage.count(filters),
            has_more=has_more,
            next_cursor=self._encode_cursor(sort, rows[-1][1]) if has_more else None,
            next_offset=offset + len(rows) if has_more and after is None else None,
            stats=stats,
        )

    @staticmethod
    def _encode_cursor(sort: Sort, position: Position) -> str:
        raw = json.dumps({"f": sort.field.value, "d": sort.descending, "v": position.value, "k": position.key})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def _decode_cursor(cursor: str, sort: Sort) -> Position:
        try:
            raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            position = Position(raw["v"], int(raw["k"]))
            same_order = raw["f"] == sort.field.value and raw["d"] == sort.descending
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise InvalidInput("the cursor is not one this server gave out", field="cursor") from exc
        if not same_order:
            raise InvalidInput("the cursor belongs to a different sort order", field="cursor")
        bounds.sql_value("cursor", position.value)  # a forged cursor must not reach SQL with what it cannot hold
        bounds.sql_value("cursor", position.key)
        return position

    # -- query: filters with an optional search (spec 000) -----------------------------
    def query(
        self,
        search: str | None = None,
        *,
        types: Sequence[str] | None = None,
        labels: Sequence[str] | None = None,
        all_tags: Sequence[str] | None = None,
        importance_bands: Sequence[str] | None = None,
        statuses: Sequence[str] = ("active",),
        sort: Sort | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> ListPage:
        """A page of the memories that pass every filter and, given a ``search``, match it.

        A memory matches a search when its calibrated relevance (words and meaning, as recall
        weighs them) reaches SEARCH_MATCH; matches count as accessed, as recall's results do.
        ``sort=None`` puts the best matches first, or lists newest first when there is no search.
        ``total`` counts every match among the candidates examined (CANDIDATE_POOL per channel).
        """
        self._check_page(limit, offset)
        if search is None or not search.strip():
            return self.list(types=types, labels=labels, all_tags=all_tags, importance_bands=importance_bands,
                             statuses=statuses, sort=sort or Sort(), limit=limit, offset=offset)  # fmt: skip
        now = self.clock.now()
        filters = self._filters(
            now, labels=labels, types=types, all_tags=all_tags, importance_bands=importance_bands, statuses=statuses
        )
        bounds.fields(search=search)
        found = self.searcher.find(search, search_terms(search), filters, max(CANDIDATE_POOL, 3 * (offset + limit)))
        matches = sorted((c for c in found.candidates if c.relevance >= SEARCH_MATCH), key=lambda c: -c.relevance)
        ids = [c.memory_id for c in matches]
        if sort is None:
            memories = self.storage.get_many(ids[offset : offset + limit])
        else:
            rows = self.storage.select(replace(filters, ids=tuple(ids)), sort, limit, offset) if ids else []
            memories = [m for m, _ in rows]
        seen = self._seen(memories, now)
        has_more = offset + len(seen) < len(ids)
        return ListPage(seen, len(ids), has_more, None, offset + len(seen) if has_more else None)

    # -- paths (spec 002) --------------------------------------------------------------
    # Only memories that have a path are addressed here; others are not given invented paths.
    def add_at(
        self, path: str, content: str, *, tags: Sequence[str] = (), expires_at: datetime | None = None
    ) -> Memory:
        """A new memory at a free path; its categories come into being with it.

        The path is its identity, so the same words at another path are another memory; the
        caller's tags are its tags (none are derived).
        """
        paths.check_path(path)
        if self.storage.get_by_path(path) is not None:
            raise Conflict(f"a memory already exists at {path!r}", path=path)
        stored = self.store(content, tags=tags, expires_at=expires_at, auto_tag=False, on_duplicate="allow", path=path)
        return stored.memory

    def get_at(self, path: str, *, include_expired: bool = True, field: str = "path") -> Memory:
        """The memory at a path; an expired one only ``include_expired``."""
        paths.check_path(path, field)
        memory = self.storage.get_by_path(path)
        if memory is None:
            raise paths.not_found(path, self.storage.name)
        if not include_expired and memory.expires_at is not None and memory.is_expired(self.clock.now()):
            raise NotFound(
                f"the memory at {path!r} expired at {to_iso(memory.expires_at)}; ask with include_expired to read it",
                path=path,
                expired=True,
            )
        return memory

    def update_at(
        self,
        path: str,
        *,
        content: str | None = None,
        tags: Sequence[str] | None = None,
        expires_at: datetime | None = UNSET,
    ) -> UpdateResult:
        """Replace the content, the tags or the expiry (``None`` clears it) of the memory at a path."""
        if content is None and tags is None and expires_at is UNSET:
            raise InvalidInput("no updates provided: give content, tags, expires_at or clear_expiry", field="updates")
        memory = self.get_at(path)
        edit = None if tags is None else TagEdit(replace=tuple(tags))
        return self.update(memory.id, content=content, tags=edit, expires_at=expires_at)

    def remove_at(self, path: str) -> ForgetResult:
        """Forget the memory at a path (recoverable for the retention period); the path is free again."""
        return self.forget(self.get_at(path).id)

    def move(self, from_path: str, to_path: str) -> Memory:
        """Give a memory another path; only its path changes, as a new version."""
        paths.check_path(to_path, "to_path")
        if from_path == to_path:
            raise InvalidInput("from_path and to_path are the same path", field="to_path")
        memory = self.get_at(from_path, field="from_path")
        if self.storage.get_by_path(to_path) is not None:
            raise Conflict(f"a memory already exists at {to_path!r}", path=to_path)
        moved = self.update(memory.id, path=to_path, reason=f"moved from {from_path}", expected_version=memory.version)
        return moved.memory

    def list_level(self, category: str | None = None, *, include_expired: bool = False) -> paths.Level:
        """One category level (the root when ``None``): its memories and its sub-categories."""
        category = paths.check_category(category)
        now = self.clock.now()
        filters = Filters(now=now, statuses=AT_PATH_STATUSES, include_expired=include_expired)
        memories, below = self.storage.path_level(paths.prefix(category), filters)
        return paths.Level(category, memories, {paths.prefix(category) + name: n for name, n in below.items()}, now)

    def prune_expired(self) -> Sequence[Memory]:
        """Forget every expired memory that has a path (reason "expired") in the caller's space; returns them."""
        expired = [m for m in self.storage.expired_with_path(self.clock.now()) if access.in_own_space(m)]
        return [m for m in expired if self._forget_if_there(m.id, ForgetReason.EXPIRED)]

    def _forget_if_there(self, memory_id: str, reason: str) -> bool:
        try:
            self.forget(memory_id, reason=reason)
        except NotFound:
            return False  # another process forgot it meanwhile
        return True

    # -- stats -------------------------------------------------------------------------
    def stats(
        self,
        *,
        scope: str = "user",
        scope_id: str | None = None,
        time_range: DateRange = DateRange(),
        metrics: Sequence[str] | None = None,
        include_trends: bool = False,
        granularity: str = "day",
    ) -> StatsReport:
        return report(
            self.storage,
            self.clock.now(),
            scope=scope,
            scope_id=scope_id,
            time_range=time_range,
            metrics=metrics,
            include_trends=include_trends,
            granularity=granularity,
        )

    def overview(
        self, *, subject: str | None = None, statuses: Sequence[str] = ("active",), signed_only: bool = False
    ) -> Overview:
        """The counts specs 000, 001 and 003 report: by type, band, category, subject, agent, tag."""
        filters = self._filters(self.clock.now(), subject=subject, statuses=statuses, signed_only=signed_only)
        return overview(self.storage, filters)
