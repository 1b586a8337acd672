"""API keys: made once, kept hashed, checked exactly, revoked for every process at once."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from mnemo.access.caller import Caller, Role
from mnemo.access.keys import KeyRing
from mnemo.cli import cli
from mnemo.errors import InvalidInput, NotFound


def test_a_key_is_shown_once_and_only_its_hash_is_kept(tmp_path: Path):
    made, key = KeyRing(tmp_path).create("alice")
    kept = (tmp_path / "keys.json").read_text()
    assert key not in kept and made.sha256 in kept
    assert stat.S_IMODE((tmp_path / "keys.json").stat().st_mode) == 0o600
    assert KeyRing(tmp_path).verify(key) == made
    assert made.caller == Caller("alice", Role.MEMBER)


@pytest.mark.parametrize("change", [lambda k: k + "x", lambda k: k[:-1], lambda k: k.replace("mnemo_", ""), str.upper])
def test_a_key_differing_in_anything_is_refused(tmp_path: Path, change):
    _, key = KeyRing(tmp_path).create("alice")
    assert KeyRing(tmp_path).verify(change(key)) is None


def test_revoking_in_one_process_reaches_a_ring_already_open_in_another(tmp_path: Path):
    serving = KeyRing(tmp_path)
    made, key = KeyRing(tmp_path).create("alice", Role.ADMIN)
    assert serving.verify(key) is not None
    KeyRing(tmp_path).revoke(made.key_id)
    assert serving.verify(key) is None
    assert serving.all()[0].revoked_at is not None


def test_unknown_keys_and_bad_users_are_errors(tmp_path: Path):
    with pytest.raises(NotFound):
        KeyRing(tmp_path).revoke("nosuchkey")
    for user in ("", "  ", "a\nb", "x" * 300):
        with pytest.raises(InvalidInput):
            KeyRing(tmp_path).create(user)


def test_the_keys_commands_create_list_and_revoke(tmp_path: Path):
    runner = CliRunner()
    env = {"MNEMO_HOME": str(tmp_path)}
    made = runner.invoke(cli, ["keys", "create", "--user", "bob", "--role", "reader"], env=env)
    assert made.exit_code == 0, made.output
    key = next(line for line in made.stdout.splitlines() if line.startswith("mnemo_"))
    key_id = key.split("_")[1]
    listed = runner.invoke(cli, ["keys", "list"], env=env)
    assert key_id in listed.stdout and "reader" in listed.stdout and key not in listed.stdout
    assert runner.invoke(cli, ["keys", "revoke", key_id], env=env).exit_code == 0
    assert KeyRing(tmp_path).verify(key) is None
