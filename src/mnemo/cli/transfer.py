"""``mnemo import`` and ``mnemo export``: many memories in or out at once."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from mnemo.cli.common import _dump, _service, _store_name, json_option, store_option
from mnemo.transfer import formats


@click.command(name="import")
@click.argument("source", metavar="FILE_OR_FOLDER", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--format",
    "chosen",
    type=click.Choice(["auto", "mnemo", "mcp-memory", "text"]),
    default="auto",
    show_default=True,
    help="mnemo: JSON lines of `mnemo export`; mcp-memory: the MCP memory server's "
    "memory.json; text: .md/.txt files, one memory per paragraph.",
)
@store_option
@json_option
def import_command(source: Path, chosen: formats.Format, store: str | None, as_json: bool) -> None:
    """Import memories from FILE_OR_FOLDER, with a progress bar and a summary.

    Each record is stored by the same rules as any write; exact and near duplicates of what the
    store holds are skipped (so importing twice adds nothing), refused records are counted with
    their reasons, and the rest goes on.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from mnemo.transfer.load import load

    kind = formats.detect(source) if chosen == "auto" else chosen
    total = sum(1 for _ in formats.read(source, kind))  # a first pass, only reading: the bar's end
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"))
    with _service(store) as service, Progress(*columns, TimeRemainingColumn(), transient=True) as bar:
        task = bar.add_task(f"importing {source.name} ({kind})", total=total, rate="")
        started = time.monotonic()

        def advanced(done: int) -> None:
            rate = done / max(time.monotonic() - started, 1e-3)
            bar.update(task, completed=done, rate=f"{rate:,.0f} records/s")

        summary = load(service, formats.read(source, kind), advanced, total=total)
    if as_json:
        _dump(
            {
                "format": kind,
                "job_id": summary.job_id,
                "imported": summary.imported,
                "duplicates_skipped": summary.duplicates,
                "rejected": dict(summary.rejected),
                "rejected_examples": summary.examples,
            }
        )
        return
    click.echo(
        f"{source.name} ({kind}): imported {summary.imported}, duplicates skipped {summary.duplicates}, "
        f"rejected {sum(summary.rejected.values())} (job {summary.job_id})"
    )
    for reason, count in summary.rejected.most_common():
        click.echo(f"  {count} rejected: {reason} (e.g. {', '.join(summary.examples[reason])})")


@click.command(name="export")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write (default: standard output).",
)
@store_option
def export_command(output: Path | None, store: str | None) -> None:
    """Export every active memory as JSON lines (a header line first); `mnemo import` reads it back."""
    from mnemo.transfer.export import export_lines

    with _service(store) as service:
        if output is None:
            for line in export_lines(service):
                sys.stdout.write(line + "\n")
            return
        partial = output.with_name(output.name + ".partial")
        with partial.open("w", encoding="utf-8") as out:
            count = -1  # the header is not a memory
            for line in export_lines(service):
                out.write(line + "\n")
                count += 1
        partial.replace(output)  # a whole file or none
    click.echo(f"exported {count} memories to {output}", err=True)


@click.command(name="migrate")
@click.option("--from", "source", required=True, metavar="LOCATION", help="sqlite:PATH or a postgresql:// URL.")
@click.option("--to", "target", required=True, metavar="LOCATION", help="sqlite:PATH or a postgresql:// URL.")
@store_option
def migrate_command(source: str, target: str, store: str | None) -> None:
    """Copy a whole store from one backend to another, with a progress bar: SQLite to PostgreSQL or back.

    LOCATION is sqlite:PATH (a store's folder, or its memory.db) or a postgresql:// URL, where the
    store is the one named by --store (default: MNEMO_STORE or default). Everything is copied as it
    is: every memory whatever its status, with its id, times, history, links and backups, its
    vector, the store's settings and entry counter, and its recorded jobs. The target must hold no
    memory yet; the source is only read.
    """
    from rich.progress import Progress

    from mnemo.app import open_storage_at
    from mnemo.config import Settings
    from mnemo.storage.copy import copy_store

    settings = Settings()
    name = _store_name(store) or settings.store
    origin = open_storage_at(settings, source, name)
    try:
        destination = open_storage_at(settings, target, name)
        try:
            with Progress(transient=True) as bar:
                task = bar.add_task(f"copying store {name}", total=None)
                copied = copy_store(
                    origin, destination, lambda done, total: bar.update(task, completed=done, total=total)
                )
        finally:
            destination.close()
    finally:
        origin.close()
    click.echo(f"copied store {name}: {copied} memories, with their history, links, backups and vectors")
