"""``mnemo hook EVENT`` (what a coding agent's hooks run) and ``mnemo hooks ...`` (setting them up)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from mnemo.capture import install, spool, state, switch
from mnemo.capture.payload import Project
from mnemo.config import Settings

STATUS_ITEMS = 10
F = TypeVar("F", bound=Callable[..., Any])


@click.command(name="hook", context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def hook_command(arguments: tuple[str, ...]) -> None:
    """Run a hook: EVENT [--client NAME], the client's JSON on stdin (what `mnemo hooks install` sets up).

    EVENT is one of: session-start, user-prompt-submit, post-tool-use, post-tool-use-failure, stop,
    session-end, pre-compact; NAME one of claude-code, codex, cursor, gemini. Another EVENT or NAME is
    refused: exit 1, the reason on stderr. Otherwise it exits 0; what goes wrong is logged, never shown
    to the agent.
    `python -m mnemo hook ...` (what the installed hooks run) starts faster than the `mnemo` script.
    """
    from mnemo.capture.client import main

    sys.exit(main(list(arguments)))


@click.group(name="hooks")
def hooks_group() -> None:
    """Automatic memory for coding agents (Claude Code, Codex, Cursor, Gemini CLI)."""


def _scope(command: F) -> F:
    command = click.option(
        "--user/--project",
        "user",
        default=False,
        help="For every project (the client's file in your home folder), or this project's (default).",
    )(command)
    return click.option(
        "--client", type=click.Choice(install.CLIENT_NAMES), default="claude-code", show_default=True,
        help="The coding agent.",
    )(command)  # fmt: skip


def _report(outcome: install.Outcome, done: str, nothing: str) -> None:
    for line in [f"{done} {change}" for change in outcome.changed] or [nothing]:
        click.echo(line)
    for note in outcome.notes:
        click.echo(f"note: {note}")


@hooks_group.command(name="install")
@_scope
def install_command(client: str, user: bool) -> None:
    """Add mnemo's hooks and MCP server to the client's configuration, beside your own entries
    (each file is backed up first); installing again changes nothing."""
    outcome = install.install(client, user, Path.cwd())
    _report(outcome, "added", f"already installed in {install.settings_file(client, user, Path.cwd())}")


@hooks_group.command(name="remove")
@_scope
def remove_command(client: str, user: bool) -> None:
    """Take mnemo's hooks and MCP server out of the client's configuration; a file nothing else
    changed in since gets its old bytes back."""
    outcome = install.remove(client, user, Path.cwd())
    _report(outcome, "removed", f"not installed in {install.settings_file(client, user, Path.cwd())}")


@hooks_group.command(name="process", hidden=True)
def process_command() -> None:
    """Run the capture process for MNEMO_HOME (the hooks start it; it exits when idle)."""
    from mnemo.capture.daemon import main

    lock = spool.take_lock(Settings().home)
    sys.exit(1 if lock is None else main(lock))  # 1: another process serves this home


@hooks_group.command(name="stop")
def stop_command() -> None:
    """Stop the capture process (the next hook starts it again); what is queued stays queued."""
    from mnemo.capture.daemon import stop

    click.echo("capture process stopped" if stop(Settings().home) else "no capture process was running")


@hooks_group.command(name="status")
@click.option("--items", type=click.IntRange(0, 200), default=STATUS_ITEMS, show_default=True, help="Recent items.")
def status_command(items: int) -> None:
    """Where the hooks are installed, whether they are off here, and what they did last."""
    home = Settings().home
    here = Path.cwd().resolve()
    installed = [
        f"{client}, {label}: {path}: installed ({', '.join(events)})"
        for client in install.CLIENT_NAMES
        for label, user in (("project", False), ("user", True))
        if (events := install.installed_events(client, path := install.settings_file(client, user, here)))
    ]
    click.echo("\n".join(installed) or "hooks: not installed for any client, here or for the user")
    off = switch.is_disabled(home, Project.of(here).root, here)
    click.echo(f"here ({here}): {'disabled' if off else 'enabled'}")
    from mnemo.capture.daemon import running_pid  # Unix only (fcntl)

    pid = running_pid(home)
    process = f"running (pid {pid})" if pid else "not running (the next hook starts it)"
    click.echo(f"capture process: {process}; {len(spool.waiting(home))} calls queued")
    for item in state.recent(home, items):
        click.echo(f"{item['at']} {item['action']:<10} {item['event']:<18} {item['project']}: {item['text']}")


@hooks_group.command(name="disable")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path), default=".")
def disable_command(folder: Path) -> None:
    """Make the hooks do nothing in FOLDER (default: here) and below it."""
    switch.set_disabled(Settings().home, folder.resolve(), True)
    click.echo(f"hooks disabled in {folder.resolve()}")


@hooks_group.command(name="enable")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path), default=".")
def enable_command(folder: Path) -> None:
    """Let the hooks work in FOLDER again (undoes `mnemo hooks disable`)."""
    switch.set_disabled(Settings().home, folder.resolve(), False)
    click.echo(f"hooks enabled in {folder.resolve()}")
