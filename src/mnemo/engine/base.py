"""What every engine operation works on (storage, clock, embedder, settings) and the steps they share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import cast

from mnemo import bounds
from mnemo.access import rules as access
from mnemo.clock import Clock, SystemClock
from mnemo.embed import Embedder
from mnemo.engine.space_limits import SharedLimits
from mnemo.errors import CorruptedData, NotFound, StorageError
from mnemo.lifecycle.settings import LifecycleSettings
from mnemo.model import Change, Memory, new_id
from mnemo.search import enrich
from mnemo.search.searcher import Searcher
from mnemo.search.vector_layers import GRAPH_FROM
from mnemo.storage import Storage


class ServiceBase:
    """The storage (as the running call's caller sees it), clock, embedder and settings of a service."""

    def __init__(
        self,
        storage: Storage,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        categories: enrich.CategoryDetector | None = None,
        *,
        recency_half_life_days: float = 30.0,
        max_memories: int | None = None,
        vector_graph_from: int = GRAPH_FROM,
        shared_limits: SharedLimits | None = None,
        lifecycle: LifecycleSettings | None = None,
        actor: str = "mnemo",
    ) -> None:
        self.storage: Storage = cast(Storage, access.ScopedStorage(storage))  # reads by id: the caller's view
        self.shared_limits = shared_limits or SharedLimits()  # what spec 003's shared space over this store allows
        self.lifecycle = lifecycle or LifecycleSettings()  # what mnemo.lifecycle's operations are set up with
        self.clock = clock or SystemClock()
        self.recency_half_life_days = recency_half_life_days
        self.max_memories = max_memories
        self.actor = actor
        self.embedder = embedder
        self.searcher = Searcher(storage, embedder, vector_graph_from)
        self.categories = categories or enrich.CategoryDetector(embedder)
        # A damaged store, or one from a newer mnemo, still gets a service, whose every operation
        # reports why to its caller.
        with suppress(CorruptedData, StorageError):
            if embedder is not None and storage.vector_model() is None:
                storage.reset_vectors(embedder.name)  # a store's first model is the one it meets first
            storage.purge_due(self.clock.now())

    def close(self) -> None:
        """Release the store's connections and the search's threads; the service is not used after."""
        self.searcher.close()
        self.storage.close()

    @contextmanager
    def batched(self) -> Iterator[None]:
        """The writes of the block (on this thread) as one transaction: a bulk import commits once a
        batch, not twice a memory. A write refused inside it undoes only itself; if the block fails
        as a whole nothing of it is kept, nor the vectors this process's index took in from it."""
        try:
            with self.storage.batch():
                yield
        except BaseException:
            self.searcher.reload_index()
            raise

    def change(self, memory: Memory, action: str, actor: str | None, reason: str | None = None,
               previous: Memory | None = None, at: datetime | None = None) -> Change:  # fmt: skip
        """The record of a write to ``memory``; Forbidden if the running call's caller may not write it."""
        access.check_writable(memory)
        return Change(
            id=new_id(),
            memory_id=memory.id,
            version=memory.version,
            action=action,
            actor=actor or memory.context.user_id or self.actor,
            at=at or self.clock.now(),
            reason=reason,
            previous=previous,
        )

    def get(self, memory_id: str) -> Memory:
        bounds.fields(memory_id=memory_id)
        memory = self.storage.get(memory_id)
        if memory is None:
            raise NotFound(f"no memory with id {memory_id}", memory_id=memory_id)
        return memory

    def history(self, memory_id: str) -> list[Change]:
        self.get(memory_id)
        return self.storage.history(memory_id)

    def _seen(self, memories: list[Memory], now: datetime) -> list[Memory]:
        """Count memories given back to a caller as accessed; returns them as they now are."""
        if memories:
            self.storage.record_recall([m.id for m in memories], now)
        return [m.evolve(access_count=m.access_count + 1, accessed_at=now) for m in memories]
