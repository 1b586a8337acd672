"""A real ``mnemo serve`` process spoken to in raw JSON-RPC lines, for what the SDK cannot send.

``RawServer`` writes bytes to the server's stdin and collects every JSON line it prints, by id,
on a reader thread; a test can also kill it with SIGKILL at any moment. ``check_store`` opens a
store's files after such a kill and lists what is wrong with them.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2025-06-18"
ANSWER_TIMEOUT_S = 30


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


class RawServer:
    """``mnemo serve`` on stdio; answers are kept by id as they arrive."""

    def __init__(self, home: Path, profile: str, store: str = "default", **env: str) -> None:
        variables = {
            **os.environ,
            "MNEMO_HOME": str(home),
            "MNEMO_CONFIG_DIR": str(home.parent / "config"),
            "MNEMO_EMBEDDER": "none",
            "MNEMO_LOG_LEVEL": "WARNING",
            **env,
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mnemo", "serve", "--profile", profile, "--store", store],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=variables,
            cwd=home.parent,  # away from any .env file in the working tree
        )
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.answers: dict[Any, dict[str, Any]] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 1_000_000  # far from the ids the hostile lines carry (11-21)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                message = {"unparsed": raw[:200].decode(errors="replace")}
            if isinstance(message, dict):
                self._answers.put(message)

    def send(self, data: bytes) -> None:
        """Write to the server; a server killed meanwhile shows as a missing answer, not an error here."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the pipe was closed
            pass

    def answer(self, request_id: Any, timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any] | None:
        """The answer to that id, or None when none came in time (or the server died)."""
        deadline = time.monotonic() + timeout
        key = json.dumps(request_id)
        while key not in self.answers:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                message = self._answers.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.process.poll() is not None and self._answers.empty():
                    return None
                continue
            self.answers[json.dumps(message.get("id"))] = message
        return self.answers[key]

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any] | None:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(line(message))
        return self.answer(self._next_id)

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """A tools/call's result, or None when the server gave no answer."""
        answer = self.request("tools/call", {"name": tool, "arguments": arguments})
        return None if answer is None else answer.get("result", answer)

    def initialize(self) -> dict[str, Any] | None:
        info = {"name": "attack", "version": "1"}
        params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": info}
        answer = self.request("initialize", params)
        self.send(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return answer

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            with suppress(BrokenPipeError):
                self.process.stdin.close()
            try:
                self.process.wait(timeout=ANSWER_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
        for pipe in (self.process.stdin, self.process.stdout):
            # Closing stdin flushes what is buffered, which a killed server can no longer read.
            with suppress(BrokenPipeError):
                if pipe is not None and not pipe.closed:
                    pipe.close()


def check_store(folder: Path) -> list[str]:
    """What is wrong with a store's files: its database and FTS index, its backups and archive."""
    problems: list[str] = []
    with closing(sqlite3.connect(folder / "memory.db")) as db:
        verdict = db.execute("PRAGMA integrity_check").fetchall()
        if verdict != [("ok",)]:
            problems.append(f"integrity_check: {verdict[:5]}")
        try:
            db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            problems.append(f"FTS index: {exc}")
    for backup in sorted((folder / "backups").glob("*.json")):
        try:
            json.loads(backup.read_text(encoding="utf-8"))
        except ValueError as exc:
            problems.append(f"backup {backup.name} is not whole: {exc}")
    for archive in sorted((folder / "archive").glob("*.jsonl")):
        for number, text in enumerate(archive.read_text(encoding="utf-8").splitlines(), 1):
            try:
                json.loads(text)
            except ValueError as exc:
                problems.append(f"archive {archive.name} line {number} is not whole: {exc}")
    return problems
