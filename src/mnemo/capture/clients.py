"""The coding agents mnemo's hooks serve: what each sends a hook, and what it reads back.

Every client runs a command hook with one JSON object on stdin and reads its stdout; they differ in
event names, field names, tool names and the output that adds context. ``parse`` reads a client's
JSON into the normalized ``HookPayload`` (tool calls translated into Claude Code's shape, so that
``capture.tool_note`` reads every client alike: a file edit is ``Edit``/``Write`` with
``tool_input.file_path``, a shell command is ``Bash`` with ``tool_input.command`` and a
``tool_response`` of ``exit_code``, ``stdout``, ``stderr``); ``output`` gives what the client reads
to add ``context`` ("" where it cannot add any). A field missing or of another type reads as empty.

Sources, per client:

- Claude Code: https://code.claude.com/docs/en/hooks (see ``payload.py``).
- Codex CLI: https://developers.openai.com/codex/hooks and the generated schemas in
  github.com/openai/codex ``codex-rs/hooks/schema/generated/*.command.{input,output}.schema.json``.
  Input as Claude Code's (``session_id``, ``cwd``, ``prompt``, ``source``, ``tool_name``,
  ``tool_input``, ``tool_response``); events SessionStart, UserPromptSubmit, PostToolUse (tool
  ``Bash`` with ``tool_input.command``, and ``apply_patch`` whose patch text is in
  ``tool_input.command``: openai/codex PR for issue #16732), Stop, PreCompact: no SessionEnd, no
  PostToolUseFailure. Output ``hookSpecificOutput.additionalContext``. The shape of a Bash
  ``tool_response`` is not documented: read as an object or as the output text.
- Cursor: https://cursor.com/docs/agent/hooks (the 1.7 text is kept in github.com/pcomans/caruso
  ``reference/cursor_hooks.md``). Every event has ``conversation_id``, ``generation_id``,
  ``hook_event_name``, ``workspace_roots``; ``beforeSubmitPrompt`` ``prompt``; ``afterFileEdit``
  ``file_path`` (absolute) and ``edits``; ``afterShellExecution`` ``command``, ``output``,
  ``duration`` (no exit code); ``stop`` ``status``. Newer releases add ``sessionStart``
  (``session_id``; output ``additional_context``), ``sessionEnd`` (``reason``), ``preCompact`` and
  ``postToolUseFailure`` (``tool_name``, ``tool_input``, ``error_message``). ``beforeSubmitPrompt``
  answers only ``continue``/``user_message``: Cursor adds no context at a prompt.
- Gemini CLI: github.com/google-gemini/gemini-cli ``docs/hooks/reference.md``,
  ``docs/reference/tools.md`` and ``packages/core/src/tools/shell.ts``. Every event has
  ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``timestamp``; SessionStart
  ``source``; BeforeAgent ``prompt``; AfterTool ``tool_name``, ``tool_input``, ``tool_response``
  (``llmContent``, ``returnDisplay``, ``error``; a shell call's ``llmContent`` is "Output: …",
  "Error: …", "Exit Code: N" lines); AfterAgent; SessionEnd ``reason``; PreCompress ``trigger``.
  Tools ``write_file`` and ``replace`` take ``file_path``, ``run_shell_command`` ``command``.
  SessionStart and BeforeAgent read ``hookSpecificOutput.additionalContext``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mnemo.bounds import MAX_ID_CHARS
from mnemo.capture.names import CLIENT_NAMES, EVENTS
from mnemo.capture.payload import HookPayload, text_of


@dataclass(frozen=True, slots=True)
class Hook:
    """One hook a client's configuration gets: its event, the `mnemo hook` event it runs, and the
    tool matcher (None where the event takes none)."""

    client_event: str
    event: str
    matcher: str | None = None


@dataclass(frozen=True, slots=True)
class Client:
    name: str
    hooks: tuple[Hook, ...]
    read: Callable[[str, dict[str, Any]], HookPayload]
    # mnemo event → the event name the client's output names, for the events that can add context
    injects: dict[str, str]
    write: Callable[[str, str], str]

    def parse(self, event: str, raw: bytes) -> HookPayload:
        """The normalized payload of ``raw``; ``ValueError`` when it is not a JSON object."""
        return self.read(event, _object(raw))

    def output(self, event: str, context: str) -> str:
        """What the client reads from the hook's stdout to add ``context``; "" when it cannot."""
        if not context or event not in self.injects:
            return ""
        return self.write(self.injects[event], context)

    @property
    def events(self) -> dict[str, str]:
        """Client event → `mnemo hook` event."""
        return {hook.client_event: hook.event for hook in self.hooks}


def _object(raw: bytes) -> dict[str, Any]:
    data = json.loads(raw.decode("utf-8", errors="replace"))
    if not isinstance(data, dict):
        raise ValueError("the hook's input is not a JSON object")
    return data


