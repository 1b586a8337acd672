"""The access rules between users, applied to the caller of the running call (``mnemo.access.caller``).

Reads: a query sees what ``Filters.visible_to`` lets through, and a read by id goes through
``ScopedStorage``, which hides another user's private memories as if they did not exist (a
caller learns nothing about them, not even that an id is taken). Writes: every write builds a
``Change`` (``MemoryService.change``), which asks ``check_writable`` first, so no operation can
write a memory its caller does not own. With no caller every rule lets everything through.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mnemo.access import caller as callers
from mnemo.access.caller import Caller, Role
from mnemo.errors import Forbidden
from mnemo.model import READABLE_BY_ALL, Context, Memory
from mnemo.storage import Job, Storage


def can_read(memory: Memory, caller: Caller | None) -> bool:
    return caller is None or caller.is_admin or memory.owner == caller.user_id or memory.access_level in READABLE_BY_ALL


def in_own_space(memory: Memory) -> bool:
    """Whether the memory is in the running caller's own space (profiles whose specs know no users)."""
    viewer = callers.viewer()
    return viewer is None or memory.owner == viewer


def check_writable(memory: Memory) -> None:
    """Forbidden unless the caller may write this memory: its owner (not with a read-only key) or an admin."""
    caller = callers.current()
    if caller is None or caller.is_admin:
        return
    if caller.role is Role.READER:
        raise Forbidden(f"user {caller.user_id!r} has a read-only key")
    if memory.owner != caller.user_id:
        raise Forbidden(f"memory {memory.id} belongs to another user", memory_id=memory.id)


def check_may_write() -> None:
    """Forbidden for a read-only key: for an operation that writes whatever it finds (a sync)."""
    caller = callers.current()
    if caller is not None and caller.role is Role.READER:
        raise Forbidden(f"user {caller.user_id!r} has a read-only key")


def check_scope(user_id: str | None, field: str = "user_id") -> None:
    """Forbidden when a caller names another user's scope (only an admin may)."""
    caller = callers.current()
    if caller is not None and not caller.is_admin and user_id is not None and user_id != caller.user_id:
        raise Forbidden(f"{field} {user_id!r} is another user's; this key acts for {caller.user_id!r}", field=field)


def own_context(context: Context) -> Context:
    """The context a new memory is stored with: the caller's user unless it names one it may use."""
    caller = callers.current()
    if caller is None:
        return context
    check_scope(context.user_id, "context.user_id")
    return context if context.user_id is not None else Context(caller.user_id, context.conversation_id,
                                                                context.session_id)  # fmt: skip


class ScopedStorage:
    """A storage whose reads by id or path return only what the running call's caller may read.

    Everything else passes through: queries are scoped by ``Filters.visible_to`` already.
    """

    def __init__(self, inner: Storage) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:  # logs name the store, not the wrapper
        return repr(self.inner)

    def get(self, memory_id: str) -> Memory | None:
        memory = self.inner.get(memory_id)
        return memory if memory is None or can_read(memory, callers.current()) else None

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        caller = callers.current()
        return [m for m in self.inner.get_many(memory_ids) if can_read(m, caller)]

    def vectors_of(self, memory_ids: Sequence[str]) -> dict[str, bytes]:
        return self.inner.vectors_of([m.id for m in self.get_many(memory_ids)])

    def get_job(self, job_id: str) -> Job | None:
        """A job is its starter's (and an admin's): to anyone else another user's job is no job at all."""
        job = self.inner.get_job(job_id)
        caller = callers.current()
        return job if job is None or caller is None or caller.is_admin or job.owner == caller.user_id else None

    def get_by_path(self, path: str) -> Memory | None:
        memory = self.inner.get_by_path(path)
        return memory if memory is None or can_read(memory, callers.current()) else None


def unscoped(storage: Storage) -> Storage:
    """The storage itself, out of its ``ScopedStorage`` if it is in one."""
    return storage.inner if isinstance(storage, ScopedStorage) else storage
