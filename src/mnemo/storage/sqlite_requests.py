"""SQL of the request ledgers (rate counts, idempotent calls) over one connection inside a transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from mnemo.model import from_iso, to_iso
from mnemo.storage import IdempotentCall


def count_request(db: sqlite3.Connection, principal: str, bucket: str, window: int) -> int:
    """Add one request to the caller's count of this window; the count after it. Older windows go."""
    db.execute("DELETE FROM request_counts WHERE principal = ? AND bucket = ? AND window < ?",
               (principal, bucket, window))  # fmt: skip
    row = db.execute(
        "INSERT INTO request_counts VALUES (?, ?, ?, 1) ON CONFLICT (principal, bucket, window)"
        " DO UPDATE SET count = count + 1 RETURNING count",
        (principal, bucket, window),
    ).fetchone()
    return int(row[0])


def begin_idempotent(
    db: sqlite3.Connection, principal: str, key: str, request_sha256: str, holder: str, at: datetime,
    lease_until: datetime, forget_before: datetime,
) -> IdempotentCall | None:  # fmt: skip
    """The call already made under this key, answered, applied or still leased (None: there was none,
    or it wrote nothing and its lease ran out by ``at``, and this one is now recorded as running under
    ``holder``)."""
    db.execute("DELETE FROM idempotent_calls WHERE created_at < ?", (to_iso(forget_before),))
    # One statement takes a new key or an unanswered, unapplied one whose lease ran out: of two
    # retries, one wins.
    taken = db.execute(
        "INSERT INTO idempotent_calls (principal, key, request_sha256, created_at, holder, lease_until)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (principal, key) DO UPDATE SET"
        " request_sha256 = excluded.request_sha256, created_at = excluded.created_at, holder = excluded.holder,"
        " lease_until = excluded.lease_until WHERE answer IS NULL AND applied_to IS NULL"
        " AND (lease_until IS NULL OR lease_until <= ?) RETURNING 1",
        (principal, key, request_sha256, to_iso(at), holder, to_iso(lease_until), to_iso(at)),
    ).fetchone()
    if taken is not None:
        return None
    row = db.execute(
        "SELECT request_sha256, answer, lease_until, applied_to FROM idempotent_calls WHERE principal = ? AND key = ?",
        (principal, key),
    ).fetchone()
    return IdempotentCall(row[0], row[1], row[2] and from_iso(row[2]), row[3])


def renew_idempotent(
    db: sqlite3.Connection, holder: str, calls: Sequence[tuple[str, str]], lease_until: datetime
) -> None:
    """Lease the keys (principal, key) of the calls ``holder`` runs until then, those it still holds."""
    db.cursor().executemany(
        "UPDATE idempotent_calls SET lease_until = ? WHERE principal = ? AND key = ? AND holder = ? AND answer IS NULL",
        [(to_iso(lease_until), principal, key, holder) for principal, key in calls],
    )


def end_idempotent(db: sqlite3.Connection, principal: str, key: str, holder: str, answer: str | None) -> None:
    """Keep the answer of the call; None: it gave none to keep, so a retry may run it again, unless
    it was applied (then its lease ends: a retry learns that). Nothing if another call took the key
    over (this one's lease had run out)."""
    if answer is None:
        db.execute("DELETE FROM idempotent_calls WHERE principal = ? AND key = ? AND holder = ? AND answer IS NULL"
                   " AND applied_to IS NULL", (principal, key, holder))  # fmt: skip
        db.execute("UPDATE idempotent_calls SET lease_until = NULL WHERE principal = ? AND key = ? AND holder = ?"
                   " AND answer IS NULL", (principal, key, holder))  # fmt: skip
    else:
        db.execute("UPDATE idempotent_calls SET answer = ? WHERE principal = ? AND key = ? AND holder = ?",
                   (answer, principal, key, holder))  # fmt: skip
