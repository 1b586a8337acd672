"""The one error hierarchy of mnemo.

Every failure a caller can act on is a ``MnemoError`` with a stable ``code``; profiles translate
these, once each, into their spec's error shape. Storage adapters map driver errors onto it.

    MnemoError
    ├── InvalidInput        INVALID_INPUT       bad argument; nothing was changed
    ├── Forbidden           FORBIDDEN           the caller may not: another user's memory or scope
    ├── NotFound            NOT_FOUND           no such memory
    │   └── ScopeNotFound   SCOPE_NOT_FOUND     no memories carry that user or conversation id
    ├── Duplicate           DUPLICATE           the same content is already stored
    ├── Conflict            CONFLICT            the memory moved on since the caller read it
    │   ├── CallInProgress  CALL_IN_PROGRESS    a call with the same idempotency key has not answered yet
    │   └── SyncConflicts   SYNC_CONFLICTS      memories changed on both sides of a sync (resolution "manual")
    ├── RateLimited         RATE_LIMITED        the caller made more calls of this tool this minute than allowed
    ├── AlreadyInState
    │   ├── AlreadyArchived ALREADY_ARCHIVED    archiving a memory that is archived
    │   └── AlreadyActive   ALREADY_ACTIVE      restoring a memory that is active
    ├── KeyReused           IDEMPOTENCY_KEY_REUSED  an idempotency key sent again with another request
    ├── TooDissimilar       MEMORIES_TOO_DISSIMILAR  memories to consolidate that are not related
    ├── Unprocessable       UNPROCESSABLE       well-formed, but not for these memories (criteria match nothing,
    │                                           a damaged archive, no synthesis model although one was required)
    ├── OperationFailed     OPERATION_FAILED    an operation failed midway and changed nothing (e.g. synthesis)
    ├── Locked              LOCKED              the store stayed busy past the lock timeout
    │   └── SyncInProgress  SYNC_IN_PROGRESS    a sync of the same two stores is running
    ├── TooComplex          QUERY_TOO_COMPLEX   a query with more filter values than allowed
    ├── QuotaExceeded       QUOTA_EXCEEDED      the store holds its configured maximum
    ├── EmbeddingError      EMBEDDING_ERROR     the embedding model failed or is not installed
    ├── CorruptedData       CORRUPTED_DATA      the store failed its integrity check
    ├── StorageError        STORAGE_ERROR       the store could not be read or written
    │   └── Unavailable     STORE_UNAVAILABLE   its database cannot be reached: retry later (503)
    │       └── TimedOut    STATEMENT_TIMEOUT   a statement ran past the database's statement timeout; its
    │                                           write was rolled back: retry later (503)
    └── QuotaExceeded ─ ArchiveQuotaExceeded  ARCHIVE_QUOTA_EXCEEDED  the archive holds its configured maximum
"""

from __future__ import annotations

from typing import Any, ClassVar

# An error answers in a bounded size whatever the input it quotes: its message and each text
# detail are cut to these lengths.
MAX_MESSAGE_CHARS = 2_000
MAX_FIELD_CHARS = 300


def clipped(text: str, most: int) -> str:
    return text if len(text) <= most else f"{text[: most - 1]}…"


class MnemoError(Exception):
    code: ClassVar[str] = "INTERNAL_ERROR"

    def __init__(self, message: str, **details: Any) -> None:
        message = clipped(message, MAX_MESSAGE_CHARS)
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = {
            name: clipped(value, MAX_FIELD_CHARS) if isinstance(value, str) else value
            for name, value in details.items()
        }


class InvalidInput(MnemoError):
    code = "INVALID_INPUT"


class Forbidden(MnemoError):
    code = "FORBIDDEN"


class NotFound(MnemoError):
    code = "NOT_FOUND"


class ScopeNotFound(NotFound):
    code = "SCOPE_NOT_FOUND"


class Duplicate(MnemoError):
    code = "DUPLICATE"

    def __init__(self, message: str, existing_id: str, **details: Any) -> None:
        super().__init__(message, existing_memory_id=existing_id, **details)
        self.existing_id = existing_id


class Conflict(MnemoError):
    code = "CONFLICT"


class CallInProgress(Conflict):
    code = "CALL_IN_PROGRESS"


class SyncConflicts(Conflict):
    code = "SYNC_CONFLICTS"


class RateLimited(MnemoError):
    code = "RATE_LIMITED"


class KeyReused(MnemoError):
    code = "IDEMPOTENCY_KEY_REUSED"


class LeaseLost(MnemoError):
    """The call's server lost its hold on the call's idempotency key to a retry, which runs the call
    instead: this one writes nothing. Not a ``Conflict``: computing the write again would not help."""

    code = "CALL_IN_PROGRESS"


class AnswerLost(KeyReused):
    """The call under this key was applied, but its server stopped before keeping its answer."""

    code = "IDEMPOTENT_ANSWER_LOST"


class AlreadyInState(MnemoError):
    """The operation would move memories to the state they are in."""


class AlreadyArchived(AlreadyInState):
    code = "ALREADY_ARCHIVED"


class AlreadyActive(AlreadyInState):
    code = "ALREADY_ACTIVE"


class TooDissimilar(MnemoError):
    code = "MEMORIES_TOO_DISSIMILAR"


class Unprocessable(MnemoError):
    code = "UNPROCESSABLE"


class OperationFailed(MnemoError):
    code = "OPERATION_FAILED"


class Locked(MnemoError):
    code = "LOCKED"


class SyncInProgress(Locked):
    code = "SYNC_IN_PROGRESS"


class TooComplex(MnemoError):
    code = "QUERY_TOO_COMPLEX"


class QuotaExceeded(MnemoError):
    code = "QUOTA_EXCEEDED"


class ArchiveQuotaExceeded(QuotaExceeded):
    code = "ARCHIVE_QUOTA_EXCEEDED"


class EmbeddingError(MnemoError):
    code = "EMBEDDING_ERROR"


class CorruptedData(MnemoError):
    code = "CORRUPTED_DATA"


class StorageError(MnemoError):
    code = "STORAGE_ERROR"


class Unavailable(StorageError):
    """The store's database cannot be reached (stopped, restarting, the network): retry later."""

    code = "STORE_UNAVAILABLE"
    RETRY_AFTER_S = 5


class TimedOut(Unavailable):
    """A statement ran past the database's statement timeout (PostgreSQL ``statement_timeout``): it
    was cancelled and its write rolled back. The database is there but too slow for now (overloaded,
    or a call that reads a great deal), so profiles answer as for ``Unavailable``: retry later; never
    "locked" (a wait for another writer is ``Locked``), nor an internal error."""

    code = "STATEMENT_TIMEOUT"


def reason_of(exc: BaseException) -> str:
    """Why an operation failed, without the absolute path an ``OSError`` names: callers may be remote."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
