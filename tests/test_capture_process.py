"""The hooks' capture process: many sessions at once, killed mid-queue, private to its user, bounded.

Every hook call is a real `python -m mnemo hook EVENT` process; the capture process is the real
one it starts.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hook_agent import Agent, project
from mnemo.capture import daemon, spool


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    agent = Agent(tmp_path)
    yield agent
    agent.stop()


def _rule(session: int, step: int) -> str:
    return f"We always run the migration number {session * 100 + step} before the tests, never after."


def test_eight_sessions_at_once_lose_nothing_and_never_see_a_locked_database(agent: Agent, tmp_path: Path):
    root = project(tmp_path, "shop")
    sessions, steps = 8, 6

    def session(number: int) -> list[int]:
        codes = []
        for step in range(steps):
            prompt = {"cwd": str(root), "prompt": _rule(number, step)}
            codes.append(agent.hook("user-prompt-submit", prompt, session=f"s{number}").returncode)
            edit = {"cwd": str(root), "tool_name": "Edit", "tool_input": {"file_path": str(root / f"f{number}.py")}}
            codes.append(agent.hook("post-tool-use", edit, session=f"s{number}").returncode)
        codes.append(agent.hook("session-end", {"cwd": str(root)}, session=f"s{number}").returncode)
        return codes

    with ThreadPoolExecutor(sessions) as pool:
        codes = [code for result in pool.map(session, range(sessions)) for code in result]
    assert set(codes) == {0}
    contents = {m.content for m in agent.memories()}
    wanted = {_rule(n, s) for n in range(sessions) for s in range(steps)}
    assert wanted <= contents
    summaries = sorted(m.content for m in agent.memories() if "session-summary" in m.tags)
    assert len(summaries) == sessions
    assert all(any(f"edited f{n}.py." in summary for summary in summaries) for n in range(sessions))
    log = (agent.home / "logs" / "mnemo.log").read_text()
    assert "locked" not in log.lower() and "Traceback" not in log
    assert len(daemon_pids(agent)) == 1


def daemon_pids(agent: Agent) -> list[int]:
    """The capture processes serving this agent's home, by their command line and environment."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"process" in command and f"MNEMO_HOME={agent.home}".encode() in environ:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_calls_queued_when_the_process_is_killed_are_captured_by_the_next_one(agent: Agent, tmp_path: Path):
    root = project(tmp_path, "shop")
    agent.hook("user-prompt-submit", {"cwd": str(root), "prompt": _rule(0, 0)})
    agent.settle()
    first = daemon.running_pid(agent.home)
    assert first is not None
    os.kill(first, signal.SIGSTOP)  # it takes nothing from the queue now
    for step in range(1, 6):
        done = agent.hook("user-prompt-submit", {"cwd": str(root), "prompt": _rule(0, step)})
        assert (done.returncode, done.stdout) == (0, "")
    assert len(spool.waiting(agent.home)) == 5
    os.kill(first, signal.SIGKILL)
    time.sleep(0.2)
    agent.hook("post-tool-use", {"cwd": str(root), "tool_name": "Edit", "tool_input": {"file_path": "a.py"}})
    contents = {m.content for m in agent.memories()}  # waits for the queue to empty
    assert {_rule(0, step) for step in range(6)} <= contents
    assert daemon.running_pid(agent.home) not in (None, first)


def test_the_socket_is_private_to_its_user_and_stop_ends_the_process(agent: Agent, tmp_path: Path):
    root = project(tmp_path, "shop")
    agent.context("session-start", {"cwd": str(root), "source": "startup"})
    path = spool.socket_path(agent.home)
    deadline = time.monotonic() + 30
    while daemon.running_pid(agent.home) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    status = agent.mnemo("hooks", "status", cwd=root)
    assert "capture process: running (pid" in status
    assert "capture process stopped" in agent.mnemo("hooks", "stop", cwd=root)
    assert daemon.running_pid(agent.home) is None and not path.exists()
    assert "not running" in agent.mnemo("hooks", "status", cwd=root)


def test_a_huge_tool_output_is_bounded_before_it_is_queued_and_its_secrets_never_written(agent: Agent, tmp_path: Path):
    root = project(tmp_path, "shop")
    key = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"
    log_lines = [f"line {i}: building module {i}" for i in range(150_000)]
    log_lines[75_000] = f"OPENAI_API_KEY={key}"
    output = "\n".join([*log_lines, "FAILED tests/test_cart.py::test_total - AssertionError"])
    assert len(output) > 4_000_000
    agent.context("session-start", {"cwd": str(root), "source": "startup"})
    process = daemon.running_pid(agent.home)
    assert process is not None
    os.kill(process, signal.SIGSTOP)  # the call stays queued, to be looked at
    started = time.monotonic()
    done = agent.hook(
        "post-tool-use",
        {
            "cwd": str(root),
            "tool_name": "Bash",
            "tool_input": {"command": "pytest -x"},
            "tool_response": {"stdout": output, "stderr": "", "exit_code": 1},
        },
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    (queued,) = spool.waiting(agent.home)
    text = queued.read_text()
    assert len(text) < 20_000 and key not in text and "AssertionError" in text
    os.kill(process, signal.SIGCONT)
    agent.hook("post-tool-use", {"cwd": str(root), "tool_name": "Bash", "tool_input": {"command": "pytest -x"},
                                 "tool_response": {"stdout": "1 passed", "exit_code": 0}})  # fmt: skip
    (fix,) = [m.content for m in agent.memories()]
    assert "AssertionError" in fix and "then worked" in fix
    on_disk = b"".join(p.read_bytes() for p in agent.home.rglob("*") if p.is_file())
    assert key.encode() not in on_disk
    print(f"a {len(output):,}-character tool output: hook took {took:.2f} s", file=sys.stderr)


def test_a_disabled_folder_queues_nothing(agent: Agent, tmp_path: Path):
    root = project(tmp_path, "shop")
    agent.mnemo("hooks", "disable", cwd=root)
    agent.hook("user-prompt-submit", {"cwd": str(root / "src"), "prompt": _rule(1, 1)})
    assert not spool.queue_dir(agent.home).exists() or spool.waiting(agent.home) == []
    assert agent.memories() == []


def test_a_queued_call_that_cannot_be_read_is_set_aside_and_the_rest_captured(agent: Agent, tmp_path: Path):
    root = project(tmp_path, "shop")
    broken = spool.queue_dir(agent.home)
    broken.mkdir(parents=True)
    (broken / "00000000000000000001-1-0.json").write_text("{not json")
    (broken / "00000000000000000002-1-0.json").write_text(json.dumps(["not", "a", "call"]))
    agent.hook("user-prompt-submit", {"cwd": str(root), "prompt": _rule(2, 2)})
    assert [m.content for m in agent.memories()] == [_rule(2, 2)]
    assert sorted(p.name for p in (broken / "failed").iterdir()) == [
        "00000000000000000001-1-0.json",
        "00000000000000000002-1-0.json",
    ]
