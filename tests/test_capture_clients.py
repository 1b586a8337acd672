"""The coding agents mnemo's hooks serve: their payloads read, their outputs written, their
configurations installed and removed again, and the Claude Code plugin (plugins/claude-code/).

No process, no network: payloads in each client's documented shape, real files under tmp_path with
HOME pointed there.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mnemo.capture import capture, clients, install
from mnemo.capture.names import EVENTS
from mnemo.capture.payload import Project
from mnemo.capture.state import Session

ROOT = Path(__file__).resolve().parents[1]
SERVER = {"command": sys.executable, "args": ["-m", "mnemo", "serve", "--profile", "full"]}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    return root


def parse(client: str, event: str, data: dict[str, Any]) -> Any:
    return clients.parse(client, event, json.dumps(data).encode())


def notes_of(payloads: list[Any], root: Path) -> list[str]:
    """What capture keeps from these tool calls, as it would for Claude Code's: its notes, then the
    files edited (for the session's summary)."""
    session, notes = Session(), []
    for payload in payloads:
        if note := capture.tool_note(payload, Project.of(root), session):
            notes.append(note.content)
    return notes + [f"edited {path}" for path in session.files]


# -- reading each client's payloads ---------------------------------------------------------
def test_claude_code_payloads_read_as_before(shop: Path):
    # https://code.claude.com/docs/en/hooks: PostToolUse with tool_name, tool_input, tool_response
    data = {
        "session_id": "c1",
        "transcript_path": "/t",
        "cwd": str(shop),
        "hook_event_name": "PostToolUse",
        "tool_name": "Edit",
        "tool_input": {"file_path": str(shop / "src" / "a.py")},
        "tool_response": {},
    }
    payload = parse("claude-code", "post-tool-use", data)
    assert (payload.session_id, payload.cwd, payload.tool_name) == ("c1", str(shop), "Edit")
    assert notes_of([payload], shop) == ["edited src/a.py"]


def test_codex_payloads(shop: Path):
    # openai/codex codex-rs/hooks/schema/generated/*.command.input.schema.json
    common = {
        "session_id": "thread-1",
        "transcript_path": None,
        "cwd": str(shop),
        "model": "gpt-5",
        "permission_mode": "default",
        "turn_id": "t1",
    }
    start = parse("codex", "session-start", common | {"hook_event_name": "SessionStart", "source": "startup"})
    assert (start.session_id, start.cwd, start.source) == ("thread-1", str(shop), "startup")
    prompt = parse("codex", "user-prompt-submit", common | {"hook_event_name": "UserPromptSubmit", "prompt": "hi"})
    assert prompt.prompt == "hi"
    tool = common | {"hook_event_name": "PostToolUse", "tool_use_id": "call-1"}
    # apply_patch: the patch text in tool_input.command (openai/codex, fix for issue #16732)
    patch = "*** Begin Patch\n*** Update File: src/cart.py\n@@\n-a\n+b\n*** End Patch\n"
    edit = parse(
        "codex",
        "post-tool-use",
        tool
        | {
            "tool_name": "apply_patch",
            "tool_input": {"command": patch},
            "tool_response": "Success. Updated: src/cart.py",
        },
    )
    assert (edit.tool_name, edit.tool_input) == ("Edit", {"file_path": str(shop / "src" / "cart.py")})
    failed = parse(
        "codex",
        "post-tool-use",
        tool
        | {
            "tool_name": "Bash",
            "tool_input": {"command": "pytest -x"},
            "tool_response": "Exit code: 1\nWall time: 0.4 seconds\nOutput:\nE   AssertionError: 9 != 10",
        },
    )
    assert failed.tool_name == "Bash" and failed.tool_response["exit_code"] == 1
    worked = parse(
        "codex",
        "post-tool-use",
        tool
        | {
            "tool_name": "Bash",
            "tool_input": {"command": "pytest -x"},
            "tool_response": {"exit_code": 0, "stdout": "12 passed", "stderr": ""},
        },
    )
    assert notes_of([failed, edit, worked], shop) == [
        "`pytest -x` failed (E   AssertionError: 9 != 10); `pytest -x` then worked after editing src/cart.py.",
        "edited src/cart.py",
    ]


def test_cursor_payloads(shop: Path):
    # https://cursor.com/docs/agent/hooks: common fields conversation_id, generation_id, workspace_roots, ...
    common = {
        "conversation_id": "conv-1",
        "generation_id": "gen-1",
        "model": "m",
        "cursor_version": "2.0.0",
        "workspace_roots": [str(shop)],
        "user_email": None,
    }
    start = parse(
        "cursor",
        "session-start",
        common
        | {
            "hook_event_name": "sessionStart",
            "session_id": "conv-1",
            "is_background_agent": False,
            "composer_mode": "agent",
        },
    )
    assert (start.session_id, start.cwd) == ("conv-1", str(shop))
    prompt = parse(
        "cursor",
        "user-prompt-submit",
        common | {"hook_event_name": "beforeSubmitPrompt", "prompt": "We use pytest.", "attachments": []},
    )
    assert (prompt.prompt, prompt.cwd) == ("We use pytest.", str(shop))
    edit = parse(
        "cursor",
        "post-tool-use",
        common
        | {
            "hook_event_name": "afterFileEdit",
            "file_path": str(shop / "src" / "cart.py"),
            "edits": [{"old_string": "a", "new_string": "b"}],
        },
    )
    assert (edit.tool_name, edit.tool_input) == ("Edit", {"file_path": str(shop / "src" / "cart.py")})
    failed = parse(
        "cursor",
        "post-tool-use-failure",
        common
        | {
            "hook_event_name": "postToolUseFailure",
            "tool_name": "Shell",
            "tool_input": {"command": "npm test"},
            "error_message": "FAILED cart",
            "failure_type": "error",
        },
    )
    assert (failed.tool_name, failed.tool_input, failed.error) == ("Bash", {"command": "npm test"}, "FAILED cart")
    shell = parse(
        "cursor",
        "post-tool-use",
        common
        | {"hook_event_name": "afterShellExecution", "command": "npm test", "output": "12 passed", "duration": 1234},
    )
    assert (shell.tool_name, shell.tool_response["stdout"]) == ("Bash", "12 passed")
    assert notes_of([failed, edit, shell], shop)[0] == (
        "`npm test` failed (FAILED cart); `npm test` then worked after editing src/cart.py."
    )
    ended = parse("cursor", "session-end", {"session_id": "conv-1", "reason": "completed", "workspace_roots": 7})
    assert (ended.session_id, ended.cwd) == ("conv-1", "")


def test_gemini_payloads(shop: Path):
    # gemini-cli docs/hooks/reference.md (base fields; AfterTool tool_response llmContent/returnDisplay/error)
    common = {"session_id": "g1", "transcript_path": "/t.json", "cwd": str(shop), "timestamp": "2026-01-01T00:00:00Z"}
    start = parse("gemini", "session-start", common | {"hook_event_name": "SessionStart", "source": "startup"})
    assert (start.session_id, start.source) == ("g1", "startup")
    prompt = parse("gemini", "user-prompt-submit", common | {"hook_event_name": "BeforeAgent", "prompt": "go"})
    assert prompt.prompt == "go"
    after = common | {"hook_event_name": "AfterTool"}
    write = parse(
        "gemini",
        "post-tool-use",
        after
        | {
            "tool_name": "write_file",
            "tool_input": {"file_path": "src/db.py", "content": "x"},
            "tool_response": {"llmContent": "ok"},
        },
    )
    assert (write.tool_name, write.tool_input) == ("Write", {"file_path": str(shop / "src" / "db.py")})
    replace = parse(
        "gemini",
        "post-tool-use",
        after
        | {
            "tool_name": "replace",
            "tool_input": {"file_path": str(shop / "src" / "cart.py"), "old_string": "a", "new_string": "b"},
        },
    )
    assert replace.tool_name == "Edit"
    # packages/core/src/tools/shell.ts: llmContent "Output: …", "Error: …", "Exit Code: N", wrapped untrusted
    content = "<untrusted_context>\nOutput: E   AssertionError: 9 != 10\nExit Code: 1\n</untrusted_context>"
    failed = parse(
        "gemini",
        "post-tool-use",
        after
        | {
            "tool_name": "run_shell_command",
            "tool_input": {"command": "pytest -x", "description": "tests"},
            "tool_response": {"llmContent": content, "returnDisplay": "…"},
        },
    )
    assert failed.tool_response == {"stdout": "E   AssertionError: 9 != 10", "stderr": "", "exit_code": 1}
    worked = parse(
        "gemini",
        "post-tool-use",
        after
        | {
            "tool_name": "run_shell_command",
            "tool_input": {"command": "pytest -x"},
            "tool_response": {"llmContent": "Output: 12 passed"},
        },
    )
    assert notes_of([failed, replace, worked], shop)[0] == (
        "`pytest -x` failed (E   AssertionError: 9 != 10); `pytest -x` then worked after editing src/cart.py."
    )


@pytest.mark.parametrize("client", clients.CLIENT_NAMES)
@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b"", b"\xff\xfe"])
def test_garbage_raises_value_error(client: str, raw: bytes):
    with pytest.raises(ValueError):
        clients.parse(client, "post-tool-use", raw)


