"""What Claude Code sends a command hook on stdin, read leniently, and the project it concerns.

Claude Code writes one JSON object per hook call (https://code.claude.com/docs/en/hooks): every
event carries ``session_id``, ``transcript_path``, ``cwd`` and ``hook_event_name``; SessionStart adds
``source`` (startup | resume | clear | compact), UserPromptSubmit ``prompt``, PostToolUse
``tool_name``, ``tool_input`` and ``tool_response``, PostToolUseFailure ``tool_name``, ``tool_input``
and ``error``, SessionEnd ``reason``, PreCompact ``trigger``. A field that is missing or of another
type reads as empty: a hook never fails on what it was sent.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemo.bounds import MAX_ID_CHARS, MAX_SUBJECT_CHARS


@dataclass(frozen=True, slots=True)
class HookPayload:
    event: str  # one of names.EVENTS' keys
    session_id: str = ""
    cwd: str = ""
    prompt: str = ""
    tool_name: str = ""
    tool_input: dict[str, Any] = field(default_factory=dict)
    tool_response: Any = None
    error: str = ""
    source: str = ""

    @classmethod
    def from_dict(cls, event: str, data: dict[str, Any]) -> HookPayload:
        """The payload of Claude Code's fields in ``data`` (other clients: ``clients.parse``)."""
        tool_input = data.get("tool_input")
        return cls(
            event=event,
            session_id=text_of(data, "session_id")[:MAX_ID_CHARS],
            cwd=text_of(data, "cwd"),
            prompt=text_of(data, "prompt"),
            tool_name=text_of(data, "tool_name"),
            tool_input=tool_input if isinstance(tool_input, dict) else {},
            tool_response=data.get("tool_response"),
            error=text_of(data, "error"),
            source=text_of(data, "source"),
        )


def text_of(data: Any, *keys: str) -> str:
    """The first of ``keys`` in ``data`` that holds a non-empty string; "" when none does."""
    if not isinstance(data, dict):
        return ""
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


@dataclass(frozen=True, slots=True)
class Project:
    """A project is its git root, else the folder the agent works in."""

    root: Path

    @classmethod
    def of(cls, cwd: str | Path) -> Project:
        folder = Path(cwd or ".").expanduser().resolve()
        # A .git folder (or the .git file of a worktree or submodule) marks a repository's root:
        # looked for directly, which costs far less than starting `git rev-parse`.
        root = next((p for p in (folder, *folder.parents) if (p / ".git").exists()), folder)
        return cls(root)

    @property
    def name(self) -> str:
        return self.root.name or str(self.root)

    @property
    def key(self) -> str:
        """The memory subject that scopes a project: its path, or a digest of a very long one."""
        path = str(self.root)
        if len(path) <= MAX_SUBJECT_CHARS:
            return path
        return f"{self.name[:100]}-{hashlib.sha256(path.encode()).hexdigest()[:16]}"

    def relative(self, path: str) -> str:
        """A file path as the project sees it; one outside it from the home folder (``~/…``), so
        that no memory holds the user's home path."""
        resolved = Path(path).expanduser().resolve()
        for base, prefix in ((self.root, ""), (Path.home(), "~/")):
            try:
                return prefix + str(resolved.relative_to(base))
            except ValueError:
                continue
        return path
