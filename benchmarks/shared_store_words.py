"""How much of a user's best word matches a word search filtered by user ranks in a shared store;
prints a table.

    python benchmarks/shared_store_words.py --memories 200000 --users 20 --backend both

Fills a store as benchmarks/latency.py does (its notes, spread round-robin over --users users;
--store-dir keeps a SQLite store for the next run, --database-url names a PostgreSQL database, a
filled one is used as it is), then for each of latency.py's queries and a few more, for
--per-query users each, searches the words filtered by the user twice: as recall does, ranking of
the memories that hold only common words the user's newest RANKED_MATCHES, and with every match
ranked. It prints the share of the BM25 score of the second search's top 10 that the first's top
10 holds (1.0: the same best matches), and both searches' times. Not a test: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import inspect
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from latency import QUERIES, filled, percentiles
from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.engine.service import MemoryService
from mnemo.query import Filters
from mnemo.search.words import search_terms

MORE_QUERIES = ["Emma", "Olivia billing", "cello", "Liam spring trip plans", "heavy load bug"]
TOP = 10


def searched(service: MemoryService, query: str, user: str, every_match: bool) -> tuple[list[float], float]:
    """The scores of the top matches among the user's memories, as recall ranks them or with every
    match of the common words ranked, and the search's time in ms."""
    backend = inspect.getmodule(type(service.storage.inner))  # type: ignore[attr-defined]
    kept = backend.RANKED_MATCHES  # type: ignore[union-attr]
    if every_match:
        backend.RANKED_MATCHES = 10**9  # type: ignore[union-attr]
    try:
        started = time.perf_counter()
        hits = service.storage.search_text(search_terms(query), Filters(now=service.clock.now(), user_id=user), TOP)
        return [hit.score for hit in hits], (time.perf_counter() - started) * 1000
    finally:
        backend.RANKED_MATCHES = kept  # type: ignore[union-attr]


def measure(args: argparse.Namespace, database_url: str | None = None) -> dict[str, Any]:
    users = [f"user_{i}" for i in range(args.users)]
    with ExitStack() as stack:
        home = (
            Path(args.store_dir)
            if args.store_dir and database_url is None
            else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        )
        service = open_service(Settings(home=home, embedder="none", database_url=database_url))
        held = service.storage.count(Filters(now=service.clock.now()))
        service.storage.close()
        if held < args.memories:
            filled(home, args.memories, users, random.Random(7), database_url)
        service = open_service(Settings(home=home, embedder="none", database_url=database_url))
        rng = random.Random(3)
        shares, as_recall_ms, every_ms = [], [], []
        for query in QUERIES + MORE_QUERIES:
            for user in rng.sample(users, min(args.per_query, len(users))):
                ranked, ranked_ms = searched(service, query, user, every_match=False)
                best, best_ms = searched(service, query, user, every_match=True)
                shares.append(sum(ranked) / sum(best) if sum(best) > 0 else 1.0)
                as_recall_ms.append(ranked_ms)
                every_ms.append(best_ms)
        service.storage.close()
    return {
        "searches": len(shares),
        "mean_share": statistics.fmean(shares),
        "lowest_share": min(shares),
        "as_recall_ms": percentiles(as_recall_ms),
        "every_match_ms": percentiles(every_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=20, help="the memories are spread over this many users")
    parser.add_argument("--per-query", type=int, default=3, help="users searched for each query")
    parser.add_argument("--store-dir", help="SQLite: fill the store here and keep it; reuse it if already filled")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument(
        "--database-url",
        default=None,
        help="postgres: a database (else a fresh one, embedded or MNEMO_TEST_POSTGRES_URL)",
    )
    args = parser.parse_args()
    results = {"sqlite": measure(args)} if args.backend in ("sqlite", "both") else {}
    if args.backend in ("postgres", "both"):
        if args.database_url:
            results["postgres"] = measure(args, args.database_url)
        else:
            from postgres_database import fresh_database, postgres_server  # beside this file; needs psycopg

            with postgres_server(None) as server, fresh_database(server) as url:
                results["postgres"] = measure(args, url)
    print(f"{args.memories:,} memories of {args.users} users; a word search filtered by one user, top {TOP}")
    print()
    print("| backend | searches | share of the best matches' BM25, mean | lowest |"
          " ms p50 / p95, as recall ranks | ms p50 / p95, every match ranked |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for backend, r in results.items():
        print(f"| {backend} | {r['searches']} | {r['mean_share']:.2f} | {r['lowest_share']:.2f} |"
              f" {r['as_recall_ms'][0]:.1f} / {r['as_recall_ms'][1]:.1f} |"
              f" {r['every_match_ms'][0]:.1f} / {r['every_match_ms'][1]:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