@pytest.mark.parametrize("client", clients.CLIENT_NAMES)
@pytest.mark.parametrize("event", list(EVENTS))
def test_odd_fields_read_as_empty(client: str, event: str):
    odd = {
        "session_id": 4,
        "conversation_id": [],
        "cwd": {},
        "workspace_roots": "x",
        "prompt": None,
        "tool_name": "Shell",
        "tool_input": "{not json",
        "tool_response": 3,
        "file_path": 9,
        "command": None,
        "error_message": 1,
        "llmContent": {},
    }
    payload = clients.parse(client, event, json.dumps(odd).encode())
    assert (payload.event, payload.session_id, payload.cwd, payload.prompt) == (event, "", "", "")


def test_an_unknown_client_is_a_value_error():
    with pytest.raises(ValueError, match="unknown client"):
        clients.output("vim", "session-start", "x")


# -- what each client reads back ------------------------------------------------------------
@pytest.mark.parametrize(
    ("client", "event", "expected"),
    [
        (
            "claude-code",
            "session-start",
            {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "M"}},
        ),
        (
            "claude-code",
            "user-prompt-submit",
            {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "M"}},
        ),
        ("codex", "session-start", {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "M"}}),
        (
            "codex",
            "user-prompt-submit",
            {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "M"}},
        ),
        ("cursor", "session-start", {"additional_context": "M"}),
        (
            "gemini",
            "session-start",
            {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "M"}},
        ),
        (
            "gemini",
            "user-prompt-submit",
            {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "M"}},
        ),
    ],
)
def test_output_is_what_the_client_reads(client: str, event: str, expected: dict[str, Any]):
    assert json.loads(clients.output(client, event, "M")) == expected
    assert clients.output(client, event, "") == ""


