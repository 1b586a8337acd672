"""How well the vector index's graph finds a query's true nearest memories, and how fast.

    python benchmarks/graph_recall.py --store-dir DIR [--rows N | --clusters N] [--settings 16,128 32,256]
    python benchmarks/graph_recall.py --store-dir DIR --settings snapshot  # the snapshot's own graph

DIR is a home (``MNEMO_HOME``) kept by ``benchmarks/latency.py --store-dir`` past the size where its
vectors get a snapshot graph (see "Large stores" in the README), a SQLite store's or a server's of a
PostgreSQL store. For each setting (links a node, candidates a node's
links are chosen from when it joins, or ``snapshot`` for the graph the snapshot holds, as searches
use it) a graph of the snapshot's vectors (its first N rows with
``--rows``; with ``--clusters N`` those of the first N of its 4,096 sentences' clusters, as dense
as the whole store's) is built as a snapshot's is, then searched as a search does (4 x k
candidates, at most k + 600, rescored exactly). Queries: 300 embedded by the local model: 100 of a
stored note's words (a sentence of ``latency.py`` without its last three words), 100 of half a
note's words and two random words, and 100 of three random words, which sit far from every note.
Prints, for each setting and k, the share of the true top k found, the share of what was found
within 0.01 cosine of the true k-th (a cluster's near-identical copies may stand in for each other),
the queries that found under half, and a search's milliseconds (all, and the random words').
Needs `mnemo setup` (the local model).
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
from mnemo.search.vector_graph import META, Meta, Snapshot, candidates, new_graph, walk_breadth
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
    metas = [(json.loads(m.read_text())["seq"], m.parent) for m in home.glob("stores/*/vector-index/**/meta.json")]
    if not metas:
        raise SystemExit(f"no vector index snapshot under {home}: keep a store of 100,000 or more with latency.py")
    return max(metas)[1]


KINDS = ("notes' words", "half and random", "random words")


def queries(model: LocalEmbedder, sentences: list[str]) -> np.ndarray:
    """QUERIES_OF_EACH_KIND of each of KINDS: a stored note's words (one of these sentences), half of
    them and two random words, three random words."""
    rng = random.Random(9)
    texts = [" ".join(s.split()[:-3]) for s in rng.sample(sentences, QUERIES_OF_EACH_KIND)]
    for sentence in rng.sample(sentences, QUERIES_OF_EACH_KIND):
        words = sentence.split()
        texts.append(" ".join(words[: len(words) // 2] + rng.sample(WORDS, 2)))
    texts += [" ".join(rng.sample(WORDS, 3)) for _ in range(QUERIES_OF_EACH_KIND)]
    return np.vstack([model.embed_query(text) for text in texts]).astype(np.float32)


def search(graph: object, vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Each query's k best of the graph's candidates by exact cosine, and the milliseconds each took:
    a graph keyed by row, or a ``Snapshot`` (keyed by the store's keys) searched as a search does."""
    found, ms = [], []
    if not isinstance(graph, Snapshot):
        graph.expansion_search = walk_breadth(candidates(k))  # type: ignore[attr-defined]  # as a Snapshot walks
    for query in queries:
        started = time.perf_counter()
        if isinstance(graph, Snapshot):
            keys, scores = graph.nearest(query, k)
            found.append(graph.rows(keys[np.argsort(-scores)[:k]])[1])
        else:
            rows = np.sort(graph.search(query, candidates(k)).keys.astype(np.int64))  # type: ignore[attr-defined]
            found.append(rows[np.argsort(-(vectors[rows] @ query))[:k]])
        ms.append((time.perf_counter() - started) * 1000)
    return found, np.array(ms)


