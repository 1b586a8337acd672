"""mnemo's hooks and MCP server in each client's configuration: where they go, in, and out again.

Per client, for a project (at the git root of ``cwd``) or for the user (``user=True``):

============ ================================= ======================================================
client       hooks                             MCP server
============ ================================= ======================================================
claude-code  ``.claude/settings.json``,        ``.mcp.json`` at the project root, ``~/.claude.json``
             ``~/.claude/settings.json``       (``mcpServers``) for the user
codex        ``.codex/hooks.json``,            ``[mcp_servers.mnemo]`` in ``.codex/config.toml`` /
             ``~/.codex/hooks.json``           ``~/.codex/config.toml``, beside ``[features] hooks``
cursor       ``.cursor/hooks.json``,           ``.cursor/mcp.json``, ``~/.cursor/mcp.json``
             ``~/.cursor/hooks.json``
gemini       ``.gemini/settings.json``,        the same ``settings.json`` (``mcpServers``)
             ``~/.gemini/settings.json``
============ ================================= ======================================================

Sources: https://code.claude.com/docs/en/hooks and /en/mcp (Claude Code);
https://developers.openai.com/codex/hooks and /codex/mcp (Codex: a project's ``.codex/`` layer is
read only in a trusted project); https://cursor.com/docs/agent/hooks and /context/mcp (Cursor);
gemini-cli ``docs/hooks/index.md`` and ``docs/tools/mcp-server.md`` (Gemini CLI: hook timeouts
are in milliseconds, the others' in seconds).

Each hook runs ``<this python> -m mnemo hook <event> --client <name>`` (the interpreter by its
absolute path, so PATH does not matter) and the server ``<this python> -m mnemo serve --profile
full``. ``install`` merges them beside the user's own entries, backing each file up first
(``<name>.mnemo-backup``); installing again changes nothing. ``remove`` takes them out, and a file
nothing else changed in since gets its old bytes back (``install_json``, ``install_toml``).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from mnemo.capture import install_json, install_toml
from mnemo.capture.clients import CLIENT_NAMES, client
from mnemo.capture.install_json import MARKER, FlatHooks, McpServer, NestedHooks, Outcome, Part
from mnemo.capture.payload import Project

__all__ = [
    "CLIENT_NAMES",
    "MARKER",
    "Outcome",
    "hook_command",
    "install",
    "installed_events",
    "mcp_file",
    "remove",
    "server_entry",
    "settings_file",
]

TIMEOUT_S = 10
SERVER_ARGS = ["-m", "mnemo", "serve", "--profile", "full"]
_HOOK_DIRS = {"claude-code": ".claude", "codex": ".codex", "cursor": ".cursor", "gemini": ".gemini"}
_HOOK_FILES = {"claude-code": "settings.json", "codex": "hooks.json", "cursor": "hooks.json", "gemini": "settings.json"}


def _base(user: bool, cwd: Path) -> Path:
    return Path.home() if user else Project.of(cwd).root


def settings_file(client_name: str, user: bool, cwd: Path) -> Path:
    """The file that holds ``client_name``'s hooks: the user's, or the project's (git root of ``cwd``)."""
    client(client_name)
    return _base(user, cwd) / _HOOK_DIRS[client_name] / _HOOK_FILES[client_name]


def mcp_file(client_name: str, user: bool, cwd: Path) -> Path:
    """The file that holds ``client_name``'s MCP servers."""
    base = _base(user, cwd)
    if client_name == "claude-code":
        return base / (".claude.json" if user else ".mcp.json")
    if client_name == "codex":
        return base / ".codex" / "config.toml"
    if client_name == "cursor":
        return base / ".cursor" / "mcp.json"
    return settings_file(client_name, user, cwd)


def hook_command(event: str, client_name: str = "claude-code") -> str:
    """The command a client's hook runs."""
    return f"{shlex.quote(sys.executable)}{MARKER}{event} --client {client_name}"


def server_entry() -> dict[str, Any]:
    return {"command": sys.executable, "args": list(SERVER_ARGS)}


def _hooks_part(client_name: str) -> Part:
    hooks = client(client_name).hooks
    if client_name == "cursor":
        flat = []
        for hook in hooks:
            # no "timeout": Cursor's documented hook entry is a command (and, newer, a matcher) only
            entry: dict[str, Any] = {"command": hook_command(hook.event, client_name)}
            if hook.matcher:
                entry["matcher"] = hook.matcher
            flat.append((hook.client_event, entry))
        return FlatHooks(tuple(flat))
    nested = []
    for hook in hooks:
        handler: dict[str, Any] = {"type": "command", "command": hook_command(hook.event, client_name)}
        if client_name == "gemini":
            handler |= {"name": f"mnemo-{hook.event}", "timeout": TIMEOUT_S * 1000}
        else:
            handler["timeout"] = TIMEOUT_S
        nested.append((hook.client_event, hook.matcher, handler))
    return NestedHooks(tuple(nested))


def _json_files(client_name: str, user: bool, cwd: Path) -> dict[Path, tuple[Part, ...]]:
    """The JSON files mnemo edits for ``client_name``, and its parts in each."""
    hooks, server = settings_file(client_name, user, cwd), mcp_file(client_name, user, cwd)
    files: dict[Path, tuple[Part, ...]] = {hooks: (_hooks_part(client_name),)}
    if client_name != "codex":  # Codex's servers are in its TOML file
        files[server] = (*files.get(server, ()), McpServer(server_entry()))
    return files


def install(client_name: str, user: bool, cwd: Path) -> Outcome:
    """Add mnemo's hooks and MCP server to ``client_name``'s configuration; an empty outcome when
    they were there already (its notes say what was left alone, and why)."""
    outcome = Outcome()
    for path, parts in _json_files(client_name, user, cwd).items():
        outcome.extend(install_json.install_file(path, parts))
    if client_name == "codex":
        outcome.extend(install_toml.install(mcp_file(client_name, user, cwd), sys.executable, SERVER_ARGS))
    return outcome


def remove(client_name: str, user: bool, cwd: Path) -> Outcome:
    """Take mnemo's hooks and MCP server out of ``client_name``'s configuration."""
    outcome = Outcome()
    for path, parts in _json_files(client_name, user, cwd).items():
        outcome.extend(install_json.remove_file(path, parts))
    if client_name == "codex":
        outcome.extend(install_toml.remove(mcp_file(client_name, user, cwd)))
    return outcome


def installed_events(client_name: str, path: Path) -> list[str]:
    """The ``client_name`` events whose hooks in ``path`` run mnemo."""
    data = install_json.load(path)
    return install_json.flat_events(data) if client_name == "cursor" else install_json.nested_events(data)
