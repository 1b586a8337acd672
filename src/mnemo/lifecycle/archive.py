"""Archive memories into tiers and restore them (spec 004's archive_memory and restore_memory).

The tiers differ in where an archived memory's content is held:

- ``cold``: in the database as before, words and vector indexed; only left out of default recall
  and lists (like every archived memory).
- ``glacier``: compressed in its row (zlib), out of the word index; its vector is dropped unless
  ``retain_embeddings``.
- ``deep_archive``: out of the live database, in a compressed, checksummed archive file of the
  store (one per run, see ``archive_files``); out of both indexes unless its vector is retained.

Every archived memory stays listable (status ``archived``) with its metadata, so nothing is gone;
each move is a version in its history. Restoring brings the content back (``full`` and
``expedited``) or only the memory's status (``metadata_only``: active again, listed and filtered,
while its content stays in its tier until a full restore).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from mnemo import bounds
from mnemo.access import rules as access
from mnemo.access.caller import viewer
from mnemo.engine.service import MemoryService
from mnemo.errors import (
    AlreadyActive,
    AlreadyArchived,
    ArchiveQuotaExceeded,
    InvalidInput,
    MnemoError,
    NotFound,
    Unprocessable,
)
from mnemo.lifecycle import archive_files, jobs
from mnemo.lifecycle.settings import LifecycleSettings
from mnemo.model import Change, Memory, Status, canonical_category, new_id
from mnemo.query import Filters, Sort

log = logging.getLogger(__name__)

TIERS = ("cold", "glacier", "deep_archive")
RESTORE_MODES = ("full", "metadata_only", "expedited")
MAX_ARCHIVE_IDS = 1_000
MAX_RESTORE_IDS = 100
MAX_INACTIVE_DAYS = 36_500
SAVE_BATCH = 500  # memories written per transaction
# Restore time a tier is quoted at before this store has measured one (ms): cold is a row update,
# glacier adds decompression, deep_archive a file read and its checksum.
FIRST_RESTORE_ESTIMATE_MS = {"cold": 2.0, "glacier": 3.0, "deep_archive": 25.0}
GB = 1e9


@dataclass(frozen=True, slots=True)
class Criteria:
    """Spec 004's auto_archive_criteria; every criterion given must hold (active memories only)."""

    inactive_days: int | None = None
    low_importance: float | None = None
    categories: tuple[str, ...] | None = None
    before_date: datetime | None = None

    def filters(self, now: datetime) -> Filters:
        return Filters(
            now=now,
            accessed_before=None if self.inactive_days is None else now - timedelta(days=self.inactive_days),
            importance_below=self.low_importance,
            categories=self.categories,
            created_to=None if self.before_date is None else self.before_date - timedelta(microseconds=1),
            user_id=viewer(),  # criteria pick the caller's own memories: others' shared ones are not theirs to archive
            visible_to=viewer(),
        )


@dataclass(frozen=True, slots=True)
class Archived:
    memory_id: str
    archive_id: str | None  # None in a dry run
    tier: str
    archived_at: datetime
    retrieval_time_estimate_ms: float
    storage_cost_reduction: float  # share of the memory's bytes in the live database the tier takes out


@dataclass(frozen=True, slots=True)
class ArchiveResult:
    job_id: str
    archived: list[Archived]
    saved_bytes: int
    monthly_savings: float
    embeddings_retained: bool
    total_cost: float
    dry_run: bool


@dataclass(frozen=True, slots=True)
class Restored:
    memory_id: str
    archive_id: str | None
    restored_at: datetime
    mode: str
    embeddings_regenerated: bool
    restoration_time_ms: float


