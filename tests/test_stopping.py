"""A server stops when asked and drops nothing it was given: real `mnemo serve` processes.

A client that writes a request and closes stdin gets its answer (the SDK alone cancelled what was
in flight at the end of its input); Ctrl-C (SIGINT) and SIGTERM stop either transport cleanly, with
status 0, what was read answered, no "Aborted!" and no native abort at exit.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import serve_env
from http_server import serving
from mnemo.config import Settings

STOP_TIMEOUT_S = 30
HANDSHAKE = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]  # fmt: skip


def store_call(number: int) -> dict[str, object]:
    arguments = {"content": f"Ann's fact number {number} is {number * 7}"}
    return {"jsonrpc": "2.0", "id": 10 + number, "method": "tools/call",
            "params": {"name": "store_memory", "arguments": arguments}}  # fmt: skip


def lines(*messages: dict[str, object]) -> bytes:
    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


def stored(settings: Settings) -> int:
    with sqlite3.connect(settings.store_folder("default") / "memory.db") as db:
        return int(db.execute("SELECT count(*) FROM memories").fetchone()[0])


def unclean(stderr: str) -> list[str]:
    return [marker for marker in ("Aborted!", "terminate called", "Traceback", "closed database") if marker in stderr]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", config_dir=tmp_path / "config", embedder="none")


def start(settings: Settings, tmp_path: Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "mnemo", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**serve_env(settings), **env}, cwd=tmp_path)  # fmt: skip


def test_requests_written_before_stdin_closes_are_all_answered_and_kept(
    settings: Settings, tmp_path: Path, installed_model: Path
):
    server = start(settings, tmp_path, MNEMO_EMBEDDER="local")  # calls that take a while: the model loads
    out, err = server.communicate(lines(*HANDSHAKE, *(store_call(n) for n in range(5))), timeout=STOP_TIMEOUT_S)
    answered = {json.loads(line)["id"] for line in out.splitlines()}
    assert answered == {1, 10, 11, 12, 13, 14}, err.decode()[-2000:]
    assert server.returncode == 0 and unclean(err.decode()) == []
    assert stored(settings) == 5


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_stdio_server_cleanly_after_answering_what_it_read(
    settings: Settings, tmp_path: Path, stop: signal.Signals
):
    server = start(settings, tmp_path)
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(lines(*HANDSHAKE, store_call(1)))
    server.stdin.flush()
    assert json.loads(server.stdout.readline())["id"] == 1
    server.send_signal(stop)  # stdin stays open, as under a client or a terminal
    try:
        status = server.wait(timeout=STOP_TIMEOUT_S)
    finally:
        out, err = server.communicate(timeout=STOP_TIMEOUT_S)  # closes stdin: no later test waits on it
    assert status == 0, err.decode()[-2000:]
    assert [json.loads(line)["id"] for line in out.splitlines()] == [11]
    assert unclean(err.decode()) == [] and stored(settings) == 1


def test_ctrl_c_stops_the_http_server_with_status_0(tmp_path: Path):
    with serving(tmp_path / "home", MNEMO_EMBEDDER="none") as server:
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=STOP_TIMEOUT_S) == 0
    log = server.log.read_text()
    assert unclean(log) == [], log[-2000:]
