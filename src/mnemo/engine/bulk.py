"""Storing many memories at once (a bulk import): ``store``'s rules, each step taken for many.

Memories are prepared one by one (checks, derived fields), then consecutive plain ones (a vector,
no path, link, signature or quota to count) are compared with the store and with each other in one
near-duplicate check (mnemo.search.twins), written in one statement per table and their vectors in one
more: the same outcome as storing them one after the other, for a fraction of the statements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from mnemo.access.caller import viewer
from mnemo.embed import BULK_TEXTS, Vectors
from mnemo.engine.memories import MemoryOperations, NewMemory
from mnemo.engine.results import StoreResult
from mnemo.errors import Conflict, MnemoError
from mnemo.lazy import numpy as np
from mnemo.model import subject_key
from mnemo.search.twins import NewText

Outcome = StoreResult | Exception
# Plain memories checked and written together at most: the check compares a run's vectors with each
# other (a square of them), and a statement names each of its memories.
MAX_RUN = BULK_TEXTS


class BulkOperations(MemoryOperations):
    def store_many(
        self,
        calls: Sequence[Mapping[str, Any]],
        vectors: Sequence[Vectors | None] | None = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> list[Outcome]:
        """Store each call's memory as ``store(**call, on_duplicate="return")`` would, in order, in
        one transaction; ``vectors`` are the contents' embeddings if the caller computed them
        (``embed_many``: a bulk import does on another thread), else they are computed here, together.

        Each call's outcome: its ``StoreResult`` (``existing`` for a duplicate), or the error that
        refused it, a ``MnemoError`` or a ``TypeError`` (an argument of the wrong type); an
        ``EmbeddingError`` means stored, and embedded later.
        """
        if vectors is None or self.searcher.vectors_state() is not None:  # not this store's model's
            vectors = self.embed_many([call.get("content") for call in calls])
        outcomes: list[Outcome | None] = [None] * len(calls)
        run = _Run()
        with self.batched():
            for position, call in enumerate(calls):
                if run.read_by(call):
                    self._write_run(run, outcomes)
                    run = _Run()
                try:
                    new = self.prepare_store(
                        **call, vector=None if vectors is None else vectors[position], on_duplicate="return",
                        actor=actor, reason=reason,
                    )  # fmt: skip
                except (MnemoError, TypeError) as refused:
                    outcomes[position] = refused
                    continue
                if isinstance(new, StoreResult):  # its id is held already
                    outcomes[position] = new
                elif self._plain(new):
                    run.add(position, new)
                    if len(run.entries) == MAX_RUN:
                        self._write_run(run, outcomes)
                        run = _Run()
                else:
                    self._write_run(run, outcomes)
                    run = _Run()
                    outcomes[position] = self._write_alone(new)
            self._write_run(run, outcomes)
        return [outcome for outcome in outcomes if outcome is not None]

    def _plain(self, new: NewMemory) -> bool:
        """Whether a memory can be written with others: one whose write reads or counts nothing but
        its duplicates (a path, a link, an entry number or a quota do)."""
        memory = new.memory
        return (
            new.vectors is not None
            and new.unique
            and not new.related
            and memory.path is None
            and memory.agent_name is None
            and self.max_memories is None
        )

    def _write_alone(self, new: NewMemory) -> Outcome:
        try:
            return self.write_new(new, "return")
        except MnemoError as refused:
            return refused

    def _write_run(self, run: _Run, outcomes: list[Outcome | None]) -> None:
        """Write a run of plain memories: each a near duplicate of one held or of an earlier one of
        the run, the same content as one held, or stored."""
        if not run.entries:
            return
        news = [new for _, new in run.entries]
        twins = self.searcher.near_duplicates([_new_text(new) for new in news], self.clock.now(), visible_to=viewer())
        fresh = [i for i, twin in enumerate(twins) if twin is None]
        try:
            written = self.storage.insert_new([(news[i].memory, news[i].change) for i in fresh])
        except Conflict:  # an id held out of the caller's sight: one at a time, so that only it is refused
            for position, new in run.entries:
                outcomes[position] = self._write_alone(new)
            return
        results: dict[int, StoreResult] = {}
        for i, stored in zip(fresh, written, strict=True):
            if isinstance(stored, str):  # the same content is held
                results[i] = self.existing(stored)
            else:
                results[i] = StoreResult(stored, news[i].extra_tags, 0, embedded=True)
        stored_now = [i for i in fresh if not results[i].existing]
        if stored_now:
            self._save_vectors([news[i].memory for i in stored_now],
                               np.concatenate([news[i].vectors for i in stored_now]), None)  # fmt: skip
        for i, twin in enumerate(twins):
            if twin is not None and twin.memory_id is not None:
                results[i] = self.existing(twin.memory_id)
            elif twin is not None and twin.earlier is not None:  # what the earlier one became, held
                results[i] = replace(results[twin.earlier], auto_tags=[], embedded=False, existing=True)
        for i, (position, _) in enumerate(run.entries):
            outcomes[position] = results[i]


class _Run:
    """Plain memories prepared, not yet written, in order; with their positions among the calls."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, NewMemory]] = []
        self._ids: set[str] = set()
        self._subjects: set[str | None] = set()

    def add(self, position: int, new: NewMemory) -> None:
        self.entries.append((position, new))
        self._ids.add(new.memory.id)
        self._subjects.add(new.memory.subject_key)

    def read_by(self, call: Mapping[str, Any]) -> bool:
        """Whether preparing this call reads what the run will write: the memory of an id it gives
        or links to, or how the run spells its subject (a subject keeps its first spelling)."""
        related = call.get("related_memory_ids")
        named = [call.get("memory_id"), *(related if isinstance(related, (list, tuple)) else ())]
        if any(isinstance(memory_id, str) and memory_id in self._ids for memory_id in named):
            return True
        subject = call.get("subject")
        return isinstance(subject, str) and subject_key(subject) in self._subjects


def _new_text(new: NewMemory) -> NewText:
    assert new.vectors is not None  # a plain memory has its vector
    return NewText(new.vectors[0], new.memory.content, new.memory.context.user_id, new.memory.subject_key)