@pytest.mark.parametrize("client", clients.CLIENT_NAMES)
def test_no_output_where_the_client_cannot_add_context(client: str):
    for event in ("post-tool-use", "post-tool-use-failure", "stop", "session-end", "pre-compact"):
        assert clients.output(client, event, "M") == ""
    if client == "cursor":  # beforeSubmitPrompt answers only continue / user_message
        assert clients.output(client, "user-prompt-submit", "M") == ""


def test_every_hook_names_a_mnemo_event():
    for client in clients.CLIENTS.values():
        assert {hook.event for hook in client.hooks} <= set(EVENTS)
        assert {"session-start", "user-prompt-submit", "post-tool-use", "stop"} <= set(client.events.values())


# -- install and remove -----------------------------------------------------------------------
USER_FILES: dict[str, dict[str, bytes]] = {
    "claude-code": {
        ".claude/settings.json": b'{\n    "hooks": {"PostToolUse": [{"matcher": "Write", "hooks": '
        b'[{"type": "command", "command": "prettier --write"}]}]},\n  "model":"opus"\n}',
        ".mcp.json": b'{"mcpServers": {"github": {"command": "gh-mcp", "args": []}}}\n',
    },
    "codex": {
        ".codex/hooks.json": b'{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]}}',
        ".codex/config.toml": b'# my Codex\nmodel = "gpt-5"   # the best\n\n[features]\nweb_search = true\n\n'
        b'[mcp_servers.docs]\ncommand = "docs-mcp"\nargs = ["--x"]\n',
    },
    "cursor": {
        ".cursor/hooks.json": b'{"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}]}}',
        ".cursor/mcp.json": b'{"mcpServers": {"db": {"command": "db-mcp"}}}',
    },
    "gemini": {
        ".gemini/settings.json": b'{"theme": "Dracula", "hooks": {"BeforeTool": [{"matcher": "write_file", '
        b'"hooks": [{"type": "command", "command": "check.sh", "timeout": 5000}]}]}, '
        b'"mcpServers": {"other": {"command": "other-mcp"}}}',
    },
}


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("client", clients.CLIENT_NAMES)
def test_install_beside_the_users_entries_again_and_remove_byte_identical(client: str, home: Path, shop: Path):
    for name, content in USER_FILES[client].items():
        (shop / name).parent.mkdir(parents=True, exist_ok=True)
        (shop / name).write_bytes(content)
    before = files_of(shop)

    done = install.install(client, False, shop / "src")
    assert done and not done.notes
    hooks_file = install.settings_file(client, False, shop)
    expected = {h.client_event for h in clients.client(client).hooks}
    assert set(install.installed_events(client, hooks_file)) == expected
    hooks = json.loads(hooks_file.read_bytes())["hooks"]
    commands = json.dumps(hooks)
    assert f"-m mnemo hook post-tool-use --client {client}" in commands
    for user_hook in ("prettier --write", "notify", "./format.sh", "check.sh"):
        assert (user_hook in commands) == (user_hook.encode() in before[str(hooks_file.relative_to(shop))])
    server_file = install.mcp_file(client, False, shop)
    if client == "codex":
        config = tomllib.loads(server_file.read_text())
        assert config["features"] == {"web_search": True, "hooks": True} and config["model"] == "gpt-5"
        assert config["mcp_servers"] == {"docs": {"command": "docs-mcp", "args": ["--x"]}, "mnemo": SERVER}
    else:
        servers = json.loads(server_file.read_bytes())["mcpServers"]
        assert servers["mnemo"] == SERVER and len(servers) == 2
    installed = files_of(shop)

    assert not install.install(client, False, shop)  # again: nothing changes
    assert files_of(shop) == installed

    removed = install.remove(client, False, shop)
    assert removed and files_of(shop) == before
    assert not install.remove(client, False, shop)


