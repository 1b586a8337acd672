"""``mnemo stores``: the store registry, and putting a damaged store's last good backup back."""

from __future__ import annotations

from pathlib import Path

import click

from mnemo.app import restore_store
from mnemo.cli.common import _console, _dump, _plain, _service, _table, json_option
from mnemo.config import Settings
from mnemo.engine import registry


@click.group(name="stores")
def stores_group() -> None:
    """The store registry: the only names that --store, MNEMO_STORE and the stores profile reach.

    A registered name maps to a folder; `default` (under MNEMO_HOME) is always there. The
    registry is stores.toml in MNEMO_HOME (or in MNEMO_CONFIG_DIR, when that is set).
    """


@stores_group.command(name="add")
@click.argument("name")
@click.argument("path", type=click.Path(path_type=Path), required=False)
def stores_add(name: str, path: Path | None) -> None:
    """Create store NAME: register folder PATH (default: MNEMO_HOME/stores/NAME) under that name.

    Only known stores can be served or used, so a mistyped --store is an error, never a new store.
    The folder is made when the store is first written.
    """
    settings = Settings()
    folder = registry.add(settings.registry_file, settings.home, name, path or settings.home / "stores" / name)
    click.echo(f"registered store {name} at {folder}")


@stores_group.command(name="list")
@json_option
def stores_list(as_json: bool) -> None:
    """List the registered stores and their folders."""
    stores = Settings().stores()
    if as_json:
        _dump({"stores": [{"name": n, "path": str(p), "exists": p.is_dir()} for n, p in stores.items()]})
        return
    table = _table()
    table.add_column("store", no_wrap=True)
    table.add_column("folder")
    for name, folder in stores.items():
        table.add_row(name, str(folder) + ("" if folder.is_dir() else "  (not created yet)"))
    _console().print(table)


@stores_group.command(name="remove")
@click.argument("name")
def stores_remove(name: str) -> None:
    """Unregister store NAME; its folder and memories are left as they are."""
    folder = registry.remove(Settings().registry_file, name)
    click.echo(f"unregistered store {name}; its files stay in {folder}")


@stores_group.command(name="backup")
@click.argument("name", default=None, required=False)
def stores_backup(name: str | None) -> None:
    """Copy store NAME (default: MNEMO_STORE or default), checked whole first, into its backups/ folder."""
    with _service(name) as service:
        written = service.storage.back_up("by-hand")
    click.echo(f"backed up store {service.storage.name} to backups/{written}")


@stores_group.command(name="restore")
@click.argument("name", default=None, required=False)
@click.argument("backup", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@json_option
def stores_restore(name: str | None, backup: Path | None, as_json: bool) -> None:
    """Put back store NAME (default: MNEMO_STORE or default) from its newest whole backup, or BACKUP.

    Backups are whole copies of the database in the store's backups/ folder: one before each
    schema migration and one when a server starts (at most daily), of a store that checks whole.
    The current database is renamed memory.db.damaged-<time> beside it, never deleted. Stop the
    servers that use the store first.
    """
    settings = Settings()
    restored = restore_store(settings, name, backup)
    if as_json:
        _dump({"store": name or settings.store, **_plain(restored)})
        return
    click.echo(f"restored store {name or settings.store} from {restored.backup}")
    if restored.set_aside:
        click.echo(f"the previous files are kept beside it as: {', '.join(restored.set_aside)}")
