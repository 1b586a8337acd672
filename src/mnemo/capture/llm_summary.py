"""Session summaries written by the user's chat model, when they allow it, within a daily token budget.

Off by default: the hooks spend no tokens. With ``MNEMO_HOOKS_SUMMARY_TOKENS_PER_DAY`` above 0 and a
chat API configured (``MNEMO_SYNTHESIS_URL`` and ``MNEMO_SYNTHESIS_MODEL``, consolidation's), the
summary a session keeps when it ends (SessionEnd, PreCompact; not at every Stop) is rewritten by
that model from the session's extractive summary — already redacted and bounded: the model never
sees a transcript or a tool's output.

The budget is never exceeded: before each call, its most possible cost (the prompt's characters /
2, more than any tokenizer makes of them, plus the answer's ``MAX_TOKENS``) is reserved in
``MNEMO_HOME/hooks/summary-tokens.json`` for the day (UTC), and the call is not made when the
reservation would pass the budget; after it, the reservation is corrected to the ``usage`` the API
reports. Any failure keeps the extractive summary.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime
from typing import Any

from mnemo.capture.redact import redact
from mnemo.capture.spool import hooks_dir, write_atomically
from mnemo.config import Settings
from mnemo.embed.http_json import api_url, post_json
from mnemo.errors import MnemoError, OperationFailed
from mnemo.lifecycle.synthesis import merged_text

log = logging.getLogger(__name__)

MAX_TOKENS = 200  # the answer's length at most
MAX_SUMMARY_CHARS = 900
SYSTEM_PROMPT = (
    "You write the memory a coding assistant keeps of one work session. From the session's notes, "
    "write at most three plain sentences: the decisions and rules the user stated, the problems fixed "
    "and how, and what changed where. Keep every name, command, path and number exactly; add nothing "
    "the notes do not say. Answer with the summary only."
)


class SummaryWriter:
    def __init__(self, settings: Settings) -> None:
        self.budget = settings.hooks_summary_tokens_per_day
        self.model = settings.synthesis_model
        self.api_key = settings.synthesis_api_key
        self.timeout_s = settings.synthesis_timeout_s
        self.url = api_url(settings.synthesis_url, "chat/completions") if settings.synthesis_url else None
        self.ledger = hooks_dir(settings.home) / "summary-tokens.json"
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.budget > 0 and self.url is not None and bool(self.model)

    def write(self, project: str, notes: str) -> str | None:
        """The model's summary of a session's extractive ``notes``; None when it is off, over budget
        or failed (the caller keeps ``notes``)."""
        if not self.enabled or self.url is None:
            return None
        prompt = f"Project {project}. The session's notes:\n{notes}"
        bound = (len(SYSTEM_PROMPT) + len(prompt)) // 2 + MAX_TOKENS
        if not self._reserve(bound):
            log.info("hooks: today's summary budget (%d tokens) is spent; the session keeps its notes", self.budget)
            return None
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
            "max_tokens": MAX_TOKENS,
            "temperature": 0,
        }
        try:
            answer = post_json(self.url, body, api_key=self.api_key, timeout_s=self.timeout_s, failure=_failed)
            text = merged_text(answer, self.url)
        except MnemoError as exc:
            log.warning("hooks: the chat model did not summarise the session (%s); it keeps its notes", exc)
            return None
        self._correct(bound, _used_tokens(answer))
        text = redact(" ".join(text.split()))
        return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1].rstrip() + "…"

    def spent_today(self) -> int:
        return self._days().get(_today(), 0)

    def _reserve(self, tokens: int) -> bool:
        with self._lock:
            days = self._days()
            if days.get(_today(), 0) + tokens > self.budget:
                return False
            self._save(days | {_today(): days.get(_today(), 0) + tokens})
            return True

    def _correct(self, reserved: int, used: int | None) -> None:
        if used is None:  # the API did not say: the reservation stands
            return
        with self._lock:
            days = self._days()
            self._save(days | {_today(): max(0, days.get(_today(), 0) - reserved + used)})

    def _days(self) -> dict[str, int]:
        try:
            days = json.loads(self.ledger.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {k: v for k, v in days.items() if isinstance(v, int)} if isinstance(days, dict) else {}

    def _save(self, days: dict[str, int]) -> None:
        kept = dict(sorted(days.items())[-30:])  # a month of days is enough to look back on
        write_atomically(self.ledger, json.dumps(kept, indent=1) + "\n")


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


def _used_tokens(answer: Any) -> int | None:
    usage = answer.get("usage") if isinstance(answer, dict) else None
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    return total if isinstance(total, int) and total >= 0 else None


def _failed(message: str, **details: Any) -> OperationFailed:
    return OperationFailed(f"session summary failed: {message}", **details)