@pytest.mark.parametrize("client", clients.CLIENT_NAMES)
@pytest.mark.parametrize("user", [False, True])
def test_install_where_no_file_was_and_remove_leaves_none(client: str, user: bool, home: Path, shop: Path):
    base = home if user else shop
    before = files_of(base)
    assert install.install(client, user, shop)
    assert install.installed_events(client, install.settings_file(client, user, shop))
    assert install.settings_file(client, user, shop).is_relative_to(base)
    assert install.remove(client, user, shop)
    assert files_of(base) == before


def test_user_scope_files(home: Path, shop: Path):
    assert install.mcp_file("claude-code", True, shop) == home / ".claude.json"
    assert install.mcp_file("codex", True, shop) == home / ".codex" / "config.toml"
    assert install.settings_file("cursor", True, shop) == home / ".cursor" / "hooks.json"
    assert install.mcp_file("gemini", False, shop / "src") == shop / ".gemini" / "settings.json"


@pytest.mark.parametrize("client", ["claude-code", "cursor", "gemini"])
def test_a_mnemo_server_the_user_wrote_is_left_alone(client: str, home: Path, shop: Path):
    path = install.mcp_file(client, True, shop)
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = {"mcpServers": {"mnemo": {"command": "mnemo", "args": ["serve"]}}}
    path.write_text(json.dumps(mine))
    done = install.install(client, True, shop)
    assert any("already has an MCP server 'mnemo'" in note for note in done.notes)
    assert json.loads(path.read_bytes())["mcpServers"] == mine["mcpServers"]
    install.remove(client, True, shop)
    assert json.loads(path.read_bytes()) == mine


def test_codex_turned_off_hooks_and_an_own_server_are_left_alone(home: Path, shop: Path):
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    content = b'[features]\ncodex_hooks = false\n\n[mcp_servers.mnemo]\ncommand = "mnemo"\nargs = ["serve"]\n'
    path.write_bytes(content)
    done = install.install("codex", True, shop)
    assert path.read_bytes() == content and len(done.notes) == 2
    assert done.changed == [f"hooks in {home / '.codex' / 'hooks.json'}"]
    install.remove("codex", True, shop)
    assert path.read_bytes() == content


def test_remove_keeps_what_the_user_changed_since(home: Path, shop: Path):
    install.install("codex", True, shop)
    config = home / ".codex" / "config.toml"
    config.write_text(config.read_text() + '\n[profiles.fast]\nmodel = "gpt-5-mini"\n')
    install.remove("codex", True, shop)
    assert tomllib.loads(config.read_text()) == {"profiles": {"fast": {"model": "gpt-5-mini"}}}


# -- the Claude Code plugin -------------------------------------------------------------------
def test_the_plugins_files_load_and_name_only_existing_events():
    plugin = ROOT / "plugins" / "claude-code"
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "mnemo" and isinstance(manifest["version"], str)
    marketplace = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert marketplace["name"] and marketplace["owner"]["name"]
    (entry,) = marketplace["plugins"]
    assert entry["name"] == manifest["name"] and (ROOT / entry["source"]).resolve() == plugin
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(clients.CLAUDE_CODE.events)
    for claude_event, groups in hooks.items():
        for group in groups:
            for hook in group["hooks"]:
                assert hook["type"] == "command"
                words = hook["command"].split()
                assert words[:2] == ["mnemo", "hook"] and words[2] == clients.CLAUDE_CODE.events[claude_event]
                assert words[3:] == ["--client", "claude-code"]
    servers = json.loads((plugin / ".mcp.json").read_text())["mcpServers"]
    assert servers["mnemo"]["args"][0] == "serve"
