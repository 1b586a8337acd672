"""A store's vectors as files beside it: a navigable graph for approximate search, with exact rerank.

A snapshot is a folder named by the vector ``seq`` it covers (every vector the store held up to
that seq, each under its storage key):

- ``keys.npy``: the keys, sorted (read whole: 8 bytes a vector, and every search looks keys up);
  ``vectors.npy``: their float32 vectors, row for row, memory-mapped, so opening costs nothing
  whatever the size and the pages a search touches are all it reads; they score candidates
  exactly, and a filtered subset of keys.
- ``signs.npy``: the vectors' sign bits, row for row (48 bytes for 384 dimensions), memory-mapped:
  a search among many keys scores exactly only those whose signs are closest to the query's
  (``best_among``). A snapshot written before it had them scores every row.
- ``graph.usearch``: an HNSW graph (usearch) over int8 copies of the vectors, also memory-mapped,
  which proposes candidates (``candidates``: 4 x k of them, at most k + 600), rescored from ``vectors.npy``.
- ``meta.json``: the seq, the model and the dimension; written last, so a folder without it is a
  build that did not finish.

A snapshot never changes once written. ``build`` makes the next one from the last one and the
vectors stored since (streamed from the store in batches, so memory stays bounded by the graph),
into a temporary folder renamed into place, so readers in other processes see either the old
snapshot or the whole new one; a process with the old one open keeps reading it (its files stay
readable until unmapped), then moves to the new one on its next refresh.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.embed import Vectors
from mnemo.lazy import import_now
from mnemo.lazy import numpy as np
from mnemo.search.vector_index import closest_by_sign, sign_bits
from mnemo.storage import Storage

if TYPE_CHECKING:
    import numpy.typing as npt

RERANK_FACTOR = 4  # graph candidates rescored exactly per wanted result
MIN_CANDIDATES = 64
# The most candidates beyond the k wanted. Spec 000's search asks for 600 nearest (a window of three
# times its pool of 200, for those archived or expired): of 4 x 600 candidates, the graph walk was
# 40% of its time at 1,000,000 memories. With 1,200 a search took 13.0-13.5 / 16.4-17.6 ms (p50 /
# p95) instead of 17.3-18.0 / 21.7-22.8, 199 of 200 pages were the same and 187 totals (the others
# within a few); the true top 600 found: a note's words 1.000 either way, three random words 0.93
# instead of 0.97.
MAX_EXTRA_CANDIDATES = 600
# Links per node, and the candidates a node's links are chosen from when it joins. Templated notes
# cluster (hundreds of memories within 0.9 cosine of each other): with usearch's defaults (16, 128)
# a node's candidates were all its cluster's and the graph had few links between clusters. At
# 1,000,000 such memories the 64 candidates of a search for 10 held 0.94 of the true top 10 for a
# stored note's words and 0.40 for three random words; with 32 and 256, 0.97 and 0.59, for the
# graph's 0.5 GB and 92 s of building on 2 cores, 0.66 GB and 224 s (benchmarks/graph_recall.py).
CONNECTIVITY = 32
EXPANSION_ADD = 256
EXPANSION_SEARCH = 64  # at 200,000 MiniLM-like vectors: 0.995 of the true top 10 among 40 candidates
# A search for more than EXPANSION_SEARCH candidates walks the graph at least WIDE_EXPANSION wide,
# keeping the candidates it asked for. A query far from every note (three random words: its nearest
# at cosine 0.45 at the median) lost its way in the narrower walk: at 1,000,000 memories a recall's
# 600 candidates held 0.882 of its true top 10 walked 600 wide and 0.950 walked 1,200 wide, for 1.4
# ms more; a note's words and half a note's held 1.000 and 0.976 either way; walking 1,200 and
# rescoring all of them instead took 8.5 ms (a scratch script, graph_recall.py's queries).
WIDE_EXPANSION = 1_200
COPY_BATCH = 10_000  # rows copied or added to the graph at once; a build checks between them whether to stop
ROWS_BY_KEY_SPREAD = 4  # a key-to-row table up to 4 int32 per snapshot row (16 MB at 1,000,000)
META = "meta.json"


@dataclass(frozen=True, slots=True)
class Meta:
    seq: int
    model: str
    dimension: int
    count: int


def _graph_class() -> Any:
    """usearch's Index, imported on first use: only stores past the size threshold need it.

    usearch's extension loaded before onnxruntime's makes a later ``import onnxruntime`` crash the
    process (a segfault while onnxruntime initialises; usearch 2.26 with onnxruntime 1.2x on Linux),
    so onnxruntime, where installed, is imported first (and numpy before it: see mnemo.lazy).
    """
    import_now(np)
    with suppress(ImportError):
        import onnxruntime  # noqa: F401

    from usearch.index import Index

    return Index


def new_graph(dimension: int, connectivity: int | None = None, expansion_add: int | None = None) -> Any:
    """An empty graph as a snapshot's is made (int8 copies of the vectors, by cosine): by default of
    CONNECTIVITY links a node, chosen among EXPANSION_ADD candidates."""
    return _graph_class()(
        ndim=dimension,
        metric="cos",
        dtype="i8",
        connectivity=connectivity or CONNECTIVITY,
        expansion_add=expansion_add or EXPANSION_ADD,
    )


def candidates(k: int) -> int:
    """How many candidates the graph proposes for the k nearest, to be rescored exactly."""
    return max(MIN_CANDIDATES, min(RERANK_FACTOR * k, k + MAX_EXTRA_CANDIDATES))


def walk_breadth(count: int) -> int:
    """How wide the graph is walked for ``count`` candidates (usearch walks at least as wide as it returns)."""
    return EXPANSION_SEARCH if count <= EXPANSION_SEARCH else max(count, WIDE_EXPANSION)


class BuildStopped(Exception):
    """A build was asked to stop (its process is closing the store) and left nothing behind."""


class Snapshot:
    """One snapshot folder, opened read-only."""

    def __init__(self, folder: Path, meta: Meta) -> None:
        self.folder = folder
        self.meta = meta
        self.keys: npt.NDArray[np.int64] = np.load(folder / "keys.npy")  # 8 MB at 1,000,000: read, not mapped
        self._row_of = _rows_by_key(self.keys)
        self.vectors: npt.NDArray[np.float32] = np.load(folder / "vectors.npy", mmap_mode="r")
        signs = folder / "signs.npy"
        self.signs: npt.NDArray[np.uint64] | None = np.load(signs, mmap_mode="r") if signs.exists() else None
        # The graph file mapped twice, walked at two breadths (usearch sets it for an index, not a
        # search): 50 MB of memory and 0.15 s more to open at 1,000,000.
        self._graph = _viewed(folder, EXPANSION_SEARCH)
        self._wide_graph = _viewed(folder, WIDE_EXPANSION)

    @property
    def seq(self) -> int:
        return self.meta.seq

    @property
    def connectivity(self) -> int:
        """The links per node its graph was built with."""
        return int(self._graph.connectivity)

    def rows(self, keys: Sequence[int] | npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The keys held here among these, and their rows."""
        wanted = np.asarray(keys, dtype=np.int64)
        if len(self.keys) == 0 or len(wanted) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        if self._row_of is not None:
            table = self._row_of
            inside = (wanted >= 0) & (wanted < len(table))
            rows = np.where(inside, table[np.clip(wanted, 0, len(table) - 1)], -1).astype(np.int64)
            held = rows >= 0
        else:
            rows = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
            held = self.keys[rows] == wanted
        return wanted[held], rows[held]

    def nearest(self, query: Vectors, k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """About the k nearest keys and their exact cosines, unordered: the graph's candidates rescored."""
        if len(self.keys) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        count = candidates(k)
        graph = self._graph if walk_breadth(count) == EXPANSION_SEARCH else self._wide_graph
        found = graph.search(query, count)
        keys, rows = self.rows(found.keys.astype(np.int64))
        return keys, self.scores(query, rows)

    def scores(self, query: Vectors, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """Exact cosines of the query with these rows (sorted first: the file is read in order)."""
        order = np.argsort(rows)
        scores = np.empty(len(rows), dtype=np.float32)
        scores[order] = self.vectors[rows[order]] @ query
        return scores

    def best_among(
        self, query: Vectors, keys: npt.NDArray[np.int64], rows: npt.NDArray[np.int64], keep: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Which of these keys (at these rows) may be the query's nearest, with their exact cosines:
        past twice ``keep`` rows, the ``keep`` whose signs differ least from the query's (and any
        tied with the last); else all of them. A user's 10,000 rows at 1,000,000 memories are 15 MB
        of floats scattered through the file, 480 KB of signs."""
        if self.signs is None or len(rows) <= 2 * keep:
            return keys, self.scores(query, rows)
        order = np.argsort(rows)  # the files are read in order
        keys, rows = keys[order], rows[order]
        distance = np.bitwise_count(self.signs[rows] ^ sign_bits(query[None, :])[0]).sum(axis=1, dtype=np.uint16)
        closest = closest_by_sign(distance, keep)
        return keys[closest], np.asarray(self.vectors[rows[closest]]) @ query


def _viewed(folder: Path, breadth: int) -> Any:
    """The snapshot's graph, memory-mapped, walked ``breadth`` wide."""
    graph = _graph_class().restore(str(folder / "graph.usearch"), view=True)
    if graph is None:  # usearch's answer when the file is not there
        raise FileNotFoundError(f"no graph in {folder}")
    graph.expansion_search = breadth
    return graph


def _rows_by_key(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int32] | None:
    """Each key's row, indexed by the key itself (-1 where no row), when the keys (the memories'
    rowids, sorted) are dense enough that the table stays within ROWS_BY_KEY_SPREAD times their
    number; else None (found by binary search). A filtered recall at 1,000,000 memories looks up a
    user's ~10,000 keys: 4.2 ms by binary search in the 8 MB of keys, ~0.1 ms in the table."""
    if len(keys) == 0 or keys[0] < 0 or keys[-1] >= ROWS_BY_KEY_SPREAD * len(keys) + 1024:
        return None
    table = np.full(int(keys[-1]) + 1, -1, dtype=np.int32)
    table[keys] = np.arange(len(keys), dtype=np.int32)
    return table


def latest(folder: Path, model: str, dimension: int) -> tuple[Path, Meta] | None:
    """The newest finished snapshot in the folder made by this model, if any."""
    best: tuple[Path, Meta] | None = None
    for entry in folder.glob("*/" + META):
        if not entry.parent.name.isdigit():
            continue  # a build still being written (it has meta.json a moment before its rename)
        try:
            meta = Meta(**json.loads(entry.read_text()))
        except (OSError, ValueError, TypeError):
            continue  # damaged or foreign: the next build replaces it
        if (meta.model, meta.dimension) == (model, dimension) and (best is None or meta.seq > best[1].seq):
            best = entry.parent, meta
    return best


def build(
    folder: Path,
    storage: Storage,
    model: str,
    dimension: int,
    previous: Snapshot | None,
    stop: threading.Event | None = None,
) -> Meta:
    """Write the snapshot of every vector the store holds now, from ``previous`` and what came after it.

    ``stop``: when set, the build ends at its next batch of rows with ``BuildStopped``; a build
    that fails or stops removes its unfinished folder."""
    target = storage.last_vector_seq()
    work = folder / f".building-{os.getpid()}-{target}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        return _build_in(work, folder, storage, model, dimension, previous, target, stop or threading.Event())
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _build_in(
    work: Path,
    folder: Path,
    storage: Storage,
    model: str,
    dimension: int,
    previous: Snapshot | None,
    target: int,
    stop: threading.Event,
) -> Meta:
    def check() -> None:
        if stop.is_set():
            raise BuildStopped(f"the vector index snapshot in {folder} was not finished: the store is closing")

    since = previous.seq if previous is not None else 0
    live = np.fromiter(sorted(storage.vector_keys()), dtype=np.int64)
    # The vectors stored after the previous snapshot, copied in batches into a mapped file; the
    # previous rows still current (neither re-embedded since nor gone) are read from the previous
    # snapshot only when the sorted file is written, so they are copied once.
    fresh = np.lib.format.open_memmap(work / "fresh.npy", "w+", np.float32, (max(len(live), 1), dimension))
    keys = np.zeros(len(live), dtype=np.int64)
    count = 0
    seq = since
    while seq < target and (batch := storage.vectors_after(seq, COPY_BATCH)):
        check()
        batch = [v for v in batch if v.seq <= target]
        if not batch:
            break
        vectors = np.frombuffer(b"".join(v.vector for v in batch), dtype=np.float32).reshape(len(batch), dimension)
        batch_keys = np.array([v.key for v in batch], dtype=np.int64)
        current = np.isin(batch_keys, live)  # deleted since it was read: left out
        n = int(current.sum())
        keys[count : count + n], fresh[count : count + n] = batch_keys[current], vectors[current]
        count += n
        seq = batch[-1].seq
    renewed = keys[:count]
    graph = new_graph(dimension)
    kept = np.zeros(0, dtype=np.int64)  # the previous snapshot's rows that stay
    if previous is not None:
        stale = ~np.isin(previous.keys, live) | np.isin(previous.keys, renewed)  # gone, or re-embedded since
        kept = np.flatnonzero(~stale)
        if previous.connectivity == CONNECTIVITY:  # only the new rows join its graph
            graph.load(str(previous.folder / "graph.usearch"))
            graph.expansion_add = EXPANSION_ADD  # not kept in the file
            if stale.any():
                graph.remove(previous.keys[stale].astype(np.uint64))
        else:  # a graph of other links (an older mnemo's) is built again, from its vectors
            for start in range(0, len(kept), COPY_BATCH):
                check()
                rows = kept[start : start + COPY_BATCH]
                graph.add(previous.keys[rows].astype(np.uint64), np.asarray(previous.vectors[rows]))
    for start in range(0, count, COPY_BATCH):
        check()
        end = min(start + COPY_BATCH, count)
        graph.add(renewed[start:end].astype(np.uint64), np.asarray(fresh[start:end]))
    graph.save(str(work / "graph.usearch"))
    _write_sorted(work, renewed, fresh, previous, kept, check)
    meta = Meta(seq=seq, model=model, dimension=dimension, count=count + len(kept))
    (work / META).write_text(json.dumps(asdict(meta)))
    for path in [*work.iterdir(), work]:
        _fsync(path)
    final = folder / str(seq)
    if final.exists():  # another process built the same snapshot: keep theirs
        shutil.rmtree(work, ignore_errors=True)
    else:
        work.rename(final)
    _fsync(folder)
    return meta


def _write_sorted(
    work: Path,
    renewed: npt.NDArray[np.int64],
    fresh: npt.NDArray[np.float32],
    previous: Snapshot | None,
    kept: npt.NDArray[np.int64],
    check: Callable[[], None],
) -> None:
    """keys.npy sorted, and vectors.npy and signs.npy in the same order, gathered in batches from the
    fresh rows (``renewed``'s, in ``fresh``) and the previous snapshot's ``kept`` rows, read in their
    order; ``check`` before each batch."""
    old_keys = previous.keys[kept] if previous is not None else np.zeros(0, dtype=np.int64)
    keys = np.concatenate([renewed, old_keys])
    order = np.argsort(keys, kind="stable")  # below len(renewed): a fresh row; from there, a kept one
    np.save(work / "keys.npy", keys[order])
    out = np.lib.format.open_memmap(work / "vectors.npy", "w+", np.float32, (len(keys), fresh.shape[1]))
    signs = np.lib.format.open_memmap(work / "signs.npy", "w+", np.uint64, (len(keys), (fresh.shape[1] + 63) // 64))
    for start in range(0, len(keys), COPY_BATCH):
        check()
        rows = order[start : start + COPY_BATCH]
        is_fresh = rows < len(renewed)
        block = np.empty((len(rows), fresh.shape[1]), dtype=np.float32)
        block[is_fresh] = fresh[rows[is_fresh]]
        if previous is not None:
            block[~is_fresh] = previous.vectors[kept[rows[~is_fresh] - len(renewed)]]
        out[start : start + len(rows)] = block
        signs[start : start + len(rows)] = sign_bits(block)
    out.flush()
    signs.flush()
    del out, signs
    (work / "fresh.npy").unlink()


def _fsync(path: Path) -> None:
    """Flush a file, or a folder's entries, to disk (before a rename publishes them)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_older(folder: Path, keep: Path) -> None:
    """Delete the snapshots older than ``keep`` and abandoned builds (readers keep their open files)."""
    for entry in folder.iterdir():
        if entry == keep or not entry.is_dir():
            continue
        if entry.name.startswith(".building-"):
            pid = entry.name.split("-")[1]  # .building-<pid>-<seq>
            if pid.isdigit() and _alive(int(pid)):
                continue
        elif not entry.name.isdigit() or int(entry.name) >= int(keep.name):
            continue
        shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
