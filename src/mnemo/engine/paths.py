"""Spec 002's path-addressed memories: add, read, update, remove and move by path; category levels."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from mnemo.access import rules as access
from mnemo.access.caller import viewer
from mnemo.engine import path_rules as paths
from mnemo.engine.memories import MemoryOperations
from mnemo.engine.results import UNSET, ForgetResult, TagEdit, UpdateResult
from mnemo.errors import Conflict, InvalidInput, NotFound
from mnemo.model import ForgetReason, Memory, Status, to_iso
from mnemo.query import Filters

AT_PATH_STATUSES = (Status.ACTIVE, Status.ARCHIVED, Status.OUTDATED)  # a forgotten memory holds no path


class PathOperations(MemoryOperations):
    """Only memories that have a path are addressed here; others are not given invented paths."""

    def add_at(
        self, path: str, content: str, *, tags: Sequence[str] = (), expires_at: datetime | None = None
    ) -> Memory:
        """A new memory at a free path; its categories come into being with it.

        The path is its identity, so the same words at another path are another memory; the
        caller's tags are its tags (none are derived).
        """
        paths.check_path(path)
        if self.storage.get_by_path(path) is not None:
            raise Conflict(f"a memory already exists at {path!r}", path=path)
        stored = self.store(content, tags=tags, expires_at=expires_at, auto_tag=False, on_duplicate="allow", path=path)
        return stored.memory

    def get_at(self, path: str, *, include_expired: bool = True, field: str = "path") -> Memory:
        """The memory at a path; an expired one only ``include_expired``."""
        paths.check_path(path, field)
        memory = self.storage.get_by_path(path)
        if memory is None:
            raise paths.not_found(path, self.storage.name)
        if not include_expired and memory.expires_at is not None and memory.is_expired(self.clock.now()):
            raise NotFound(
                f"the memory at {path!r} expired at {to_iso(memory.expires_at)}; ask with include_expired to read it",
                path=path,
                expired=True,
            )
        return memory

    def update_at(
        self,
        path: str,
        *,
        content: str | None = None,
        tags: Sequence[str] | None = None,
        expires_at: datetime | None = UNSET,
    ) -> UpdateResult:
        """Replace the content, the tags or the expiry (``None`` clears it) of the memory at a path."""
        if content is None and tags is None and expires_at is UNSET:
            raise InvalidInput("no updates provided: give content, tags, expires_at or clear_expiry", field="updates")
        memory = self.get_at(path)
        edit = None if tags is None else TagEdit(replace=tuple(tags))
        return self.update(memory.id, content=content, tags=edit, expires_at=expires_at)

    def remove_at(self, path: str) -> ForgetResult:
        """Forget the memory at a path (recoverable for the retention period); the path is free again."""
        return self.forget(self.get_at(path).id)

    def move(self, from_path: str, to_path: str) -> Memory:
        """Give a memory another path; only its path changes, as a new version."""
        paths.check_path(to_path, "to_path")
        if from_path == to_path:
            raise InvalidInput("from_path and to_path are the same path", field="to_path")
        memory = self.get_at(from_path, field="from_path")
        if self.storage.get_by_path(to_path) is not None:
            raise Conflict(f"a memory already exists at {to_path!r}", path=to_path)
        moved = self.update(memory.id, path=to_path, reason=f"moved from {from_path}", expected_version=memory.version)
        return moved.memory

    def list_level(self, category: str | None = None, *, include_expired: bool = False) -> paths.Level:
        """One category level (the root when ``None``): its memories and its sub-categories."""
        category = paths.check_category(category)
        now = self.clock.now()
        filters = Filters(now=now, statuses=AT_PATH_STATUSES, include_expired=include_expired, visible_to=viewer())
        memories, below = self.storage.path_level(paths.prefix(category), filters)
        return paths.Level(category, memories, {paths.prefix(category) + name: n for name, n in below.items()}, now)

    def prune_expired(self) -> Sequence[Memory]:
        """Forget every expired memory that has a path (reason "expired") in the caller's space; returns them."""
        access.check_may_write()  # a reader's space may hold none: refused all the same
        expired = [m for m in self.storage.expired_with_path(self.clock.now()) if access.in_own_space(m)]
        return [m for m in expired if self._forget_if_there(m.id, ForgetReason.EXPIRED)]

    def _forget_if_there(self, memory_id: str, reason: str) -> bool:
        try:
            self.forget(memory_id, reason=reason)
        except NotFound:
            return False  # another process forgot it meanwhile
        return True