def clustered(vectors: np.ndarray, clusters: int) -> np.ndarray:
    """The rows of the first ``clusters`` of latency.py's sentences: those nearest one of them among
    the store's first 4,096 rows (the sentences' own memories, stored first)."""
    sentences = vectors[: len(SENTENCES)]
    step = 100_000
    nearest = np.concatenate(
        [np.argmax(vectors[i : i + step] @ sentences.T, axis=1) for i in range(0, len(vectors), step)]
    )
    return np.flatnonzero(nearest < clusters)


def measure(graph: object, vectors: np.ndarray, queries: np.ndarray, scores: np.ndarray, k: int) -> Found:
    """``graph``: a usearch graph; ``scores``: each row's cosine with each query (rows x queries)."""
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
    parser.add_argument("--store-dir", type=Path, required=True, help="a home with a store's snapshot graph")
    parser.add_argument("--rows", type=int, default=0, help="only the snapshot's first N vectors (0: all)")
    parser.add_argument("--clusters", type=int, default=0, help="only the vectors of the first N sentences' clusters")
    parser.add_argument("--settings", nargs="+", default=["16,128", "32,256"], help="links,candidates of each graph")
    args = parser.parse_args()
    folder = latest_snapshot(args.store_dir)
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    vectors = np.ascontiguousarray(vectors[: args.rows or len(vectors)])
    if args.clusters:
        vectors = vectors[clustered(vectors, args.clusters)]
    asked = queries(LocalEmbedder(model=Settings().model), SENTENCES[: args.clusters or len(SENTENCES)])
    scores = vectors @ asked.T
    kinds = [slice(n * QUERIES_OF_EACH_KIND, (n + 1) * QUERIES_OF_EACH_KIND) for n in range(len(KINDS))]
    print(f"{len(vectors):,} vectors of {folder}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    best = scores.max(axis=0)
    for name, part in zip(KINDS, kinds, strict=True):
        print(
            f"{name}: nearest cosine p5 / p50 / p95 {np.percentile(best[part], 5):.2f} /"
            f" {np.median(best[part]):.2f} / {np.percentile(best[part], 95):.2f}"
        )
    print("recall: share of the true top k found; near: of those found, the share within 0.01 of the true k-th\n")
    each = "recall / near / under half"
    print(
        "| links, candidates | build s | k | "
        + " | ".join(f"{name}: {each}" for name in KINDS)
        + " | search ms p50 / p95 | random words' p95 |"
    )
    print("| --- | ---: | ---: | --- | --- | --- | ---: | ---: |")
    for setting in args.settings:
        graph: object
        if setting == "snapshot":
            if args.rows or args.clusters:
                parser.error("--settings snapshot searches the whole snapshot: without --rows or --clusters")
            snapshot = Snapshot(folder, Meta(**json.loads((folder / META).read_text())))
            graph, built, label = snapshot, 0.0, f"the snapshot's ({snapshot.connectivity} links)"
        else:
            links, build_candidates = (int(n) for n in setting.split(","))
            graph, built = graph_of(vectors, links, build_candidates)
            label = f"{links}, {build_candidates}"
        for k in KS:
            f = measure(graph, vectors, asked, scores, k)
            cells = [
                f"{f.recall[part].mean():.3f} / {f.near[part].mean():.3f} / {(f.recall[part] < 0.5).sum()}"
                for part in kinds
            ]
            ms = f"{np.median(f.ms):.2f} / {np.percentile(f.ms, 95):.2f}"
            print(
                f"| {label} | {built:.0f} | {k} | {' | '.join(cells)} | {ms} |"
                f" {np.percentile(f.ms[kinds[-1]], 95):.2f} |",
                flush=True,
            )


def graph_of(vectors: np.ndarray, links: int, build_candidates: int) -> tuple[object, float]:
    """A usearch graph of the vectors as a snapshot's is built, and the seconds it took."""
    graph = new_graph(vectors.shape[1], links, build_candidates)
    started = time.perf_counter()
    graph.add(np.arange(len(vectors), dtype=np.uint64), vectors)
    return graph, time.perf_counter() - started


if __name__ == "__main__":
    main()
