"""Recalls' access counts on PostgreSQL, written just after the answer rather than before it.

Counting a memory as accessed rewrites its row, and PostgreSQL writes a row whose indexed columns
changed anew into every index of its table (the memories have 25, the words' GIN among them): at
1,000,000 memories 2.5-3 ms for a recall's ten, 9 ms at the median when the recalls were spread over
100 users (pages not yet written since the last checkpoint are logged whole) — up to a third of a
recall, spent after its answer was known. So a recall hands its memories to this tally and answers;
one thread writes what the tally holds, the recalls that came meanwhile in one statement (under
concurrent recalls, fewer and larger writes).

Every read that shows access counts, or orders or filters by them, first waits for what was tallied
before it began (``settle``): this process's reads see every count it has given back. Another
server's read may miss them for the few milliseconds of the write, and a process killed in those
milliseconds loses them: counts are statistics, never a memory. A write that fails (the database
down, a lock held past the busy timeout) is logged and its counts dropped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime

log = logging.getLogger(__name__)

# Recalls tallied and not yet written past which a recall waits for the writer: the tally stays
# bounded while the database is slow or down.
MOST_PENDING = 1_000

# What the writer is given: each memory's new accesses and the last one's time, and each recall's
# time and the number of memories it gave back (its event).
Counts = dict[str, tuple[int, datetime]]
Recalls = list[tuple[datetime, int]]


class AccessTally:
    """Access counts tallied in memory until one thread has written them (see the module)."""

    def __init__(self, write: Callable[[Counts, Recalls], None], settle_timeout_s: float) -> None:
        self._write = write
        self._settle_timeout_s = settle_timeout_s
        self._changed = threading.Condition()
        self._counts: Counts = {}
        self._recalls: Recalls = []
        self._tallied = 0  # recalls handed in
        self._written = 0  # recalls written, or given up on
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-access-counts")
        self._writing = False
        self._local = threading.local()  # depth: this thread's reads and transactions open, searches

    @contextmanager
    def held(self) -> Iterator[None]:
        """Around each read and transaction: the outermost of a thread's settles first. One inside
        another does not: the writer may need a row the outer one holds."""
        if getattr(self._local, "depth", 0) == 0:
            self.settle()
        with self.searching():
            yield

    @contextmanager
    def searching(self) -> Iterator[None]:
        """Around a search's reads, which need no access counts: they go on while the last recall's
        are written."""
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1

    def add(self, memory_ids: Sequence[str], at: datetime) -> None:
        """Count these memories as accessed at ``at``, by one recall."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._recalls) < MOST_PENDING, timeout=self._settle_timeout_s)
            for memory_id in memory_ids:  # accessed_at: the last recall's time, as written one by one
                self._counts[memory_id] = (self._counts.get(memory_id, (0, at))[0] + 1, at)
            self._recalls.append((at, len(memory_ids)))
            self._tallied += 1
            if not self._writing:
                self._writing = True
                self._writer.submit(self._drain)

    def settle(self) -> None:
        """Wait until what was tallied before this call is written (or its write failed); after the
        store's busy timeout, go on without it."""
        with self._changed:
            target = self._tallied
            self._changed.wait_for(lambda: self._written >= target, timeout=self._settle_timeout_s)

    def close(self) -> None:
        """Write what is tallied, then stop the writer."""
        self.settle()
        self._writer.shutdown(wait=True)

    def _drain(self) -> None:
        while True:
            with self._changed:
                if not self._recalls:
                    self._writing = False
                    return
                counts, recalls, upto = self._counts, self._recalls, self._tallied
                self._counts, self._recalls = {}, []
                self._changed.notify_all()  # room for recalls waiting on MOST_PENDING
            try:
                self._write(counts, recalls)
            except Exception as exc:  # the answers were given: their counts are dropped, said once
                log.warning("the access counts of %d memories were not written: %s", len(counts), exc)
            with self._changed:
                self._written = upto
                self._changed.notify_all()
