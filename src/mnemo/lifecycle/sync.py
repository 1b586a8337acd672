"""Sync between two stores (spec 004's sync_memories): the same ids on both sides, changes since the
last sync of the pair, deletions as forgotten memories, conflicts resolved as asked.

A sync first plans, then applies. Every write of a memory is numbered by its store (whatever its
``updated_at``: an import keeps the file's), and the pair's marks, kept in both stores, say from
which number each side is still unread. The plan compares each memory changed on one side since its
mark with its copy on the other side: absent there → created; the same state → nothing; changed
only on this side → updated; changed on both → a conflict, resolved by ``conflict_resolution``
(``manual``: a 409 listing them, nothing applied). Applying writes one memory per transaction and
moves the marks only at the end, so a sync killed midway and run again finds what it wrote already
equal, and ends where an uninterrupted one would have. A side's mark moves past what this sync read
of it and past its own writes there (so they are not sent back), never past another writer's
change, nor past a transaction still running (``Storage.change_horizon``). A forgotten memory
travels as forgotten (a soft delete, recoverable on both sides); memories purged for good, or
archived beyond ``cold`` (their content lives in the tier), are not carried (counted as skipped). A
memory written on one side takes the other side's vector of the same content when both stores'
vectors are the model's that it embeds with; otherwise it is embedded there (a changed content's old
vector is dropped first).
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from mnemo.access import rules as access
from mnemo.access.caller import current, viewer
from mnemo.engine import registry
from mnemo.engine.service import MemoryService
from mnemo.errors import Forbidden, InvalidInput, SyncConflicts, SyncInProgress
from mnemo.lifecycle import jobs
from mnemo.model import Memory, Status
from mnemo.query import Filters, Position, Sort, SortField
from mnemo.storage import BULK_WRITE, LEASED_CALL

log = logging.getLogger(__name__)
SYNC_TYPES = ("full", "incremental", "bidirectional", "push", "pull")
RESOLUTIONS = ("source_wins", "destination_wins", "newest_wins", "merge", "manual")
PAGE = 500
STORE_ID = "store-id"
MARKS = "sync-marks:"  # + the other store's id: each side's numbering and the number it is unread from
OLD_WATERMARK = "sync-watermark:"  # + the other store's id: a time, the start of the last sync (before marks)
# The fields a sync carries: everything a memory says, not how this store counts or numbers it.
CARRIED = (
    "content",
    "path",
    "type",
    "category",
    "subject",
    "tags",
    "auto_tags",
    "importance",
    "confidence",
    "agent_name",
    "metadata",
    "context",
    "access_level",
    "owner",
    "expires_at",
    "status",
    "archive_tier",
    "archive_id",
    "archived_at",
    "forget_reason",
    "forget_details",
    "forgotten_at",
    "recoverable_until",
    "updated_at",
)


@dataclass(frozen=True, slots=True)
class SyncFilters:
    categories: tuple[str, ...] | None = None
    user_id: str | None = None
    conversation_id: str | None = None
    modified_since: datetime | None = None


@dataclass
class SyncReport:
    sync_id: str
    sync_type: str
    source: str
    destination: str
    started_at: datetime
    completed_at: datetime | None = None
    duration_ms: float = 0.0
    checked: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    conflicts: int = 0
    conflicts_resolved: int = 0
    skipped: int = 0
    errors: int = 0
    conflicts_handled: list[dict[str, str]] = field(default_factory=list)
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class Write:
    """One memory to write on one side: ``current`` is that side's copy (None: create it)."""

    side: MemoryService
    memory: Memory
    current: Memory | None


def state(memory: Memory) -> tuple[Any, ...]:
    return tuple(getattr(memory, name) for name in CARRIED if name != "updated_at")


def store_id(service: MemoryService) -> str:
    known = service.storage.read_setting(STORE_ID)
    if known is None:
        known = str(uuid.uuid4())
        service.storage.write_setting(STORE_ID, known)
    return known


