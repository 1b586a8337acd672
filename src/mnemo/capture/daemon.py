"""The capture process: one per MNEMO_HOME, started by the first hook that finds none running.

It keeps the store open and the model loaded, so a hook costs a process start and a socket round
trip instead of importing mnemo and loading the model each time. It answers the hook command over
a Unix socket (``spool.socket_path``: in a folder only this user may enter, and each peer's user
id is checked where the platform tells it) and captures the queued calls, oldest first, one at a
time, so the calls of one session are captured in order and several sessions never write the
store at once. A call is deleted from the queue only after it was captured: a crash captures it
again; one that keeps failing to be read is moved aside to ``queue/failed/``.

It exits on SIGTERM or SIGINT (finishing the call it is capturing), and by itself after
``MNEMO_HOOKS_IDLE_S`` without a hook call and with nothing queued. A second process started for
the same home finds the lock taken and exits at once.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from mnemo.capture import spool
from mnemo.capture.runner import Capturer
from mnemo.config import Settings
from mnemo.errors import EmbeddingError, Locked, StorageError
from mnemo.serve.server import configure_logging

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8_000_000  # the hook command sends bounded texts; anything larger is refused
REQUEST_TIMEOUT_S = 5.0
POLL_S = 1.0  # how often the queue is looked at without a wake-up
RETRY_S = 5.0
# What an injection waits for the queue to be captured: a session start can, a prompt little.
DRAIN_BEFORE_INJECT_S = {
    "session-start": 1.0,
    "user-prompt-submit": 0.1,
}  # after a capture failed for a reason of the store's (busy, unavailable): wait, retry


def main(lock: BinaryIO) -> int:
    """Run the capture process of MNEMO_HOME, holding its lock (``spool.take_lock``); 2 when the
    settings are wrong (said in the log: no one sees this process's stderr)."""
    try:
        settings = Settings()
    except ValueError as exc:  # a bad MNEMO_* variable: the hooks queue, and nothing captures them
        (spool.mnemo_home() / "logs").mkdir(parents=True, exist_ok=True)
        logging.basicConfig(filename=spool.mnemo_home() / "logs" / "mnemo.log", level=logging.ERROR)
        log.error("capture process: the settings are wrong, nothing is captured until they are fixed: %s", exc)
        return 2
    configure_logging(settings)
    return CaptureProcess(settings).run(lock)


class CaptureProcess:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = settings.home
        self.capturer = Capturer(settings)
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.last_call = time.monotonic()

    def run(self, lock: BinaryIO) -> int:
        """Serve until stopped or idle, holding ``lock`` (``spool.take_lock``); 0."""
        path = spool.socket_path(self.home)
        path.unlink(missing_ok=True)  # left by a process that was killed: the lock says none runs
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(os.fspath(path))
        path.chmod(0o600)
        listener.listen(64)
        listener.settimeout(0.25)
        (spool.run_dir(self.home) / "capture.pid").write_text(str(os.getpid()))
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stopping.set())
        log.info("capture process %d serves %s at %s", os.getpid(), self.home, path)
        worker = threading.Thread(target=self._capture_queued, name="capture", daemon=True)
        worker.start()
        threading.Thread(target=self._warm_up, name="warm-up", daemon=True).start()
        try:
            self._accept(listener)
        finally:
            self.stopping.set()
            self.wake.set()
            listener.close()
            path.unlink(missing_ok=True)
            worker.join(timeout=30)
            self.capturer.close()
            (spool.run_dir(self.home) / "capture.pid").unlink(missing_ok=True)
            lock.close()
            log.info("capture process %d stopped", os.getpid())
        return 0

    def _accept(self, listener: socket.socket) -> None:
        idle_s = self.settings.hooks_idle_s
        while not self.stopping.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                if time.monotonic() - self.last_call > idle_s and not spool.waiting(self.home):
                    log.info("capture process: no hook call for %.0f s, exiting", idle_s)
                    return
                continue
            self.last_call = time.monotonic()
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            try:
                connection.settimeout(REQUEST_TIMEOUT_S)
                if not _same_user(connection):
                    log.warning("capture process: a connection from another user, refused")
                    return
                request = _read_request(connection)
                reply: dict[str, Any] = {"ok": True}
                if request.get("op") == "inject":
                    self._wait_for_queue(DRAIN_BEFORE_INJECT_S.get(str(request.get("event")), 0.0))
                    reply = {"output": self.capturer.inject(request)}
                elif request.get("op") == "wake":
                    self.wake.set()
                else:
                    reply = {"error": "unknown op"}
                connection.sendall(json.dumps(reply).encode())
            except Exception:
                log.exception("capture process: a hook call failed; the hook shows nothing")

    def _wait_for_queue(self, timeout_s: float) -> None:
        """Let the calls queued before this one be captured first, for at most ``timeout_s``: a
        session that starts just after one ended sees that session's summary."""
        deadline = time.monotonic() + timeout_s
        self.wake.set()
        while spool.waiting(self.home) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _capture_queued(self) -> None:
        while not self.stopping.is_set():
            for item in spool.waiting(self.home):
                if self.stopping.is_set():
                    return
                if not self._capture(item):
                    self.stopping.wait(RETRY_S)
                    break
            self.wake.wait(POLL_S)
            self.wake.clear()

    def _capture(self, item: Path) -> bool:
        """Capture one queued call and delete it; False when the store could not take it now."""
        try:
            call = json.loads(item.read_bytes())
            if not isinstance(call, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            if not item.exists():
                return True  # taken by a process that held the lock before this one
            log.warning("capture process: unreadable queued call %s (%s), set aside", item.name, exc)
            (item.parent / "failed").mkdir(exist_ok=True)
            item.replace(item.parent / "failed" / item.name)
            return True
        try:
            self.capturer.capture(call)
        except (Locked, StorageError, EmbeddingError) as exc:  # the store or model, for now
            log.warning("capture process: %s; the call stays queued and is retried", exc)
            return False
        except Exception:
            log.exception("capture process: capturing %s failed; set aside", item.name)
            (item.parent / "failed").mkdir(exist_ok=True)
            item.replace(item.parent / "failed" / item.name)
            return True
        item.unlink(missing_ok=True)
        return True

    def _warm_up(self) -> None:
        try:
            self.capturer.warm_up()
        except Exception:
            log.exception("capture process: warming up failed (the first hook call will try again)")


def _same_user(connection: socket.socket) -> bool:
    """Whether the peer runs as this user (Linux tells; elsewhere the socket's folder is private)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return uid == os.getuid()


def _read_request(connection: socket.socket) -> dict[str, Any]:
    data = bytearray()
    while chunk := connection.recv(65536):
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            raise ValueError("a request over the size limit")
    request = json.loads(data)
    if not isinstance(request, dict):
        raise ValueError("a request that is not a JSON object")
    return request


def stop(home: Path, timeout_s: float = 30.0) -> bool:
    """Stop the capture process of ``home`` and wait for it to exit; False when none ran."""
    pid = running_pid(home)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while running_pid(home) == pid and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def running_pid(home: Path) -> int | None:
    """The pid of the capture process serving ``home``, if one does (it holds the lock)."""
    lock = spool.take_lock(home)
    if lock is not None:  # nobody held it: no process serves
        lock.close()
        return None
    try:
        return int((spool.run_dir(home) / "capture.pid").read_text())
    except (OSError, ValueError):
        return None
