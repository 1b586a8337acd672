"""Recorded jobs: archive and restore runs and imports are readable by id (MCP resource, CLI), and a
job whose process died is marked failed when a server of the store next starts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp import Client, MCPError

from mcp_calls import structured
from mnemo.access.caller import Caller, Role, acting_as
from mnemo.cli import cli
from mnemo.clock import ManualClock
from mnemo.lifecycle import jobs
from mnemo.serve.server import ProfileServer
from mnemo.storage import Job

pytestmark = pytest.mark.every_backend  # the storage contract: SQLite and PostgreSQL


async def read_job(client: Client, job_id: str) -> dict:
    result = await client.read_resource(f"mnemo://jobs/{job_id}")
    return json.loads(result.contents[0].text)


async def test_an_archive_run_and_a_restore_are_jobs_readable_by_id(server: ProfileServer, clock: ManualClock):
    async with Client(server) as client:
        ids = [
            (await structured(client, "store_memory", content=f"Note {n} about the garden"))["memory_id"]
            for n in range(3)
        ]
        archived = await structured(client, "archive_memory", memory_ids=ids, archive_tier="glacier")
        job = await read_job(client, archived["archive_job_id"])
        assert (job["kind"], job["status"], job["progress"]) == (
            "archive to glacier",
            "succeeded",
            {"done": 3, "total": 3},
        )
        assert job["result"]["archived"] == 3
        restored = await structured(client, "restore_memory", memory_ids=ids)
        assert (await read_job(client, restored["restore_job_id"]))["status"] == "succeeded"


async def test_a_job_is_read_only_by_the_user_who_started_it_and_hidden_like_an_unknown_id_from_others(
    server: ProfileServer,
):
    async with Client(server) as client:
        with acting_as(Caller("alice")):
            ids = [(await structured(client, "store_memory", content=f"Note {n}"))["memory_id"] for n in range(2)]
            job_id = (await structured(client, "archive_memory", memory_ids=ids))["archive_job_id"]
            assert (await read_job(client, job_id))["status"] == "succeeded"
        refusals = []
        for asked in (job_id, "no-such-job"):
            with acting_as(Caller("bob")), pytest.raises(MCPError) as refused:
                await read_job(client, asked)
            error = refused.value
            refusals.append(repr((error.code, error.message, error.data)).replace(asked, "ID"))
        assert refusals[0] == refusals[1]  # the same answer, but for the id asked
        with acting_as(Caller("root", Role.ADMIN)):
            assert (await read_job(client, job_id))["kind"] == "archive to cold"
        assert (await read_job(client, job_id))["kind"] == "archive to cold"  # the keyless local caller


def test_a_job_left_running_by_a_dead_process_is_marked_failed(server: ProfileServer, clock: ManualClock):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    storage = server.service.storage
    here = socket.gethostname()
    storage.put_job(Job("gone", "archive to cold", jobs.RUNNING, clock.now(), here, int(dead.stdout)))
    storage.put_job(Job("alive", "import", jobs.RUNNING, clock.now(), here, os.getpid()))
    assert jobs.close_abandoned(storage, clock) == 1
    gone = storage.get_job("gone")
    assert gone is not None and gone.status == jobs.FAILED and "ended before the job finished" in (gone.error or "")
    assert storage.get_job("alive").status == jobs.RUNNING  # type: ignore[union-attr]


def test_mnemo_jobs_lists_an_import_and_shows_it_by_id(tmp_path: Path):
    notes = tmp_path / "notes.md"
    notes.write_text("One paragraph.\n\nAnother paragraph.\n")
    env = {"MNEMO_HOME": str(tmp_path / "home"), "MNEMO_EMBEDDER": "none"}
    runner = CliRunner()
    job_id = json.loads(runner.invoke(cli, ["import", str(notes), "--json"], env=env).stdout)["job_id"]
    listed = json.loads(runner.invoke(cli, ["jobs", "--json"], env=env).stdout)["jobs"]
    assert [j["job_id"] for j in listed] == [job_id]
    shown = json.loads(runner.invoke(cli, ["jobs", job_id, "--json"], env=env).stdout)
    assert (shown["kind"], shown["status"], shown["result"]["imported"]) == ("import", "succeeded", 2)
    missing = runner.invoke(cli, ["jobs", "no-such-job"], env=env)
    assert missing.exit_code != 0 and "no job" in missing.output
