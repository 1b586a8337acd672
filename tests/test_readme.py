"""The README and docs/ tell the truth: their examples run, their links resolve, and every setting,
command and bound is documented."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mnemo.cli import cli
from mnemo.config import Settings

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
LINKED_PAGES = [*PAGES, ROOT / "benchmarks" / "README.md"]


def text(page: Path) -> str:
    return page.read_text()


def blocks(language: str, page: Path = README) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text(page), flags=re.DOTALL)


def without_code(markdown: str) -> str:
    return re.sub(r"^```.*?^```", "", markdown, flags=re.DOTALL | re.MULTILINE)


def anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", without_code(text(page)), flags=re.MULTILINE):
        name, n = anchor(heading), 1
        while name in found:  # GitHub numbers repeated headings: name, name-1, name-2...
            name, n = f"{anchor(heading)}-{n}", n + 1
        found.add(name)
    return found


def test_every_setting_is_documented_in_the_readme():
    readme = text(README)
    for name in Settings.model_fields:
        assert f"`MNEMO_{name.upper()}`" in readme, f"MNEMO_{name.upper()} is not in the README"


def test_every_cli_command_is_named_in_the_command_line_page():
    page = text(DOCS / "cli.md")
    for name in cli.commands:
        assert f"mnemo {name}" in page, f"`mnemo {name}` is not in docs/cli.md"


@pytest.mark.parametrize("page", [p for p in PAGES if blocks("python", p)], ids=lambda p: p.name)
def test_the_python_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MNEMO_HOME", str(tmp_path))
    # The README's MCP client starts `mnemo serve` by name, as from an activated venv.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(tmp_path)
    for code in blocks("python", page):
        exec(compile(code, str(page.relative_to(ROOT)), "exec"), {})


@pytest.mark.parametrize("page", [p for p in PAGES if blocks("sh", p)], ids=lambda p: p.name)
def test_the_command_line_examples_run_in_order(page: Path, tmp_path: Path):
    """Every `mnemo ...` line of a page's sh blocks runs, in order, in a fresh home (ID: the last added)."""
    runner = CliRunner()
    env = {"MNEMO_HOME": str(tmp_path)}
    last_id = None
    for block in blocks("sh", page):
        for line in block.splitlines():
            words = shlex.split(line)
            if words[:1] != ["mnemo"] or words[1] in ("serve", "setup"):  # setup downloads; CI runs it
                continue
            args = [last_id if w == "ID" else w for w in words[1:]]
            result = runner.invoke(cli, [*args, "--json"] if args[0] == "add" else args, env=env)
            assert result.exit_code == 0, f"{page.name}: {line}: {result.output}"
            if args[0] == "add":
                last_id = json.loads(result.stdout)["memory"]["id"]


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path):
    for target in re.findall(r"\]\(([^)\s]+)\)", without_code(text(page))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target} names no file"
        if fragment and linked.suffix == ".md":
            assert fragment in anchors(linked), f"{page.name}: {target}: no such heading in {linked.name}"


def test_every_bound_is_in_the_limits_page():
    from mnemo import bounds

    limits = text(DOCS / "limits.md")
    names = [name for name in vars(bounds) if name.startswith("MAX_") and name != "MAX_SQL_INT"]
    for name in names:
        value = getattr(bounds, name)
        assert f"{value:,}" in limits or f" {value} " in limits, f"{name} ({value}) is not in docs/limits.md"
    assert bounds.MIN_TIME.strftime("%Y-%m-%dT%H:%M:%SZ") in limits
    assert "9999-12-31T23:59:59.999999Z" in limits


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    for command in blocks("sh")[1].strip().splitlines():
        assert re.search(rf"^{re.escape(command)}$", ci, flags=re.MULTILINE), f".ci/run does not run `{command}`"
