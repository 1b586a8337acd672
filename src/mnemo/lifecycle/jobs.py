"""Durable records of long operations: an archive or restore run, an import, a re-embedding.

``recorded(...)`` writes the job as running before the work starts, its progress as it goes, and
how it ended (succeeded with what it reports, or failed with why). The record lives in the store,
so any process of the store can read it by id (``mnemo jobs ID``, the MCP resource
``mnemo://jobs/{id}``). A job left running by a process that ended (killed, crashed) is marked
failed with that reason when a server of the store next starts (``close_abandoned``): the store's
own operations are transactions, so such a job either did all of a step or none of it.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from mnemo.access.caller import user_id
from mnemo.clock import Clock
from mnemo.errors import NotFound
from mnemo.model import new_id, to_iso
from mnemo.storage import Job, Storage

RUNNING, SUCCEEDED, FAILED = "running", "succeeded", "failed"


@dataclass
class Progress:
    """Handed to the running operation: report how far it is, and what it has to say at the end."""

    job: Job
    storage: Storage
    report: dict[str, Any]

    def advance(self, done: int, total: int | None = None) -> None:
        self.job = replace(self.job, done=done, total=total if total is not None else self.job.total)
        self.storage.put_job(self.job)


@contextmanager
def recorded(
    storage: Storage, clock: Clock, kind: str, job_id: str | None = None, total: int | None = None
) -> Iterator[Progress]:
    job = Job(job_id or new_id(), kind, RUNNING, clock.now(), socket.gethostname(), os.getpid(), total=total,
              owner=user_id())  # fmt: skip
    storage.put_job(job)
    progress = Progress(job, storage, {})
    try:
        yield progress
    except BaseException as error:
        storage.put_job(
            replace(progress.job, status=FAILED, ended_at=clock.now(), error=str(error) or type(error).__name__)
        )
        raise
    storage.put_job(
        replace(progress.job, status=SUCCEEDED, ended_at=clock.now(), detail=json.dumps(progress.report, default=str))
    )


def announce(storage: Storage, clock: Clock, kind: str, job_id: str) -> None:
    """Record a job as running before the thread that runs it (and records it again) has started."""
    storage.put_job(Job(job_id, kind, RUNNING, clock.now(), socket.gethostname(), os.getpid(), owner=user_id()))


def close_abandoned(storage: Storage, clock: Clock) -> int:
    """Mark failed the running jobs of this machine whose process is gone; how many."""
    here = socket.gethostname()
    closed = 0
    for job in storage.running_jobs():
        if job.host == here and not _alive(job.pid):
            reason = f"interrupted: its process ({job.pid}) ended before the job finished"
            storage.put_job(replace(job, status=FAILED, ended_at=clock.now(), error=reason))
            closed += 1
    return closed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def shown(job: Job) -> dict[str, Any]:
    """A job as the CLI and the MCP resource show it."""
    return {
        "job_id": job.id,
        "kind": job.kind,
        "status": job.status,
        "started_at": to_iso(job.started_at),
        "ended_at": to_iso(job.ended_at) if job.ended_at else None,
        "progress": {"done": job.done, "total": job.total},
        "result": json.loads(job.detail),
        "error": job.error,
    }


def find(storage: Storage, job_id: str) -> Job:
    job = storage.get_job(job_id)
    if job is None:
        raise NotFound(f"no job {job_id!r} in store {storage.name!r}", job_id=job_id)
    return job
