"""Many stores behind one server (spec 002): each call names its store.

``NamedStores`` resolves a store name through the registry, opens that store's service on first
use and keeps it open; it closes them all at shutdown. It receives how to read the registry and
how to open a service (the composition root decides both), so it imports no backend.

A registered store whose folder does not exist yet is created by the first write; reading it
before then finds nothing (no memory, an empty level, nothing to prune) and creates nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from mnemo.access import rules as access
from mnemo.engine import path_rules as paths
from mnemo.engine.results import UNSET, ForgetResult, UpdateResult
from mnemo.engine.service import MemoryService
from mnemo.errors import NotFound
from mnemo.model import Memory


class NamedStores:
    def __init__(
        self,
        registry: Callable[[], Mapping[str, Path]],
        open_store: Callable[[str], MemoryService],
        opened: Mapping[tuple[str, Path], MemoryService] | None = None,
    ) -> None:
        self._registry = registry
        self._open_store = open_store
        # Keyed by name and folder, so a store registered anew elsewhere is opened anew.
        self._services: dict[tuple[str, Path], MemoryService] = dict(opened or {})
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return sorted(self._registry())

    def service(self, store: str) -> MemoryService:
        """The service of a registered store, opened (and its folder made) if it is not yet."""
        key = self._key(store)
        with self._lock:
            return self._opened(key)

    def existing(self, store: str) -> MemoryService | None:
        """The service of a registered store, or ``None`` while its folder does not exist."""
        key = self._key(store)
        with self._lock:
            return self._opened(key) if key in self._services or key[1].is_dir() else None

    def _key(self, store: str) -> tuple[str, Path]:
        registered = self._registry()
        folder = registered.get(store)
        if folder is None:
            raise NotFound(
                f"store {store!r} is not registered; registered stores: {', '.join(sorted(registered))}",
                store=store,
                registered=sorted(registered),
            )
        return store, folder

    def _opened(self, key: tuple[str, Path]) -> MemoryService:
        """The cached service of a store, opened now if need be (the caller holds the lock)."""
        if key not in self._services:
            self._services[key] = self._open_store(key[0])
        return self._services[key]

    def close(self) -> None:
        with self._lock:
            for service in self._services.values():
                service.close()
            self._services.clear()

    # -- spec 002's operations, on the named store -----------------------------------------
    def add(
        self, store: str, path: str, content: str, tags: Sequence[str] = (), expires_at: datetime | None = None
    ) -> Memory:
        paths.check_path(path)  # before the store's folder is made for it
        return self.service(store).add_at(path, content, tags=tags, expires_at=expires_at)

    def get(self, store: str, path: str, *, include_expired: bool = False) -> Memory:
        return self._existing(store, path).get_at(path, include_expired=include_expired)

    def update(
        self,
        store: str,
        path: str,
        *,
        content: str | None = None,
        tags: Sequence[str] | None = None,
        expires_at: datetime | None = UNSET,
    ) -> UpdateResult:
        return self._existing(store, path).update_at(path, content=content, tags=tags, expires_at=expires_at)

    def remove(self, store: str, path: str) -> ForgetResult:
        return self._existing(store, path).remove_at(path)

    def move(self, store: str, from_path: str, to_path: str) -> Memory:
        paths.check_path(to_path, "to_path")
        return self._existing(store, from_path, "from_path").move(from_path, to_path)

    def list_level(self, store: str, category: str | None = None, *, include_expired: bool = False) -> paths.Level:
        service = self.existing(store)
        if service is None:
            return paths.Level(paths.check_category(category), [], {}, datetime.now().astimezone())
        return service.list_level(category, include_expired=include_expired)

    def prune(self, store: str) -> Sequence[Memory]:
        service = self.existing(store)
        if service is None:
            access.check_may_write()  # refused as the store's prune_expired would refuse it
            return []
        return service.prune_expired()

    def _existing(self, store: str, path: str, field: str = "path") -> MemoryService:
        """The store's service, or ``NotFound`` for the path when the store has no folder yet."""
        service = self.existing(store)
        if service is None:
            raise paths.not_found(paths.check_path(path, field), store)
        return service
