"""How long a page of a filtered, sorted list takes, filter by filter, on a kept store.

    python benchmarks/list_filters.py --store-dir DIR [--runs 5]

DIR is a store ``latency.py --store-dir DIR`` filled (its memories are spread over 100 users,
with categories and tags of very different sizes). Each list (a page of 20, and its total) is
timed ``--runs`` times; prints the fastest and the slowest in ms, and how many memories matched.
Filters that keep a few memories of a large store are where a plan can go wrong: SQLite keeps no
statistics, so it cannot tell a filter that keeps 300,000 memories from one that keeps none.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.query import DateRange, Filters, Sort, SortField


def cases(now: datetime) -> dict[str, dict[str, Any]]:
    by_importance, by_access = Sort(SortField.IMPORTANCE, True), Sort(SortField.ACCESSED_AT, True)
    return {
        "label skill (rare), by creation": {"labels": ["skill"]},
        "label context (rare), by importance": {"labels": ["context"], "sort": by_importance},
        "label instruction (common), by importance": {"labels": ["instruction"], "sort": by_importance},
        "category goal, by last access": {"categories": ["goal"], "sort": by_access},
        "category custom (none), by creation": {"categories": ["custom"]},
        "a tag, by creation": {"tags": ["sourdough"]},
        "a tag a fifth have, by creation": {"tags": ["anything"]},
        "a tag none has, by creation": {"tags": ["nonesuch"]},
        "two tags, by creation": {"all_tags": ["sourdough", "evening"]},
        "one user, by importance": {"user_id": "user_7", "sort": by_importance},
        "one user and label skill (none), by creation": {"user_id": "user_7", "labels": ["skill"]},
        "subject (none), by creation": {"subject": "Emma"},
        "access level shared (none), by creation": {"access_levels": ["shared"]},
        "created in the last week, by creation": {"date_range": DateRange(now - timedelta(days=7), now)},
        "importance 0.999 or more, by creation": {"importance_min": 0.999},
        "importance band high (spec 000), by creation": {"importance_bands": ["high"]},
        "importance band medium, by importance": {"importance_bands": ["medium"], "sort": by_importance},
        "none, page at offset 5,000": {"offset": 5_000},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store-dir", required=True, help="a store latency.py --store-dir filled")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    home = Path(args.store_dir)
    service = open_service(Settings(home=home, config_dir=home / "config", embedder="none"))
    held = service.storage.count(Filters(now=datetime.now(UTC)))
    print(f"{held:,} memories, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}\n")
    print("| list (a page of 20 and its total) | fastest ms | slowest ms | matched |")
    print("| --- | ---: | ---: | ---: |")
    for name, arguments in cases(datetime.now(UTC)).items():
        took = []
        for _ in range(args.runs):
            started = time.perf_counter()
            page = service.list(**arguments)
            took.append((time.perf_counter() - started) * 1000)
        print(f"| {name} | {min(took):.1f} | {max(took):.1f} | {page.total:,} |")
    service.storage.close()


if __name__ == "__main__":
    main()
