"""Embedding memories: on the way in, later for those the model failed, and again for a new model."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from mnemo.access.caller import viewer
from mnemo.embed import BULK_TEXTS, Vectors
from mnemo.engine.base import ServiceBase
from mnemo.errors import EmbeddingError, MnemoError, Unavailable
from mnemo.model import Memory, Status
from mnemo.query import Filters

log = logging.getLogger(__name__)


class EmbeddingOperations(ServiceBase):
    """A failing model never loses a memory: it is saved first and embedded when the model works."""

    def _try_embed(self, texts: Sequence[str]) -> tuple[Vectors | None, Exception | None]:
        """Vectors for the texts; (None, None) when this store does not use vectors; the error if the model failed."""
        if self.embedder is None or self.searcher.vectors_state() is not None:
            return None, None
        try:
            return self.embedder.embed_documents(texts), None
        except Exception as exc:  # whatever the model does, the memory itself must still be saved
            return None, exc

    def embed_many(self, contents: Sequence[object]) -> list[Vectors | None] | None:
        """The contents' vectors computed together (the model's cost is mostly per call), None for
        one that is not text; None when this store uses no vectors or the model failed: then each
        store embeds its own, or records why not."""
        if self.embedder is None or self.searcher.vectors_state() is not None:
            return None
        texts = {i: content for i, content in enumerate(contents) if isinstance(content, str) and content.strip()}
        if not texts:
            return None
        try:
            computed = iter(self.embedder.embed_documents(list(texts.values())))
        except Exception:  # the model's failure: each store tries again and says so
            return None
        return [next(computed) if i in texts else None for i in range(len(contents))]

    def _save_vectors(self, memories: Sequence[Memory], vectors: Vectors | None, error: Exception | None) -> bool:
        """Store vectors for memories already saved; False if this store does not use vectors.

        The memories are saved first, so a failing model loses nothing: they stay searchable by
        words, the caller gets EmbeddingError naming them, and ``embed_pending`` embeds them later.
        """
        if error is not None:
            raise EmbeddingError(
                f"the memory was stored but could not be embedded ({error}); it is searchable by words and "
                "will be embedded later",
                memory_ids=[m.id for m in memories],
            ) from error
        if vectors is None:
            return False
        self.storage.put_vectors([(m.id, v.astype("<f4").tobytes()) for m, v in zip(memories, vectors, strict=True)])
        return True

    def _embed(self, memories: Sequence[Memory]) -> bool:
        return self._save_vectors(memories, *self._try_embed([m.content for m in memories]))

    def drop_vectors(self, memory_ids: Sequence[str]) -> None:
        """Forget these memories' vectors, in the store and in this process's index (their content
        went to an archive tier, or was replaced by a sync)."""
        keys = self.storage.keys_matching(Filters(now=self.clock.now(), statuses=None, ids=tuple(memory_ids),
                                                  include_expired=True, visible_to=viewer()))  # fmt: skip
        self.storage.drop_vectors(memory_ids)
        if self.searcher.index is not None:
            self.searcher.index.discard(keys)

    def embed_pending(self, batch: int = BULK_TEXTS) -> int:
        """Embed memories that have no vector yet (stored while the model failed); returns how many."""
        done = 0
        while self.embedder is not None and (pending := self.storage.unembedded(batch)):
            self._embed(pending)
            done += len(pending)
        return done

    def readiness(self) -> dict[str, str]:
        """Whether this service can answer now: its store's database ("ok", "unreachable" or "failed",
        the why logged) and its model ("ready", "loading" until the warm-up or a first use loads it,
        or "none": words only)."""
        try:
            self.storage.read_setting("readiness probe")
            database = "ok"
        except MnemoError as down:
            log.warning("not ready: %s", down.message)
            database = "unreachable" if isinstance(down, Unavailable) else "failed"
        model = "none" if self.embedder is None else "ready" if getattr(self.embedder, "loaded", True) else "loading"
        return {"database": database, "model": model}

    def warm_up(self) -> None:
        """Load the model and embed what is pending; run in the background when a server starts."""
        load = getattr(self.embedder, "load", None)
        if load is not None:
            load()
        self.categories.load()
        self.embed_pending()

    def reindex(self, progress: Callable[[int, int], None] | None = None, batch: int = BULK_TEXTS) -> int:
        """Re-embed every memory with the configured model, replacing vectors of any other."""
        if self.embedder is None:
            raise EmbeddingError("no embedding model is configured")
        self.storage.reset_vectors(self.embedder.name)
        total = self.storage.count(Filters(now=self.clock.now(), statuses=(Status.ACTIVE, Status.ARCHIVED),
                                           include_expired=True, visible_to=viewer()))  # fmt: skip
        done = 0
        while pending := self.storage.unembedded(batch):
            self._embed(pending)
            done += len(pending)
            if progress is not None:
                progress(done, total)
        return done
