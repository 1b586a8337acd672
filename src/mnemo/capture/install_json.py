"""mnemo's entries in a client's JSON configuration file: merged beside the user's, and taken out.

A file gets one or more parts: a client's hooks (Claude Code, Codex and Gemini CLI nest them as
``{"hooks": {"<Event>": [{"matcher": …, "hooks": [{"type": "command", "command": …}]}]}}``; Cursor
lists them flat as ``{"version": 1, "hooks": {"<event>": [{"command": …}]}}``) and an MCP server
under ``mcpServers``. A hook is mnemo's when its command holds `` -m mnemo hook ``; the server is
mnemo's when it runs ``-m mnemo serve`` with mnemo's arguments, and a ``mnemo`` server the user
wrote otherwise is left alone (and said so).

``install_file`` copies the file to ``<name>.mnemo-backup`` before its first change and changes
nothing when mnemo's parts are there already. ``remove_file`` takes them out; when what remains is
what the backup holds without them, the backup's bytes are put back (byte-identical), and a file
mnemo made is deleted.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mnemo.errors import InvalidInput

MARKER = " -m mnemo hook "  # in the command of every hook mnemo installs
BACKUP_SUFFIX = ".mnemo-backup"


@dataclass
class Outcome:
    """What ``install``/``remove`` changed (one line per change), and what it left alone and why."""

    changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed)

    def extend(self, other: Outcome) -> None:
        self.changed += other.changed
        self.notes += other.notes


class Part(Protocol):
    @property
    def label(self) -> str: ...

    def present(self, data: dict[str, Any]) -> bool: ...
    def strip(self, data: dict[str, Any]) -> None: ...
    def add(self, data: dict[str, Any], path: Path) -> str | None: ...  # a note when it adds nothing
    def view(self, data: dict[str, Any]) -> Any: ...


def ours(hook: Any) -> bool:
    return isinstance(hook, dict) and MARKER in str(hook.get("command", ""))


@dataclass(frozen=True)
class NestedHooks:
    """Claude Code's hook layout, which Codex and Gemini CLI share: event → matcher groups."""

    entries: tuple[tuple[str, str | None, dict[str, Any]], ...]  # (client event, matcher, hook)
    label: str = "hooks"

    def present(self, data: dict[str, Any]) -> bool:
        return bool(nested_events(data))

    def view(self, data: dict[str, Any]) -> Any:
        return data.get("hooks")

    def strip(self, data: dict[str, Any]) -> None:
        hooks = data.get("hooks")
        if not isinstance(hooks, dict):
            return
        for event, groups in list(hooks.items()):
            if not isinstance(groups, list) or not any(ours(h) for h in _entries(groups)):
                continue
            kept = []
            for group in groups:
                entries = group.get("hooks") if isinstance(group, dict) else None
                if not isinstance(entries, list) or not any(ours(h) for h in entries):
                    kept.append(group)
                elif others := [h for h in entries if not ours(h)]:
                    kept.append({**group, "hooks": others})
            if kept:
                hooks[event] = kept
            else:  # the event (and the hooks key) only mnemo filled; an empty one the user wrote stays
                del hooks[event]
                if not hooks:
                    del data["hooks"]

    def add(self, data: dict[str, Any], path: Path) -> str | None:
        hooks = data.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            raise InvalidInput(f"{path}: 'hooks' is not an object; fix it by hand first")
        for event, matcher, hook in self.entries:
            group: dict[str, Any] = {"matcher": matcher} if matcher else {}
            group["hooks"] = [hook]
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise InvalidInput(f"{path}: hooks.{event} is not a list; fix it by hand first")
            groups.append(group)
        return None


@dataclass(frozen=True)
class FlatHooks:
    """Cursor's hook layout: ``{"version": 1, "hooks": {"<event>": [{"command": …}, …]}}``."""

    entries: tuple[tuple[str, dict[str, Any]], ...]  # (client event, hook)
    label: str = "hooks"

    def present(self, data: dict[str, Any]) -> bool:
        return bool(flat_events(data))

    def view(self, data: dict[str, Any]) -> Any:
        return (data.get("version"), data.get("hooks"))

    def strip(self, data: dict[str, Any]) -> None:
        hooks = data.get("hooks")
        if not isinstance(hooks, dict):
            return
        for event, entries in list(hooks.items()):
            if not isinstance(entries, list) or not any(ours(h) for h in entries):
                continue
            if kept := [h for h in entries if not ours(h)]:
                hooks[event] = kept
            else:
                del hooks[event]
                if not hooks:
                    del data["hooks"]

    def add(self, data: dict[str, Any], path: Path) -> str | None:
        data.setdefault("version", 1)
        hooks = data.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            raise InvalidInput(f"{path}: 'hooks' is not an object; fix it by hand first")
        for event, hook in self.entries:
            entries = hooks.setdefault(event, [])
            if not isinstance(entries, list):
                raise InvalidInput(f"{path}: hooks.{event} is not a list; fix it by hand first")
            entries.append(dict(hook))
        return None


