"""The maintenance pass on a real store: what it purges, what it forgets, what it leaves alone."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from mnemo.clock import ManualClock
from mnemo.engine.service import MemoryService
from mnemo.lifecycle.maintenance import Maintained, maintain
from mnemo.model import Status


def test_memories_expired_past_the_grace_are_forgotten_and_forgotten_ones_past_recovery_purged(
    service: MemoryService, clock: ManualClock, caplog: pytest.LogCaptureFixture
):
    soon = clock.now() + timedelta(days=1)
    lapsing = service.store("The parking permit runs out", expires_at=soon).memory
    at_path = service.add_at("permits/parking", "Parking permit, kept at its path", expires_at=soon)
    lasting = service.store("The house was built in 1931").memory
    dropped = service.store("An old note to drop").memory
    service.forget(dropped.id, retention_period_days=3)

    clock.advance(days=5)  # expired 4 days ago: within the grace of 7
    assert maintain(service, timedelta(days=7)) == Maintained(
        purged=1, expired_forgotten=0
    )  # the dropped note's recovery ended: purged
    assert service.storage.get(dropped.id) is None
    assert service.get(lapsing.id).status is Status.ACTIVE

    clock.advance(days=5)
    with caplog.at_level(logging.INFO, logger="mnemo.lifecycle.maintenance"):
        assert maintain(service, timedelta(days=7)) == Maintained(purged=0, expired_forgotten=1)
    forgotten = service.get(lapsing.id)
    assert (forgotten.status, forgotten.forget_reason) == (Status.FORGOTTEN, "expired")
    assert service.get(at_path.id).status is Status.ACTIVE  # spec 002 keeps it for prune_memories
    assert service.get(lasting.id).status is Status.ACTIVE
    assert "forgot 1 expired" in caplog.text
    assert maintain(service, timedelta(days=7)) == Maintained(purged=0, expired_forgotten=0)  # nothing left to do
