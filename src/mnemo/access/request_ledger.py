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
a retry is refused as ``CallInProgress`` rather than run twice. A running call holds its key by a
lease that its server renews while it runs: a server that died (SIGKILL, a lost machine) stops
renewing, and once the lease runs out a retry takes the key over and runs the call (one retry: the
store takes the key over in one statement). A call that gave no answer (an error, a dropped
connection), or one whose answer says to retry later (the store out of reach or busy), frees its
key at once.

Exactly once, whenever a server dies: a call's writes mark its key applied in their own transaction
(``applying``), and a write whose server no longer holds the key fails and writes nothing. A call
that was applied but whose answer was never kept (its server died between the commit and keeping
it, or the connection dropped) is not run again: a retry is refused as ``AnswerLost``, naming the
first memory the call changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from mnemo import errors
from mnemo.access.rules import unscoped
from mnemo.clock import Clock
from mnemo.errors import AnswerLost, CallInProgress, InvalidInput, KeyReused, MnemoError, RateLimited, Unavailable
from mnemo.model import new_id
from mnemo.storage import LEASED_CALL, LeasedCall, Storage

log = logging.getLogger("mnemo.request_ledger")  # the name its log lines carry, kept when the module moved

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
IDEMPOTENCY_LEASE = timedelta(seconds=15)  # a running call's hold on its key, unless its server renews it
LEASE_RENEWAL_S = 5.0  # how often a server renews the leases of the calls it runs
END_RETRY_S = 60.0  # how long a call's answer waits to be kept while the store is out of reach
END_RETRY_PAUSE_S = 1.0
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


@dataclass(slots=True)
class RunningCall:
    """A call running under an idempotency key, as its transport learns how it ended."""

    retry_later: bool = False  # it failed for now (the store out of reach or busy): keep no answer


_RUNNING: ContextVar[RunningCall | None] = ContextVar("mnemo_running_call", default=None)


def failed_for_now(error: MnemoError) -> None:
    """Note that the call running under a key (if one is) failed as a retry may not: the store out
    of reach (``Unavailable``) or busy (``Locked``). Its answer says "retry", so it is not kept to be
    replayed to that retry; the key is freed (or, were the call applied, told so)."""
    running = _RUNNING.get()
    if running is not None and isinstance(error, Unavailable | errors.Locked):
        running.retry_later = True


def retry_after(refused: MnemoError) -> dict[str, str]:
    """The ``Retry-After`` header of a refusal that says when to retry (a call in progress), or none."""
    return {"Retry-After": str(refused.details["retry_after"])} if "retry_after" in refused.details else {}


def request_digest(tool: str, arguments: Any) -> str:
    """The same request, whatever the order or spacing of its JSON."""
    canonical = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class RequestLedger:
    def __init__(
        self, storage: Storage, clock: Clock, limits: RateLimits, renew_every_s: float = LEASE_RENEWAL_S
    ) -> None:
        self.storage = storage
        self.clock = clock
        self.limits = limits
        self.renew_every_s = renew_every_s
        self.holder = new_id()  # this server's name on the keys of the calls it runs
        self._running: set[tuple[str, str]] = set()  # (principal, key) of those calls
        self._lock = threading.Lock()
        self._renewing = False

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
        now, digest = self.clock.now(), request_digest(tool, arguments)
        earlier = self.storage.begin_idempotent(principal, key, digest, self.holder, now, now + IDEMPOTENCY_LEASE,
                                                now - IDEMPOTENCY_TTL)  # fmt: skip
        if earlier is None:
            self._hold(principal, key)
            return None
        if earlier.request_sha256 != digest:
            raise KeyReused(f"idempotency key {key!r} was used for another request", key=key)
        if earlier.answer is None and earlier.applied_to is not None and (earlier.lease_until or now) <= now:
            raise AnswerLost(f"the call with idempotency key {key!r} was applied (it changed memory"
                             f" {earlier.applied_to}) but its server stopped before answering; it is not run"
                             " again", key=key, memory_id=earlier.applied_to)  # fmt: skip
        if earlier.answer is None:
            wait = max(1, math.ceil(((earlier.lease_until or now) - now).total_seconds()))
            raise CallInProgress(f"the call with idempotency key {key!r} has not answered yet; retry in {wait} s",
                                 key=key, retry_after=wait)  # fmt: skip
        return earlier.answer

    @contextmanager
    def applying(self, principal: str, key: str) -> Iterator[RunningCall]:
        """Run the call that ``begin`` let through in this block: its writes mark its key applied, and
        what it yields says whether its answer is one to keep."""
        running = RunningCall()
        leased = LEASED_CALL.set(LeasedCall(principal, key, self.holder, unscoped(self.storage)))
        noted = _RUNNING.set(running)
        try:
            yield running
        finally:
            _RUNNING.reset(noted)
            LEASED_CALL.reset(leased)

    def end(self, principal: str, key: str, answer: str | None) -> None:
        """Keep the call's answer (None: free its key). While the store cannot take it (its database
        restarting) this keeps trying, and renewing the call's lease, for up to END_RETRY_S: the call
        has run, so a retry must find its answer rather than run it again."""
        give_up = time.monotonic() + END_RETRY_S
        try:
            while True:
                try:
                    self.storage.end_idempotent(principal, key, self.holder, answer)
                    return
                except Unavailable as down:
                    if time.monotonic() > give_up:
                        raise
                    log.warning("keeping the answer under idempotency key %r: %s", key, down.message)
                    time.sleep(END_RETRY_PAUSE_S)
        finally:
            with self._lock:
                self._running.discard((principal, key))

    def _hold(self, principal: str, key: str) -> None:
        with self._lock:
            self._running.add((principal, key))
            if not self._renewing:
                self._renewing = True
                threading.Thread(target=self._renew, name="mnemo-idempotency-leases", daemon=True).start()

    def _renew(self) -> None:
        """While this server runs calls under idempotency keys, renew their leases (then stop)."""
        while True:
            time.sleep(self.renew_every_s)
            with self._lock:
                running = sorted(self._running)
                self._renewing = bool(running)
            if not running:
                return
            try:
                self.storage.renew_idempotent(self.holder, running, self.clock.now() + IDEMPOTENCY_LEASE)
            except MnemoError as error:  # the store out of reach: try again at the next turn
                log.warning("could not renew the leases of %d idempotent calls: %s", len(running), error.message)
