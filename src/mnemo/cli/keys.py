"""``mnemo keys``: the API keys of a mnemo served over HTTP (``mnemo serve --http``)."""

from __future__ import annotations

import click

from mnemo.access.caller import Role
from mnemo.access.keys import KeyRing
from mnemo.cli.common import _console, _dump, _table, json_option
from mnemo.config import Settings


@click.group(name="keys")
def keys_group() -> None:
    """API keys for HTTP callers: each acts as one user, with a role.

    member: reads their own memories and others' shared/public ones, writes their own;
    reader: reads the same, writes nothing; admin: reads and writes every memory.
    Keys are kept hashed in MNEMO_HOME/keys.json; a revoked key stops working at once.
    """


@keys_group.command(name="create")
@click.option("--user", "user_id", required=True, help="The user the key acts as.")
@click.option("--role", type=click.Choice([r.value for r in Role]), default=Role.MEMBER.value, show_default=True)
@json_option
def keys_create(user_id: str, role: str, as_json: bool) -> None:
    """Make a key and print it once (it is not kept: store it now)."""
    made, key = KeyRing(Settings().home).create(user_id, Role(role))
    if as_json:
        _dump({"key": key, "key_id": made.key_id, "user": made.user_id, "role": made.role.value})
        return
    click.echo(f"key {made.key_id} for user {made.user_id} ({made.role.value}):")
    click.echo(key)
    click.echo("Send it as `Authorization: Bearer <key>` or `X-API-Key: <key>`. It is shown only this once.", err=True)


@keys_group.command(name="list")
@json_option
def keys_list(as_json: bool) -> None:
    """List the keys: id, user, role, when made and revoked (never the keys themselves)."""
    keys = KeyRing(Settings().home).all()
    if as_json:
        _dump({"keys": [{"key_id": k.key_id, "user": k.user_id, "role": k.role.value, "created_at": k.created_at,
                         "revoked_at": k.revoked_at} for k in keys]})  # fmt: skip
        return
    table = _table()
    for column in ("key", "user", "role", "created", "revoked"):
        table.add_column(column, no_wrap=True)
    for k in keys:
        table.add_row(k.key_id, k.user_id, k.role.value, k.created_at, k.revoked_at or "-")
    _console().print(table)


@keys_group.command(name="revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke key KEY_ID (as `keys list` shows it); servers refuse it from their next request."""
    revoked = KeyRing(Settings().home).revoke(key_id)
    click.echo(f"revoked key {revoked.key_id} of user {revoked.user_id}")
