"""Idempotency keys in the request ledger: a running call holds its key by a lease that its server
renews while it runs; a retry takes over the key of a call whose server died once the lease runs out."""

from __future__ import annotations

import threading
import time

import pytest

from mnemo.access.request_ledger import LEASE_RENEWAL_S, RateLimits, RequestLedger, retry_after
from mnemo.clock import ManualClock
from mnemo.engine.service import MemoryService
from mnemo.errors import CallInProgress

STORE = ("store_memory", {"content": "Invoice 91 was paid on Monday"})


def _server(service: MemoryService, renew_every_s: float = LEASE_RENEWAL_S) -> RequestLedger:
    """The ledger of one server of the store."""
    return RequestLedger(service.storage, service.clock, RateLimits(enabled=False), renew_every_s)


def _refusal(ledger: RequestLedger) -> CallInProgress:
    with pytest.raises(CallInProgress) as refused:
        ledger.begin("alice", "k", *STORE)
    return refused.value


def _renewers() -> int:
    return sum(thread.name == "mnemo-idempotency-leases" for thread in threading.enumerate())


def test_a_call_whose_server_died_is_run_by_one_retry_once_its_lease_runs_out(
    service: MemoryService, clock: ManualClock
):
    killed, one, other = _server(service, renew_every_s=3600), _server(service), _server(service)
    assert killed.begin("alice", "k", *STORE) is None  # then the server is killed: no renewal, no end
    clock.advance(seconds=4)
    refused = _refusal(one)
    assert refused.details["retry_after"] == 11 and retry_after(refused) == {"Retry-After": "11"}
    clock.advance(seconds=11)  # the lease ran out
    assert one.begin("alice", "k", *STORE) is None  # this retry runs the call
    assert _refusal(other).details["retry_after"] == 15  # and no other one
    one.end("alice", "k", '{"memory_id": "m1"}')
    killed.end("alice", "k", None)  # the killed call, were it ever to end, changes nothing
    assert other.begin("alice", "k", *STORE) == '{"memory_id": "m1"}'


def test_a_running_call_renews_its_lease_so_no_retry_takes_it_over_and_stops_renewing_when_it_ends(
    service: MemoryService, clock: ManualClock
):
    before = _renewers()
    running, elsewhere = _server(service, renew_every_s=0.01), _server(service)
    assert running.begin("alice", "k", *STORE) is None
    for _ in range(3):  # 30 s, twice the lease
        clock.advance(seconds=10)
        deadline = time.monotonic() + 10
        while _refusal(elsewhere).details["retry_after"] != 15:  # 5 until the server renews the lease
            assert time.monotonic() < deadline, "the lease was not renewed"
            time.sleep(0.01)
    running.end("alice", "k", '{"memory_id": "m1"}')
    assert elsewhere.begin("alice", "k", *STORE) == '{"memory_id": "m1"}'
    deadline = time.monotonic() + 10
    while _renewers() > before:
        assert time.monotonic() < deadline, "the renewing thread outlived the call"
        time.sleep(0.01)
