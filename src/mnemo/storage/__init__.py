"""Storage backends behind one small, driver-free Protocol.

No connections, cursors or sessions cross this boundary: only ``mnemo.model`` and
``mnemo.query`` values. Every method is one atomic operation; a write that finds a memory at
another version than the one it was computed from raises ``Conflict`` and changes nothing, and an
insert with ``unique_content`` that finds the same content (same signature, user and subject) already
stored raises ``Duplicate`` naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from mnemo.embed import Vectors
from mnemo.model import Backup, Change, Memory
from mnemo.query import Filters, Follower, Position, RankFields, Sort, StoredText, TextHit


class GroupKey(StrEnum):
    STATUS = "status"
    CATEGORY = "category"
    TYPE = "type"
    IMPORTANCE_BAND = "importance_band"
    SUBJECT = "subject"
    AGENT = "agent"


class Granularity(StrEnum):
    HOUR = "hour"
    DAY = "day"
    WEEK = "week"
    MONTH = "month"


@dataclass(frozen=True, slots=True)
class Totals:
    count: int
    content_bytes: int
    access_total: int
    accessed_count: int
    max_access: int


@dataclass(frozen=True, slots=True)
class EventPattern:
    """When events of one kind happened: how many, per hour of day (0-23) and weekday (0=Mon)."""

    total: int
    by_hour: dict[int, int]
    by_weekday: dict[int, int]


@dataclass(frozen=True, slots=True)
class StoredVector:
    seq: int  # grows with every vector write
    key: int  # the memory's storage key
    vector: bytes  # float32, little-endian


@dataclass(frozen=True, slots=True)
class StoreFile:
    """Where a store keeps its data, whether that is there, and its measured size."""

    path: str  # the file's name within the store's folder: callers are told the store, not the disk layout
    exists: bool
    size_bytes: int


@dataclass(frozen=True, slots=True)
class IdempotentCall:
    """A call made earlier under an idempotency key: what it asked (hashed), its answer (None: running)
    and, while it runs, until when its server vouches for it (the lease that server renews)."""

    request_sha256: str
    answer: str | None
    lease_until: datetime | None = None
    applied_to: str | None = None  # the first memory its writes changed: it was applied, answered or not


@dataclass(frozen=True, slots=True)
class LeasedCall:
    """The call under an idempotency key that this context runs, as its server holds the key."""

    principal: str
    key: str
    holder: str
    ledger: object  # the storage that keeps the key: only its own writes mark it (not another store's)


# Set while a call under an idempotency key runs (``RequestLedger.applying``). Each write of memories
# it makes to the store that keeps the key marks the key applied in the write's own transaction, and
# fails, writing nothing, if this server no longer holds the key: a call is applied once, whenever
# its server dies.
LEASED_CALL: ContextVar[LeasedCall | None] = ContextVar("mnemo_leased_call", default=None)


@dataclass(frozen=True, slots=True)
class Job:
    """A long operation as recorded: ``status`` is running, succeeded or failed."""

    id: str
    kind: str
    status: str
    started_at: datetime
    host: str
    pid: int
    ended_at: datetime | None = None
    done: int = 0
    total: int | None = None
    detail: str = "{}"  # JSON: what the operation reports when it ends
    error: str | None = None
    owner: str | None = None  # the user who started it; None: a local caller


class VectorSearch(Protocol):
    """Cosine search over a store's vectors, by storage key, in the process: ``mnemo.search.vector_index.VectorIndex``
    (in memory, fed by ``vectors_after``) or ``vector_layers.LayeredIndex`` (a snapshot on disk as well)."""

    def refresh(self, storage: Storage) -> None: ...  # take in what other writers stored
    def discard(self, keys: Sequence[int]) -> None: ...  # these keys' vectors were dropped
    def search(self, query: Vectors, k: int) -> list[tuple[int, float]]: ...  # the k keys nearest the query, best first
    def close(self, query: Vectors, k: int, floor: float) -> list[tuple[int, float]]: ...  # of those at cosine >= floor
    def close_many(self, queries: Sequence[Vectors], k: int, floor: float) -> list[list[tuple[int, float]]]: ...
    # the k nearest among the memories that pass the filters, their true top k (the store says which)
    def search_passing(self, query: Vectors, k: int, filters: Filters, storage: Storage) -> list[tuple[int, float]]: ...
    def similarity(self, query: Vectors, keys: Sequence[int]) -> dict[int, float]: ...
    def vectors(self, keys: Sequence[int]) -> dict[int, Vectors]: ...  # the vectors of these keys that have one


# Rows written at once (an import, a sync) past which the writer refreshes the planner's view of the
# store (``Storage.refresh_statistics``); fewer change no plan enough to wait for it.
BULK_WRITE = 1_000


class Storage(Protocol):
    name: str

    def close(self) -> None: ...
    # This thread's writes in the block as one transaction, each a savepoint in it (a failed write
    # undoes only itself), which the block's reads see: a bulk import commits once a batch.
    def batch(self) -> AbstractContextManager[None]: ...
    def batching(self) -> bool: ...  # whether this thread is in batch(): other threads do not see its writes

    # -- single memories ---------------------------------------------------------------
    def insert(
        self,
        memory: Memory,
        change: Change,
        link_to: Sequence[str] = (),
        unique_content: bool = False,
        numbered: bool = False,
    ) -> Memory: ...  # numbered: the store's next entry number, given in the same transaction
    # many new memories in one transaction: each stored, or the id of one held with the same content
    def insert_new(self, new: Sequence[tuple[Memory, Change]]) -> list[Memory | str]: ...
    def get(self, memory_id: str) -> Memory | None: ...
    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]: ...
    def subject_spelling(self, key: str) -> str | None: ...
    def rank_fields(self, keys: Sequence[int]) -> dict[int, RankFields]: ...  # by storage key: the cheap lookup
    def save(self, changes: Sequence[tuple[Memory, Change]], backups: Sequence[Backup] = ()) -> None: ...
    def purge(self, memory_ids: Sequence[str], changes: Sequence[Change]) -> None: ...
    def purge_due(self, now: datetime) -> int: ...
    def linked_ids(self, memory_id: str) -> list[str]: ...
    def add_links(self, source_id: str, target_ids: Sequence[str], at: datetime) -> None: ...
    def link_counts(self, memory_ids: Sequence[str]) -> dict[str, int]: ...
    def history(self, memory_id: str) -> list[Change]: ...
    def backup(self, backup_id: str) -> Backup | None: ...

    # -- paths (spec 002) ------------------------------------------------------------------
    def get_by_path(self, path: str) -> Memory | None: ...
    def path_level(self, prefix: str, filters: Filters) -> tuple[list[Memory], dict[str, int]]: ...
    def expired_with_path(self, now: datetime) -> list[Memory]: ...

    # -- finding -----------------------------------------------------------------------
    def search_text(self, terms: Sequence[str], filters: Filters, limit: int) -> list[TextHit]: ...
    def select(
        self, filters: Filters, sort: Sort, limit: int | None, offset: int = 0, after: Position | None = None
    ) -> list[tuple[Memory, Position]]: ...  # limit None: every match
    def count(self, filters: Filters) -> int: ...
    def max_access_count(self) -> int: ...
    # Counts the memories as accessed; PostgreSQL writes the counts just after it returns (its reads
    # wait for them: storage.access_tally).
    def record_recall(self, memory_ids: Sequence[str], at: datetime) -> None: ...

    # -- vectors -----------------------------------------------------------------------
    # A memory's ``key`` is a small integer handle the backend gives it, stable for its lifetime.
    def vector_model(self) -> str | None: ...
    def reset_vectors(self, model: str) -> None: ...
    def drop_vectors(self, memory_ids: Sequence[str]) -> None: ...
    def put_vectors(self, vectors: Sequence[tuple[str, bytes]]) -> None: ...
    def vectors_after(self, seq: int, limit: int) -> list[StoredVector]: ...
    def vectors_of(self, memory_ids: Sequence[str]) -> dict[str, bytes]: ...  # by id, as put_vectors takes them
    def last_vector_seq(self) -> int: ...
    def unfed_vectors(self) -> list[StoredVector]: ...  # written, not yet given by vectors_after, seen by this thread
    def vector_keys(self) -> list[int]: ...  # the keys of every memory that has a vector
    def unembedded(self, limit: int) -> list[Memory]: ...
    def keys_passing(self, keys: Sequence[int], filters: Filters) -> dict[int, str]: ...
    def texts_passing(self, keys: Sequence[int], filters: Filters) -> dict[int, StoredText]: ...
    def keys_matching(self, filters: Filters) -> list[int]: ...
    def subjects_among(self, keys: Sequence[str]) -> set[str]: ...
    def keys_mentioning(self, keys: Sequence[int], subject: str) -> set[int]: ...
    def keys_holding(
        self, keys: Sequence[int], terms: Sequence[str]
    ) -> set[int]: ...  # any term, as search_text matches
    # for each key in a session: the next ``count`` memories of that session, in order made, with their lengths
    def following_in_session(self, keys: Sequence[int], count: int, within: timedelta) -> dict[int, list[Follower]]: ...
    def vector_bytes(self, filters: Filters | None = None) -> int: ...
    def index_folder(self) -> Path | None: ...  # where the vector index may keep files, rebuilt from the store at will

    # -- changes (a sync reads each side from where its last one reached) --------------------------
    # Every write of a memory is given a change number: a write that commits after
    # ``change_horizon`` is read is numbered at or above the number it gives, with the name of the
    # numbering (a store copied or restored elsewhere numbers anew, under another name).
    def change_horizon(self) -> tuple[str, int]: ...
    def changed_from(self, number: int) -> dict[str, int]: ...  # the memories last changed at or above it: id → number
    def first_change_after(self, at: datetime) -> int: ...  # where a sync's older watermark, a time, reads from

    # -- archive tiers and store settings ------------------------------------------------
    def read_setting(self, key: str) -> str | None: ...
    def write_setting(self, key: str, value: str) -> None: ...
    def packed_bytes(self) -> int: ...  # compressed content held in the database (glacier)
    def refresh_statistics(self) -> None: ...  # after a bulk write: the planner sees the store as it now is
    def archive_files_in_use(self) -> set[str]: ...  # archive_file values deep-archived memories name

    # -- request ledgers (HTTP servers of one store share them) --------------------------
    def count_request(self, principal: str, bucket: str, window: int) -> int: ...  # the count after this one
    # None: the key was new, or its running call's lease had run out (its server died); now
    # ``holder`` (a server) runs it, leased until ``lease_until``. Renewing and ending take effect
    # only on the keys the holder still holds.
    def begin_idempotent(
        self, principal: str, key: str, request_sha256: str, holder: str, at: datetime, lease_until: datetime,
        forget_before: datetime,
    ) -> IdempotentCall | None: ...  # fmt: skip
    def renew_idempotent(self, holder: str, calls: Sequence[tuple[str, str]], lease_until: datetime) -> None: ...
    def end_idempotent(self, principal: str, key: str, holder: str, answer: str | None) -> None: ...

    # -- jobs ------------------------------------------------------------------------------
    def put_job(self, job: Job) -> None: ...  # insert or replace the job's record
    def get_job(self, job_id: str) -> Job | None: ...
    def recent_jobs(self, limit: int) -> list[Job]: ...  # newest first
    def running_jobs(self) -> list[Job]: ...

    # -- statistics --------------------------------------------------------------------
    def totals(self, filters: Filters) -> Totals: ...
    def group_count(self, filters: Filters, key: GroupKey) -> dict[str, int]: ...
    def tag_counts(self, filters: Filters, limit: int | None = None) -> list[tuple[str, int]]: ...
    def duplicate_count(self, filters: Filters) -> int: ...
    def created_histogram(self, filters: Filters, granularity: Granularity) -> list[tuple[str, int]]: ...
    def event_pattern(self, kind: str, start: datetime, end: datetime) -> EventPattern: ...
    def change_counts(self, start: datetime, end: datetime, memory_filters: Filters) -> dict[str, int]: ...
    def size_bytes(self) -> int: ...

    # -- health ------------------------------------------------------------------------
    def store_file(self) -> StoreFile: ...
    def check_write_lock(self, timeout_s: float) -> None: ...  # Locked if not free within the timeout
    def check_integrity(self) -> list[str]: ...  # the problems the backend's own check found
    def back_up(self, reason: str, min_interval_s: float = 0.0) -> str | None: ...  # a copy of a whole store
