"""Recall latency on a store that is already filled, in rounds: for comparing two versions of mnemo
on one store, their rounds alternating (a machine's load drifts over minutes; alternating spreads
it over both).

    python benchmarks/recall_rounds.py --database-url URL --home HOME [--rounds 1] [--samples 150]
    python benchmarks/recall_rounds.py --home HOME            # a SQLite store (latency.py --store-dir)

    for round in 1 2 3; do
        PYTHONPATH=/path/to/old/src python benchmarks/recall_rounds.py --database-url URL --home HOME
        python benchmarks/recall_rounds.py --database-url URL --home HOME
    done

The store is the one `latency.py --keep-database NAME --store-dir HOME` (PostgreSQL: HOME keeps the
server's snapshot of the vectors) or `latency.py --store-dir HOME` (SQLite) filled: its queries,
its 100 users. Each round warms up with 25 recalls, then times ``--samples`` recalls of the whole
store and as many filtered to one user, through the service (query embedding included), and prints
one line each: the mnemo it ran (its checkout's folder), p50 / p95 / max ms and the load average.
Not a test: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

import mnemo
from latency import QUERIES, percentiles
from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.engine.service import MemoryService

USERS = [f"user_{i}" for i in range(100)]  # latency.py's


def timed_round(service: MemoryService, rng: random.Random, samples: int, filtered: bool) -> list[float]:
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        service.recall(rng.choice(QUERIES), user_id=rng.choice(USERS) if filtered else None)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="the store's home (PostgreSQL: the server's)")
    parser.add_argument("--database-url", default=None, help="a PostgreSQL store; without it, HOME's SQLite store")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--samples", type=int, default=150)
    args = parser.parse_args()
    version = Path(mnemo.__file__).parents[2].name  # the checkout the mnemo under test comes from
    service = open_service(Settings(home=args.home, database_url=args.database_url))
    rng = random.Random(3)
    try:
        for filtered in (False, True):  # warm both paths: the first recalls read the index and pages in
            timed_round(service, rng, 25, filtered)
        for _ in range(args.rounds):
            for filtered in (False, True):
                times = timed_round(service, rng, args.samples, filtered)
                p50, p95 = percentiles(times)
                label = "filtered" if filtered else "recall"
                print(
                    f"{version:12s} {label:9s} p50 {p50:.1f} p95 {p95:.1f} max {max(times):.1f}"
                    f" load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        service.close()


if __name__ == "__main__":
    main()
