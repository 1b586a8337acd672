"""The ``mnemo`` command, driven through click's runner against real SQLite stores in tmp_path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from mnemo.app import open_service
from mnemo.cli import RECALL_MIN_RELEVANCE, cli
from mnemo.config import Settings

ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")

Invoke = Callable[..., Result]


@pytest.fixture
def mnemo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """Run ``mnemo ARGS...`` with its data under tmp_path and no MNEMO_* settings leaking in."""
    for name in list(os.environ):
        if name.startswith("MNEMO_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no stray .env file is read
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(
            cli, list(args), env={"MNEMO_HOME": str(tmp_path), "MNEMO_CONFIG_DIR": str(tmp_path / "config")}
        )

    return invoke


def as_json(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert isinstance(payload, dict)
    return payload


def add(mnemo: Invoke, content: str, *options: str) -> str:
    return as_json(mnemo("add", content, *options, "--json"))["memory"]["id"]


def test_add_then_recall_finds_the_memory(mnemo: Invoke) -> None:
    added = mnemo("add", "Emma is lactose intolerant", "--tag", "diet")
    assert added.exit_code == 0, added.output
    memory_id = re.search(r"stored (\S+)", added.stdout).group(1)
    assert "diet" in added.stdout
    add(mnemo, "Bob uses vim for everything")

    table = mnemo("recall", "lactose")
    recalled = as_json(mnemo("recall", "lactose", "--json"))

    assert table.exit_code == 0, table.output
    assert memory_id in table.stdout
    assert recalled["hits"][0]["memory"]["id"] == memory_id  # Bob's memory may follow, far behind
    assert recalled["hits"][0]["rank"] == 1
    assert 0 < recalled["hits"][0]["scores"]["combined"] <= 1


def test_recall_leaves_out_weak_matches_says_so_and_shows_them_at_min_relevance_0(
    mnemo: Invoke, installed_model: Path
) -> None:
    lactose = add(mnemo, "Emma is lactose intolerant")
    add(mnemo, "Bob uses vim for everything")
    add(mnemo, "The boiler is serviced every March")

    strong = as_json(mnemo("recall", "lactose", "--json"))
    every = as_json(mnemo("recall", "lactose", "--min-relevance", "0", "--json"))
    table = mnemo("recall", "lactose")
    nothing = mnemo("recall", "tax return deadline")

    assert [hit["memory"]["id"] for hit in strong["hits"]] == [lactose]
    assert len(every["hits"]) == 3
    assert all(hit["scores"]["semantic_similarity"] < RECALL_MIN_RELEVANCE for hit in every["hits"][1:])
    assert f"relevance >= {RECALL_MIN_RELEVANCE}" in table.stdout
    assert "--min-relevance 0 shows weaker matches" in nothing.stdout
    assert f"[default: {RECALL_MIN_RELEVANCE};" in mnemo("recall", "--help").stdout


def test_add_prints_the_auto_tags_beside_the_given_ones(mnemo: Invoke) -> None:
    stored = as_json(mnemo("add", "Emma prefers oat milk in her coffee", "--tag", "diet", "--json"))

    assert stored["memory"]["tags"] == ["diet"]
    assert stored["auto_tags"]
    assert stored["auto_tags"] == stored["memory"]["auto_tags"]


def test_adding_the_same_content_twice_fails_with_duplicate_and_stores_one(mnemo: Invoke) -> None:
    first = add(mnemo, "Emma is lactose intolerant")

    again = mnemo("add", "Emma is lactose intolerant")

    assert again.exit_code == 1
    assert again.stderr.startswith("error: DUPLICATE: ")
    assert first in again.stderr
    assert "Traceback" not in again.output
    assert as_json(mnemo("list", "--json"))["total"] == 1


def test_list_json_parses_and_sorts_by_the_chosen_field(mnemo: Invoke) -> None:
    for content, importance in [("low note", "0.2"), ("high note", "0.9"), ("middle note", "0.5")]:
        add(mnemo, content, "--importance", importance)

    descending = as_json(mnemo("list", "--sort", "importance", "--json"))
    ascending = as_json(mnemo("list", "--sort", "importance", "--asc", "--json"))

    assert [m["importance"] for m in descending["memories"]] == [0.9, 0.5, 0.2]
    assert [m["importance"] for m in ascending["memories"]] == [0.2, 0.5, 0.9]
    assert descending["total"] == 3
    assert all(ISO_UTC.match(m["created_at"]) for m in descending["memories"])


def test_list_limit_pages_and_says_there_is_more(mnemo: Invoke) -> None:
    for n in range(3):
        add(mnemo, f"note number {n}")

    page = as_json(mnemo("list", "--limit", "2", "--json"))

    assert len(page["memories"]) == 2
    assert page["has_more"] is True
    assert page["total"] == 3


def test_show_includes_the_history_of_an_update_made_through_the_service(mnemo: Invoke, tmp_path: Path) -> None:
    memory_id = add(mnemo, "Emma is lactose intolerant")
    service = open_service(Settings(home=tmp_path))
    try:
        service.update(memory_id, content="Emma is lactose intolerant and vegan", reason="learned more")
    finally:
        service.storage.close()

    shown = as_json(mnemo("show", memory_id, "--json"))
    table = mnemo("show", memory_id)

    assert shown["memory"]["content"] == "Emma is lactose intolerant and vegan"
    assert shown["memory"]["version"] == 2
    assert [(c["version"], c["action"]) for c in shown["history"]] == [(1, "create"), (2, "update")]
    assert shown["history"][1]["reason"] == "learned more"
    assert shown["history"][1]["previous"]["content"] == "Emma is lactose intolerant"
    assert table.exit_code == 0, table.output
    assert "update" in table.stdout
    assert "learned more" in table.stdout


def test_forgotten_memory_is_listed_under_status_deleted_only(mnemo: Invoke) -> None:
    memory_id = add(mnemo, "Emma is lactose intolerant")
    kept = add(mnemo, "Bob uses vim")

    forgotten = as_json(mnemo("forget", memory_id, "--reason", "privacy", "--retention-days", "7", "--json"))

    assert forgotten["deletion_type"] == "soft"
    assert ISO_UTC.match(forgotten["recoverable_until"])
    assert forgotten["backup_id"]
    assert [m["id"] for m in as_json(mnemo("list", "--json"))["memories"]] == [kept]
    deleted = as_json(mnemo("list", "--status", "deleted", "--json"))["memories"]
    assert [(m["id"], m["status"], m["forget_reason"]) for m in deleted] == [(memory_id, "forgotten", "privacy")]
    table = mnemo("list", "--status", "deleted", "--status", "active")
    assert memory_id in table.stdout
    assert "deleted" in table.stdout


def test_forget_prints_the_deletion_type_and_the_backup(mnemo: Invoke) -> None:
    memory_id = add(mnemo, "Emma is lactose intolerant")

    result = mnemo("forget", memory_id)

    assert result.exit_code == 0, result.output
    assert f"deleted {memory_id} (soft)" in result.stdout
    assert "recoverable until: " in result.stdout
    assert "backup: " in result.stdout


def test_hard_forget_leaves_no_backup_and_nothing_to_show(mnemo: Invoke) -> None:
    memory_id = add(mnemo, "Emma is lactose intolerant")

    forgotten = as_json(mnemo("forget", memory_id, "--hard", "--json"))
    shown = mnemo("show", memory_id)

    assert (forgotten["deletion_type"], forgotten["recoverable_until"], forgotten["backup_id"]) == ("hard", None, None)
    assert shown.exit_code == 1
    assert shown.stderr.startswith("error: NOT_FOUND: ")


def test_stats_json_counts_the_memories(mnemo: Invoke) -> None:
    add(mnemo, "Emma is lactose intolerant")
    add(mnemo, "Bob uses vim")

    report = as_json(mnemo("stats", "--json"))
    table = mnemo("stats")

    assert report["scope"] == "global"
    assert report["statistics"]["count"]["total"] == 2
    assert ISO_UTC.match(report["generated_at"])
    assert table.exit_code == 0, table.output
    assert "total: 2" in table.stdout


def test_stats_of_an_unknown_user_is_a_scope_error(mnemo: Invoke) -> None:
    add(mnemo, "Emma is lactose intolerant", "--user", "emma")

    result = mnemo("stats", "--scope", "user", "--scope-id", "nobody")

    assert result.exit_code == 1
    assert result.stderr.startswith("error: SCOPE_NOT_FOUND: ")


def test_invalid_importance_exits_1_and_leaves_the_store_unchanged(mnemo: Invoke) -> None:
    result = mnemo("add", "Emma is lactose intolerant", "--importance", "1.5")

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: INVALID_INPUT: ")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.output
    assert as_json(mnemo("list", "--json", "--status", "active", "--status", "deleted"))["total"] == 0


def test_a_usage_error_exits_2_as_click_does(mnemo: Invoke) -> None:
    result = mnemo("list", "--sort", "colour")

    assert result.exit_code == 2
    assert result.stdout == ""


def test_a_bad_setting_is_a_one_line_error(mnemo: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_BUSY_TIMEOUT_S", "-1")

    result = mnemo("list")

    assert result.exit_code == 1
    assert result.stderr.startswith("error: INVALID_INPUT: setting busy_timeout_s")


def test_store_option_keeps_stores_apart_on_the_group_or_the_command(mnemo: Invoke) -> None:
    assert mnemo("stores", "add", "work").exit_code == 0
    assert mnemo("stores", "add", "home").exit_code == 0
    as_json(mnemo("--store", "work", "add", "Deploys happen on Tuesdays", "--json"))
    as_json(mnemo("add", "Emma is lactose intolerant", "--store", "home", "--json"))

    assert as_json(mnemo("list", "--json"))["total"] == 0
    assert as_json(mnemo("list", "--store", "work", "--json"))["total"] == 1
    assert as_json(mnemo("--store", "home", "list", "--json"))["total"] == 1
    chosen = as_json(mnemo("--store", "home", "list", "--store", "work", "--json"))  # the command's option wins
    assert [m["content"] for m in chosen["memories"]] == ["Deploys happen on Tuesdays"]


def test_json_output_is_exactly_one_object_with_iso_timestamps(mnemo: Invoke) -> None:
    result = mnemo("add", "Emma is lactose intolerant", "--json")

    assert result.exit_code == 0
    payload = json.loads(result.stdout)  # fails on anything besides the one object
    memory = payload["memory"]
    assert all(ISO_UTC.match(memory[key]) for key in ("created_at", "updated_at", "accessed_at"))
    assert result.stderr == ""


def test_every_command_and_option_has_help_text(mnemo: Invoke) -> None:
    undocumented: list[str] = []
    for name, command in cli.commands.items():
        if not (command.help or "").strip():
            undocumented.append(name)
        for param in command.params:
            if isinstance(param, click.Option) and not (param.help or "").strip():
                undocumented.append(f"{name} {param.opts[0]}")
        assert mnemo(name, "--help").exit_code == 0
    assert undocumented == []
    assert {"serve", "add", "recall", "list", "show", "forget", "stats"} <= set(cli.commands)


def test_commands_other_than_serve_do_not_import_the_mcp_sdk() -> None:
    code = "import sys, mnemo.cli; print(any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules))"

    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert loaded.stdout.strip() == "False"


def test_content_that_looks_like_markup_is_printed_as_written(mnemo: Invoke) -> None:
    add(mnemo, "Wrap errors in [/red] and [bold]x[/bold] :smile:")

    listed = mnemo("list")
    recalled = mnemo("recall", "errors")

    assert listed.exit_code == 0, listed.output
    assert recalled.exit_code == 0, recalled.output
    for output in (listed.stdout, recalled.stdout):
        assert "[/red]" in output
        assert ":smile:" in output


def test_reindex_without_a_model_is_a_clear_error(mnemo: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_EMBEDDER", "none")
    add(mnemo, "Emma is lactose intolerant")
    result = mnemo("reindex")
    assert result.exit_code == 1
    assert "EMBEDDING_ERROR" in result.stderr


def test_reindex_embeds_every_memory_with_the_configured_model(mnemo: Invoke, installed_model: Path) -> None:
    add(mnemo, "Emma is lactose intolerant")
    add(mnemo, "Liam plays the cello")
    result = mnemo("reindex")
    assert result.exit_code == 0, result.output
    assert "re-embedded 2 memories" in result.stdout
