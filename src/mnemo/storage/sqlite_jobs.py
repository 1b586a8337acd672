"""SQL of the jobs table, over one connection."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from mnemo.model import to_iso
from mnemo.storage import Job

_COLUMNS = "id, kind, status, started_at, ended_at, done, total, detail, error, host, pid, owner"


def put_job(db: sqlite3.Connection, job: Job) -> None:
    db.execute(
        f"INSERT OR REPLACE INTO jobs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            job.id,
            job.kind,
            job.status,
            to_iso(job.started_at),
            to_iso(job.ended_at) if job.ended_at else None,
            job.done,
            job.total,
            job.detail,
            job.error,
            job.host,
            job.pid,
            job.owner,
        ),
    )


def _job(row: tuple) -> Job:  # type: ignore[type-arg]
    job_id, kind, status, started, ended, done, total, detail, error, host, pid, owner = row
    return Job(
        job_id,
        kind,
        status,
        datetime.fromisoformat(started),
        host,
        pid,
        datetime.fromisoformat(ended) if ended else None,
        done,
        total,
        detail,
        error,
        owner,
    )


def get_job(db: sqlite3.Connection, job_id: str) -> Job | None:
    row = db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return None if row is None else _job(row)


def recent_jobs(db: sqlite3.Connection, limit: int) -> list[Job]:
    return [_job(r) for r in db.execute(f"SELECT {_COLUMNS} FROM jobs ORDER BY started_at DESC LIMIT ?", (limit,))]


def running_jobs(db: sqlite3.Connection) -> list[Job]:
    return [_job(r) for r in db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE status = 'running'")]
