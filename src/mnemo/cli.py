"""The ``mnemo`` command: a client of the library, for people and scripts."""

from __future__ import annotations

import click

from mnemo import __version__
from mnemo.config import Settings


@click.group()
@click.version_option(__version__, prog_name="mnemo")
def cli() -> None:
    """mnemo: a memory server for AI agents."""


@cli.command()
@click.option("--profile", default=None, help="Tool surface to serve (default: MNEMO_PROFILE or full).")
@click.option("--store", default=None, help="Store to serve (default: MNEMO_STORE or default).")
def serve(profile: str | None, store: str | None) -> None:
    """Serve MCP on stdio (for Claude Desktop, Claude Code, Cursor...)."""
    from mnemo.server import serve as run

    run(Settings(), profile, store)


def main() -> None:
    cli()
