"""The vector search of a store, in the process (SQLite and PostgreSQL alike): two layers.

Up to GRAPH_FROM vectors, everything is in ``VectorIndex`` (exact, in memory). Past that, a
snapshot on disk (``vector_graph``: a graph for candidates, float32 rows to rescore them, both
memory-mapped) holds every vector up to some ``seq``, and ``VectorIndex`` holds only the ones
stored after it. A search asks both and keeps the best; a key in the recent layer (re-embedded
since the snapshot) or discarded is ignored in the snapshot. When the recent layer reaches a
share of the snapshot's size, a background thread writes the next snapshot from the last one plus
the recent vectors (one process at a time, under a lock file); every process, this one included,
moves to a newer snapshot on its next refresh, which notices it by the folder's mtime. A SQLite
store's snapshot is beside it, shared by the processes that open it; a PostgreSQL store's is in
each server's home (``Storage.index_folder``), whose ``seq`` is the feed's, in commit order.

So start-up reads only the vectors since the last snapshot, whatever the store's size; writes by
other processes reach the recent layer as before (by ``seq``), and deletions by anyone drop out of
results when the engine reads the memories, then out of the next snapshot.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mnemo.embed import Vectors
from mnemo.lazy import numpy as np
from mnemo.search import vector_graph
from mnemo.search.vector_graph import RERANK_FACTOR, Snapshot, candidates
from mnemo.search.vector_index import VectorIndex
from mnemo.storage import Storage

if TYPE_CHECKING:
    import numpy.typing as npt

    from mnemo.query import Filters

log = logging.getLogger(__name__)

# Vectors from which a store's index is a snapshot plus the recent ones. Below, the scan in memory
# takes a couple of ms and reading every vector at start-up about a second; above, both grow with
# the store (1.5 GB and 12 s at 1,000,000: benchmarks/latency.py, "Large stores" in the README).
GRAPH_FROM = 100_000
# The recent layer holds up to this share of GRAPH_FROM, or of the snapshot's size if larger,
# before the next snapshot is written: a snapshot rewrites every vector file (1.5 GB at 1,000,000),
# so its cost is spread over stores in proportion, while the recent layer's scan stays a few ms
# (exact up to 20,000 vectors, by sign bits beyond: see vector_index).
REBUILD_SHARE = 0.2
# A filtered search among more keys of the snapshot than this asks the graph for enough
# candidates to hold k of them; among fewer, it compares their sign bits and scores the closest.
EXACT_AMONG_UP_TO = 20_000
# Rows of a filtered search among the snapshot scored exactly, of those past twice as many: the ones
# whose sign bits are closest to the query's (Snapshot.best_among). Among a user's ~10,000 of
# 1,000,000 MiniLM vectors (100 queries), this kept the true top 10 every time and 0.9998 of the
# top 50 (0.999 keeping 1,000), gathering 2 MB of vectors instead of 15 (4.3 ms to 1.1 here).
EXACT_AMONG_KEEP = 2_000
RETRY_AFTER_S = 600.0  # after a snapshot could not be written (a full disk?), before trying again

# Every index of this process, for its exit: see _stop_snapshots.
_indexes: weakref.WeakSet[LayeredIndex] = weakref.WeakSet()


@atexit.register
def _stop_snapshots() -> None:
    """Stop the snapshots being written when the process exits without closing its stores (a script
    that opened a service and returned): a builder killed inside the graph library's native code
    aborts the process (SIGABRT, "terminate called without an active exception"). Waits for the
    batch of rows in hand (COPY_BATCH; seconds at most); the unfinished folder is removed."""
    for index in list(_indexes):
        index.shutdown()


class LayeredIndex:
    """``VectorSearch`` over a snapshot on disk and the vectors stored since, in memory."""

    def __init__(
        self,
        dimension: int,
        model: str,
        folder: Path,
        graph_from: int = GRAPH_FROM,
    ) -> None:
        self.dimension = dimension
        self.model = model
        self.folder = folder
        self.graph_from = graph_from
        self._recent = VectorIndex(dimension)
        self._snapshot: Snapshot | None = None
        self._discarded: frozenset[int] = frozenset()  # replaced, never changed: searches read it unlocked
        self._folder_mtime: int | None = None
        self._lock = threading.Lock()  # guards swapping the layers, and the choice to build
        self._builder: threading.Thread | None = None
        self._stop = threading.Event()  # set by shutdown(): no snapshot is written after it
        self._retry_at = 0.0  # time.monotonic() before which no snapshot is attempted (after a failure)
        _indexes.add(self)

    @property
    def snapshot_seq(self) -> int | None:
        """The seq the snapshot in use covers; None while everything is in memory."""
        snapshot = self._snapshot
        return None if snapshot is None else snapshot.seq

    @property
    def in_memory(self) -> int:
        """Vectors held in memory: those stored after the snapshot (all of them without one)."""
        return len(self._recent)

    def settle(self, timeout: float | None = None) -> None:
        """Wait for a snapshot being written by this process, if any (benchmarks, tests)."""
        builder = self._builder
        if builder is not None:
            builder.join(timeout)

    def shutdown(self) -> None:
        """Stop a snapshot being written by this process (at its next batch of rows) and wait for
        it, and write none after: before the store's connections close, which must not happen
        under a query (a segfault in SQLite's Python module)."""
        with self._lock:  # a refresh starts a builder under it: then that one is the one waited for
            self._stop.set()
        self.settle()

    def refresh(self, storage: Storage) -> None:
        self._adopt_newer_snapshot(storage)
        self._recent.refresh(storage)
        with self._lock:
            snapshot = self._snapshot
            due = len(self._recent) >= (
                self.graph_from
                if snapshot is None
                else max(1, int(REBUILD_SHARE * max(self.graph_from, snapshot.meta.count)))
            )
            idle = self._builder is None or not self._builder.is_alive()
            if due and idle and not self._stop.is_set() and time.monotonic() >= self._retry_at:
                self._builder = threading.Thread(
                    target=self._build_quietly, args=(storage,), name="mnemo-vector-snapshot", daemon=True
                )
                self._builder.start()

    def build(self, storage: Storage) -> bool:
        """Write the next snapshot now and move to it; False if another process is writing one."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / ".lock", "a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            self._adopt_newer_snapshot(storage)  # one another process just wrote, if any
            meta = vector_graph.build(self.folder, storage, self.model, self.dimension, self._snapshot, self._stop)
            vector_graph.remove_older(self.folder, self.folder / str(meta.seq))
        self._adopt_newer_snapshot(storage)
        return True

    def _build_quietly(self, storage: Storage) -> None:
        try:
            self.build(storage)
        except vector_graph.BuildStopped:
            pass
        except Exception:  # the layers in use still answer; a refresh tries again later
            self._retry_at = time.monotonic() + RETRY_AFTER_S
            log.exception("could not write the vector index snapshot in %s", self.folder)

    def _adopt_newer_snapshot(self, storage: Storage) -> None:
        try:
            mtime = self.folder.stat().st_mtime_ns
        except FileNotFoundError:
            return
        if mtime == self._folder_mtime:
            return
        self._folder_mtime = mtime
        found = vector_graph.latest(self.folder, self.model, self.dimension)
        current = self.snapshot_seq
        if found is None or (current is not None and found[1].seq <= current):
            return
        folder, meta = found
        if meta.seq > storage.last_vector_seq():  # the store was put back to an earlier state
            return
        try:
            snapshot = Snapshot(folder, meta)
        except FileNotFoundError:  # being removed by the process that wrote a newer one: look again next time
            self._folder_mtime = None
            return
        recent = VectorIndex(self.dimension, after=meta.seq)
        recent.refresh(storage)
        with self._lock:
            if self._snapshot is None or self._snapshot.seq < meta.seq:
                self._snapshot, self._recent = snapshot, recent

    def discard(self, keys: Sequence[int]) -> None:
        with self._lock:
            self._discarded = self._discarded.union(keys)
            recent = self._recent
        recent.discard(keys)

    def search(self, query: Vectors, k: int, among: Sequence[int] | None = None) -> list[tuple[int, float]]:
        snapshot, recent = self._snapshot, self._recent
        if snapshot is None:
            return recent.search(query, k, among)
        if among is None:
            found = recent.search(query, k)
            keys, scores = self._graph_nearest(snapshot, recent, query, k)
        else:
            wanted = np.asarray(among, dtype=np.int64)
            in_recent = recent.held(wanted)  # their vector there is the current one
            found = recent.search(query, k, wanted[in_recent].tolist()) if in_recent.any() else []
            keys, rows = self._current(snapshot, recent, wanted[~in_recent])
            if len(keys) > EXACT_AMONG_UP_TO and (nearest := self._nearest_among(snapshot, query, k, keys)) is not None:
                keys, scores = nearest
            else:
                keys, scores = snapshot.best_among(query, keys, rows, max(EXACT_AMONG_KEEP, RERANK_FACTOR * k))
        if len(scores) > k:  # only the best k become Python objects
            best = np.argpartition(-scores, k - 1)[:k]
            keys, scores = keys[best], scores[best]
        return _merged(found, keys, scores, k)

    def search_passing(self, query: Vectors, k: int, filters: Filters, storage: Storage) -> list[tuple[int, float]]:
        return self.search(query, k, among=storage.keys_matching(filters))

    def close_many(self, queries: Sequence[Vectors], k: int, floor: float) -> list[list[tuple[int, float]]]:
        return [self.close(query, k, floor) for query in queries]

    def close(self, query: Vectors, k: int, floor: float) -> list[tuple[int, float]]:
        """The k nearest at cosine ``floor`` or more: the recent layer's by their signs first
        (VectorIndex.close), the snapshot's from its graph."""
        snapshot, recent = self._snapshot, self._recent
        found = recent.close(query, k, floor)
        if snapshot is None:
            return found
        keys, scores = self._graph_nearest(snapshot, recent, query, k)
        at_floor = scores >= floor
        return _merged(found, keys[at_floor], scores[at_floor], k)

    def _graph_nearest(
        self, snapshot: Snapshot, recent: VectorIndex, query: Vectors, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The snapshot graph's k nearest whose snapshot vector is still current."""
        keys, scores = snapshot.nearest(query, k)
        current = self._current_mask(recent, keys)
        return keys[current], scores[current]

    @staticmethod
    def _nearest_among(
        snapshot: Snapshot, query: Vectors, k: int, among: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        """The graph's nearest among many keys: as many candidates as hold k of them on average,
        twice over; None if that is no fewer than the keys, or if fewer than k of them came up (the
        caller scans them all)."""
        share = len(among) / max(1, snapshot.meta.count)
        wanted_k = int(2 * k / share) + 1
        if candidates(wanted_k) >= len(among):
            return None
        keys, scores = snapshot.nearest(query, wanted_k)
        wanted = np.isin(keys, among)
        return (keys[wanted], scores[wanted]) if wanted.sum() >= k else None

    def similarity(self, query: Vectors, keys: Sequence[int]) -> dict[int, float]:
        snapshot, recent = self._snapshot, self._recent
        found = recent.similarity(query, keys)
        if snapshot is not None:
            held, rows = self._current(snapshot, recent, [key for key in keys if key not in found])
            found.update(zip(held.tolist(), snapshot.scores(query, rows).tolist(), strict=True))
        return found

    def vectors(self, keys: Sequence[int]) -> dict[int, Vectors]:
        snapshot, recent = self._snapshot, self._recent
        found = recent.vectors(keys)
        if snapshot is not None:
            held, rows = self._current(snapshot, recent, [key for key in keys if key not in found])
            found.update((int(key), np.array(snapshot.vectors[row])) for key, row in zip(held, rows, strict=True))
        return found

    def _current(
        self, snapshot: Snapshot, recent: VectorIndex, keys: Sequence[int] | npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The snapshot's rows of these keys whose snapshot vector is still theirs."""
        held, rows = snapshot.rows(keys)
        keep = self._current_mask(recent, held)
        return held[keep], rows[keep]

    def _current_mask(self, recent: VectorIndex, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """False for keys whose snapshot vector was replaced (re-embedded since) or discarded."""
        replaced = recent.held(keys)
        discarded = self._discarded
        if discarded:
            replaced |= np.isin(keys, np.fromiter(discarded, dtype=np.int64, count=len(discarded)))
        return ~replaced


def _merged(
    found: list[tuple[int, float]], keys: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], k: int
) -> list[tuple[int, float]]:
    """The recent layer's hits and the snapshot's, the best k of them."""
    merged = found + list(zip(keys.tolist(), scores.tolist(), strict=True))
    return sorted(merged, key=lambda hit: -hit[1])[:k]
