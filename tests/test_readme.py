"""The README tells the truth: its examples run, and every setting and command is documented."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from mnemo.cli import cli
from mnemo.config import Settings

README = (Path(__file__).parent.parent / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_every_setting_is_documented_in_the_readme():
    for name in Settings.model_fields:
        assert f"`MNEMO_{name.upper()}`" in README, f"MNEMO_{name.upper()} is not in the README"


def test_every_cli_command_is_named_in_the_readme():
    for name in cli.commands:
        assert f"mnemo {name}" in README, f"`mnemo {name}` is not in the README"


def test_the_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MNEMO_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for code in blocks("python"):
        exec(compile(code, "README.md", "exec"), {})


def test_the_command_line_examples_run_in_order(tmp_path: Path):
    runner = CliRunner()
    env = {"MNEMO_HOME": str(tmp_path)}
    last_id = None
    for block in blocks("sh"):
        for line in block.splitlines():
            words = shlex.split(line)
            if words[:1] != ["mnemo"] or words[1] in ("serve", "setup"):  # setup downloads; CI runs it
                continue
            args = [last_id if w == "ID" else w for w in words[1:]]
            result = runner.invoke(cli, [*args, "--json"] if args[0] == "add" else args, env=env)
            assert result.exit_code == 0, f"{line}: {result.output}"
            if args[0] == "add":
                last_id = json.loads(result.stdout)["memory"]["id"]


def test_every_bound_is_in_the_readmes_limits_table():
    from mnemo import bounds

    limits = README.split("## Limits", 1)[1].split("\n## ", 1)[0]
    names = [name for name in vars(bounds) if name.startswith("MAX_") and name != "MAX_SQL_INT"]
    for name in names:
        value = getattr(bounds, name)
        assert f"{value:,}" in limits or f" {value} " in limits, f"{name} ({value}) is not in the README's Limits"
    assert bounds.MIN_TIME.strftime("%Y-%m-%dT%H:%M:%SZ") in limits
    assert "9999-12-31T23:59:59.999999Z" in limits
