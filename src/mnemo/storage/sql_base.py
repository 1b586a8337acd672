"""What every SQL backend gives the shared SQL (``SQLStore``, ``SQLStatistics``): its transactions
and its dialect; and the few helpers that run a query in one.

``_read`` and ``_write`` yield a DB-API connection inside a transaction, its errors mapped onto
mnemo's. Queries mark parameters with ``?``; ``_q`` turns them into the backend's marks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from mnemo.model import Memory
from mnemo.storage import sql


class SQLBase(ABC):
    name: str
    _dialect: sql.Dialect

    @abstractmethod
    def _read(self) -> AbstractContextManager[Any]: ...

    @abstractmethod
    def _write(self) -> AbstractContextManager[Any]: ...

    def _q(self, query: str) -> str:
        return query if self._dialect.mark == "?" else query.replace("?", self._dialect.mark)

    def _marks(self, n: int) -> str:
        return self._dialect.marks(n)

    @staticmethod
    def _many(db: Any, query: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            db.cursor().executemany(query, rows)

    def _memories(self, query: str, params: Sequence[Any] = ()) -> list[Memory]:
        with self._read() as db:
            rows = db.execute(self._q(query), list(params)).fetchall()
        return [sql.memory(row, self.name, self._dialect) for row in rows]

    def _one(self, query: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the one row a query gives."""
        with self._read() as db:
            return db.execute(self._q(query), list(params)).fetchone()[0]

    def _rows(self, query: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._read() as db:
            return list(db.execute(self._q(query), list(params)).fetchall())
