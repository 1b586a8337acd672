"""Who is calling: the principal a network transport authenticated, for the engine's access rules.

A transport that knows its caller (mnemo over HTTP, with an API key or a bearer token) runs each
call inside ``acting_as(caller)``; the engine reads ``current()`` where a rule depends on it. With
no caller (stdio, the command line, a Python program) the engine serves its one local user
unrestricted, as before. A context variable rather than an argument on every operation: one
place sets it per call, and worker threads inherit it (anyio copies the context into them).

The rules (``mnemo.access.rules``): a member reads their own memories and anyone's ``shared`` or
``public`` ones, and writes only their own; a reader reads the same and writes nothing; an admin
reads and writes every memory and may act for another user.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"
    MEMBER = "member"
    READER = "reader"


@dataclass(frozen=True, slots=True)
class Caller:
    user_id: str
    role: Role = Role.MEMBER

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


_current: ContextVar[Caller | None] = ContextVar("mnemo_caller", default=None)
_request_id: ContextVar[str | None] = ContextVar("mnemo_request_id", default=None)


def current() -> Caller | None:
    """The authenticated caller of the running call; None for a local, unrestricted one."""
    return _current.get()


def user_id() -> str | None:
    """The running call's user, whatever their role; None for a local caller."""
    caller = _current.get()
    return None if caller is None else caller.user_id


def viewer() -> str | None:
    """Whose view queries take: the caller's user, unless an admin or a local caller (None: all)."""
    caller = _current.get()
    return None if caller is None or caller.is_admin else caller.user_id


def request_id() -> str | None:
    """The id the transport gave the running request (HTTP: ``X-Request-Id``), for logs and errors."""
    return _request_id.get()


@contextmanager
def acting_as(caller: Caller | None, request: str | None = None) -> Iterator[None]:
    """Run the enclosed call as ``caller``, under the request id ``request``."""
    tokens = _current.set(caller), _request_id.set(request)
    try:
        yield
    finally:
        _current.reset(tokens[0])
        _request_id.reset(tokens[1])
