"""One hook call against the store: what to show the agent, and what to keep.

A call is ``{"client", "event", "payload"}`` as the hook command (``client.py``) sent or queued
it, its texts already bounded and redacted. ``Capturer.inject`` answers session starts and prompts
(what to print); ``Capturer.capture`` keeps what a call gives (a stated rule, an edit, a fix, the
session's summary). Both do nothing in a disabled folder.

Captured memories carry their project as ``subject`` (the git root's path: the near-duplicate rule
compares memories of one subject, and recall and list filter on it cheaply), the client's session
as ``context.session_id``, and a ``project:<name>`` tag for people. A rule the user states for
every project ("in all my projects…") gets the subject ``global`` instead, and is shown everywhere.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemo.app import open_service
from mnemo.capture import capture, clients, inject, state, switch
from mnemo.capture.capture import Note
from mnemo.capture.llm_summary import SummaryWriter
from mnemo.capture.names import EVENTS
from mnemo.capture.payload import HookPayload, Project
from mnemo.config import Settings
from mnemo.engine.service import MemoryService
from mnemo.errors import NotFound
from mnemo.model import Context

log = logging.getLogger(__name__)

ACTOR = "mnemo-hook"
# Where the chat model may rewrite a session's summary, when allowed: its end, not every Stop (a
# Stop comes after each of the agent's turns).
MODEL_SUMMARY_EVENTS = ("session-end", "pre-compact")


@dataclass(frozen=True, slots=True)
class _Call:
    client: str
    payload: HookPayload
    project: Project


class Capturer:
    """The store's service for hook calls, opened at the first call and kept open."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = settings.home
        self.excluded = tuple(glob.strip() for glob in settings.hooks_exclude.split(",") if glob.strip())
        self.summary_writer = SummaryWriter(settings)
        self._service: MemoryService | None = None
        self._opening = threading.Lock()

    @property
    def service(self) -> MemoryService:
        with self._opening:
            if self._service is None:
                self._service = open_service(self.settings, actor=ACTOR)
            return self._service

    def close(self) -> None:
        if self._service is not None:
            self._service.close()

    def warm_up(self) -> None:
        """Load the model now, so that the first prompt's recall does not wait for it."""
        self.service.recall("warm up", limit=1)

    def inject(self, call: dict[str, Any]) -> str:
        """What the hook prints for a session start or a prompt ("" for nothing)."""
        read = self._read(call)
        if read is None or read.payload.event not in ("session-start", "user-prompt-submit"):
            return ""
        payload, project = read.payload, read.project
        if payload.event == "session-start":
            context = inject.session_index(self.service, project)
        else:
            context = inject.prompt_context(self.service, project, payload.prompt)
        if not context:
            return ""
        count = context.count("\n")
        state.record(self.home, "injected", payload.event, project.name, f"{count} memor{'y' if count == 1 else 'ies'}")
        return clients.output(read.client, payload.event, context)

    def capture(self, call: dict[str, Any]) -> None:
        """Keep what one call gives; the session's notes and pending fix live in ``state``."""
        read = self._read(call)
        if read is None:
            return
        payload, project = read.payload, read.project
        session = state.load_session(self.home, payload.session_id)
        notes: list[Note] = []
        if payload.event == "user-prompt-submit":
            notes = capture.prompt_notes(payload.prompt)
        elif payload.event in ("post-tool-use", "post-tool-use-failure"):
            note = capture.tool_note(payload, project, session, self.excluded)
            notes = [note] if note else []
        elif payload.event in ("stop", "session-end", "pre-compact"):
            self._summarise(read, session)
        for note in notes:
            self._store(read, note)
            session.add_note(note.content)
        state.save_session(self.home, payload.session_id, session)

    def _read(self, call: dict[str, Any]) -> _Call | None:
        """The call's payload and project; None for a call of unknown shape or in a disabled folder."""
        event, name, data = call.get("event"), call.get("client"), call.get("payload")
        if event not in EVENTS or name not in clients.CLIENTS or not isinstance(data, dict):
            log.warning("mnemo hook: a call of unknown shape (client %r, event %r), ignored", name, event)
            return None
        payload = clients.CLIENTS[name].read(event, data)
        cwd = Path(payload.cwd or ".").expanduser().resolve()
        project = Project.of(cwd)
        if switch.is_disabled(self.home, project.root, cwd):
            return None
        return _Call(name, payload, project)

    def _store(self, call: _Call, note: Note) -> str:
        payload, project = call.payload, call.project
        result = self.service.store(
            note.content,
            context=Context(session_id=payload.session_id or None),
            category=note.category,
            subject=inject.GLOBAL_SUBJECT if note.everywhere else project.key,
            tags=(f"project:{project.name}", *note.tags),
            importance=note.importance,
            metadata={"source": call.client, "hook": payload.event},
            on_duplicate="return",
            actor=ACTOR,
        )
        action = "repeated" if result.existing else "captured"
        state.record(self.home, action, payload.event, project.name, note.content, result.memory.id)
        return result.memory.id

    def _summarise(self, call: _Call, session: state.Session) -> None:
        """Keep one summary memory per session, rewritten when the session has new notes, and by the
        chat model at its end when that is allowed (``llm_summary``)."""
        payload, project = call.payload, call.project
        by_model = payload.event in MODEL_SUMMARY_EVENTS and self.summary_writer.enabled
        fresh = session.size > session.summarised
        if not fresh and not (by_model and session.model_summarised < session.size):
            return
        text = capture.summary(project, session)
        if text is None:
            return
        if (
            by_model
            and session.model_summarised < session.size
            and (written := self.summary_writer.write(project.name, text))
        ):
            text, session.model_summarised = written, session.size
        elif not fresh:
            return  # the model did not write it (budget, failure): the summary stored stands
        if session.summary_id is not None:
            try:
                self.service.update(session.summary_id, content=text, reason="the session went on", actor=ACTOR)
                state.record(self.home, "summarised", payload.event, project.name, text, session.summary_id)
                session.summarised = session.size
                return
            except NotFound:  # the summary was forgotten meanwhile: write a new one
                pass
        note = Note(text, "event", ("session-summary",), 0.5)
        session.summary_id = self._store(call, note)
        session.summarised = session.size
