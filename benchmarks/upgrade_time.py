"""How long a store of N memories takes to upgrade, and how long other connections wait meanwhile.

    python benchmarks/upgrade_time.py --memories 200000 --backend both

Fills a store as latency.py does (N synthetic memories with vectors, over 100 users), then puts its
schema back as a mnemo of before change numbers left it: SQLite before m017 (change numbers) and
m018 (applied idempotent calls), PostgreSQL before m012 and m013, the two that touch every memory's
row or a table of every call. Then opens it as `mnemo serve` does at start, which runs those
migrations, and prints how long each took. Meanwhile two other connections, as an older server
still running would, read one memory's row and write one (its access time) every 20 ms; the table
gives the longest each waited while the migrations ran. Not a test: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import functools
import random
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from latency import load
from mnemo.config import Settings
from mnemo.storage import postgres_schema, sqlite_schema
from mnemo.storage.postgres import PostgresStorage
from mnemo.storage.sqlite import DB_FILENAME, SQLiteStorage
from postgres_database import fresh_database, postgres_server
from postgres_server import store_connection, undo_m012
from sqlite_schemas import undo_m017

PROBE_PAUSE_S = 0.02


@contextmanager
def timed_migrations(migrations: list[Callable[..., None]]) -> Iterator[dict[str, float]]:
    """Each migration of the list wrapped to record its seconds, by name, while the block runs."""
    seconds: dict[str, float] = {}
    originals = list(migrations)

    def timing(migration: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(migration)
        def run(db: Any) -> None:
            started = time.perf_counter()
            migration(db)
            seconds[migration.__name__] = time.perf_counter() - started

        return run

    migrations[:] = [timing(m) for m in originals]
    try:
        yield seconds
    finally:
        migrations[:] = originals


class Probe:
    """Another connection that reads, or writes, one memory's row every PROBE_PAUSE_S; its longest wait."""

    def __init__(self, connect: Callable[[], Any], statement: str, keys: list[int]) -> None:
        self.connect, self.statement, self.keys = connect, statement, keys
        self.longest_s, self.calls = 0.0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with closing(self.connect()) as db:
            rng = random.Random(3)
            while not self._stop.is_set():
                started = time.perf_counter()
                db.execute(self.statement, (rng.choice(self.keys),))
                db.commit()
                self.longest_s = max(self.longest_s, time.perf_counter() - started)
                self.calls += 1
                time.sleep(PROBE_PAUSE_S)

    def __enter__(self) -> Probe:
        self._thread.start()
        time.sleep(0.2)  # connected and probing before the upgrade starts
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


READ = "SELECT content FROM memories WHERE rowid = {mark}"
WRITE = "UPDATE memories SET accessed_at = accessed_at WHERE rowid = {mark}"


def upgrade_sqlite(count: int, folder: Path) -> tuple[dict[str, float], float, Probe, Probe]:
    home = folder / "home"
    load(home, count, [f"user-{n}" for n in range(100)], random.Random(1))
    store = Settings(home=home).store_folder("default")
    with closing(sqlite3.connect(store / DB_FILENAME)) as db, db:
        undo_m017(db)  # the store as a mnemo before change numbers left it
    with closing(sqlite3.connect(store / DB_FILENAME)) as db:
        keys = [key for (key,) in db.execute("SELECT rowid FROM memories ORDER BY random() LIMIT 1000")]

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(store / DB_FILENAME, timeout=600)

    with (
        Probe(connect, READ.format(mark="?"), keys) as reader,
        Probe(connect, WRITE.format(mark="?"), keys) as writer,
        timed_migrations(sqlite_schema.MIGRATIONS) as seconds,
    ):
        started = time.perf_counter()
        SQLiteStorage(store).close()  # it backs the file up first, and checks it
        opened = time.perf_counter() - started
    # the open's check runs the first migrations on a scratch database, to know what to expect
    return {name: s for name, s in seconds.items() if name >= "m017"}, opened, reader, writer


def upgrade_postgres(count: int, folder: Path, url: str) -> tuple[dict[str, float], float, Probe, Probe]:
    load(folder / "pg-home", count, [f"user-{n}" for n in range(100)], random.Random(1), url)
    with closing(store_connection(url)) as db:
        undo_m012(db)
        keys = [key for (key,) in db.execute("SELECT rowid FROM memories ORDER BY random() LIMIT 1000")]

    def connect() -> psycopg.Connection:
        return store_connection(url)

    with (
        Probe(connect, READ.format(mark="%s"), keys) as reader,
        Probe(connect, WRITE.format(mark="%s"), keys) as writer,
        timed_migrations(postgres_schema.MIGRATIONS) as seconds,
    ):
        started = time.perf_counter()
        PostgresStorage(url, "default").close()
        opened = time.perf_counter() - started
    return seconds, opened, reader, writer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--database-url", default=None, help="a PostgreSQL server (default: MNEMO_TEST_POSTGRES_URL, or embedded)"
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mnemo-upgrade-") as scratch:
        folder = Path(scratch)
        if args.backend in ("sqlite", "both"):
            rows.append(("SQLite", *upgrade_sqlite(args.memories, folder)))
        if args.backend in ("postgres", "both"):
            with postgres_server(args.database_url) as server, fresh_database(server) as url:
                rows.append(("PostgreSQL", *upgrade_postgres(args.memories, folder, url)))
    print(f"\nUpgrade of a store of {args.memories:,} memories (seconds; the probes: longest wait of a read,"
          " and of a write, of one memory's row from another connection, every 20 ms)\n")  # fmt: skip
    print("| backend | migrations run (s each) | open, all told | longest read wait | longest write wait |")
    print("| --- | --- | ---: | ---: | ---: |")
    for backend, seconds, opened, reader, writer in rows:
        each = ", ".join(f"{name} {s:.1f}" for name, s in seconds.items())
        print(f"| {backend} | {each} | {opened:.1f} | {reader.longest_s:.2f} | {writer.longest_s:.2f} |")


if __name__ == "__main__":
    main()
