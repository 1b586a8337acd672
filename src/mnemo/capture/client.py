"""``mnemo hook EVENT``: the command a client's hooks run, fast enough to run at every tool call.

Starting Python and importing mnemo's engine and model takes most of a second, more than a hook
may cost. So this command imports only the standard library and does three small things:

1. reads the client's JSON from stdin, bounds every text in it (a tool's output can be a whole
   file: long texts keep their first and last lines) and takes secrets out (``redact``), so
   nothing secret is written anywhere, not even to the queue;
2. at session start and at a prompt, asks the capture process (``capture/daemon.py``: one per
   MNEMO_HOME, model loaded, store open) for the memories to show the agent, over a Unix socket,
   and prints them in the client's format;
3. writes the call to the durable queue (``spool``) when there may be something to keep, wakes the
   capture process, and exits: the capture happens a moment later, in that process.

When no capture process runs, it starts one, detached, and the queued calls wait for it (a session
start waits a moment for it to answer). It exits 0 whatever happens to a call: what goes wrong is
logged to ``MNEMO_HOME/logs/mnemo.log`` and the agent goes on as if no hook had run. Only arguments
it does not know (an event or client misspelled in the hooks' configuration, wrong at every call)
are refused at once: the reason on stderr, where the client shows a failed hook to the user, and
exit status 1, which every client reads as a failed hook that blocks nothing (2 would block).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from mnemo.capture import spool, switch
from mnemo.capture.names import CLIENT_NAMES, EVENTS
from mnemo.capture.redact import redact

INJECTING = frozenset({"session-start", "user-prompt-submit"})  # events that may show memories
CAPTURING = frozenset(EVENTS) - {"session-start"}  # events that may give something to keep
# The exit status of a call refused for its arguments: Claude Code, Codex, Cursor and Gemini CLI all
# read a status other than 0 and 2 as a hook that failed without blocking; 2 blocks a prompt or a tool.
REFUSED = 1
USAGE = (
    f"usage: mnemo hook EVENT [--client {'|'.join(CLIENT_NAMES)}]\n"
    f"  Run by a coding agent's hooks with its JSON on stdin. EVENT: {', '.join(EVENTS)}.\n"
    "  An unknown EVENT or client is refused: exit 1, the reason on stderr (the agent goes on).\n"
    "  Otherwise it exits 0; what goes wrong is logged, never shown to the agent.\n"
)

# Fields that name where the agent works, never hold a secret and must stay intact (the project is
# found from them): a folder named like a random token must not be taken for one.
NOT_REDACTED = frozenset({"cwd", "transcript_path", "session_id", "hook_event_name", "workspace_roots"})
MAX_STDIN_BYTES = 16_000_000  # a client's JSON longer than this is not read (the call is logged, not captured)
MAX_TEXT_CHARS = 8_000  # a longer text keeps its first and last lines, this many characters in all
MAX_PROMPT_CHARS = 16_000
MAX_LIST_ITEMS = 100
MAX_DEPTH = 12
ANSWER_TIMEOUT_S = 4.0  # the capture process's answer at a prompt (its first recall loads the model)
START_WAIT_S = 3.0  # at session start, how long a capture process just started is waited for
CONNECT_TIMEOUT_S = 0.5


def main(argv: list[str]) -> int:
    """Run one hook call: 0 (help asked: the usage, also 0), or ``REFUSED`` for arguments it does
    not know."""
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    try:
        event, client = _arguments(argv)
    except ValueError as exc:
        sys.stderr.write(f"mnemo hook: {exc}; nothing was captured\n")
        with suppress(Exception):  # the refusal is on stderr already; the log keeps a copy
            _log(spool.mnemo_home(), f"mnemo hook {' '.join(argv)}: {exc}; refused")
        return REFUSED
    try:
        home = spool.mnemo_home()
    except Exception:  # no home to log in: nothing can be done, quietly
        return 0
    try:
        output = _run(home, event, client, sys.stdin.buffer.read(MAX_STDIN_BYTES))
        if output:
            sys.stdout.write(output + "\n")
    except ValueError as exc:
        _log(home, f"mnemo hook {' '.join(argv)}: {exc}; ignored")
    except Exception:
        _log(home, f"mnemo hook {' '.join(argv)} failed; the agent goes on without it", failed=True)
    return 0


def _arguments(argv: list[str]) -> tuple[str, str]:
    """The event and client the arguments name; ``ValueError`` naming the known ones when they
    name another."""
    event, rest = argv[0], argv[1:]
    client = "claude-code"
    if rest[:1] == ["--client"] and len(rest) == 2:
        client = rest[1]
    elif len(rest) == 1 and rest[0].startswith("--client="):
        client = rest[0].partition("=")[2]
    elif rest:
        raise ValueError(f"unexpected arguments {rest} (usage: mnemo hook EVENT [--client NAME])")
    if event not in EVENTS:
        raise ValueError(f"unknown event {event!r} (known: {', '.join(EVENTS)})")
    if client not in CLIENT_NAMES:
        raise ValueError(f"unknown client {client!r} (known: {', '.join(CLIENT_NAMES)})")
    return event, client


def _run(home: Path, event: str, client: str, raw: bytes) -> str:
    if not hasattr(socket, "AF_UNIX"):
        raise ValueError("the capture process needs Unix sockets (Linux, macOS): the hooks do nothing here")
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise ValueError(f"the input is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("the input is not a JSON object")
    if switch.is_disabled(home, _folder(data)):
        return ""  # nothing is read further, nothing queued
    call = {"client": client, "event": event, "payload": _bounded(data, MAX_DEPTH)}
    output = _ask(home, call) if event in INJECTING else ""
    if event in CAPTURING:
        if spool.put(home, call) is None:
            _log(home, f"mnemo hook {event}: the capture queue is full; this call is not captured")
        _wake(home)
    return output


def _folder(data: dict[str, Any]) -> Path:
    """The folder the agent works in: the payload's ``cwd`` (Cursor: its first workspace root), or
    the folder the client started the hook in."""
    roots = data.get("workspace_roots")
    folder = data.get("cwd") or (roots[0] if isinstance(roots, list) and roots else None)
    return Path(folder if isinstance(folder, str) and folder else os.getcwd()).expanduser().resolve()


def _bounded(value: Any, depth: int, key: str = "") -> Any:
    """``value`` with its texts bounded and redacted, its lists and nesting cut short."""
    if isinstance(value, str):
        text = _clipped(value, MAX_PROMPT_CHARS if key == "prompt" else MAX_TEXT_CHARS)
        return text if key in NOT_REDACTED else redact(text)
    if depth <= 0:
        return None
    if isinstance(value, dict):
        return {str(k): _bounded(v, depth - 1, str(k)) for k, v in list(value.items())[:MAX_LIST_ITEMS]}
    if isinstance(value, list):
        return [_bounded(v, depth - 1, key) for v in value[:MAX_LIST_ITEMS]]
    return value


def _clipped(text: str, limit: int) -> str:
    """The first and last lines of a long text (cut at line ends, so no secret is cut in two)."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 2], text[-(limit // 2) :]
    head = head[: head.rfind("\n") + 1] if "\n" in head else head[: head.rfind(" ") + 1]
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail[tail.find(" ") + 1 :]
    return f"{head}[… {len(text) - len(head) - len(tail)} characters left out …]\n{tail}"


