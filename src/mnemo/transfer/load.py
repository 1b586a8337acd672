"""Import many memories at once: embedded in batches, each stored by the engine's own rules.

Every record is stored by ``MemoryService.store_many`` (the same validation, duplicate detection
and access rules as any write), with its vector computed beforehand with the others of its batch:
the model runs once per batch instead of once per memory, which is most of a store's time, and on
a worker thread while the batch before is stored; each batch's writes are one transaction. A record
the engine refuses is counted with its reason and the import goes on; an exact or near duplicate
(same content, or same meaning, for the same user and subject, or an id already held) is skipped,
so running the same import twice adds nothing the second time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass, field
from itertools import islice

from mnemo.embed import BULK_TEXTS, Vectors
from mnemo.engine.results import StoreResult
from mnemo.engine.service import MemoryService
from mnemo.errors import EmbeddingError, MnemoError
from mnemo.lifecycle import jobs
from mnemo.storage import BULK_WRITE
from mnemo.transfer.formats import Record, Unreadable

BATCH = BULK_TEXTS  # records read, embedded and stored (one transaction) at a time
MAX_EXAMPLES = 5  # rejected records named per reason in the summary


@dataclass
class ImportSummary:
    job_id: str = ""
    imported: int = 0
    duplicates: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def reject(self, where: str, reason: str) -> None:
        self.rejected[reason] += 1
        named = self.examples.setdefault(reason, [])
        if len(named) < MAX_EXAMPLES:
            named.append(where)


def load(
    service: MemoryService,
    records: Iterable[Record | Unreadable],
    progress: Callable[[int], None] = lambda done: None,
    actor: str = "mnemo-import",
    total: int | None = None,
) -> ImportSummary:
    """Store the records; ``progress`` hears how many were read so far (of ``total``, if known)."""
    with jobs.recorded(service.storage, service.clock, "import", total=total) as job:
        summary = ImportSummary(job_id=job.job.id)

        def advanced(done: int) -> None:
            progress(done)
            job.advance(done)

        _load(service, records, summary, advanced, actor)
        if summary.imported >= BULK_WRITE:
            service.storage.refresh_statistics()
        job.report.update(
            imported=summary.imported, duplicates=summary.duplicates, rejected=sum(summary.rejected.values())
        )
    return summary


def _load(
    service: MemoryService,
    records: Iterable[Record | Unreadable],
    summary: ImportSummary,
    progress: Callable[[int], object],
    actor: str,
) -> None:
    items = iter(records)
    done = 0
    # The model embeds the next batch on a worker while this thread stores the current one:
    # onnxruntime releases the GIL, so on two cores the two costs overlap instead of adding up.
    # The worker runs in this thread's context: its reads see what the running call's caller may see.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-import-embed") as model:
        upcoming = model.submit(copy_context().run, _prepared, service, list(islice(items, BATCH)))
        while (batch := upcoming.result()).size:
            upcoming = model.submit(copy_context().run, _prepared, service, list(islice(items, BATCH)))
            for bad in batch.unreadable:
                summary.reject(bad.where, bad.reason)
            summary.duplicates += batch.held
            _store(service, batch, summary, actor)  # one transaction a batch
            done += batch.size
            progress(done)


@dataclass
class _Batch:
    size: int  # the records read, 0 at the end of the input
    records: list[Record]  # to store, with their vectors if the model made them (else None)
    vectors: list[Vectors | None] | None
    held: int  # records whose id the store already holds (a re-import of an export)
    unreadable: list[Unreadable]


def _prepared(service: MemoryService, batch: list[Record | Unreadable]) -> _Batch:
    readable = [r for r in batch if isinstance(r, Record)]
    held = _held_ids(service, readable)  # nothing to embed for these
    records = [r for r in readable if r.arguments.get("memory_id") not in held]
    vectors = service.embed_many([r.arguments.get("content") for r in records])
    return _Batch(
        len(batch), records, vectors, len(readable) - len(records), [r for r in batch if isinstance(r, Unreadable)]
    )


def _store(service: MemoryService, batch: _Batch, summary: ImportSummary, actor: str) -> None:
    outcomes = service.store_many(
        [record.arguments for record in batch.records], batch.vectors, actor=actor, reason="import"
    )
    for record, outcome in zip(batch.records, outcomes, strict=True):
        if isinstance(outcome, StoreResult):
            if outcome.existing:
                summary.duplicates += 1
            else:
                summary.imported += 1
        elif isinstance(outcome, EmbeddingError):
            summary.imported += 1  # stored; it is embedded later (embed_pending)
        elif isinstance(outcome, MnemoError):
            summary.reject(record.where, outcome.message)
        else:  # a field of the wrong type in the file
            summary.reject(record.where, f"malformed record: {outcome}")


def _held_ids(service: MemoryService, records: list[Record]) -> set[str]:
    ids = [r.arguments["memory_id"] for r in records if isinstance(r.arguments.get("memory_id"), str)]
    return {m.id for m in service.storage.get_many(ids)} if ids else set()
