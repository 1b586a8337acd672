"""The configured limits of spec 003's shared space, a value the service carries for it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class SharedLimits:
    max_words: int = 200
    max_entries: int = 1_000
    folder: Path | None = None  # where backups/ and archive/ go: the store's folder