def _mapping(value: Any) -> dict[str, Any]:
    """An object, or a JSON text of one (Cursor sends MCP tool input as a string); else empty."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _absolute(path: str, cwd: str) -> str:
    """``path`` joined to ``cwd`` when relative, so that the project sees it where the agent did."""
    return path if not path or os.path.isabs(path) or not cwd else os.path.join(cwd, path)


def _hook_specific(client_event: str, context: str) -> str:
    return json.dumps({"hookSpecificOutput": {"hookEventName": client_event, "additionalContext": context}})


# -- Claude Code ---------------------------------------------------------------------------
def _claude_read(event: str, data: dict[str, Any]) -> HookPayload:
    return HookPayload.from_dict(event, data)


CLAUDE_CODE = Client(
    name="claude-code",
    hooks=(
        Hook("SessionStart", "session-start"),
        Hook("UserPromptSubmit", "user-prompt-submit"),
        Hook("PostToolUse", "post-tool-use", "Edit|MultiEdit|Write|NotebookEdit|Bash"),
        Hook("PostToolUseFailure", "post-tool-use-failure", "Bash"),
        Hook("Stop", "stop"),
        Hook("SessionEnd", "session-end"),
        Hook("PreCompact", "pre-compact"),
    ),
    read=_claude_read,
    injects={event: EVENTS[event] for event in ("session-start", "user-prompt-submit")},
    write=_hook_specific,
)


# -- Codex CLI -----------------------------------------------------------------------------
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_EXIT_CODE = re.compile(r"(?im)^\s*(?:exit code|process exited with code)\s*:?\s*(-?\d+)")


def _codex_read(event: str, data: dict[str, Any]) -> HookPayload:
    payload = _claude_read(event, data)
    tool_input = payload.tool_input
    if payload.tool_name == "apply_patch":
        patch = text_of(tool_input, "command", "input", "patch")
        files = [a or b for a, b in _PATCH_FILE.findall(patch)]
        edit = {"file_path": _absolute(files[0], payload.cwd)} if files else {}
        return replace(payload, tool_name="Edit", tool_input=edit)
    if payload.tool_name in ("Bash", "shell", "local_shell", "exec_command"):
        command = tool_input.get("command")
        if isinstance(command, list):  # an argv, as the older shell tools took it
            command = " ".join(str(word) for word in command)
        return replace(
            payload, tool_name="Bash", tool_input={"command": command}, tool_response=_shell(payload.tool_response)
        )
    return payload


def _shell(response: Any, error: str = "") -> dict[str, Any]:
    """A shell call's result in Claude Code's shape, from an object or from the output's text."""
    if isinstance(response, dict):
        code = response.get("exit_code", response.get("exitCode"))
        stdout = text_of(response, "stdout", "output", "aggregated_output", "formatted_output")
        stderr = text_of(response, "stderr") or error
    else:
        stdout, stderr, code = (response if isinstance(response, str) else ""), error, None
    if not isinstance(code, int) and (found := _EXIT_CODE.search(stdout)):
        code = int(found.group(1))
    shaped: dict[str, Any] = {"stdout": stdout, "stderr": stderr}
    if isinstance(code, int) and not isinstance(code, bool):
        shaped["exit_code"] = code
    return shaped


CODEX = Client(
    name="codex",
    hooks=(
        Hook("SessionStart", "session-start"),
        Hook("UserPromptSubmit", "user-prompt-submit"),
        Hook("PostToolUse", "post-tool-use", "Bash|apply_patch"),
        Hook("Stop", "stop"),
        Hook("PreCompact", "pre-compact"),
    ),
    read=_codex_read,
    injects={event: EVENTS[event] for event in ("session-start", "user-prompt-submit")},
    write=_hook_specific,
)


# -- Cursor --------------------------------------------------------------------------------
_CURSOR_EDIT_TOOLS = {"Write": "Write", "Edit": "Edit", "StrReplace": "Edit", "MultiEdit": "Edit"}