class Syncer:
    def __init__(
        self, source: MemoryService, destination: MemoryService, source_name: str, destination_name: str
    ) -> None:
        # One service is one store: refused before an id is given to it, so a refusal writes nothing.
        # Two handles on one store (its name and its file) share the id its first sync gives it.
        if source is destination or store_id(source) == store_id(destination):
            raise InvalidInput("source and destination are the same store", field="destination")
        self.source, self.destination = source, destination
        self.names = (source_name, destination_name)
        self.ids = store_id(source), store_id(destination)

    def sync(
        self,
        sync_type: str = "incremental",
        filters: SyncFilters = SyncFilters(),
        conflict_resolution: str = "newest_wins",
        dry_run: bool = False,
        actor: str = "mnemo-sync",
        job_id: str | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> SyncReport:
        if sync_type not in SYNC_TYPES:
            raise InvalidInput(f"sync_type must be one of {', '.join(SYNC_TYPES)}", field="sync_type")
        if conflict_resolution not in RESOLUTIONS:
            raise InvalidInput(
                f"conflict_resolution must be one of {', '.join(RESOLUTIONS)}", field="conflict_resolution"
            )
        # over HTTP a member syncs their own memories (an admin: anyone's); a reader writes nothing
        access.check_scope(filters.user_id, "filters.user_id")
        access.check_may_write()
        filters = replace(filters, user_id=filters.user_id or viewer())
        self._refuse_if_running(job_id)
        started = self.source.clock.now()
        # the sync's id is its job's: mnemo jobs ID and mnemo://jobs/ID show how it went
        report = SyncReport(job_id or f"sync_{uuid.uuid4().hex[:12]}", sync_type, *self.names, started, dry_run=dry_run)
        clock_started = time.perf_counter()
        sides = (self.source, self.destination)
        horizons = [side.storage.change_horizon() for side in sides]  # before anything is read
        marks = (None, None) if sync_type == "full" else self._marks([numbering for numbering, _ in horizons])
        directions = self._directions(sync_type)
        writes = self._plan(directions, dict(zip(sides, marks, strict=True)), filters, conflict_resolution, report)
        if not dry_run:
            with jobs.recorded(
                self.source.storage, self.source.clock, self.kind, report.sync_id, total=len(writes)
            ) as progress:
                written = []
                for done, write in enumerate(writes, start=1):
                    if self._apply(write, actor, report):
                        written.append(write)
                    if on_progress is not None:
                        on_progress(done, len(writes))
                    if done % 100 == 0:
                        progress.advance(done)
                for side in (self.source, self.destination):
                    landed = [w.memory for w in written if w.side is side]
                    self._carry_vectors(side, landed)
                    side.embed_pending()
                    if len(landed) >= BULK_WRITE:
                        side.storage.refresh_statistics()
                origins = {origin for origin, _ in directions}
                self._set_marks([
                    (numbering, self._new_mark(side, start if side in origins else mark, written))
                    for side, (numbering, start), mark in zip(sides, horizons, marks, strict=True)
                ])  # fmt: skip
                progress.report.update(created=report.created, updated=report.updated, deleted=report.deleted)
        report.completed_at = self.source.clock.now()
        report.duration_ms = round((time.perf_counter() - clock_started) * 1000, 1)
        return report

    # -- planning --------------------------------------------------------------------------
    def _directions(self, sync_type: str) -> list[tuple[MemoryService, MemoryService]]:
        """(origin, target): where changes are read, where they are written."""
        return {
            "pull": [(self.destination, self.source)],
            "bidirectional": [(self.source, self.destination), (self.destination, self.source)],
        }.get(sync_type, [(self.source, self.destination)])

    def _plan(
        self,
        directions: list[tuple[MemoryService, MemoryService]],
        marks: dict[MemoryService, int | None],
        filters: SyncFilters,
        resolution: str,
        report: SyncReport,
    ) -> list[Write]:
        """``marks``: each side's number it is unread from (None: every memory is new to the pair)."""
        writes: dict[tuple[int, str], Write] = {}
        conflicts: list[dict[str, str]] = []
        for origin, target in directions:
            mark = marks[target]
            changed_there = None if mark is None else target.storage.changed_from(mark)
            for memory in self._changed(origin, marks[origin], filters):
                report.checked += 1
                if memory.status is Status.ARCHIVED and memory.archive_tier not in (None, "cold"):
                    report.skipped += 1
                    continue
                current = target.storage.get(memory.id)
                if current is None:
                    if memory.status is Status.FORGOTTEN:
                        report.skipped += 1  # nothing to delete there
                    else:
                        writes[(id(target), memory.id)] = Write(target, memory, None)
                    continue
                if state(current) == state(memory):
                    continue
                if changed_there is not None and memory.id not in changed_there:
                    writes[(id(target), memory.id)] = Write(target, memory, current)
                    continue
                if (id(origin), memory.id) in writes or any(c["memory_id"] == memory.id for c in conflicts):
                    continue  # the same conflict, seen from the other side
                conflicts.append(self._resolve(memory, current, origin, target, resolution, writes))
        report.conflicts = len(conflicts)
        if resolution == "manual" and conflicts:
            raise SyncConflicts(
                f"{len(conflicts)} memories changed on both sides since the last sync; nothing was "
                "applied: resolve them, or choose a conflict_resolution",
                conflicts=[c["memory_id"] for c in conflicts],
            )
        report.conflicts_resolved = len(conflicts)
        report.conflicts_handled = conflicts
        return list(writes.values())

    def _resolve(
        self,
        mine: Memory,
        theirs: Memory,
        origin: MemoryService,
        target: MemoryService,
        resolution: str,
        writes: dict[tuple[int, str], Write],
    ) -> dict[str, str]:
        """Decide one conflict (``mine`` from origin, ``theirs`` on target); queue what it writes."""
        origin_is_source = origin is self.source
        if resolution == "newest_wins":
            origin_wins = mine.updated_at >= theirs.updated_at
        elif resolution in ("source_wins", "destination_wins"):
            origin_wins = origin_is_source == (resolution == "source_wins")
        else:  # merge: the newest content, every tag of both, on both sides; the other content stays in history
            newest, other = (mine, theirs) if mine.updated_at >= theirs.updated_at else (theirs, mine)
            merged = newest.evolve(tags=tuple(dict.fromkeys(newest.tags + other.tags)))
            writes[(id(target), mine.id)] = Write(target, merged, theirs)
            writes[(id(origin), mine.id)] = Write(origin, merged, mine)
            return {"memory_id": mine.id, "resolution": "merge", "winner": "merged"}
        winner, loser_side, loser = (mine, target, theirs) if origin_wins else (theirs, origin, mine)
        writes[(id(loser_side), mine.id)] = Write(loser_side, winner, loser)
        winner_is_source = origin_wins == origin_is_source
        return {
            "memory_id": mine.id,
            "resolution": resolution,
            "winner": "source" if winner_is_source else "destination",
        }

    @staticmethod
    def _changed(side: MemoryService, mark: int | None, filters: SyncFilters) -> list[Memory]:
        query = Filters(
            now=side.clock.now(),
            statuses=None,
            include_expired=True,
            visible_to=None,
            categories=filters.categories,
            user_id=filters.user_id,
            conversation_id=filters.conversation_id,
            updated_after=filters.modified_since,
            changed_from=mark,
        )
        found: list[Memory] = []
        after: Position | None = None
        sort = Sort(SortField.UPDATED_AT, descending=False)
        while page := side.storage.select(query, sort, PAGE, after=after):
            found.extend(m for m, _ in page)
            after = page[-1][1]
        return found

    # -- applying --------------------------------------------------------------------------
    def _apply(self, write: Write, actor: str, report: SyncReport) -> bool:
        side, memory, current = write.side, write.memory, write.current
        carried = {name: getattr(memory, name) for name in CARRIED}
        try:
            if current is None:
                made = replace(memory, entry_number=None, access_count=0, version=1, store=side.storage.name)
                change = side.change(made, "sync", actor, f"created by sync from {self._other(side)}")
                side.storage.insert(made, change, numbered=memory.agent_name is not None)
                report.created += 1
                return True
            moved = current.evolve(**carried, version=current.version + 1)
            if moved.content != current.content:  # its vector is the old content's: carried or embedded below
                side.drop_vectors([current.id])
            action = (
                "forget" if memory.status is Status.FORGOTTEN and current.status is not Status.FORGOTTEN else "sync"
            )
            side.storage.save(
                [(moved, side.change(moved, action, actor, f"synced from {self._other(side)}", previous=current))]
            )
            report.deleted += action == "forget"
            report.updated += action == "sync"
            return True
        except Exception as error:  # one memory's failure is counted; the rest goes on
            report.errors += 1
            report.conflicts_handled.append({"memory_id": memory.id, "resolution": "error", "winner": str(error)})
            return False

    def _carry_vectors(self, side: MemoryService, written: list[Memory]) -> None:
        """Give the memories written to ``side`` (as written) the other store's vectors of the same
        content, when both stores' vectors are the model's that ``side`` embeds with: embedding them
        again would be most of a sync's time (2,000 new memories: 12.7 of 15.0 s)."""
        other = self.destination if side is self.source else self.source
        model = side.embedder.name if side.embedder is not None else None
        if model is None or side.storage.vector_model() != model or other.storage.vector_model() != model:
            return
        embedded = [m for m in written if m.status in (Status.ACTIVE, Status.ARCHIVED)]
        for start in range(0, len(embedded), PAGE):
            chunk = embedded[start : start + PAGE]
            there = {m.id: m.content for m in other.storage.get_many([m.id for m in chunk])}
            same = [m.id for m in chunk if there.get(m.id) == m.content]
            side.storage.put_vectors(list(other.storage.vectors_of(same).items()))

    @property
    def kind(self) -> str:
        """The job kind of this pair's syncs (one runs at a time)."""
        return f"sync {self.names[0]} <-> {self.names[1]}"

    def _other(self, side: MemoryService) -> str:
        return self.names[0] if side is self.destination else self.names[1]

    # -- the pair's marks and lock ---------------------------------------------------------------
    def _settings(self, prefix: str) -> list[str | None]:
        """The pair's setting of this kind in each store (each names the other)."""
        return [self.source.storage.read_setting(prefix + self.ids[1]),
                self.destination.storage.read_setting(prefix + self.ids[0])]  # fmt: skip

    def _marks(self, numberings: list[str]) -> tuple[int | None, int | None]:
        """From which number each side is unread. Both stores must agree that a sync completed: a
        store restored from an older backup holds older marks (the lower of the two is read from); a
        side numbered otherwise than the marks say (copied, or restored into another cluster) is
        read whole. A pair last synced before changes were numbered reads from its watermark's
        time, as numbered by the migration."""
        records = self._settings(MARKS)
        if None not in records:
            held = [json.loads(record or "") for record in records]

            def unread_from(side: str, numbering: str) -> int | None:
                agreed = all(r[side][0] == numbering and r[side][1] is not None for r in held)
                return min(r[side][1] for r in held) if agreed else None

            return unread_from(self.ids[0], numberings[0]), unread_from(self.ids[1], numberings[1])
        older = self._settings(OLD_WATERMARK)
        if None in older:
            return None, None
        since = min(datetime.fromisoformat(at or "") for at in older)
        return self.source.storage.first_change_after(since), self.destination.storage.first_change_after(since)

    def _new_mark(self, side: MemoryService, start: int | None, written: list[Write]) -> int | None:
        """From where the next sync reads ``side``: ``start`` (what this one read of it: its horizon
        then, for a side changes were read from), past this sync's own writes there, which the
        other side holds already, but not past another writer's change, nor a transaction running."""
        if start is None:
            return None
        _, horizon = side.storage.change_horizon()  # first: a change committed after it is numbered above
        ours = {w.memory.id: w.memory for w in written if w.side is side}
        changed = side.storage.changed_from(start)
        held = {m.id: m for m in side.storage.get_many([i for i in changed if i in ours])}
        others = [n for i, n in changed.items() if i not in held or state(held[i]) != state(ours[i])]
        return min([horizon, *others])

    def _set_marks(self, marks: list[tuple[str, int | None]]) -> None:
        record = json.dumps(dict(zip(self.ids, marks, strict=True)))
        self.source.storage.write_setting(MARKS + self.ids[1], record)
        self.destination.storage.write_setting(MARKS + self.ids[0], record)

    def _refuse_if_running(self, own_job: str | None = None) -> None:
        kind = self.kind
        jobs.close_abandoned(self.source.storage, self.source.clock)  # a killed sync does not hold the pair
        running = [j for j in self.source.storage.running_jobs() if j.kind == kind and j.id != own_job]
        if running:
            raise SyncInProgress(
                f"a sync of {self.names[0]} and {self.names[1]} is running (job {running[0].id})", job_id=running[0].id
            )


def run_sync(
    service: MemoryService,
    source: str = "local",
    destination: str = "cloud",
    *,
    background: bool = False,
    **options: Any,
) -> SyncReport:
    """Sync two locations by name: ``local`` (or the store's own name) is ``service``'s store, any
    other a store of the registry. In the background the report comes back at once (its sync_id is
    the job to read); the work goes on in a thread, as the caller."""
    opened: list[MemoryService] = []

    def located(name: str) -> MemoryService:
        if name in ("local", service.storage.name):
            return service
        if registry.is_path(name) and current() is not None:
            raise Forbidden(
                f"{name!r} is a path on the server's own disk: only a local caller may sync with one",
                field="destination",
            )
        if service.lifecycle.locations is None:
            raise InvalidInput(f"this store cannot reach other locations than local, not {name!r}", field="destination")
        other: MemoryService = service.lifecycle.locations(name)
        opened.append(other)
        return other

    def close() -> None:
        for other in opened:
            other.close()

    try:
        syncer = Syncer(located(source), located(destination), source, destination)
        if not background or options.get("dry_run"):  # a dry run writes nothing: it answers at once
            return syncer.sync(**options)
        syncer._refuse_if_running()  # 423 now, not in the background
    except BaseException:
        close()
        raise
    job_id = f"sync_{uuid.uuid4().hex[:12]}"
    # recorded before the thread starts: the caller may read mnemo://jobs/{sync_id} at once
    jobs.announce(syncer.source.storage, syncer.source.clock, syncer.kind, job_id)
    placeholder = SyncReport(
        job_id,
        options.get("sync_type", "incremental"),
        source,
        destination,
        service.clock.now(),
        dry_run=options.get("dry_run", False),
    )

    def work() -> None:
        try:
            syncer.sync(**options, job_id=job_id)
        except Exception:  # recorded as the job's failure; nobody waits on this thread
            log.exception("background sync %s failed", job_id)
        finally:
            close()

    context = contextvars.copy_context()  # the caller (and request id) go with the work
    context.run(LEASED_CALL.set, None)  # not the call's idempotency key: the call answers before the work ends
    threading.Thread(target=context.run, args=(work,), name=f"mnemo-{job_id}", daemon=True).start()
    return placeholder
