"""Bring back a forgotten memory while it is still recoverable (``mnemo restore ID``).

A soft delete keeps the memory (status forgotten) until its ``recoverable_until``; after that the
maintenance pass purges it for good. Recovering makes it active again as it was when it was
forgotten, as a new version whose history says so. Its path, given up when it was forgotten,
comes back if no other memory has taken it since.
"""

from __future__ import annotations

from mnemo.engine.service import MemoryService
from mnemo.errors import AlreadyActive, NotFound
from mnemo.model import Memory, Status


def recover(service: MemoryService, memory_id: str, actor: str | None = None) -> Memory:
    memory = service.get(memory_id)
    if memory.status is not Status.FORGOTTEN:
        raise AlreadyActive(f"memory {memory_id} is {memory.status.value}, not forgotten", memory_id=memory_id)
    now = service.clock.now()
    if memory.recoverable_until is not None and memory.recoverable_until <= now:
        raise NotFound(f"memory {memory_id} was forgotten and is past its recovery time", memory_id=memory_id)
    before = next((c.previous for c in reversed(service.history(memory_id)) if c.action == "forget"), None)
    path = before.path if before is not None else None
    if path is not None and service.storage.get_by_path(path) is not None:
        path = None  # taken since: the memory comes back without it
    recovered = memory.evolve(
        status=Status.ACTIVE,
        forget_reason=None,
        forget_details=None,
        forgotten_at=None,
        recoverable_until=None,
        path=path,
        version=memory.version + 1,
        updated_at=now,
    )
    service.storage.save([(recovered, service.change(recovered, "recover", actor, "recovered", previous=memory))])
    return recovered
