"""How fast `mnemo import` loads memories (with their embeddings) and `mnemo export` writes them.

    python benchmarks/import_speed.py [--memories 5000] [--format mnemo|text|mcp-memory] [--texts FILE]
        [--backend sqlite|postgres|both] [--database-url URL]

Writes N distinct synthetic memories (or the first N memories of an evaluation file in
../shared/eval/'s format, ``--texts``: real notes or conversation turns, longer and less alike
than the synthetic ones) in the chosen format, imports them into a fresh store with
the local model (the same code as `mnemo import`), exports the store, and imports that export back
into it (every memory a duplicate, found by id); prints memories per second for each step and the
machine's load. ``--backend both`` runs SQLite, then PostgreSQL, on the same file, one table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.transfer import formats
from mnemo.transfer.export import export_lines
from mnemo.transfer.load import load

T = TypeVar("T")
Kind = Literal["mnemo", "text", "mcp-memory"]
PEOPLE = ["Emma", "Liam", "Noah", "Ava", "Mia", "Lucas", "Zoe", "Omar", "Ines", "Kenji"]
THINGS = [
    "the quarterly report",
    "a trip to Lisbon",
    "the boiler",
    "piano lessons",
    "the Atlas service",
    "a peanut allergy",
    "the garden shed",
    "a new laptop",
    "the database migration",
    "marathon training",
]
VERBS = ["is planning", "finished", "worries about", "asked about", "postponed", "is excited about", "paid for"]


def sentences(count: int) -> list[str]:
    rng = random.Random(7)
    return [
        f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} {rng.choice(THINGS)} (note {n}, day {rng.randrange(365)})"
        for n in range(count)
    ]


def evaluation_texts(path: Path, count: int) -> list[str]:
    data = json.loads(path.read_text())
    return [m["content"] for haystack in data["haystacks"] for m in haystack["memories"]][:count]


def write(folder: Path, kind: str, texts: list[str]) -> Path:
    if kind == "text":
        path = folder / "notes.md"
        path.write_text("\n\n".join(texts) + "\n")
    elif kind == "mcp-memory":
        path = folder / "memory.json"
        entities = [
            {"type": "entity", "name": f"Entity_{i}", "entityType": "note", "observations": [text]}
            for i, text in enumerate(texts)
        ]
        path.write_text("\n".join(json.dumps(r) for r in entities) + "\n")
    else:
        path = folder / "dump.jsonl"
        rows: list[dict[str, object]] = [{"format": formats.EXPORT_FORMAT, "version": formats.EXPORT_VERSION}]
        rows += [{"content": t} for t in texts]
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def timed(action: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


@dataclass
class Run:
    backend: str
    imported: int
    took: float
    took_export: float
    imported_again: int
    duplicates_again: int
    took_again: float
    rejected: dict[str, int]


def run(backend: str, source: Path, kind: Kind, database_url: str | None) -> Run:
    """Import the file into a fresh store of the backend, export it, import the export back."""
    with ExitStack() as stack:
        url = None
        if backend == "postgres":
            from postgres_database import fresh_database, postgres_server  # beside this file; needs psycopg

            url = stack.enter_context(fresh_database(stack.enter_context(postgres_server(database_url))))
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mnemo-import-")))
        service = open_service(Settings(home=folder / "home", config_dir=folder / "config", database_url=url))
        service.warm_up()  # the model's load is not the import's
        first, took = timed(lambda: load(service, formats.read(source, kind)))
        dump = folder / "export.jsonl"
        _, took_export = timed(lambda: dump.write_text("\n".join(export_lines(service)) + "\n"))
        again, took_again = timed(lambda: load(service, formats.read(dump, "mnemo")))
        service.storage.close()
    return Run(backend, first.imported, took, took_export, again.imported, again.duplicates, took_again,
               dict(first.rejected))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--format", choices=["mnemo", "text", "mcp-memory"], default="mnemo")
    parser.add_argument("--texts", type=Path, help="an evaluation file whose memories' contents to import")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument(
        "--database-url", default=None, help="postgres: a server (default: MNEMO_TEST_POSTGRES_URL, or embedded)"
    )
    args = parser.parse_args()
    texts = sentences(args.memories) if args.texts is None else evaluation_texts(args.texts, args.memories)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory(prefix="mnemo-import-input-") as folder:
        source = write(Path(folder), args.format, texts)
        runs = [run(backend, source, args.format, args.database_url) for backend in backends]
    load_avg = os.getloadavg()
    print(
        f"{len(texts)} memories ({args.format}{', from ' + args.texts.name if args.texts else ''}) on "
        f"{' and '.join(backends)}, {os.cpu_count()} cores, load {load_avg[0]:.2f} {load_avg[1]:.2f}\n"
    )
    print("| backend | step | memories | seconds | memories/s |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in runs:
        print(f"| {r.backend} | import (with embeddings) | {r.imported} | {r.took:.1f} | {r.imported / r.took:.0f} |")
        print(f"| {r.backend} | export | {r.imported} | {r.took_export:.1f} | {r.imported / r.took_export:.0f} |")
        print(
            f"| {r.backend} | import the export back ({r.duplicates_again} duplicates, by id) | {r.imported_again} | "
            f"{r.took_again:.1f} | {len(texts) / r.took_again:.0f} |"
        )
    for r in runs:
        if r.rejected:
            print(f"\n{r.backend}: rejected: {r.rejected}")


if __name__ == "__main__":
    main()