@dataclass(frozen=True, slots=True)
class RestoreResult:
    job_id: str
    restored: list[Restored]
    total_cost: float
    remaining_ms: float = 0.0  # expedited: the embeddings still being made in the background
    warnings: list[str] = field(default_factory=list)


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class Archiver:
    def __init__(self, service: MemoryService, settings: LifecycleSettings) -> None:
        self.service = service
        self.settings = settings

    # -- archive -------------------------------------------------------------------------
    def archive(
        self,
        memory_id: str | None = None,
        memory_ids: Sequence[str] | None = None,
        criteria: Criteria | None = None,
        *,
        tier: str = "cold",
        retain_embeddings: bool = False,
        reason: str | None = None,
        dry_run: bool = False,
        actor: str | None = None,
    ) -> ArchiveResult:
        """Move memories, named or matched by criteria, into a tier; dry_run only says what would move."""
        access.check_may_write()  # a reader is not told what would move, as a sync's dry run tells them nothing
        _one_of(memory_id=memory_id, memory_ids=memory_ids, auto_archive_criteria=criteria)
        if memory_id is not None:
            memory_ids = [memory_id]
        if tier not in TIERS:
            raise InvalidInput(f"archive_tier must be one of {', '.join(TIERS)}", field="archive_tier")
        bounds.fields(reason=reason)
        now = self.service.clock.now()
        targets = self._named(memory_ids) if memory_ids is not None else self._matching(criteria, now)
        job_id = new_id()
        archive_ids = {m.id: new_id() for m in targets}
        kept = {m.id: self._kept_bytes(m, tier) for m in targets}
        vector_bytes = 0 if retain_embeddings or tier == "cold" else 4 * self._dimension()
        saved = {m.id: _bytes(m.content) - kept[m.id] + vector_bytes if tier != "cold" else 0 for m in targets}
        estimate = self._restore_estimate_ms(tier)
        moved = [
            Archived(
                m.id, None if dry_run else archive_ids[m.id], tier, now, estimate,
                round(saved[m.id] / max(1, _bytes(m.content) + vector_bytes), 4),
            )
            for m in targets
        ]  # fmt: skip
        original = sum(_bytes(m.content) for m in targets)
        monthly = (original * self.settings.price("active") - sum(kept.values()) * self.settings.price(tier)) / GB
        result = ArchiveResult(
            job_id, moved, sum(saved.values()), round(monthly, 6), retain_embeddings or tier == "cold",
            0.0, dry_run,
        )  # fmt: skip
        if dry_run or not targets:
            return result
        self._check_quota(sum(kept.values()) if tier != "cold" else 0)
        why = f"archived to {tier}" + (f": {reason}" if reason else "") + f" (job {job_id})"
        storage, clock = self.service.storage, self.service.clock
        with jobs.recorded(storage, clock, f"archive to {tier}", job_id, total=len(targets)) as progress:
            reference = None
            if tier == "deep_archive":
                reference = archive_files.write(self._folder(), job_id, [(m.id, m.content) for m in targets])
            for start in range(0, len(targets), SAVE_BATCH):
                batch = targets[start : start + SAVE_BATCH]
                storage.save([self._moved(m, tier, archive_ids[m.id], reference, now, why, actor) for m in batch])
                progress.advance(start + len(batch))
            if tier != "cold" and not retain_embeddings:
                self.service.drop_vectors([m.id for m in targets])
            progress.report.update(archived=len(targets), storage_saved_bytes=result.saved_bytes)
        return result

    def _named(self, memory_ids: Sequence[str]) -> list[Memory]:
        ids = _ids(memory_ids, MAX_ARCHIVE_IDS)
        found = {m.id: m for m in self.service.storage.get_many(ids) if m.status is not Status.FORGOTTEN}
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(f"no memory with id {', '.join(missing)}", memory_ids=missing)
        archived = [i for i in ids if found[i].status is Status.ARCHIVED]
        if archived:
            raise AlreadyArchived(f"already archived: {', '.join(archived)}", memory_ids=archived)
        return [found[i] for i in ids]

    def _matching(self, criteria: Criteria | None, now: datetime) -> list[Memory]:
        assert criteria is not None
        if all(value is None for value in (criteria.inactive_days, criteria.low_importance, criteria.categories,
                                           criteria.before_date)):  # fmt: skip
            raise InvalidInput("auto_archive_criteria needs at least one criterion", field="auto_archive_criteria")
        if criteria.inactive_days is not None and not 1 <= criteria.inactive_days <= MAX_INACTIVE_DAYS:
            raise InvalidInput(f"inactive_days must be between 1 and {MAX_INACTIVE_DAYS:,}", field="inactive_days")
        if criteria.before_date is not None:
            criteria = replace(criteria, before_date=bounds.when("before_date", criteria.before_date))
            if criteria.before_date == bounds.MIN_TIME:  # nothing was made before the first moment mnemo keeps
                raise Unprocessable("no memory was created before 1970-01-01", criteria=_described(criteria))
        if criteria.categories is not None:
            bounds.listed("categories", criteria.categories, bounds.MAX_FILTER_VALUES, bounds.MAX_FILTER_CHARS)
            canonical = tuple(canonical_category(c).value for c in criteria.categories)
            criteria = Criteria(criteria.inactive_days, criteria.low_importance, canonical, criteria.before_date)
        found = [m for m, _ in self.service.storage.select(criteria.filters(now), Sort(), limit=None)]
        if not found:
            raise Unprocessable("no active memory meets the archival criteria", criteria=_described(criteria))
        return found

    @staticmethod
    def _kept_bytes(memory: Memory, tier: str) -> int:
        """Bytes of content the tier still holds for a memory: all (cold), compressed (glacier), the file's share."""
        if tier == "cold":
            return _bytes(memory.content)
        return len(zlib.compress(memory.content.encode("utf-8", "surrogatepass"), 9))

    def _moved(
        self, memory: Memory, tier: str, archive_id: str, reference: str | None, now: datetime, why: str,
        actor: str | None,
    ) -> tuple[Memory, Change]:  # fmt: skip
        moved = memory.evolve(
            status=Status.ARCHIVED, archive_tier=tier, archive_id=archive_id, archived_at=now,
            archive_file=reference, version=memory.version + 1, updated_at=now,
        )  # fmt: skip
        return moved, self.service.change(moved, "archive", actor, why, previous=memory)

    def _check_quota(self, adding: int) -> None:
        quota = self.settings.archive_quota_bytes
        if quota is None:
            return
        held = self.service.storage.packed_bytes() + archive_files.size(self._folder())
        if held + adding > quota:
            raise ArchiveQuotaExceeded(
                f"the archive holds {held:,} bytes; {adding:,} more would pass its quota of {quota:,}",
                quota_bytes=quota, held_bytes=held, needed_bytes=adding,
            )  # fmt: skip

    # -- restore -------------------------------------------------------------------------
    def restore(
        self,
        memory_id: str | None = None,
        archive_id: str | None = None,
        memory_ids: Sequence[str] | None = None,
        *,
        mode: str = "full",
        regenerate_embeddings: bool = True,
        reason: str | None = None,
        actor: str | None = None,
    ) -> RestoreResult:
        """Bring archived memories back; nothing is written unless every one of them can be restored."""
        if mode not in RESTORE_MODES:
            raise InvalidInput(f"restore_mode must be one of {', '.join(RESTORE_MODES)}", field="restore_mode")
        bounds.fields(reason=reason)
        _one_of(memory_id=memory_id, archive_id=archive_id, memory_ids=memory_ids)
        targets = self._restorable([memory_id] if memory_id is not None else memory_ids, archive_id, mode)
        job_id = new_id()
        with jobs.recorded(self.service.storage, self.service.clock, f"restore ({mode})", job_id,
                           total=len(targets)) as progress:  # fmt: skip
            result = self._restore(targets, job_id, mode, regenerate_embeddings, reason, actor)
            progress.advance(len(targets))
            progress.report.update(restored=len(targets), remaining_ms=result.remaining_ms)
        return result

    def _restore(self, targets: list[Memory], job_id: str, mode: str, regenerate_embeddings: bool,
                 reason: str | None, actor: str | None) -> RestoreResult:  # fmt: skip
        started = time.perf_counter()
        contents = self._archived_contents(targets) if mode != "metadata_only" else {}
        now = self.service.clock.now()
        why = f"restored ({mode})" + (f": {reason}" if reason else "")
        saved = []
        for m in targets:
            if mode == "metadata_only":
                back = m.evolve(status=Status.ACTIVE, version=m.version + 1, updated_at=now)
            else:
                back = m.evolve(
                    status=Status.ACTIVE, content=contents.get(m.id, m.content), archive_tier=None, archive_id=None,
                    archived_at=None, archive_file=None, version=m.version + 1, updated_at=now,
                )  # fmt: skip
            saved.append((back, self.service.change(back, "restore", actor, why, previous=m)))
        self.service.storage.save(saved)
        files = {m.archive_file for m in targets if m.archive_file and mode != "metadata_only"}
        if files:
            archive_files.discard_unused(self._folder(), files, self.service.storage.archive_files_in_use())
        restored_memories = [back for back, _ in saved]
        embedded, remaining = self._embed_restored(restored_memories, mode, regenerate_embeddings)
        elapsed_ms = (time.perf_counter() - started) * 1000
        each_ms = elapsed_ms / max(1, len(targets))
        for tier in {m.archive_tier or "cold" for m in targets}:
            self._record_restore_ms(tier, each_ms)
        restored_bytes = sum(_bytes(m.content) for m in restored_memories)
        return RestoreResult(
            job_id,
            [Restored(m.id, m.archive_id, now, mode, m.id in embedded, round(each_ms, 3)) for m in targets],
            round(restored_bytes / GB * self.settings.price("restore"), 6),
            remaining,
        )

    def _restorable(self, memory_ids: Sequence[str] | None, archive_id: str | None, mode: str) -> list[Memory]:
        storage = self.service.storage
        if archive_id is not None:
            bounds.text("archive_id", archive_id, bounds.MAX_ID_CHARS)
            filters = Filters(now=self.service.clock.now(), statuses=None, archive_ids=(archive_id,),
                              include_expired=True, visible_to=viewer())  # fmt: skip
            found = [m for m, _ in storage.select(filters, Sort(), limit=1)]
            if not found:
                raise NotFound(f"no archive with id {archive_id}", archive_id=archive_id)
            targets = found
        else:
            ids = _ids(memory_ids or (), MAX_RESTORE_IDS)
            by_id = {m.id: m for m in storage.get_many(ids) if m.status is not Status.FORGOTTEN}
            missing = [i for i in ids if i not in by_id]
            if missing:
                raise NotFound(f"no memory with id {', '.join(missing)}", memory_ids=missing)
            targets = [by_id[i] for i in ids]
        active = [m.id for m in targets if m.status is not Status.ARCHIVED and (mode == "metadata_only" or
                                                                                 m.archive_tier is None)]  # fmt: skip
        if active:
            raise AlreadyActive(f"already active: {', '.join(active)}", memory_ids=active)
        return targets

    def _archived_contents(self, targets: Sequence[Memory]) -> dict[str, str]:
        """The content of deep-archived memories, read and checked before anything is written."""
        contents: dict[str, str] = {}
        for reference in sorted({m.archive_file for m in targets if m.archive_file}):
            held = archive_files.read(self._folder(), reference)
            contents.update(held)
        lost = [m.id for m in targets if m.archive_tier == "deep_archive" and m.id not in contents]
        if lost:
            raise Unprocessable(f"the archive holds no content for {', '.join(lost)}", memory_ids=lost)
        return contents

    def _embed_restored(self, memories: list[Memory], mode: str, regenerate: bool) -> tuple[set[str], float]:
        """Vectors for restored memories that lost theirs: now (full), or in the background (expedited)."""
        if mode == "metadata_only" or not regenerate or self.service.embedder is None:
            return set(), 0.0
        unembedded = {m.id for m in self.service.storage.unembedded(len(memories) + 1_000)}
        needing = [m for m in memories if m.id in unembedded]
        if not needing:
            return set(), 0.0
        if mode == "expedited":  # searchable by words at once; by meaning when this thread is done
            threading.Thread(target=self._embed_pending, name="mnemo-restore-embed", daemon=True).start()
            return set(), round(3.0 * len(needing), 1)  # ~3 ms an embedding on this machine kind
        self.service.embed_pending()
        return {m.id for m in needing}, 0.0

    def _embed_pending(self) -> None:
        """Embed what waits for a vector, on a thread nobody waits on: a store closed meanwhile (the
        server stopping) or a failing model leaves the rest to the next start's warm-up."""
        try:
            self.service.embed_pending()
        except MnemoError as exc:
            log.warning("restored memories left to embed at the next start: %s", exc.message)

    # -- measured facts ------------------------------------------------------------------
    def _restore_estimate_ms(self, tier: str) -> float:
        stored = self.service.storage.read_setting(f"restore_ms:{tier}")
        if stored is None:
            return FIRST_RESTORE_ESTIMATE_MS[tier]
        return round(float(json.loads(stored)["mean"]), 3)

    def _record_restore_ms(self, tier: str, ms: float) -> None:
        """A running mean of the restore time per memory, per tier, kept in the store."""
        key = f"restore_ms:{tier}"
        stored = self.service.storage.read_setting(key)
        count, mean = (0, 0.0) if stored is None else (json.loads(stored)["count"], json.loads(stored)["mean"])
        count += 1
        mean += (ms - mean) / count
        self.service.storage.write_setting(key, json.dumps({"count": count, "mean": mean}))

    def _dimension(self) -> int:
        return self.service.embedder.dimension if self.service.embedder is not None else 0

    def _folder(self) -> Path:
        if self.settings.folder is None:
            raise Unprocessable("this store has no folder for archive files")
        return self.settings.folder


def _ids(memory_ids: Sequence[str], most: int) -> list[str]:
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        raise InvalidInput("memory_ids must name at least one memory", field="memory_ids")
    bounds.listed("memory_ids", ids, most, bounds.MAX_ID_CHARS)
    return ids


def _one_of(**given: object) -> None:
    """Exactly one of these arguments (the spec's oneOf)."""
    named = [name for name, value in given.items() if value is not None]
    if len(named) != 1:
        raise InvalidInput(f"give exactly one of {', '.join(given)}; got {', '.join(named) or 'none'}", given=named)


def _described(criteria: Criteria) -> dict[str, object]:
    return {
        k: v.isoformat() if isinstance(v, datetime) else v
        for k, v in (
            ("inactive_days", criteria.inactive_days),
            ("low_importance", criteria.low_importance),
            ("categories", list(criteria.categories) if criteria.categories else None),
            ("before_date", criteria.before_date),
        )
        if v is not None
    }
