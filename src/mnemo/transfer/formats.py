"""What ``mnemo import`` reads: mnemo's own export, the MCP memory server's memory.json, text folders.

Each reader yields ``Record``s (the arguments of one ``MemoryService.store``) or ``Unreadable``s
(a line or paragraph that is not a memory, with why); nothing here decides whether a record is
valid, a duplicate or allowed: the engine does, as for any other write.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from mnemo.model import Context

EXPORT_FORMAT = "mnemo-export"
EXPORT_VERSION = 1
TEXT_SUFFIXES = (".md", ".markdown", ".txt")
Format = Literal["auto", "mnemo", "mcp-memory", "text"]


@dataclass(frozen=True, slots=True)
class Record:
    where: str  # file:line (or file:paragraph), for the summary's reasons
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Unreadable:
    where: str
    reason: str


def detect(source: Path) -> Format:
    """The format of a file or folder: a folder is text; a file by its first JSON line."""
    if source.is_dir() or source.suffix.lower() in TEXT_SUFFIXES:
        return "text"
    with source.open(encoding="utf-8", errors="replace") as lines:
        first = next((line for line in lines if line.strip()), "")
    try:
        head = json.loads(first)
    except ValueError:
        return "text"
    if isinstance(head, dict) and head.get("format") == EXPORT_FORMAT:
        return "mnemo"
    if isinstance(head, dict) and head.get("type") in ("entity", "relation"):
        return "mcp-memory"
    return "text"


def read(source: Path, chosen: Format = "auto") -> Iterator[Record | Unreadable]:
    kind = detect(source) if chosen == "auto" else chosen
    if kind == "mnemo":
        return _mnemo_export(source)
    if kind == "mcp-memory":
        return _mcp_memory(source)
    return _text(source)


def _json_lines(source: Path) -> Iterator[tuple[str, Any]]:
    with source.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                where = f"{source.name}:{number}"
                try:
                    yield where, json.loads(line)
                except ValueError as error:
                    yield where, Unreadable(where, f"not JSON: {error}")


# -- mnemo's own export ----------------------------------------------------------------------
def _mnemo_export(source: Path) -> Iterator[Record | Unreadable]:
    for index, (where, row) in enumerate(_json_lines(source)):
        if isinstance(row, Unreadable):
            yield row
        elif index == 0 and isinstance(row, dict) and row.get("format") == EXPORT_FORMAT:
            if row.get("version") != EXPORT_VERSION:
                yield Unreadable(where, f"export version {row.get('version')!r}; this mnemo reads {EXPORT_VERSION}")
                return
        elif not isinstance(row, dict) or not isinstance(row.get("content"), str):
            yield Unreadable(where, "not a memory object with a content string")
        else:
            yield _exported(where, row)


def _exported(where: str, row: dict[str, Any]) -> Record | Unreadable:
    context = row.get("context") or {}
    try:
        created = datetime.fromisoformat(row["created_at"]) if row.get("created_at") else None
        expires = datetime.fromisoformat(row["expires_at"]) if row.get("expires_at") else None
    except (TypeError, ValueError) as error:
        return Unreadable(where, f"a date that is not ISO 8601: {error}")
    arguments = {
        "memory_id": row.get("id"),
        "content": row["content"],
        "category": row.get("category"),
        "subject": row.get("subject"),
        "tags": row.get("tags") or (),
        "importance": row.get("importance"),
        "confidence": row.get("confidence"),
        "type": row.get("type"),
        "access_level": row.get("access_level") or "private",
        "expires_at": expires,
        "metadata": row.get("metadata") or {},
        "agent_name": row.get("agent_name"),
        "path": row.get("path"),
        "timestamp": created,
        "context": Context(context.get("user_id"), context.get("conversation_id"), context.get("session_id")),
    }
    return Record(where, arguments)  # auto tags are derived from the content again, as they were


# -- the MCP reference memory server's knowledge graph ---------------------------------------
def _mcp_memory(source: Path) -> Iterator[Record | Unreadable]:
    """memory.json of @modelcontextprotocol/server-memory: one entity or relation per line.

    Each observation of an entity is a memory about it (subject: the entity, tag: its type); each
    relation is a memory "A relation B" about A.
    """
    for where, row in _json_lines(source):
        if isinstance(row, Unreadable):
            yield row
        elif not isinstance(row, dict):
            yield Unreadable(where, "not an entity or a relation")
        elif row.get("type") == "entity" and isinstance(row.get("name"), str):
            observations = row.get("observations") or []
            kind = str(row.get("entityType") or "entity")
            for number, observation in enumerate(observations, start=1):
                if not isinstance(observation, str) or not observation.strip():
                    yield Unreadable(f"{where}#{number}", "an observation that is not text")
                    continue
                metadata = {"source": "mcp-memory", "entity": row["name"], "entity_type": kind}
                yield Record(
                    f"{where}#{number}",
                    {
                        "content": observation.strip(),
                        "subject": _name(row["name"]),
                        "tags": [kind],
                        "metadata": metadata,
                    },
                )
        elif row.get("type") == "relation" and all(isinstance(row.get(k), str) for k in ("from", "to", "relationType")):
            said = f"{_name(row['from'])} {_name(row['relationType'])} {_name(row['to'])}"
            metadata = {"source": "mcp-memory", "relation": row["relationType"]}
            yield Record(
                where, {"content": said, "subject": _name(row["from"]), "tags": ["relation"], "metadata": metadata}
            )
        else:
            yield Unreadable(where, "not an entity (name, observations) or a relation (from, to, relationType)")


def _name(text: str) -> str:
    """John_Smith → John Smith; works_at → works at."""
    return " ".join(text.replace("_", " ").split())


# -- text and markdown ------------------------------------------------------------------------
def _text(source: Path) -> Iterator[Record | Unreadable]:
    """One memory per paragraph (blank-line separated) of every .md/.markdown/.txt file; headings and
    empty paragraphs are not memories."""
    files = (
        sorted(p for p in source.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
        if source.is_dir()
        else [source]
    )
    for file in files:
        name = str(file.relative_to(source)) if source.is_dir() else file.name
        text = file.read_text(encoding="utf-8", errors="replace")
        for number, paragraph in enumerate(text.replace("\r\n", "\n").split("\n\n"), start=1):
            lines = [line for line in paragraph.strip().splitlines() if not line.lstrip().startswith("#")]
            content = " ".join(" ".join(lines).split())
            if content:
                yield Record(f"{name}:{number}", {"content": content, "metadata": {"source_file": name}})
