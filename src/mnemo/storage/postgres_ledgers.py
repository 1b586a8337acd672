"""SQL of the request ledgers (rate counts, idempotent calls) and of jobs, over one PostgreSQL
connection inside the caller's transaction. The same rules as sqlite_requests and sqlite_jobs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import psycopg

from mnemo.bounds import as_utc
from mnemo.storage import IdempotentCall, Job

_JOB_COLUMNS = "id, kind, status, started_at, ended_at, done, total, detail, error, host, pid, owner"


def count_request(db: psycopg.Connection, principal: str, bucket: str, window: int) -> int:
    """Add one request to the caller's count of this window; the count after it. Older windows go."""
    db.execute(
        'DELETE FROM request_counts WHERE principal = %s AND bucket = %s AND "window" < %s', (principal, bucket, window)
    )
    row = db.execute(
        'INSERT INTO request_counts VALUES (%s, %s, %s, 1) ON CONFLICT (principal, bucket, "window")'
        " DO UPDATE SET count = request_counts.count + 1 RETURNING count",
        (principal, bucket, window),
    ).fetchone()
    assert row is not None
    return int(row[0])


def begin_idempotent(
    db: psycopg.Connection, principal: str, key: str, request_sha256: str, holder: str, at: datetime,
    lease_until: datetime, forget_before: datetime,
) -> IdempotentCall | None:  # fmt: skip
    """The call already made under this key, answered, applied or still leased (None: there was none,
    or it wrote nothing and its lease ran out by ``at``, and this one is now recorded as running under
    ``holder``)."""
    db.execute("DELETE FROM idempotent_calls WHERE created_at < %s", (forget_before,))
    # One statement takes a new key or an unanswered, unapplied one whose lease ran out. Two servers
    # at once: one writes the row, the other waits on it and then finds its lease live. A write that
    # marks the key applied holds its row: a takeover waits for it and then sees the mark.
    taken = db.execute(
        "INSERT INTO idempotent_calls (principal, key, request_sha256, created_at, holder, lease_until)"
        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (principal, key) DO UPDATE SET"
        " request_sha256 = excluded.request_sha256, created_at = excluded.created_at, holder = excluded.holder,"
        " lease_until = excluded.lease_until WHERE idempotent_calls.answer IS NULL"
        " AND idempotent_calls.applied_to IS NULL"
        " AND (idempotent_calls.lease_until IS NULL OR idempotent_calls.lease_until <= %s) RETURNING 1",
        (principal, key, request_sha256, at, holder, lease_until, at),
    ).fetchone()
    if taken is not None:
        return None
    row = db.execute(
        "SELECT request_sha256, answer, lease_until, applied_to FROM idempotent_calls"
        " WHERE principal = %s AND key = %s",
        (principal, key),
    ).fetchone()
    assert row is not None
    return IdempotentCall(row[0], row[1], row[2] and as_utc(row[2]), row[3])


def renew_idempotent(
    db: psycopg.Connection, holder: str, calls: Sequence[tuple[str, str]], lease_until: datetime
) -> None:
    db.cursor().executemany(
        "UPDATE idempotent_calls SET lease_until = %s"
        " WHERE principal = %s AND key = %s AND holder = %s AND answer IS NULL",
        [(lease_until, principal, key, holder) for principal, key in calls],
    )


def end_idempotent(db: psycopg.Connection, principal: str, key: str, holder: str, answer: str | None) -> None:
    """Keep the answer of the call; None: it gave none to keep, so a retry may run it again, unless
    it was applied (then its lease ends: a retry learns that)."""
    if answer is None:
        db.execute(
            "DELETE FROM idempotent_calls WHERE principal = %s AND key = %s AND holder = %s AND answer IS NULL"
            " AND applied_to IS NULL",
            (principal, key, holder),
        )
        db.execute(
            "UPDATE idempotent_calls SET lease_until = NULL WHERE principal = %s AND key = %s AND holder = %s"
            " AND answer IS NULL",
            (principal, key, holder),
        )
    else:
        db.execute(
            "UPDATE idempotent_calls SET answer = %s WHERE principal = %s AND key = %s AND holder = %s",
            (answer, principal, key, holder),
        )


def put_job(db: psycopg.Connection, job: Job) -> None:
    db.execute(
        f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, status = excluded.status,"
        " started_at = excluded.started_at, ended_at = excluded.ended_at, done = excluded.done,"
        " total = excluded.total, detail = excluded.detail, error = excluded.error, host = excluded.host,"
        " pid = excluded.pid, owner = excluded.owner",
        (job.id, job.kind, job.status, job.started_at, job.ended_at, job.done, job.total, job.detail, job.error,
         job.host, job.pid, job.owner),
    )  # fmt: skip


def _job(row: tuple) -> Job:  # type: ignore[type-arg]
    job_id, kind, status, started, ended, done, total, detail, error, host, pid, owner = row
    return Job(job_id, kind, status, as_utc(started), host, pid, ended and as_utc(ended), done, total, detail, error,
               owner)  # fmt: skip


def get_job(db: psycopg.Connection, job_id: str) -> Job | None:
    row = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = %s", (job_id,)).fetchone()
    return None if row is None else _job(row)


def recent_jobs(db: psycopg.Connection, limit: int) -> list[Job]:
    rows = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs ORDER BY started_at DESC LIMIT %s", (limit,))
    return [_job(r) for r in rows]


def running_jobs(db: psycopg.Connection) -> list[Job]:
    return [_job(r) for r in db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE status = 'running'")]