def is_our_server(entry: Any, args: list[str]) -> bool:
    """An MCP server entry that runs mnemo's server with ``args`` (by whichever interpreter)."""
    return isinstance(entry, dict) and entry.get("args") == args and isinstance(entry.get("command"), str)


@dataclass(frozen=True)
class McpServer:
    """``{"mcpServers": {"mnemo": {"command": …, "args": […]}}}``."""

    entry: dict[str, Any]
    name: str = "mnemo"
    label: str = "MCP server 'mnemo'"

    def _ours(self, entry: Any) -> bool:
        return is_our_server(entry, self.entry["args"])

    def present(self, data: dict[str, Any]) -> bool:
        servers = data.get("mcpServers")
        return isinstance(servers, dict) and self._ours(servers.get(self.name))

    def view(self, data: dict[str, Any]) -> Any:
        servers = data.get("mcpServers")
        return servers.get(self.name) if isinstance(servers, dict) else None

    def strip(self, data: dict[str, Any]) -> None:
        if self.present(data):
            del data["mcpServers"][self.name]
            if not data["mcpServers"]:
                del data["mcpServers"]

    def add(self, data: dict[str, Any], path: Path) -> str | None:
        servers = data.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise InvalidInput(f"{path}: 'mcpServers' is not an object; fix it by hand first")
        if self.name in servers:
            return f"{path} already has an MCP server {self.name!r} of its own; left as is"
        servers[self.name] = copy.deepcopy(self.entry)
        return None


def nested_events(data: dict[str, Any]) -> list[str]:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    return [event for event, groups in hooks.items() if any(ours(h) for h in _entries(groups))]


def flat_events(data: dict[str, Any]) -> list[str]:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    return [e for e, entries in hooks.items() if isinstance(entries, list) and any(ours(h) for h in entries)]


def _entries(groups: Any) -> list[Any]:
    if not isinstance(groups, list):
        return []
    return [h for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list) for h in g["hooks"]]


def load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_bytes() or b"{}")
    except ValueError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc}); fix it by hand first") from exc
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} does not hold a JSON object; fix it by hand first")
    return data


def _without(data: dict[str, Any], parts: tuple[Part, ...]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    for part in parts:
        part.strip(data)
    return data


def install_file(path: Path, parts: tuple[Part, ...]) -> Outcome:
    """Merge ``parts`` into the JSON file ``path`` (made when missing)."""
    original = path.read_bytes() if path.exists() else None
    current = load(path)
    wanted = _without(current, parts)
    outcome = Outcome()
    for part in parts:
        if note := part.add(wanted, path):
            outcome.notes.append(note)
    if wanted == current:
        return outcome
    outcome.changed = [f"{part.label} in {path}" for part in parts if part.view(wanted) != part.view(current)]
    if original is not None and not any(part.present(current) for part in parts):  # the user's own file
        path.with_name(path.name + BACKUP_SUFFIX).write_bytes(original)
    write(path, json.dumps(wanted, indent=2, ensure_ascii=False) + "\n")
    return outcome


def remove_file(path: Path, parts: tuple[Part, ...]) -> Outcome:
    """Take ``parts`` out of ``path``, restoring the backup when nothing else changed since."""
    current = load(path)
    present = [part for part in parts if part.present(current)]
    if not present:
        return Outcome()
    left = _without(current, parts)
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    restored = backup.exists() and _backup_matches(backup, left, parts)
    if restored:
        write(path, backup.read_bytes())
    elif _empty(left, parts) and not backup.exists():  # mnemo made the file
        path.unlink()
    else:
        write(path, json.dumps(left, indent=2, ensure_ascii=False) + "\n")
    backup.unlink(missing_ok=True)
    return Outcome(changed=[f"{part.label} from {path}" for part in present])


def _backup_matches(backup: Path, left: dict[str, Any], parts: tuple[Part, ...]) -> bool:
    try:
        before = json.loads(backup.read_bytes() or b"{}")
    except ValueError:
        return False
    return isinstance(before, dict) and _comparable(_without(before, parts), parts) == _comparable(left, parts)


def _comparable(data: dict[str, Any], parts: tuple[Part, ...]) -> dict[str, Any]:
    """``data`` without what mnemo may have added beside its parts: Cursor's ``"version": 1``."""
    if any(isinstance(part, FlatHooks) for part in parts) and data.get("version") == 1:
        return {k: v for k, v in data.items() if k != "version"}
    return data


def _empty(left: dict[str, Any], parts: tuple[Part, ...]) -> bool:
    return not _comparable(left, parts)


def write(path: Path, content: str | bytes) -> None:
    """Write ``path`` whole or not at all (a temporary file moved into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.mnemo-tmp")
    if isinstance(content, str):
        temporary.write_text(content, encoding="utf-8")
    else:
        temporary.write_bytes(content)
    temporary.replace(path)