def _ask(home: Path, call: dict[str, Any]) -> str:
    """The capture process's answer (what to print), starting it when none runs; "" when it
    cannot answer in time."""
    answer = _request(home, {"op": "inject", **call}, ANSWER_TIMEOUT_S)
    if answer is None:
        _start_process(home)
        if call["event"] != "session-start":
            return ""
        deadline = time.monotonic() + START_WAIT_S
        while answer is None and time.monotonic() < deadline:
            time.sleep(0.05)
            answer = _request(home, {"op": "inject", **call}, max(0.1, deadline - time.monotonic()))
    output = (answer or {}).get("output", "")
    return output if isinstance(output, str) else ""


def _wake(home: Path) -> None:
    if _request(home, {"op": "wake"}, CONNECT_TIMEOUT_S) is None:
        _start_process(home)


def _request(home: Path, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """One request to the capture process; None when none listens (or it did not answer in time)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(CONNECT_TIMEOUT_S)
        try:
            connection.connect(os.fspath(spool.socket_path(home)))
        except OSError:
            return None
        connection.settimeout(timeout)
        try:
            connection.sendall(json.dumps(message, ensure_ascii=False).encode() + b"\n")
            connection.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := connection.recv(65536):
                reply += chunk
        except OSError as exc:
            _log(home, f"mnemo hook: the capture process did not answer ({exc})")
            return None
    answer = json.loads(reply) if reply.strip() else None
    return answer if isinstance(answer, dict) else None


def _start_process(home: Path) -> None:
    """Start the capture process for ``home``, detached; a second one started at once exits at
    its lock, so many hooks starting it together leave one."""
    import subprocess  # only here: most hook calls find the process running

    with open(os.devnull, "r+b") as null:
        subprocess.Popen(
            [sys.executable, "-m", "mnemo", "hooks", "process"],
            stdin=null,
            stdout=null,
            stderr=null,
            cwd=home if home.is_dir() else None,
            env=os.environ | {"MNEMO_HOME": str(home)},
            start_new_session=True,
        )


def _log(home: Path, message: str, failed: bool = False) -> None:
    """Append ``message`` (and the exception being handled, when ``failed``) to the mnemo log;
    logging is imported only then, as most hook calls have nothing to log."""
    import logging

    log = logging.getLogger("mnemo.capture")
    if not logging.getLogger().handlers:
        (home / "logs").mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(home / "logs" / "mnemo.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)
    log.log(logging.ERROR if failed else logging.WARNING, message, exc_info=failed)
