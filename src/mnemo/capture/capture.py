"""What is worth keeping, decided by rules, with no model and no tokens.

- From a prompt: the sentences that state an instruction, a preference or a decision ("always…",
  "never…", "don't…", "we use…", "prefer…", "remember…"); questions, trivial prompts and
  acknowledgements give nothing.
- From a tool call: a failed Bash command with the command that then worked (its error and the
  fix); never a tool's whole output. The files edited are remembered for the session's summary.
- At the end of a session: an extractive one-paragraph summary of what it stated, fixed and edited.

Every text leaves here through ``redact``.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemo.capture.payload import HookPayload, Project
from mnemo.capture.redact import redact
from mnemo.capture.state import Session

MAX_NOTE_CHARS = 300
MAX_SUMMARY_CHARS = 900
MIN_PROMPT_WORDS = 4
EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")

_ACKNOWLEDGEMENT = re.compile(
    r"(?i)^\s*(ok(ay)?|k|yes|yep|no|nope|sure|thanks?( you)?|thx|ty|great|nice|cool|perfect|lgtm|go( on| ahead)?"
    r"|continue|proceed|do it|done|good|fine|sounds good|looks good)[\s.!]*$"
)
_FENCED = re.compile(r"```.*?(```|\Z)", re.DOTALL)  # a pasted block of code: never a rule
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# A sentence that states a rule or a choice, and the category it is filed under.
_STATED = (
    ("preference", re.compile(r"(?i)\b(i|we) (prefer|like|want)\b|\bprefer(red)?\b|\brather than\b|\binstead of\b")),
    (
        "instruction",
        re.compile(
            r"(?i)\b(always|never|don'?t|do not|must( not)?|should( not)?|make sure|from now on|remember"
            r"|keep in mind)\b"
        ),
    ),
    ("fact", re.compile(r"(?i)\bwe('re| are)? (use|using|decided|chose|agreed|switched|standardi[sz]e)\b")),
)
# What makes a sentence that matched a rule's words no rule: it holds for now only, asks something
# (a question without its question mark), is a line of pasted code, or asks for one task to be done
# without saying it holds beyond it ("Make the walker use rayon instead of threads").
_FOR_NOW = re.compile(
    r"(?i)\b(for now|for the moment|right now|this time|just this once|temporar(y|ily)|until (we|i|it)"
    r"|in this (pr|task|ticket))\b"
)
_ASKS = re.compile(
    r"(?i)^(should|shall|can|could|would|will|do|does|did|is|are|was|were|what|which|who|why|how|where|when)\b"
)
_CODE = re.compile(r"^\s*(#|//|--|/\*|\*|>>>|\$ |[\w.]+\(.*\)\s*[;{]?$|[{}<])")
_TASK = re.compile(
    r"(?i)^(please,?\s+)?(make|add|fix|change|update|refactor|rename|move|write|create|implement|remove|delete"
    r"|run|let'?s|switch|convert|replace|rewrite|set up|try)\b"
)
_LASTING = re.compile(
    r"(?i)\b(always|never|from now on|every time|in (the )?future|going forward|by default|remember)\b"
)
_LEAD_IN = re.compile(r"(?i)^(please,?\s+|remember( that|:|,)?\s+|note( that|:)\s+|fyi:?\s+)+")
_ERROR_LINE = re.compile(r"(?i)error|exception|failed|failure|fatal|traceback|not found|denied|assert")


# A stated rule that holds beyond this project: kept as one of the user's global memories.
_EVERYWHERE = re.compile(
    r"(?i)\b(in|for|across) (all|every|each|any) (of )?(my |our |the )?(projects?|repos(itories)?|codebases?)\b"
)


@dataclass(frozen=True, slots=True)
class Note:
    content: str
    category: str
    tags: tuple[str, ...]
    importance: float
    everywhere: bool = False  # the user's, for every project (``GLOBAL_SUBJECT``), not this project's


def prompt_notes(prompt: str) -> list[Note]:
    """The instructions, preferences and decisions a prompt states, one note per sentence."""
    prompt = redact(prompt)
    if len(prompt.split()) < MIN_PROMPT_WORDS or _ACKNOWLEDGEMENT.match(prompt):
        return []
    notes = []
    for sentence in _SENTENCE.split(_FENCED.sub("\n", prompt)):
        if _CODE.match(sentence):
            continue
        sentence = " ".join(sentence.split())
        if len(sentence.split()) < MIN_PROMPT_WORDS or sentence.endswith("?") or not _lasting_rule(sentence):
            continue
        for category, pattern in _STATED:
            if pattern.search(sentence):
                text = _LEAD_IN.sub("", sentence)
                text = text[0].upper() + text[1:]
                everywhere = bool(_EVERYWHERE.search(text))
                tags = ("stated", category, "global") if everywhere else ("stated", category)
                notes.append(Note(_clip(text, MAX_NOTE_CHARS), category, tags, 0.8, everywhere))
                break
    return notes


def _lasting_rule(sentence: str) -> bool:
    """Whether a sentence may state a rule that lasts: not for now only, not a question, not a
    one-off task (unless it says it lasts)."""
    if _FOR_NOW.search(sentence) or _ASKS.match(sentence):
        return False
    return not _TASK.match(sentence) or bool(_LASTING.search(sentence))


def tool_note(payload: HookPayload, project: Project, session: Session, excluded: Sequence[str] = ()) -> Note | None:
    """The note a tool call gives, if any; ``session`` remembers a failed command until it is fixed.
    An edit of a file matching one of the ``excluded`` globs gives none."""
    if payload.tool_name in EDIT_TOOLS:
        path = payload.tool_input.get("file_path") or payload.tool_input.get("notebook_path")
        if not isinstance(path, str) or not path:
            return None
        where = project.relative(path)
        if any(fnmatch.fnmatch(where, glob) or fnmatch.fnmatch(Path(where).name, glob) for glob in excluded):
            return None
        session.edited_file(redact(where))
        return None  # the files a session edited go into its summary, not one memory each
    if payload.tool_name != "Bash":
        return None
    command = payload.tool_input.get("command")
    if not isinstance(command, str) or not command.strip():
        return None
    command = _clip(" ".join(command.split()), 160)
    error = _failure(payload)
    if error is not None:
        session.failed_command, session.failed_error, session.edited = redact(command), redact(error), []
        return None
    if session.failed_command is None or _program(session.failed_command) != _program(command):
        return None
    after = f" after editing {', '.join(session.edited[:3])}" if session.edited else ""
    text = f"`{session.failed_command}` failed ({session.failed_error}); `{command}` then worked{after}."
    session.failed_command = session.failed_error = None
    return Note(redact(text), "skill", ("fix",), 0.6)


def _failure(payload: HookPayload) -> str | None:
    """The telling line of a failed Bash call's error, or None when it worked."""
    response = payload.tool_response if isinstance(payload.tool_response, dict) else {}
    code = response.get("exit_code", response.get("exitCode", 0))
    failed = payload.event == "post-tool-use-failure" or bool(response.get("is_error") or response.get("isError"))
    if not (failed or (isinstance(code, int) and code != 0)):
        return None
    output = payload.error or _as_text(response.get("stderr")) or _as_text(response.get("stdout"))
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    telling = next((line for line in reversed(lines) if _ERROR_LINE.search(line)), lines[-1] if lines else "failed")
    return _clip(telling, 160)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _program(command: str) -> str:
    """The program a command runs, past ``VAR=value`` prefixes: ``pytest`` for ``CI=1 pytest -x``."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return next((w for w in words if "=" not in w), "")


def summary(project: Project, session: Session) -> str | None:
    """One paragraph of what a session stated, fixed and edited; None when it did none of it."""
    parts = [note.rstrip(".") for note in session.notes]
    if session.files:
        parts.append(f"edited {', '.join(session.files)}")
    if not parts:
        return None
    return _clip(f"Session in {project.name}: " + "; ".join(parts) + ".", MAX_SUMMARY_CHARS)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
