"""What the attack suite checks on every answer, and the figures it prints.

``judge`` reads one tool call's outcome as a client sees it and lists what is wrong with it: an
internal error, traceback text, the database's path, an error outside the profile's spec shape,
a failure the store reports although it is healthy, non-JSON tokens, or a success that does not
validate against the tool's ``outputSchema``. ``dump`` is the database's canonical content, to
prove that a rejected call changed nothing. ``FIGURES`` collects the counts that conftest's
terminal summary prints.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from mcp import MCPError
from mcp.types import CallToolResult

FIGURES: Counter[str] = Counter()

# The codes a healthy store must never answer with: they blame the server, not the caller.
SERVER_FAULTS = {"INTERNAL_ERROR", "STORAGE_ERROR", "CORRUPTED_DATA"}
AGENT_CODES = {"INVALID_INPUT", "NOT_FOUND", "STORAGE_ERROR", "PERMISSION_ERROR", "CORRUPTED_DATA"}
AGENT_CODES |= {"LIMIT_EXCEEDED", "INTERNAL_ERROR"}
MEMENTO_CODES = {"MEMORY_NOT_FOUND", "INVALID_PARAMETER", "STORAGE_ERROR", "EMBEDDING_ERROR", "RATE_LIMIT"}
SHARED_CHARACTER_LIMIT = 25_000
INVALID_PARAMS = -32602
LEAKS = ("Traceback (most recent call last)", "Error executing tool", 'File "/', "sqlite3.")


@dataclass
class Verdict:
    accepted: bool
    problems: list[str] = field(default_factory=list)


def strict_json(text: str) -> Any:
    """Parse JSON that a spec-following client can parse: NaN and Infinity are not JSON."""

    def refuse(token: str) -> Any:
        raise ValueError(f"non-JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def _shape(profile: str, body: Any) -> list[str]:
    """What is wrong with an error body in the profile's spec shape (an empty list when nothing)."""
    if profile == "shared":
        ok = isinstance(body, dict) and set(body) == {"success", "error"} and body["success"] is False
        if not ok or not isinstance(body["error"], str) or not body["error"]:
            return [f"error outside spec 003's shape: {body!r:.300}"]
        return ["internal error reached the client"] if body["error"].startswith("internal error") else []
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not error.get("message") or not isinstance(error.get("code"), str):
        return [f"error outside the spec's shape: {body!r:.300}"]
    code = error["code"]
    if profile == "full":
        ok = set(body) == {"api_version", "success", "error"} and body["success"] is False
        ok = ok and {"code", "message", "status"} <= set(error)
    elif profile == "agent":
        ok = set(body) == {"error"} and set(error) == {"code", "message"} and code in AGENT_CODES
    else:  # memento
        ok = set(body) == {"error"} and {"code", "message"} <= set(error) <= {"code", "message", "details"}
        ok = ok and code in MEMENTO_CODES
    problems = [] if ok else [f"error outside the spec's shape: {body!r:.300}"]
    if code in SERVER_FAULTS:
        problems.append(f"{code} from a healthy store: {error['message']!r:.300}")
    return problems


def judge(
    profile: str, outcome: CallToolResult | BaseException, output_schema: dict[str, Any] | None, home: Path
) -> Verdict:
    """Check one call's outcome; ``accepted`` is whether the tool did what it was asked.

    ``home`` is the data folder: no answer may show where the store's files are.
    """
    secret = str(home)
    if isinstance(outcome, MCPError):
        if profile != "stores":
            return Verdict(False, [f"a protocol error where a tool error was due: {outcome.error!r:.300}"])
        data = outcome.error.data if isinstance(outcome.error.data, dict) else {}
        problems = [] if outcome.error.code == INVALID_PARAMS else [f"protocol error {outcome.error!r:.300}"]
        if data.get("code") in SERVER_FAULTS:
            problems.append(f"{data['code']} from a healthy store: {outcome.error.message!r:.300}")
        return Verdict(False, problems + _leaks(outcome.error.message + repr(outcome.error.data), secret))
    if isinstance(outcome, BaseException):
        return Verdict(False, [f"the client got {type(outcome).__name__}: {outcome!s:.300}"])
    texts = [c.text for c in outcome.content if c.type == "text"]
    problems = [p for text in texts for p in _leaks(text, secret)]
    if outcome.is_error:
        if profile == "stores":
            problems.append("a tool error where spec 002 asks for a protocol error")
            return Verdict(False, problems)
        try:
            problems += _shape(profile, strict_json(texts[0]))
        except (ValueError, IndexError) as exc:
            problems.append(f"error is not strict JSON: {exc}")
        return Verdict(False, problems)
    if profile == "shared":
        problems += _shared_answer(texts)
    elif outcome.structured_content is None:
        problems.append("a success without structured content")
    elif output_schema is not None:
        for error in jsonschema.Draft202012Validator(output_schema).iter_errors(outcome.structured_content):
            problems.append(f"answer invalid against outputSchema at {list(error.absolute_path)}: {error.message:.200}")
    for text in texts:
        if text.startswith(("{", "[")):
            try:
                strict_json(text)
            except ValueError as exc:
                problems.append(f"answer is not strict JSON: {exc}")
    return Verdict(True, problems)


def _shared_answer(texts: list[str]) -> list[str]:
    problems = [f"answer of {len(t)} characters, past spec 003's {SHARED_CHARACTER_LIMIT}" for t in texts]
    problems = [p for p, t in zip(problems, texts, strict=True) if len(t) > SHARED_CHARACTER_LIMIT]
    if len(texts) != 1:
        problems.append(f"{len(texts)} content blocks where spec 003 sends one")
    return problems


def _leaks(text: str, secret: str) -> list[str]:
    found = [f"answer shows {leak!r}" for leak in LEAKS if leak in text]
    return found + (["answer shows the path of the store's files"] if secret in text else [])


# Records of calls rather than memory state: a refused operation may leave a failed job behind.
CALL_RECORDS = {"jobs", "request_counts", "idempotent_calls"}


def dump(home: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (but the call records) of every database under ``home``, in a stable order."""
    content: dict[str, list[tuple[Any, ...]]] = {}
    for db_file in sorted(home.rglob("*.db")):
        with closing(sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)) as db:
            tables = db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name"
            ).fetchall()
            for (table,) in tables:
                if table in CALL_RECORDS:
                    continue
                rows = db.execute(f'SELECT * FROM "{table}"').fetchall()
                content[f"{db_file.relative_to(home)}:{table}"] = sorted(rows, key=repr)
    return content


def difference(before: dict[str, list[Any]], after: dict[str, list[Any]]) -> str:
    """Which tables changed, and how many rows each gained or lost (empty when none changed)."""
    changed = [
        f"{name}: {len(before.get(name, []))} -> {len(after.get(name, []))} rows"
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]
    return "; ".join(changed)
