"""``mnemo restore``, ``mnemo archive`` and ``mnemo consolidate``: spec 004's lifecycle from the shell."""

from __future__ import annotations

import json

import click

from mnemo.cli.common import _dump, _plain, _service, json_option, store_option


@click.command(name="restore")
@click.argument("memory_id", metavar="ID")
@store_option
@json_option
def restore_command(memory_id: str, store: str | None, as_json: bool) -> None:
    """Bring memory ID back: a forgotten one (before its recovery time ends) or an archived one."""
    from mnemo.lifecycle.archive import Archiver
    from mnemo.lifecycle.recover import recover
    from mnemo.model import Status

    with _service(store) as service:
        if service.get(memory_id).status is Status.FORGOTTEN:
            memory = recover(service, memory_id, actor="mnemo-cli")
            answer = {"memory_id": memory.id, "restored_from": "forgotten", "version": memory.version}
        else:
            result = Archiver(service, service.lifecycle).restore(memory_id, actor="mnemo-cli")
            answer = {"memory_id": memory_id, "restored_from": "archive", "mode": result.restored[0].mode}
    if as_json:
        _dump(answer)
    else:
        click.echo(f"restored {memory_id} (it was {answer['restored_from']})")


@click.command(name="archive")
@click.argument("memory_ids", metavar="ID...", nargs=-1, required=True)
@click.option(
    "--tier",
    type=click.Choice(["cold", "glacier", "deep_archive"]),
    default="cold",
    show_default=True,
    help="cold: out of recall and lists; glacier: compressed in the database; deep_archive: to a file.",
)
@click.option("--dry-run", is_flag=True, help="Say what would move; change nothing.")
@store_option
@json_option
def archive_command(memory_ids: tuple[str, ...], tier: str, dry_run: bool, store: str | None, as_json: bool) -> None:
    """Archive memories into a tier (cold: out of recall; glacier: compressed; deep_archive: to a file)."""
    from mnemo.lifecycle.archive import Archiver

    with _service(store) as service:
        result = Archiver(service, service.lifecycle).archive(
            memory_ids=list(memory_ids), tier=tier, dry_run=dry_run, actor="mnemo-cli"
        )
    if as_json:
        _dump(_plain(result))
        return
    verb = "would archive" if dry_run else "archived"
    click.echo(f"{verb} {len(result.archived)} memories into {tier}; {result.saved_bytes} bytes out of the database")


@click.command(name="consolidate")
@click.argument("memory_ids", metavar="ID ID...", nargs=-1, required=True)
@click.option(
    "--strategy",
    type=click.Choice(["merge_all", "keep_primary", "ai_synthesis"]),
    default="merge_all",
    show_default=True,
    help="ai_synthesis needs MNEMO_SYNTHESIS_URL (else it merges and says so).",
)
@click.option("--primary", default=None, help="The memory to keep (keep_primary).")
@store_option
@json_option
def consolidate_command(
    memory_ids: tuple[str, ...], strategy: str, primary: str | None, store: str | None, as_json: bool
) -> None:
    """Merge related memories into one; the originals are archived (their ids stay readable)."""
    from mnemo.lifecycle.archive import Archiver
    from mnemo.lifecycle.consolidate import Consolidator

    with _service(store) as service:
        merged = Consolidator(service, Archiver(service, service.lifecycle)).consolidate(
            list(memory_ids), strategy, primary_memory_id=primary, actor="mnemo-cli"
        )
    if as_json:
        _dump(
            {
                "memory_id": merged.memory.id,
                "content": merged.memory.content,
                "method": merged.method,
                "source_ids": merged.source_ids,
                "warnings": merged.warnings,
            }
        )
        return
    click.echo(f"consolidated {len(merged.source_ids)} memories into {merged.memory.id} ({merged.method}):")
    click.echo(merged.memory.content)
    for warning in merged.warnings:
        click.echo(f"warning: {warning}", err=True)


@click.command(name="jobs")
@click.argument("job_id", metavar="[ID]", required=False)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="Most jobs to list.")
@store_option
@json_option
def jobs_command(job_id: str | None, limit: int, store: str | None, as_json: bool) -> None:
    """The store's recorded jobs (archive and restore runs, imports, re-embedding), newest first, or job ID."""
    from mnemo.cli.common import _console, _table, _when
    from mnemo.lifecycle import jobs

    with _service(store) as service:
        found = [jobs.find(service.storage, job_id)] if job_id else service.storage.recent_jobs(limit)
    shown = [jobs.shown(job) for job in found]
    if as_json:
        _dump(shown[0] if job_id else {"jobs": shown})
        return
    table = _table()  # two lines a job, so that a whole id and the result fit 80 columns
    table.add_column("job\nkind", no_wrap=True)
    table.add_column("status\nprogress", no_wrap=True)
    table.add_column("started\n(UTC)", no_wrap=True)
    table.add_column("result or error", ratio=1)
    for job, view in zip(found, shown, strict=True):
        table.add_row(
            f"{job.id}\n{job.kind}",
            f"{job.status}\n{job.done}/{job.total if job.total is not None else '?'}",
            _when(job.started_at).replace(" ", "\n"),
            job.error or "\n".join(f"{name}: {json.dumps(value)}" for name, value in view["result"].items()),
        )
    _console().print(table)


@click.command(name="sync")
@click.option(
    "--type",
    "sync_type",
    type=click.Choice(["full", "incremental", "bidirectional", "push", "pull"]),
    default="incremental",
    show_default=True,
    help="incremental/push: changes since the last sync, from --from to --to; pull: the other way; "
    "bidirectional: both; full: everything, from --from to --to.",
)
@click.option(
    "--from",
    "source",
    default="local",
    show_default=True,
    help="A store name; local is the one --store (or MNEMO_STORE) names.",
)
@click.option(
    "--to",
    "destination",
    default="cloud",
    show_default=True,
    help="A store name (register cloud with `mnemo stores add cloud PATH`).",
)
@click.option(
    "--conflicts",
    "resolution",
    default="newest_wins",
    show_default=True,
    type=click.Choice(["source_wins", "destination_wins", "newest_wins", "merge", "manual"]),
    help="What wins when a memory changed on both sides since the last sync (manual: stop and list them).",
)
@click.option("--dry-run", is_flag=True, help="Say what would change; change nothing.")
@store_option
@json_option
def sync_command(
    sync_type: str, source: str, destination: str, resolution: str, dry_run: bool, store: str | None, as_json: bool
) -> None:
    """Sync memories between two stores: the same ids on both sides, deletions included."""
    from rich.progress import Progress

    from mnemo.lifecycle.sync import run_sync

    with _service(store) as service, Progress(transient=True) as bar:
        task = bar.add_task(f"syncing {source} -> {destination}", total=None)

        def advanced(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        report = run_sync(
            service,
            source,
            destination,
            sync_type=sync_type,
            conflict_resolution=resolution,
            dry_run=dry_run,
            actor="mnemo-cli",
            on_progress=advanced,
        )
    if as_json:
        _dump(_plain(report))
        return
    verb = "would sync" if dry_run else "synced"
    click.echo(
        f"{verb} {source} -> {destination} ({sync_type}): {report.checked} checked, {report.created} created, "
        f"{report.updated} updated, {report.deleted} deleted, {report.conflicts} conflicts resolved "
        f"({resolution}), {report.skipped} skipped, {report.errors} errors"
    )
