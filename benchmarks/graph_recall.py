"""How well the vector index's graph finds a query's true nearest memories, and how fast.

    python benchmarks/graph_recall.py --store-dir DIR [--rows N] [--settings 16,128 32,256]

DIR is a store kept by ``benchmarks/latency.py --store-dir`` past the size where its vectors get a
snapshot graph (see "Large stores" in the README). For each setting (links a node, candidates a node's
links are chosen from when it joins) a graph of the snapshot's vectors (its first N rows with
``--rows``) is built as a snapshot's is, then searched as a search does (4 x k candidates, rescored
exactly), with 200 queries embedded by the local model: 100 of a stored note's words (a sentence of
``latency.py`` without its last three words) and 100 of three random words, which sit far from every
note. Prints, for each setting and k, the share of the true top k found, the share of what was found
within 0.01 cosine of the true k-th (a cluster's near-identical copies may stand in for each other),
the queries that found under half, and a search's milliseconds. Needs `mnemo setup` (the local model).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from latency import SENTENCES
from mnemo.config import Settings
from mnemo.embed.local import LocalEmbedder
from mnemo.vector_graph import EXPANSION_SEARCH, MIN_CANDIDATES, RERANK_FACTOR, new_graph
from server_rss import WORDS

KS = (10, 50, 200)
QUERIES_OF_EACH_KIND = 100
NEAR = 0.01  # cosine below the true k-th that still counts as found


@dataclass(frozen=True)
class Found:
    recall: np.ndarray  # per query: share of the true top k found
    near: np.ndarray  # per query: share of the found k within NEAR of the true k-th cosine
    ms: np.ndarray


def latest_snapshot(home: Path) -> Path:
    metas = [(json.loads(m.read_text())["seq"], m.parent) for m in home.glob("stores/*/vector-index/*/meta.json")]
    if not metas:
        raise SystemExit(f"no vector index snapshot under {home}: keep a store of 100,000 or more with latency.py")
    return max(metas)[1]


def queries(model: LocalEmbedder) -> np.ndarray:
    rng = random.Random(9)
    texts = [" ".join(s.split()[:-3]) for s in rng.sample(SENTENCES, QUERIES_OF_EACH_KIND)]
    texts += [" ".join(rng.sample(WORDS, 3)) for _ in range(QUERIES_OF_EACH_KIND)]
    return np.vstack([model.embed_query(text) for text in texts]).astype(np.float32)


def search(graph: object, vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Each query's k best of the graph's candidates by exact cosine, and the milliseconds each took."""
    found, ms = [], []
    for query in queries:
        started = time.perf_counter()
        rows = np.sort(graph.search(query, max(MIN_CANDIDATES, RERANK_FACTOR * k)).keys.astype(np.int64))  # type: ignore[attr-defined]
        scores = vectors[rows] @ query
        found.append(rows[np.argsort(-scores)[:k]])
        ms.append((time.perf_counter() - started) * 1000)
    return found, np.array(ms)


def measure(graph: object, vectors: np.ndarray, queries: np.ndarray, scores: np.ndarray, k: int) -> Found:
    """``scores``: each row's cosine with each query (rows x queries)."""
    top = np.argpartition(-scores, k - 1, axis=0)[:k].T  # each query's true top k rows
    found, ms = search(graph, vectors, queries, k)
    recall, near = [], []
    for j, rows in enumerate(found):
        kth = scores[top[j], j].min()
        recall.append(len(np.intersect1d(rows, top[j])) / k)
        near.append(float((scores[rows, j] >= kth - NEAR).mean()) if len(rows) else 0.0)
    return Found(np.array(recall), np.array(near), ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store-dir", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=0, help="only the snapshot's first N vectors (0: all)")
    parser.add_argument("--settings", nargs="+", default=["16,128", "32,256"], help="links,candidates of each graph")
    args = parser.parse_args()
    folder = latest_snapshot(args.store_dir)
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    vectors = np.ascontiguousarray(vectors[: args.rows or len(vectors)])
    asked = queries(LocalEmbedder(model=Settings().model))
    scores = vectors @ asked.T
    print(f"{len(vectors):,} vectors of {folder}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print("recall: share of the true top k found; near: of those found, the share within 0.01 of the true k-th\n")
    each = "recall / near / under half"
    print(f"| links, candidates | build s | k | notes' words: {each} | random words: {each} | search ms p50 / p95 |")
    print("| --- | ---: | ---: | --- | --- | --- |")
    for setting in args.settings:
        links, candidates = (int(n) for n in setting.split(","))
        graph = new_graph(vectors.shape[1], links, candidates)
        started = time.perf_counter()
        graph.add(np.arange(len(vectors), dtype=np.uint64), vectors)
        built = time.perf_counter() - started
        graph.expansion_search = EXPANSION_SEARCH
        for k in KS:
            f = measure(graph, vectors, asked, scores, k)
            kinds = [
                f"{f.recall[part].mean():.3f} / {f.near[part].mean():.3f} / {(f.recall[part] < 0.5).sum()}"
                for part in (slice(0, QUERIES_OF_EACH_KIND), slice(QUERIES_OF_EACH_KIND, None))
            ]
            print(
                f"| {links}, {candidates} | {built:.0f} | {k} | {kinds[0]} | {kinds[1]} | "
                f"{np.median(f.ms):.2f} / {np.percentile(f.ms, 95):.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
