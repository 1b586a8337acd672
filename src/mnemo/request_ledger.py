"""Rate limits and idempotency keys: rules about a caller's requests, kept in the store.

Counts and answers live in the store's database, not in one process, so every server of a store
(several behind a load balancer) applies the same limits and honours the same keys.

Rate limits are per user, per tool, per minute (a fixed window: the count starts again at each
whole minute, which ``reset`` names; ``MNEMO_RATE_WINDOW_S`` sets another length). Spec 004's
table gives the defaults for its tools; any other tool, and every request that is not a tool
call, counts against ``*``. ``MNEMO_RATE_LIMITS`` changes them: ``store_memory=50,*=1000``, or
``off``.

An idempotency key names one write: the first call under a key runs and its answer is kept for
``IDEMPOTENCY_TTL``; the same key with the same request gets that answer again without running
anything; with another request it is refused (``KeyReused``); while the first is still running,
a retry is refused as ``CallInProgress`` rather than run twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from mnemo.clock import Clock
from mnemo.errors import CallInProgress, InvalidInput, KeyReused, RateLimited
from mnemo.storage import Storage

SPEC_004_LIMITS = {  # requests per minute, spec 004's "Rate Limits"
    "store_memory": 100,
    "recall_memories": 1000,
    "update_memory": 200,
    "forget_memory": 50,
    "consolidate_memories": 10,
    "list_memories": 500,
    "get_memory_stats": 100,
    "sync_memories": 10,
    "archive_memory": 20,
    "restore_memory": 20,
}
OTHER_REQUESTS = "*"
DEFAULT_LIMIT = 600  # any other tool or request, per minute
IDEMPOTENCY_TTL = timedelta(hours=24)
MAX_KEY_CHARS = 255


@dataclass(frozen=True, slots=True)
class RateLimits:
    per_bucket: dict[str, int] = field(default_factory=lambda: {**SPEC_004_LIMITS, OTHER_REQUESTS: DEFAULT_LIMIT})
    enabled: bool = True
    window_s: int = 60

    @classmethod
    def parse(cls, text: str, window_s: int = 60) -> RateLimits:
        """``""`` (the defaults), ``off``, or ``name=N,...`` over the defaults (``*`` for every other)."""
        if text.strip().lower() == "off":
            return cls(enabled=False)
        limits = cls().per_bucket
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, _, number = item.partition("=")
            if not number.strip().isdigit() or int(number) < 1:
                raise InvalidInput(f"MNEMO_RATE_LIMITS: {item!r} is not name=N with N ≥ 1", field="rate_limits")
            limits[name.strip()] = int(number)
        return cls(limits, window_s=window_s)

    def limit(self, bucket: str) -> int:
        return self.per_bucket.get(bucket, self.per_bucket[OTHER_REQUESTS])


@dataclass(frozen=True, slots=True)
class RateState:
    limit: int
    remaining: int
    reset: int  # unix time (s) when the window ends

    @property
    def headers(self) -> dict[str, str]:
        return {"X-RateLimit-Limit": str(self.limit), "X-RateLimit-Remaining": str(self.remaining),
                "X-RateLimit-Reset": str(self.reset)}  # fmt: skip


def request_digest(tool: str, arguments: Any) -> str:
    """The same request, whatever the order or spacing of its JSON."""
    canonical = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class RequestLedger:
    def __init__(self, storage: Storage, clock: Clock, limits: RateLimits) -> None:
        self.storage = storage
        self.clock = clock
        self.limits = limits

    def count(self, principal: str, bucket: str) -> RateState | None:
        """Count one request; RateLimited (its state in ``details``) past the limit; None when off."""
        if not self.limits.enabled:
            return None
        length = self.limits.window_s
        window = int(self.clock.now().timestamp()) // length
        made = self.storage.count_request(principal, bucket, window)
        limit = self.limits.limit(bucket)
        state = RateState(limit, max(0, limit - made), (window + 1) * length)
        if made > limit:
            raise RateLimited(
                f"rate limit of {limit} {bucket if bucket != OTHER_REQUESTS else 'request'} calls per {length} s "
                f"reached; retry after {state.reset}",
                limit=limit, remaining=0, reset=state.reset,
            )  # fmt: skip
        return state

    def begin(self, principal: str, key: str, tool: str, arguments: Any) -> str | None:
        """The kept answer of an earlier call under this key; None: run this one (then ``end`` it)."""
        if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
            raise InvalidInput(f"X-Idempotency-Key must be 1-{MAX_KEY_CHARS} printable characters", field="key")
        now = self.clock.now()
        earlier = self.storage.begin_idempotent(principal, key, request_digest(tool, arguments), now,
                                                now - IDEMPOTENCY_TTL)  # fmt: skip
        if earlier is None:
            return None
        if earlier.request_sha256 != request_digest(tool, arguments):
            raise KeyReused(f"idempotency key {key!r} was used for another request", key=key)
        if earlier.answer is None:
            raise CallInProgress(f"the call with idempotency key {key!r} has not answered yet; retry", key=key)
        return earlier.answer

    def end(self, principal: str, key: str, answer: str | None) -> None:
        self.storage.end_idempotent(principal, key, answer)
