"""A coding agent's stand-in for the hook tests: runs `python -m mnemo hook EVENT` as a client would.

Each hook call is a real process given the client's JSON on stdin, with MNEMO_HOME (and HOME, for
~/.claude) in a temporary folder; captures are made by the real capture process it starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mnemo.app import open_service
from mnemo.capture import daemon, spool
from mnemo.config import Settings
from mnemo.model import Memory


class Agent:
    """A Claude Code stand-in: runs mnemo's hook commands as Claude Code would."""

    def __init__(self, tmp_path: Path, embedder: str = "none", model_dir: Path | None = None) -> None:
        self.home = tmp_path / "home"
        self.env = os.environ | {
            "MNEMO_HOME": str(self.home),
            "MNEMO_CONFIG_DIR": str(tmp_path / "config"),
            "MNEMO_EMBEDDER": embedder,
            "HOME": str(tmp_path / "user"),
            # a capture process started by a test's last hook call, after the test stopped the one it
            # knew of, exits by itself soon
            "MNEMO_HOOKS_IDLE_S": "15",
        }
        if model_dir is not None:
            self.env["MNEMO_MODEL_DIR"] = str(model_dir)
        self.model_dir = model_dir
        self.embedder = embedder

    def hook(
        self, event: str, payload: dict[str, Any] | bytes, session: str = "s1", client: str = "claude-code"
    ) -> subprocess.CompletedProcess[str]:
        """One hook call as ``client`` makes it (Claude Code's shape adds ``session_id``)."""
        if isinstance(payload, bytes):
            raw = payload
        else:
            raw = json.dumps(({"session_id": session} if client == "claude-code" else {}) | payload).encode()
        command = [sys.executable, "-m", "mnemo", "hook", event, "--client", client]
        done = subprocess.run(command, input=raw, env=self.env, capture_output=True, timeout=60)
        return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())

    def context(self, event: str, payload: dict[str, Any], session: str = "s1") -> str:
        """The additionalContext a hook injected ("" for none), once what came before is captured."""
        self.settle()
        done = self.hook(event, payload, session)
        assert done.returncode == 0, done.stderr
        if not done.stdout.strip():
            return ""
        return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]

    def mnemo(self, *args: str, cwd: Path) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "mnemo", *args], cwd=cwd, env=self.env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def settle(self, timeout_s: float = 60.0) -> None:
        """Wait until the capture process has captured every queued hook call."""
        deadline = time.monotonic() + timeout_s
        while spool.waiting(self.home):
            assert time.monotonic() < deadline, "the capture process did not empty its queue"
            time.sleep(0.05)

    def stop(self) -> None:
        daemon.stop(self.home)

    def memories(self) -> list[Memory]:
        self.settle()
        settings = Settings(home=self.home, config_dir=Path(self.env["MNEMO_CONFIG_DIR"]), embedder="none")
        service = open_service(settings)
        try:
            return service.list(limit=None).memories
        finally:
            service.close()


def project(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    return root
