"""An in-memory index of a store's vectors: cosine search with numpy.

Up to EXACT_UP_TO vectors, and always among a filtered subset, search is an exact scan. Beyond,
a scan of every float vector costs memory bandwidth (150 MB at 100,000 x 384 floats, ~10 ms
here), so the index first ranks by the Hamming distance of sign bits (48 bytes a vector) and
scores exactly only the RERANK_FACTOR * k closest (and any tied with the last). On MiniLM
vectors this keeps the true top-10 at 100,000 (the issue's measurement: recall 1.0 reranking
1,000). The vectors live in the store; the index reads the ones written since it last looked
(by ``seq``), so writes from other processes become visible on the next search.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mnemo.embed import Vectors
from mnemo.lazy import numpy as np
from mnemo.storage import Storage, StoredVector

if TYPE_CHECKING:
    import numpy.typing as npt

    from mnemo.query import Filters

READ_BATCH = 5_000
EXACT_UP_TO = 20_000  # below this an exact scan is as fast as the sign-bit prefilter
RERANK_FACTOR = 4
MIN_RERANK = 1_000
# Rows scored by a near-duplicate check among many similar ones (an import of templated notes:
# ~5% of them lie within the sign radius of each, so the floats gathered grew with the store).
# Among import_speed.py's 20,000 / 100,000 synthetic notes (300 queries each), the true top 10 at
# cosine 0.92 or more ranked at worst 38th / 125th by sign of the 830 / 4,620 within the radius.
CLOSE_KEEP = 256


def sign_radius(floor: float, bits: int) -> int:
    """How many signs may differ between a query and a vector at cosine ``floor`` or more: half
    as many again as random directions that far apart differ in (their angle over pi), plus a
    twelfth of the bits; 106 of 384 at 0.92. Measured with MiniLM: no pair at 0.92 or more among
    6,000 synthetic notes (25,000 pairs), LoCoMo's 4,124 turns or agent-memory's 400 notes
    differed in over 70 signs (35-40 on average), none at 0.85 or more in over 95 (radius 134);
    within 106 of a note lie ~5% of the synthetic notes and ~1.4% of LoCoMo's turns."""
    angle = math.acos(max(-1.0, min(1.0, floor)))
    return min(bits, math.ceil(bits * (1.5 * angle / math.pi + 1 / 12)))


def sign_bits(vectors: Vectors) -> npt.NDArray[np.uint64]:
    """One bit per dimension (set where positive), packed into 64-bit words."""
    packed = np.packbits(vectors > 0, axis=-1)
    padding = (-packed.shape[-1]) % 8
    if padding:
        packed = np.pad(packed, [(0, 0)] * (packed.ndim - 1) + [(0, padding)])
    return np.ascontiguousarray(packed).view(np.uint64)


def closest_by_sign(distance: npt.NDArray[np.unsignedinteger], n: int) -> npt.NDArray[np.int64]:
    """The positions of the n smallest sign distances, and of every one tied with the last."""
    # Distances are small integers, so counting finds the cutoff: a third of argpartition's time.
    cutoff = int(np.searchsorted(np.cumsum(np.bincount(distance)), n))
    return np.flatnonzero(distance <= cutoff)


