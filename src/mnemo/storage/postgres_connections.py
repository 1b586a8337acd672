"""What a PostgreSQL store's connections need: the driver's errors read as mnemo's, the store's SQL
dialect, timeouts in SET's units, and reads planned for their parameters."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import psycopg_pool
from psycopg import errors

from mnemo.bounds import as_utc
from mnemo.errors import Locked, MnemoError, StorageError, TimedOut, Unavailable
from mnemo.storage import sql

PROBE_TIMEOUT_S = 2  # how long a connection that tells "busy" from "unreachable" may take to open


@dataclass(frozen=True, slots=True)
class Failures:
    """How the driver's errors read as mnemo's for one store: by class (SQLSTATE), never by message."""

    store: str
    url: str
    busy_timeout_s: float
    pool_timeout_s: float
    statement_timeout_s: float

    @contextmanager
    def translated(self) -> Iterator[None]:
        """Map the driver's errors raised in the block onto mnemo's."""
        try:
            yield
        except MnemoError:
            raise
        except psycopg_pool.PoolTimeout as exc:  # every connection busy, or none can be made
            if self.reachable():
                raise Locked(f"store {self.store!r} stayed busy for {self.pool_timeout_s:g}s") from exc
            raise self.unavailable() from exc
        except errors.LockNotAvailable as exc:  # lock_timeout
            raise Locked(f"store {self.store!r} stayed busy for {self.busy_timeout_s:g}s") from exc
        except errors.QueryCanceled as exc:  # statement_timeout (or an operator's pg_cancel_backend)
            raise self.timed_out() from exc
        except psycopg.OperationalError as exc:  # the connection failed or the server shut it down
            raise self.unavailable(exc) from exc
        except psycopg.Error as exc:
            raise StorageError(f"store {self.store!r} failed: {exc}", store=self.store) from exc

    def reachable(self) -> bool:
        try:
            psycopg.connect(self.url, connect_timeout=PROBE_TIMEOUT_S).close()
        except psycopg.Error:
            return False
        return True

    def unavailable(self, cause: Exception | None = None) -> Unavailable:
        why = f": {str(cause).strip().splitlines()[0]}" if cause is not None and str(cause).strip() else ""
        wait = Unavailable.RETRY_AFTER_S
        message = f"store {self.store!r}: its PostgreSQL database cannot be reached{why}; retry in {wait} s"
        return Unavailable(message, store=self.store, retry_after=wait)

    def timed_out(self) -> TimedOut:
        wait = Unavailable.RETRY_AFTER_S
        return TimedOut(
            f"store {self.store!r}: a statement ran past the {self.statement_timeout_s:g} s statement timeout and"
            f" was cancelled, its write rolled back; retry in {wait} s",
            store=self.store,
            timeout_s=self.statement_timeout_s,
            retry_after=wait,
        )


def milliseconds(seconds: float) -> int:
    """A timeout for SET, at least 1 ms: 0 would mean none."""
    return max(1, int(seconds * 1000))


def dialect(server_version: int) -> sql.Dialect:
    # Spec 003's case-insensitive search folds like Python's str.casefold: PostgreSQL 18's casefold()
    # under the builtin Unicode collation does ("Straße" holds "STRASSE"); before 18, lower().
    fold = "casefold" if server_version >= 180000 else "lower"
    collate = " COLLATE pg_unicode_fast" if server_version >= 180000 else ""

    def contains(text: str, folded: bool) -> str:
        if folded:
            return f"strpos({fold}(normalize({text}, NFKC){collate}), %s) > 0"
        return f"strpos({text}, %s) > 0"

    return sql.Dialect("%s", as_utc, as_utc, contains, None, 'COLLATE "C"', "")  # its planner counts rows


@contextmanager
def planned_each_time(db: psycopg.Connection) -> Iterator[None]:
    """The block's statements unprepared, so PostgreSQL plans each for its parameters.

    psycopg prepares a statement once it has run five times, and PostgreSQL then keeps one plan for
    any parameters when that plan's estimate is no worse: a word search's best plan depends on how
    common its words are, a filtered search's on how many memories the filter keeps, and where it
    chose one plan for all of them recall took twice as long. Writes stay prepared: their plans do
    not depend on their values, and planning each again cost storing ~6% (docs/postgresql-performance.md)."""
    threshold = db.prepare_threshold
    db.prepare_threshold = None
    try:
        yield
    finally:
        db.prepare_threshold = threshold
