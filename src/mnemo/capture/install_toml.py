"""mnemo's lines in Codex's ``config.toml``: the hooks feature flag and the MCP server, by line edits.

Codex (https://developers.openai.com/codex/config-reference, https://developers.openai.com/codex/hooks)
reads MCP servers from ``[mcp_servers.<name>]`` tables (``command``, ``args``) and its feature flags
from ``[features]``. Hooks were behind ``[features] codex_hooks = true`` while experimental; the
canonical key is now ``hooks`` (stable and on by default, ``codex_hooks`` a deprecated alias whose
use Codex reports at every session start: openai/codex ``codex-rs/features/src/legacy.rs``). mnemo
writes ``hooks = true`` unless the user set either key (a ``false`` is theirs to keep: said so).

The standard library reads TOML (``tomllib``) but does not write it, and rewriting a user's file
would lose its comments and layout; so mnemo only adds whole lines, each ending in ``MARK``: a line
under an existing ``[features]`` header, or tables appended at the end. ``remove`` deletes the
marked lines; when the rest parses to what the backup holds, the backup's bytes are put back. Every
edit is parsed with ``tomllib`` before it is written: a file it would break is not written.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from mnemo.capture.install_json import BACKUP_SUFFIX, Outcome, write
from mnemo.errors import InvalidInput

MARK = "# added by mnemo"
FEATURE = "hooks"
LEGACY_FEATURES = ("hooks", "codex_hooks")
_FEATURES_HEADER = re.compile(r"^\s*\[\s*features\s*\]\s*(#.*)?$")


def _load(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{path} is not valid TOML ({exc}); fix it by hand first") from exc


def _string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False)


def server_lines(command: str, args: list[str]) -> list[str]:
    return [
        f"[mcp_servers.mnemo]  {MARK}",
        f"command = {_string(command)}  {MARK}",
        f"args = [{', '.join(_string(a) for a in args)}]  {MARK}",
    ]


def _ours(line: str) -> bool:
    return line.rstrip().endswith(MARK)


def _strip(text: str) -> str:
    """``text`` without mnemo's lines (and the blank line mnemo put before a table it appended)."""
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    for number, line in enumerate(lines):
        if _ours(line):
            continue
        if (
            not line.strip()
            and number + 1 < len(lines)
            and lines[number + 1].lstrip().startswith("[")
            and _ours(lines[number + 1])
        ):
            continue
        kept.append(line)
    return "".join(kept)


def installed(path: Path) -> bool:
    return path.exists() and any(_ours(line) for line in path.read_text(encoding="utf-8").splitlines())


def install(path: Path, command: str, args: list[str]) -> Outcome:
    """Add the feature flag and the ``mnemo`` MCP server to ``path`` where they are not."""
    original = path.read_bytes() if path.exists() else None
    current = original.decode("utf-8") if original is not None else ""
    _load(current, path)
    text = _strip(current)  # what the user wrote; mnemo's lines are added again below
    data = _load(text, path)
    outcome = Outcome()
    features = data.get("features")
    flags = {k: features[k] for k in LEGACY_FEATURES if isinstance(features, dict) and k in features}
    if False in flags.values():
        outcome.notes.append(f"{path}: hooks are turned off ([features] {' / '.join(flags)} = false); left as is")
    elif not flags:
        if features is not None and not _has_header(text):
            outcome.notes.append(f"{path}: 'features' is not a [features] table; add `{FEATURE} = true` by hand")
        else:
            text = _with_feature(text)
    servers = data.get("mcp_servers")
    entry = servers.get("mnemo") if isinstance(servers, dict) else None
    if entry is not None:
        outcome.notes.append(f"{path} already has an MCP server 'mnemo' of its own ([mcp_servers.mnemo]); left as is")
    else:
        text = _appended(text, server_lines(command, args))
    if text == current:
        return outcome
    _load(text, path)  # never write a file Codex could not read
    before = _load(current, path)
    after = _load(text, path)
    if before.get("features") != after.get("features"):
        outcome.changed.append(f"[features] {FEATURE} = true in {path}")
    if _server(before) != _server(after):
        outcome.changed.append(f"MCP server 'mnemo' in {path}")
    if original is not None and not installed(path):
        path.with_name(path.name + BACKUP_SUFFIX).write_bytes(original)
    write(path, text)
    return outcome


def remove(path: Path) -> Outcome:
    """Take mnemo's lines out of ``path``, restoring the backup when nothing else changed since."""
    if not installed(path):
        return Outcome()
    current = path.read_text(encoding="utf-8")
    left = _strip(current)
    before, after = _load(current, path), _load(left, path)
    outcome = Outcome()
    if before.get("features") != after.get("features"):
        outcome.changed.append(f"[features] {FEATURE} = true from {path}")
    if _server(before) != _server(after):
        outcome.changed.append(f"MCP server 'mnemo' from {path}")
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if backup.exists() and _backup_matches(backup, after):
        write(path, backup.read_bytes())
    elif not left.strip() and not backup.exists():  # mnemo made the file
        path.unlink()
    else:
        write(path, left)
    backup.unlink(missing_ok=True)
    return outcome


def _server(data: dict[str, Any]) -> Any:
    servers = data.get("mcp_servers")
    return servers.get("mnemo") if isinstance(servers, dict) else None


def _backup_matches(backup: Path, left: dict[str, Any]) -> bool:
    try:
        return tomllib.loads(_strip(backup.read_text(encoding="utf-8"))) == left
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False


def _has_header(text: str) -> bool:
    return any(_FEATURES_HEADER.match(line) for line in text.splitlines())


def _with_feature(text: str) -> str:
    """``text`` with ``hooks = true`` under its ``[features]`` header, or a new table at its end."""
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if _FEATURES_HEADER.match(line):
            newline = "\r\n" if line.endswith("\r\n") else "\n"
            if not line.endswith("\n"):
                lines[number] = line + newline
            lines.insert(number + 1, f"{FEATURE} = true  {MARK}{newline}")
            return "".join(lines)
    return _appended(text, [f"[features]  {MARK}", f"{FEATURE} = true  {MARK}"])


def _appended(text: str, table: list[str]) -> str:
    """``text`` with ``table`` at its end, after a blank line when the file has content."""
    newline = "\r\n" if "\r\n" in text else "\n"
    if text and not text.endswith("\n"):
        text += newline
    separator = newline if text.strip() else ""
    return text + separator + newline.join(table) + newline