class VectorIndex:
    def __init__(self, dimension: int, after: int = 0) -> None:
        """``after``: the vectors of seq up to this are held elsewhere (see vector_layers)."""
        self.dimension = dimension
        self._matrix: Vectors = np.zeros((0, dimension), dtype=np.float32)
        # Sign bits transposed, one row per 64-bit word: a distance adds up a few contiguous rows.
        self._bits: npt.NDArray[np.uint64] = sign_bits(self._matrix).T
        self._keys: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._size = 0
        self._row_of: dict[int, int] = {}
        self._seq = after
        self._lock = threading.Lock()

    def refresh(self, storage: Storage) -> None:
        """Take in every vector written since the last refresh, by this process or another, and those
        of this thread's batch not yet committed (``unfed_vectors``: given again by seq once they are)."""
        with self._lock:
            if storage.last_vector_seq() > self._seq:
                while batch := storage.vectors_after(self._seq, READ_BATCH):
                    self._take(batch)
                    self._seq = batch[-1].seq
                    if len(batch) < READ_BATCH:  # the last: asking again would find nothing
                        break
            if unfed := storage.unfed_vectors():
                self._take(unfed)

    def _take(self, batch: Sequence[StoredVector]) -> None:
        vectors = np.frombuffer(b"".join(v.vector for v in batch), dtype=np.float32)
        self._add([v.key for v in batch], vectors.reshape(len(batch), self.dimension))

    def _add(self, keys: Sequence[int], vectors: Vectors) -> None:
        fresh = [i for i, key in enumerate(keys) if key not in self._row_of]
        for i, key in enumerate(keys):  # a re-embedded memory replaces its row in place
            row = self._row_of.get(key)
            if row is not None:
                self._matrix[row] = vectors[i]
                self._bits[:, row] = sign_bits(vectors[i : i + 1])[0]
        if not fresh:
            return
        needed = self._size + len(fresh)
        if needed > len(self._matrix):  # grow geometrically: appends stay amortised O(1)
            capacity = max(needed, 2 * len(self._matrix), 1024)
            matrix = np.zeros((capacity, self.dimension), dtype=np.float32)
            matrix[: self._size] = self._matrix[: self._size]
            keys_array = np.zeros(capacity, dtype=np.int64)
            keys_array[: self._size] = self._keys[: self._size]
            bits = np.zeros((self._bits.shape[0], capacity), dtype=np.uint64)
            bits[:, : self._size] = self._bits[:, : self._size]
            self._matrix, self._keys, self._bits = matrix, keys_array, bits
        start = self._size
        self._matrix[start:needed] = vectors[fresh]
        self._bits[:, start:needed] = sign_bits(vectors[fresh]).T
        self._keys[start:needed] = [keys[i] for i in fresh]
        for offset, i in enumerate(fresh):
            self._row_of[keys[i]] = start + offset
        self._size = needed

    def __len__(self) -> int:
        """Rows held, discarded ones included."""
        return self._size

    def held(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Which of these keys have a vector here."""
        with self._lock:
            return np.isin(keys, self._keys[: self._size])

    def discard(self, keys: Sequence[int]) -> None:
        """Forget these keys' vectors (their rows stay, zeroed: they no longer match anything)."""
        with self._lock:
            for key in keys:
                row = self._row_of.pop(key, None)
                if row is not None:
                    self._matrix[row] = 0.0
                    self._keys[row] = -1

    def search(self, query: Vectors, k: int, among: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """The k keys most similar to the query (cosine, best first), optionally only ``among`` keys."""
        with self._lock:
            rows: npt.NDArray[np.int64] | None = None  # None: every row, scanned as a view (no copy)
            if among is not None:
                rows = np.fromiter((r for key in among if (r := self._row_of.get(key)) is not None), dtype=np.int64)
            elif self._size > max(EXACT_UP_TO, RERANK_FACTOR * k):
                rows = self._closest_by_sign(query, max(MIN_RERANK, RERANK_FACTOR * k))
            scores = (self._matrix[: self._size] if rows is None else self._matrix[rows]) @ query
            if len(scores) == 0:
                return []
            k = min(k, len(scores))
            top = np.argpartition(-scores, k - 1)[:k]
            top = top[np.argsort(-scores[top])]
            keys = self._keys[top if rows is None else rows[top]]
            return [(int(key), float(scores[i])) for key, i in zip(keys, top, strict=True)]

    def search_passing(self, query: Vectors, k: int, filters: Filters, storage: Storage) -> list[tuple[int, float]]:
        return self.search(query, k, among=storage.keys_matching(filters))

    def close_many(self, queries: Sequence[Vectors], k: int, floor: float) -> list[list[tuple[int, float]]]:
        return [self.close(query, k, floor) for query in queries]

    def close(self, query: Vectors, k: int, floor: float) -> list[tuple[int, float]]:
        """The k keys nearest the query of those at cosine ``floor`` or more, best first.

        Only the rows whose sign bits differ from the query's in at most ``sign_radius`` bits are
        scored: a near-duplicate check then reads 48 bytes of most rows, not 1,536 (at 20,000
        memories, the scan of every float was a third of a bulk import's storing thread). Of more
        than twice CLOSE_KEEP such rows, only the CLOSE_KEEP closest by sign are scored."""
        with self._lock:
            distance = self._sign_distances(query)
            rows = np.flatnonzero(distance <= sign_radius(floor, self.dimension))
            if len(rows) > 2 * CLOSE_KEEP:
                rows = rows[closest_by_sign(distance[rows], CLOSE_KEEP)]
            scores = self._matrix[rows] @ query
            passing = (scores >= floor) & (self._keys[rows] >= 0)  # a discarded row keeps no key
            rows, scores = rows[passing], scores[passing]
            best = np.argsort(-scores)[:k]
            return [(int(key), float(score)) for key, score in zip(self._keys[rows[best]], scores[best], strict=True)]

    def _sign_distances(self, query: Vectors) -> npt.NDArray[np.uint16]:
        """How many signs of each row differ from the query's."""
        distance = np.zeros(self._size, dtype=np.uint16)
        for row, word in zip(self._bits[:, : self._size], sign_bits(query[None, :])[0], strict=True):
            distance += np.bitwise_count(row ^ word)
        return distance

    def _closest_by_sign(self, query: Vectors, n: int) -> npt.NDArray[np.int64]:
        """The n rows whose sign bits differ least from the query's, and every row tied with the last."""
        return closest_by_sign(self._sign_distances(query), n)

    def vectors(self, keys: Sequence[int]) -> dict[int, Vectors]:
        """The vectors of these keys that have one."""
        with self._lock:
            return {key: self._matrix[row].copy() for key in keys if (row := self._row_of.get(key)) is not None}

    def similarity(self, query: Vectors, keys: Sequence[int]) -> dict[int, float]:
        """Cosine of the query with each of these keys that has a vector."""
        with self._lock:
            present = [(key, row) for key in keys if (row := self._row_of.get(key)) is not None]
            if not present:
                return {}
            scores = self._matrix[[row for _, row in present]] @ query
        return {key: float(score) for (key, _), score in zip(present, scores, strict=True)}
