"""The composition root for library use: settings → storage → service.

from mnemo.app import open_service
memories = open_service()            # the default store under MNEMO_HOME
memories.store("Emma is lactose intolerant")
"""

from __future__ import annotations

from mnemo.clock import Clock
from mnemo.config import Settings
from mnemo.service import MemoryService
from mnemo.storage.sqlite import SQLiteStorage


def open_service(
    settings: Settings | None = None, store: str | None = None, *, actor: str = "mnemo", clock: Clock | None = None
) -> MemoryService:
    settings = settings or Settings()
    name = store or settings.store
    storage = SQLiteStorage(settings.store_folder(name), name, settings.busy_timeout_s)
    return MemoryService(
        storage,
        clock,
        recency_half_life_days=settings.recency_half_life_days,
        max_memories=settings.max_memories,
        actor=actor,
    )
