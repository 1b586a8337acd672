"""SQL of the request ledgers (rate counts, idempotent calls) over one connection inside a transaction."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from mnemo.model import to_iso
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
    db: sqlite3.Connection, principal: str, key: str, request_sha256: str, at: datetime, forget_before: datetime
) -> IdempotentCall | None:
    """The call already made under this key (None: none was, and this one is now recorded, unanswered)."""
    db.execute("DELETE FROM idempotent_calls WHERE created_at < ?", (to_iso(forget_before),))
    row = db.execute(
        "SELECT request_sha256, answer FROM idempotent_calls WHERE principal = ? AND key = ?", (principal, key)
    ).fetchone()
    if row is not None:
        return IdempotentCall(row[0], row[1])
    db.execute("INSERT INTO idempotent_calls VALUES (?, ?, ?, NULL, ?)", (principal, key, request_sha256, to_iso(at)))
    return None


def end_idempotent(db: sqlite3.Connection, principal: str, key: str, answer: str | None) -> None:
    """Keep the answer of the call; None: it gave none to keep, so a retry may run it again."""
    if answer is None:
        db.execute("DELETE FROM idempotent_calls WHERE principal = ? AND key = ? AND answer IS NULL", (principal, key))
    else:
        db.execute("UPDATE idempotent_calls SET answer = ? WHERE principal = ? AND key = ?", (answer, principal, key))
