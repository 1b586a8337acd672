"""Idempotency keys in the request ledger: a running call holds its key by a lease that its server
renews while it runs; a retry takes over the key of a call whose server died once the lease runs out,
unless that call was applied: a call's writes mark its key applied in their own transaction."""

from __future__ import annotations

import threading
import time

import pytest

from mnemo.access.request_ledger import LEASE_RENEWAL_S, RateLimits, RequestLedger, retry_after
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.engine.service import MemoryService
from mnemo.errors import AnswerLost, CallInProgress, LeaseLost
from mnemo.lifecycle.sync import run_sync
from mnemo.query import Filters

STORE = ("store_memory", {"content": "Invoice 91 was paid on Monday"})


def _server(service: MemoryService, renew_every_s: float = LEASE_RENEWAL_S) -> RequestLedger:
    """The ledger of one server of the store."""
    return RequestLedger(service.storage, service.clock, RateLimits(enabled=False), renew_every_s)


def _refusal(ledger: RequestLedger) -> CallInProgress:
    with pytest.raises(CallInProgress) as refused:
        ledger.begin("alice", "k", *STORE)
    return refused.value


def _stored(service: MemoryService) -> int:
    return service.storage.count(Filters(now=service.clock.now(), statuses=None, include_expired=True))


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


@pytest.mark.every_backend
def test_a_call_applied_before_its_server_died_is_not_run_again(service: MemoryService, clock: ManualClock):
    killed, retry = _server(service, renew_every_s=3600), _server(service)
    assert killed.begin("alice", "k", *STORE) is None
    with killed.applying("alice", "k"):
        stored = service.store("Invoice 91 was paid on Monday").memory
    # the server dies here: after the write's commit, before keeping its answer
    clock.advance(seconds=16)  # its lease ran out
    with pytest.raises(AnswerLost) as lost:
        retry.begin("alice", "k", *STORE)
    assert lost.value.details["memory_id"] == stored.id and lost.value.code == "IDEMPOTENT_ANSWER_LOST"
    assert _stored(service) == 1


@pytest.mark.every_backend
def test_a_call_that_failed_after_writing_is_refused_at_once_and_one_that_wrote_nothing_runs_again(
    service: MemoryService,
):
    ledger = _server(service)
    assert ledger.begin("alice", "wrote", *STORE) is None
    with ledger.applying("alice", "wrote"):
        service.store("Invoice 91 was paid on Monday")
    ledger.end("alice", "wrote", None)  # an error, or the connection dropped, after the write
    with pytest.raises(AnswerLost):
        ledger.begin("alice", "wrote", *STORE)
    assert ledger.begin("alice", "idle", *STORE) is None
    ledger.end("alice", "idle", None)  # it failed before writing anything
    assert ledger.begin("alice", "idle", *STORE) is None
    ledger.end("alice", "idle", None)  # and ends: no lease left to renew once the store is closed


@pytest.mark.every_backend
def test_a_write_whose_server_lost_its_key_to_a_retry_writes_nothing(service: MemoryService, clock: ManualClock):
    stalled, retry = _server(service, renew_every_s=3600), _server(service)
    assert stalled.begin("alice", "k", *STORE) is None
    clock.advance(seconds=16)  # the server stalled past its lease (a long pause, a partition)
    assert retry.begin("alice", "k", *STORE) is None  # a retry took the key over and runs the call
    with stalled.applying("alice", "k"), pytest.raises(LeaseLost, match="another call took it over"):
        service.store("Invoice 91 was paid on Monday")
    assert _stored(service) == 0
    with retry.applying("alice", "k"):
        service.store("Invoice 91 was paid on Monday")
    retry.end("alice", "k", '{"memory_id": "m1"}')
    assert _stored(service) == 1


def test_a_sync_under_a_key_writes_the_other_store_unmarked_in_the_foreground_and_in_the_background(
    service: MemoryService, settings: Settings, clock: ManualClock
):
    """Only the store that keeps the key is marked, and only by the call itself: a sync's writes to
    another store, and a background sync's writes after the call answered, go through."""
    cloud = open_service(settings, "cloud", create=True, clock=clock)
    try:
        service.store("The offsite is in Porto")
        ledger = _server(service)
        assert ledger.begin("alice", "now", "sync_memories", {}) is None
        with ledger.applying("alice", "now"):
            assert run_sync(service, sync_type="full").completed_at is not None
        ledger.end("alice", "now", "{}")
        cloud.store("The offsite moved to Faro")
        assert ledger.begin("alice", "later", "sync_memories", {"background": True}) is None
        with ledger.applying("alice", "later"):  # from the other store into the key's own
            started = run_sync(service, "cloud", "local", background=True, sync_type="full")
        ledger.end("alice", "later", "{}")
        deadline = time.monotonic() + 30  # a sync's job is recorded in its source store
        while (job := cloud.storage.get_job(started.sync_id)) is None or job.status == "running":
            assert time.monotonic() < deadline, "the background sync never ended"
            time.sleep(0.05)
        assert job.status == "succeeded", job.error
        assert _stored(cloud) == _stored(service) == 2
    finally:
        cloud.close()
