"""mnemo import / mnemo export through the command line, on real stores."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mnemo.app import open_service
from mnemo.cli import cli
from mnemo.config import Settings
from mnemo.model import Context
from mnemo.storage import BULK_WRITE
from mnemo.storage.sqlite_files import DB_FILENAME
from mnemo.transfer.formats import Record
from mnemo.transfer.load import BATCH, load
from postgres_server import store_connection

WORDS_ONLY = {"MNEMO_EMBEDDER": "none"}
COUNT = 10_000  # notes in the import killed midway: a few seconds of work without a model


def run(home: Path, *args: str, **env: str) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"MNEMO_HOME": str(home), **WORDS_ONLY, **env})
    assert result.exit_code == 0, result.output
    return result


def imported(home: Path, source: Path, **env: str) -> dict[str, Any]:
    summary = json.loads(run(home, "import", str(source), "--json", **env).stdout)
    assert summary.pop("job_id")  # every import is a recorded job
    return dict(summary)


def memories(home: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in run(home, "export").stdout.splitlines()[1:]]


def test_an_export_imported_into_a_new_store_is_the_same_memories(tmp_path: Path):
    first = tmp_path / "first"
    service = open_service(Settings(home=first, config_dir=tmp_path / "config", embedder="none"))
    service.store("Emma is allergic to peanuts", subject="Emma", tags=["health"], importance=0.9,
                  context=Context(user_id="u1", conversation_id="c1"), metadata={"source": "chat"})  # fmt: skip
    service.store("The team ships on Thursdays", access_level="shared", type="core")
    service.storage.close()
    dump = tmp_path / "dump.jsonl"
    run(first, "export", "-o", str(dump))
    header = json.loads(dump.read_text().splitlines()[0])
    assert (header["format"], header["count"]) == ("mnemo-export", 2)
    second = tmp_path / "second"
    assert imported(second, dump) == {"format": "mnemo", "imported": 2, "duplicates_skipped": 0, "rejected": {},
                                      "rejected_examples": {}}  # fmt: skip
    assert memories(second) == memories(first)  # ids, dates, tags, auto tags, users, metadata: all kept


def test_importing_the_same_file_twice_adds_nothing_the_second_time(tmp_path: Path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "house.md").write_text("# House\n\nThe spare key is under the blue pot.\n\n"
                                    "The boiler is serviced every March.\n")  # fmt: skip
    home = tmp_path / "home"
    assert imported(home, notes)["imported"] == 2
    again = imported(home, notes)
    assert (again["imported"], again["duplicates_skipped"]) == (0, 2)
    assert len(memories(home)) == 2


def test_a_text_folder_gives_one_memory_per_paragraph_and_skips_headings(tmp_path: Path):
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.md").write_text("# Title\n\nFirst paragraph\nspans two lines.\n\n## Only a heading\n\n\n")
    (notes / "sub" / "b.txt").write_text("Second file, one paragraph.")
    (notes / "ignored.json").write_text("{}")
    home = tmp_path / "home"
    assert imported(home, notes)["imported"] == 2
    kept = {m["content"]: m["metadata"]["source_file"] for m in memories(home)}
    assert kept == {"First paragraph spans two lines.": "a.md", "Second file, one paragraph.": "sub/b.txt"}


def test_the_mcp_memory_servers_graph_becomes_memories_about_its_entities(tmp_path: Path):
    graph = tmp_path / "memory.json"
    lines = [
        {"type": "entity", "name": "John_Smith", "entityType": "person",
         "observations": ["Speaks fluent Spanish", "Graduated in 2019"]},
        {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": []},
        {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    ]  # fmt: skip
    graph.write_text("\n".join(json.dumps(line) for line in lines) + "\n{not json\n" + '{"type": "thing"}\n')
    home = tmp_path / "home"
    summary = imported(home, graph)
    assert (summary["format"], summary["imported"]) == ("mcp-memory", 3)
    assert sum(summary["rejected"].values()) == 2 and any("not JSON" in r for r in summary["rejected"])
    by_content = {m["content"]: m for m in memories(home)}
    assert set(by_content) == {"Speaks fluent Spanish", "Graduated in 2019", "John Smith works at Anthropic"}
    assert by_content["Speaks fluent Spanish"]["subject"] == "John Smith"
    assert "person" in by_content["Speaks fluent Spanish"]["tags"]


def test_a_graphs_facts_are_listed_and_recalled_with_the_entity_they_are_about(tmp_path: Path):
    graph = tmp_path / "memory.json"
    graph.write_text(json.dumps({"type": "entity", "name": "John_Smith", "entityType": "person",
                                 "observations": ["Speaks fluent Spanish"]}))  # fmt: skip
    home = tmp_path / "home"
    run(home, "import", str(graph))
    for command in (["list"], ["recall", "Spanish"]):
        assert "John Smith: Speaks fluent Spanish" in run(home, *command, COLUMNS="160").stdout


def test_mnemo_jobs_prints_whole_ids_and_each_result_as_key_value_text(tmp_path: Path):
    notes = tmp_path / "notes.md"
    notes.write_text("The shed key is in the drawer.\n\nLiam plays the cello.\n")
    home = tmp_path / "home"
    job_id = json.loads(run(home, "import", str(notes), "--json").stdout)["job_id"]
    table = run(home, "jobs", COLUMNS="80").stdout
    assert job_id in table
    assert "imported: 2" in table and "duplicates: 0" in table and "{" not in table


def test_on_a_terminal_the_import_bar_counts_records_done_of_all_and_their_rate(tmp_path: Path):
    graph = tmp_path / "memory.json"
    entities = ({"type": "entity", "name": f"P_{n}", "entityType": "person", "observations": [f"Likes {n}"]}
                for n in range(1500))  # fmt: skip
    graph.write_text("".join(json.dumps(entity) + "\n" for entity in entities))
    env = {name: value for name, value in os.environ.items() if not name.startswith("MNEMO_")}
    env |= {"MNEMO_HOME": str(tmp_path / "home"), "MNEMO_CONFIG_DIR": str(tmp_path / "config"), **WORDS_ONLY,
            "COLUMNS": "120", "TERM": "xterm"}  # fmt: skip
    terminal, its_end = pty.openpty()
    with subprocess.Popen([sys.executable, "-m", "mnemo", "import", str(graph)], env=env,
                          stdin=its_end, stdout=its_end, stderr=its_end) as importing:  # fmt: skip
        os.close(its_end)
        written = b""
        while True:
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # EIO: the command ended and closed the terminal
                break
            if not chunk:
                break
            written += chunk
    os.close(terminal)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", written.decode(errors="replace"))
    assert importing.returncode == 0, shown
    assert "1500/1500" in shown and re.search(r"\d records/s", shown), shown
    assert "imported 1500" in shown


def test_refused_records_are_counted_with_their_reasons_and_the_rest_is_imported(tmp_path: Path):
    dump = tmp_path / "dump.jsonl"
    rows = [{"format": "mnemo-export", "version": 1}, {"content": "A good one"}, {"content": ""},
            {"content": "Too important", "importance": 5}, {"content": "Bad date", "created_at": "yesterday"},
            {"content": "Wrong tags", "tags": 7}, {"no": "content"}]  # fmt: skip
    dump.write_text("\n".join(json.dumps(r) for r in rows))
    home = tmp_path / "home"
    summary = imported(home, dump)
    assert summary["imported"] == 1 and sum(summary["rejected"].values()) == 5
    assert [m["content"] for m in memories(home)] == ["A good one"]
    shown = run(home, "import", str(dump)).stdout
    assert "rejected 5" in shown and "dump.jsonl:3" in shown  # the reasons name the lines


def test_with_the_model_a_rewrite_of_a_stored_fact_is_skipped_as_a_near_duplicate(
    tmp_path: Path, installed_model: Path
):
    notes = tmp_path / "notes.md"
    notes.write_text("Emma is allergic to peanuts.\n\nemma is allergic to peanuts\n\nLiam plays the cello.\n")
    home = tmp_path / "home"
    summary = imported(home, notes, MNEMO_EMBEDDER="local")
    assert (summary["imported"], summary["duplicates_skipped"]) == (2, 1)
    service = open_service(Settings(home=home, config_dir=tmp_path / "config"))
    try:
        assert service.storage.unembedded(10) == []  # the batch's vectors were stored with them
        assert service.recall("who plays an instrument").hits[0].memory.content == "Liam plays the cello."
    finally:
        service.storage.close()


def test_an_import_killed_midway_keeps_whole_batches_and_run_again_adds_exactly_the_rest(tmp_path: Path):
    notes = tmp_path / "notes.md"
    notes.write_text("\n\n".join(f"Note {n}: the shed key is in drawer {n % 7}" for n in range(COUNT)))
    home = tmp_path / "home"
    env = {**os.environ, "MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(tmp_path / "config"), **WORDS_ONLY}
    importing = subprocess.Popen([sys.executable, "-m", "mnemo", "import", str(notes)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 60
    while _stored(home, tmp_path) < 2 * BATCH:
        assert time.monotonic() < deadline and importing.poll() is None, "the import ended before it could be killed"
        time.sleep(0.02)
    importing.send_signal(signal.SIGKILL)
    importing.wait()
    partial = _stored(home, tmp_path)
    assert 0 < partial < COUNT and partial % BATCH == 0  # a batch is one transaction: all of it or none
    summary = imported(home, notes)
    assert (summary["imported"], summary["duplicates_skipped"]) == (COUNT - partial, partial)
    contents = [m["content"] for m in memories(home)]
    assert len(contents) == len(set(contents)) == COUNT


def _stored(home: Path, tmp_path: Path) -> int:
    """The memories committed to the default store, read straight from its file (a poll must be quick)."""
    path = Settings(home=home, config_dir=tmp_path / "config").store_folder("default") / DB_FILENAME
    if not path.exists():
        return 0
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
        try:
            return int(db.execute("SELECT count(*) FROM memories").fetchone()[0])
        except sqlite3.OperationalError:  # the schema is not there yet
            return 0


@pytest.mark.parametrize("name", ["memory.json", "notes.txt"])
def test_the_format_is_detected_from_the_file(tmp_path: Path, name: str):
    from mnemo.transfer.formats import detect

    path = tmp_path / name
    path.write_text('{"type": "entity", "name": "x", "entityType": "t", "observations": []}\n')
    assert detect(path) == ("mcp-memory" if name == "memory.json" else "text")


def test_a_large_import_into_postgresql_leaves_its_planner_knowing_the_memories(tmp_path: Path, postgres_url: str):
    # Until autovacuum came by, the planner saw the new store as empty: a list by importance sorted
    # every memory instead of walking its index (see PostgresStorage.refresh_statistics).
    service = open_service(Settings(home=tmp_path / "home", embedder="none", database_url=postgres_url))
    try:
        count = BULK_WRITE
        summary = load(service, [Record(str(i), {"content": f"note {i} about the garden shed"}) for i in range(count)])
        assert summary.imported == count
        with store_connection(postgres_url) as db:
            (planned,) = db.execute("SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass").fetchone()
        assert planned == count
    finally:
        service.storage.close()
