"""Latency of mnemo's operations on a store of N synthetic memories; prints a table.

    python benchmarks/latency.py --memories 10000
    python benchmarks/latency.py --memories 100000 --json

Measures, through the service on a real SQLite file: store (one transaction each), recall (words),
recall with a filter, list (filtered and sorted), and the cold start of `mnemo serve` until it
answers `initialize` over stdio. Not a test: numbers, not assertions.
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

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.model import Context
from mnemo.query import Sort, SortField

PEOPLE = ["Emma", "Liam", "Noah", "Olivia", "Ava", "Lucas", "Mia", "Ethan", "Zoe", "Omar", "Priya", "Chen"]
TOPICS = {
    "food": ["sushi", "lasagne", "oat milk", "spicy curry", "gluten-free bread", "dark chocolate", "tofu"],
    "work": ["the billing service", "the mobile app", "quarterly planning", "the data pipeline", "code review"],
    "tools": ["pytest", "vim", "PostgreSQL", "Docker", "TypeScript", "Rust", "Kubernetes", "GitHub Actions"],
    "places": ["Lisbon", "Kyoto", "Toronto", "Berlin", "the lake house", "the downtown office"],
    "hobbies": ["cello", "trail running", "chess", "pottery", "bouldering", "birdwatching"],
}
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


def cold_start_ms(home: Path) -> float:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    rng = random.Random(7)

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        service = open_service(Settings(home=home))
        users = [f"user_{i}" for i in range(100)]
        load_start = time.perf_counter()
        for i in range(args.memories):
            service.store(synthetic(rng), context=Context(user_id=users[i % len(users)]), importance=rng.random())
        load_s = time.perf_counter() - load_start

        rows: dict[str, list[float]] = {}
        rows["store"] = timed(lambda: service.store(synthetic(rng)), args.samples)
        rows["recall"] = timed(lambda: service.recall(rng.choice(QUERIES)), args.samples)
        rows["recall, filtered (1 user of 100)"] = timed(
            lambda: service.recall(rng.choice(QUERIES), user_id=rng.choice(users)), args.samples
        )
        rows["list, by importance"] = timed(
            lambda: service.list(sort=Sort(SortField.IMPORTANCE), limit=20), args.samples
        )
        rows["list, filtered by user"] = timed(lambda: service.list(user_id=rng.choice(users)), args.samples)
        service.storage.close()
        rows["cold start to initialize"] = [cold_start_ms(home) for _ in range(5)]

    result = {name: dict(zip(("p50_ms", "p95_ms"), percentiles(s), strict=True)) for name, s in rows.items()}
    if args.json:
        print(json.dumps({"memories": args.memories, "load_per_s": args.memories / load_s, "latency": result}))
        return
    print(f"{args.memories:,} memories loaded at {args.memories / load_s:,.0f}/s (one transaction each)\n")
    print("| operation | p50 ms | p95 ms |\n| --- | ---: | ---: |")
    for name, value in result.items():
        print(f"| {name} | {value['p50_ms']:.2f} | {value['p95_ms']:.2f} |")


if __name__ == "__main__":
    main()
