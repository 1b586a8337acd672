"""What the lifecycle operations are configured with (from ``mnemo.config.Settings``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Price keys: holding content per GB-month in the live database ("active") or a tier, and
# restoring per GB. All zero by default: a local disk costs nothing extra per tier.
PRICE_KEYS = ("active", "cold", "glacier", "deep_archive", "restore")


@dataclass(frozen=True, slots=True)
class SynthesisEndpoint:
    """An OpenAI-compatible chat completions API (Ollama, vLLM, llama.cpp server, OpenAI)."""

    url: str  # base URL, e.g. http://127.0.0.1:11434/v1
    model: str
    api_key: str | None = None
    timeout_s: float = 60.0


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    folder: Path | None = None  # the store's folder: deep archive files go to its archive/deep/
    archive_quota_bytes: int | None = None  # archived content (compressed) the store may hold
    prices: dict[str, float] = field(default_factory=dict)  # PRICE_KEYS → USD; missing keys are 0
    synthesis: SynthesisEndpoint | None = None
    locations: Callable[[str], Any] | None = None  # opens another store by name (a MemoryService), for sync

    def price(self, key: str) -> float:
        return self.prices.get(key, 0.0)
