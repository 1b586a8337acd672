"""The maintenance pass: what a store sheds on its own, at a server's start and then periodically.

- Forgotten memories past their ``recoverable_until`` are purged for good (their backups too).
- Memories expired more than ``grace`` ago are forgotten softly (reason "expired"), so they stay
  recoverable for the usual retention before the pass after that purges them. Memories at a
  path are left alone: spec 002 keeps an expired memory readable (``include_expired``) until its
  store is pruned.
Each pass logs what it removed; forgetting writes history records, so the statistics'
deletion_rate counts them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from mnemo.engine.service import MemoryService
from mnemo.model import ForgetReason, Status
from mnemo.query import Filters, Position, Sort

log = logging.getLogger(__name__)
PAGE = 500
DEFAULT_GRACE = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class Maintained:
    purged: int  # forgotten memories past their recovery time, deleted for good
    expired_forgotten: int  # expired memories forgotten softly


def maintain(service: MemoryService, grace: timedelta = DEFAULT_GRACE) -> Maintained:
    now = service.clock.now()
    purged = service.storage.purge_due(now)
    filters = Filters(
        now=now,
        statuses=(Status.ACTIVE, Status.ARCHIVED),
        include_expired=True,
        expired_before=now - grace,
        visible_to=None,
    )
    forgotten = 0
    after: Position | None = None
    while page := service.storage.select(filters, Sort(), PAGE, after=after):
        after = page[-1][1]
        due = [memory for memory, _ in page if memory.path is None]
        if due:
            details = f"expired more than {grace.days} days ago"
            service.forget_softly(due, ForgetReason.EXPIRED, details, actor="mnemo-maintenance")
            forgotten += len(due)
    if purged or forgotten:
        log.info(
            "maintenance of store %s: purged %d forgotten memories past their recovery time, forgot %d expired ones",
            service.storage.name,
            purged,
            forgotten,
        )
    return Maintained(purged, forgotten)