def _cursor_read(event: str, data: dict[str, Any]) -> HookPayload:
    roots = data.get("workspace_roots")
    root = next((r for r in roots if isinstance(r, str) and r), "") if isinstance(roots, list) else ""
    cwd = text_of(data, "cwd") or root
    base = HookPayload(
        event=event,
        session_id=text_of(data, "conversation_id", "session_id")[:MAX_ID_CHARS],
        cwd=cwd,
        prompt=text_of(data, "prompt"),
        source=text_of(data, "source"),
    )
    if event not in ("post-tool-use", "post-tool-use-failure"):
        return base
    error = text_of(data, "error_message", "error")
    if text_of(data, "file_path"):  # afterFileEdit
        return replace(base, tool_name="Edit", tool_input={"file_path": _absolute(data["file_path"], cwd)})
    if "command" in data:  # afterShellExecution
        command = text_of(data, "command")
        response = _shell({k: data[k] for k in ("output", "exit_code", "exitCode") if k in data}, error)
        return replace(base, tool_name="Bash", tool_input={"command": command}, tool_response=response, error=error)
    tool, tool_input = text_of(data, "tool_name"), _mapping(data.get("tool_input"))  # postToolUse(Failure)
    if tool == "Shell":
        response = _shell(_mapping(data.get("tool_output")) or data.get("tool_output"), error)
        command = text_of(tool_input, "command")
        return replace(base, tool_name="Bash", tool_input={"command": command}, tool_response=response, error=error)
    if tool in _CURSOR_EDIT_TOOLS:
        path = _absolute(text_of(tool_input, "file_path", "path", "target_file"), cwd)
        return replace(base, tool_name=_CURSOR_EDIT_TOOLS[tool], tool_input={"file_path": path} if path else {})
    return replace(base, tool_name=tool, tool_input=tool_input, error=error)


CURSOR = Client(
    name="cursor",
    hooks=(
        Hook("sessionStart", "session-start"),
        Hook("beforeSubmitPrompt", "user-prompt-submit"),
        Hook("afterFileEdit", "post-tool-use"),
        Hook("afterShellExecution", "post-tool-use"),
        Hook("postToolUseFailure", "post-tool-use-failure", "Shell"),
        Hook("stop", "stop"),
        Hook("sessionEnd", "session-end"),
        Hook("preCompact", "pre-compact"),
    ),
    read=_cursor_read,
    injects={"session-start": "sessionStart"},
    write=lambda _event, context: json.dumps({"additional_context": context}),
)


# -- Gemini CLI ----------------------------------------------------------------------------
_GEMINI_TOOLS = {"write_file": "Write", "replace": "Edit", "run_shell_command": "Bash"}
_GEMINI_OUTPUT = re.compile(
    r"(?s)^Output: (.*?)(?=^(?:Error|Exit Code|Signal|Background PIDs|Process Group PGID): |\Z)", re.M
)
_GEMINI_ERROR = re.compile(r"(?m)^Error: (.*)$")
_UNTRUSTED = re.compile(r"^\s*<untrusted_context>\n?|\n?</untrusted_context>\s*$")


def _gemini_read(event: str, data: dict[str, Any]) -> HookPayload:
    payload = _claude_read(event, data)
    tool = _GEMINI_TOOLS.get(payload.tool_name)
    if tool is None:
        return payload
    tool_input = payload.tool_input
    if tool != "Bash":
        path = _absolute(text_of(tool_input, "file_path"), payload.cwd)
        return replace(payload, tool_name=tool, tool_input={"file_path": path} if path else {})
    response = payload.tool_response if isinstance(payload.tool_response, dict) else {}
    content = _UNTRUSTED.sub("", text_of(response, "llmContent"))
    failure = response.get("error")
    error = text_of(failure, "message") or (failure if isinstance(failure, str) else "")
    if not error and (found := _GEMINI_ERROR.search(content)):
        error = found.group(1)
    shaped = _shell(content, error)
    if output := _GEMINI_OUTPUT.search(content):
        shaped["stdout"] = output.group(1).rstrip("\n").removesuffix("(empty)")
    if failure and "exit_code" not in shaped:
        shaped["is_error"] = True
    return replace(
        payload, tool_name="Bash", tool_input={"command": text_of(tool_input, "command")}, tool_response=shaped
    )


GEMINI = Client(
    name="gemini",
    hooks=(
        Hook("SessionStart", "session-start"),
        Hook("BeforeAgent", "user-prompt-submit"),
        Hook("AfterTool", "post-tool-use", "write_file|replace|run_shell_command"),
        Hook("AfterAgent", "stop"),
        Hook("SessionEnd", "session-end"),
        Hook("PreCompress", "pre-compact"),
    ),
    read=_gemini_read,
    injects={"session-start": "SessionStart", "user-prompt-submit": "BeforeAgent"},
    write=_hook_specific,
)

CLIENTS: dict[str, Client] = {client.name: client for client in (CLAUDE_CODE, CODEX, CURSOR, GEMINI)}
assert tuple(CLIENTS) == CLIENT_NAMES


def client(name: str) -> Client:
    """The client called ``name``; ``ValueError`` for an unknown one."""
    try:
        return CLIENTS[name]
    except KeyError:
        raise ValueError(f"unknown client {name!r} (known: {', '.join(CLIENT_NAMES)})") from None


def parse(client_name: str, event: str, raw: bytes) -> HookPayload:
    """``raw``, which ``client_name`` sent a hook for the `mnemo hook` ``event``, normalized."""
    return client(client_name).parse(event, raw)


def output(client_name: str, event: str, context: str) -> str:
    """What ``client_name`` reads from a hook's stdout to add ``context`` at ``event`` ("" for none)."""
    return client(client_name).output(event, context)
