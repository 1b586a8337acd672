"""What the hooks keep between calls, in small files under ``MNEMO_HOME/hooks/``.

- ``activity.jsonl``: the last items captured and injected, for ``mnemo hooks status``.
- ``sessions/<id>.json``: one session's notes so far (for its summary), the memory holding that
  summary, and a failed command waiting for the command that fixes it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo.capture.spool import hooks_dir, write_atomically

ACTIVITY_KEPT = 200  # lines of activity.jsonl kept when it is trimmed
ACTIVITY_TRIM_AT = 400
MAX_SESSION_NOTES = 50


# -- activity ------------------------------------------------------------------------------
def record(home: Path, action: str, event: str, project: str, text: str, memory_id: str | None = None) -> None:
    """Add one line to the activity log (``action``: captured, injected, ...)."""
    path = hooks_dir(home) / "activity.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    line = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "action": action, "event": event,
            "project": project, "text": text[:160], "id": memory_id}  # fmt: skip
    with path.open("a", encoding="utf-8") as log:
        log.write(json.dumps(line, ensure_ascii=False) + "\n")
    if path.stat().st_size > ACTIVITY_TRIM_AT * 300:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        if len(lines) > ACTIVITY_TRIM_AT:
            write_atomically(path, "".join(lines[-ACTIVITY_KEPT:]))


def recent(home: Path, count: int) -> list[dict[str, Any]]:
    path = hooks_dir(home) / "activity.jsonl"
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()[-count:]
    return [json.loads(line) for line in lines if line.strip()]


# -- one session ---------------------------------------------------------------------------
@dataclass
class Session:
    notes: list[str] = field(default_factory=list)  # what was captured, in order (for the summary)
    summary_id: str | None = None  # the memory holding this session's summary
    summarised: int = 0  # the session's size when its summary was written
    model_summarised: int = 0  # the session's size when the chat model last wrote its summary
    failed_command: str | None = None  # a Bash command that failed, waiting for one that works
    failed_error: str | None = None
    edited: list[str] = field(default_factory=list)  # files edited since that failure
    files: list[str] = field(default_factory=list)  # every file the session edited, in order

    def add_note(self, note: str) -> None:
        if note not in self.notes and len(self.notes) < MAX_SESSION_NOTES:
            self.notes.append(note)

    def edited_file(self, path: str) -> None:
        if path not in self.edited:
            self.edited.append(path)
        if path not in self.files and len(self.files) < MAX_SESSION_NOTES:
            self.files.append(path)

    @property
    def size(self) -> int:
        """What the session holds for its summary: a summary of fewer is out of date."""
        return len(self.notes) + len(self.files)


def _session_file(home: Path, session_id: str) -> Path:
    name = hashlib.sha256(session_id.encode()).hexdigest()[:32]  # any id, safely as a file name
    return hooks_dir(home) / "sessions" / f"{name}.json"


def load_session(home: Path, session_id: str) -> Session:
    path = _session_file(home, session_id)
    if not path.exists():
        return Session()
    data = json.loads(path.read_text(encoding="utf-8"))
    return Session(**{k: v for k, v in data.items() if k in Session.__dataclass_fields__})


def save_session(home: Path, session_id: str, session: Session) -> None:
    write_atomically(_session_file(home, session_id), json.dumps(asdict(session), ensure_ascii=False))
