"""The domain operations of mnemo in one object, ``MemoryService``; their rules live in ``mnemo.engine``.

The service receives its storage and clock; it never imports a driver or a transport, so the
same operations serve every MCP profile, the CLI and Python programs.
"""

from __future__ import annotations

from mnemo.engine.bulk import BulkOperations
from mnemo.engine.lists import ListOperations
from mnemo.engine.paths import PathOperations
from mnemo.engine.recall import RecallOperations


class MemoryService(BulkOperations, PathOperations, ListOperations, RecallOperations):
    """Every engine operation over one store: each family is a module of ``mnemo.engine``.

    ``BulkOperations`` (store many) and ``PathOperations`` build on ``MemoryOperations`` (store,
    update, forget), which builds on ``EmbeddingOperations``; all share ``ServiceBase``, which takes
    the storage, clock and embedder.
    """
