"""mnemo restore / archive / consolidate from the command line, on a real store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from mnemo.app import open_service
from mnemo.cli import cli
from mnemo.config import Settings
from mnemo.model import Status


def run(home: Path, *args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(cli, [*args], env={"MNEMO_HOME": str(home), "MNEMO_EMBEDDER": "none"})
    assert result.exit_code == code, result.output
    return result


def added(home: Path, content: str) -> str:
    return str(json.loads(run(home, "add", content, "--json").stdout)["memory"]["id"])


def test_a_forgotten_memory_comes_back_with_restore_as_it_was(tmp_path: Path):
    home = tmp_path / "home"
    memory_id = added(home, "The wifi password is on the fridge")
    run(home, "forget", memory_id)
    back = json.loads(run(home, "restore", memory_id, "--json").stdout)
    assert back == {"memory_id": memory_id, "restored_from": "forgotten", "version": 3}
    service = open_service(Settings(home=home, config_dir=tmp_path / "config", embedder="none"))
    try:
        memory = service.get(memory_id)
        assert (memory.status, memory.content, memory.forgotten_at) == (
            Status.ACTIVE,
            "The wifi password is on the fridge",
            None,
        )
        assert [c.action for c in service.history(memory_id)] == ["create", "forget", "recover"]
    finally:
        service.storage.close()
    assert "ALREADY_ACTIVE" in run(home, "restore", memory_id, code=1).output  # active now: nothing to restore


def test_archive_then_restore_and_consolidate_from_the_shell(tmp_path: Path):
    home = tmp_path / "home"
    first, second = added(home, "Emma likes green tea"), added(home, "Emma likes green tea in the morning")
    assert "archived 1 memories into glacier" in run(home, "archive", first, "--tier", "glacier").stdout
    assert json.loads(run(home, "restore", first, "--json").stdout)["restored_from"] == "archive"
    merged = json.loads(run(home, "consolidate", first, second, "--json").stdout)
    assert merged["method"] == "merge_all" and set(merged["source_ids"]) == {first, second}
    assert "green tea" in merged["content"]
