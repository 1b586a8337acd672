"""The server backend: a store is one schema of a PostgreSQL database (see postgres_schema).

Concurrency policy: a pool of connections (psycopg_pool), each used by one thread at a time, in
autocommit mode: a write is one explicit transaction (READ COMMITTED), a read of one statement
runs on its own. What SQLite gets
from ``BEGIN IMMEDIATE`` is asked for where it matters: a save updates only the version it was
computed from (a concurrent save waits on the row, then finds another version: ``Conflict``);
entry numbers come from one row of ``settings`` updated in the inserting transaction (its row lock
orders the writers of every process); a check for the same content takes an advisory lock on
that content first. ``lock_timeout`` is the busy timeout: a writer kept waiting past it, or a
caller left without a connection for the pool timeout (the busy timeout unless set), gets
``Locked``. Each connection's ``statement_timeout`` bounds one statement: past it PostgreSQL cancels
the statement (its transaction rolls back) and the caller gets ``TimedOut``, retryable. Maintenance
that legitimately runs longer opts out (``_unbounded``: reindex's deletions, ANALYZE); the schema's
migrations run on a connection of their own, outside the pool, without it.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector
from psycopg import errors
from psycopg import sql as pgsql
from psycopg.pq import TransactionStatus

from mnemo.errors import InvalidInput, StorageError, Unavailable
from mnemo.model import Change, Memory
from mnemo.query import Filters, StoredText, TextHit
from mnemo.storage import (
    EventPattern,
    StoredVector,
    StoreFile,
    Totals,
    access_tally,
    postgres_ledgers,
    postgres_stats,
    postgres_text,
    postgres_vectors,
    sql,
)
from mnemo.storage.postgres_connections import Failures, dialect, milliseconds, planned_each_time
from mnemo.storage.postgres_schema import (
    ENTRY_COUNTER,
    EXPECTED_TABLES,
    MIGRATIONS,
    WORDS_CONFIG,
    instance_id,
    migrate,
    schema_name,
    unfix_dimension,
)
from mnemo.storage.sql_store import SQLStore

RANKED_MATCHES = 500  # matches of a search's common words that are ranked, the newest (as in sqlite.py)

Read = TypeVar("Read", bound=Callable[..., Any])


def _search_read(method: Read) -> Read:
    """A read of a search's: it shows no access counts, so it need not wait for the last recall's to
    be written (access_tally)."""

    @functools.wraps(method)
    def read(self: PostgresStorage, *args: Any, **kwargs: Any) -> Any:
        with self._access.searching():
            return method(self, *args, **kwargs)

    return read  # type: ignore[return-value]


class PostgresStorage(SQLStore):
    """A store kept in schema ``mnemo_<name>`` of the database at ``url``."""

    _unique_violation = errors.UniqueViolation
    _bucket_expr = postgres_stats.BUCKET_EXPR
    _jobs: ClassVar[Any] = postgres_ledgers
    _requests: ClassVar[Any] = postgres_ledgers

    def __init__(
        self,
        url: str,
        name: str = "default",
        pool_size: int = 5,
        busy_timeout_s: float = 30.0,
        statement_timeout_s: float = 60.0,
        pool_timeout_s: float | None = None,
        index_home: Path | None = None,
    ) -> None:
        """``index_home``: the folder under which this process keeps its snapshot of the store's
        vectors (``index_folder``); None: every vector in memory."""
        self.name = name
        self.schema = schema_name(name)
        self._url = url
        pool_timeout_s = busy_timeout_s if pool_timeout_s is None else pool_timeout_s
        self._failures = Failures(name, url, busy_timeout_s, pool_timeout_s, statement_timeout_s)
        self._words = postgres_text.WordStats(self._read)
        self._index_home = index_home
        self._local = threading.local()  # batch()'s connection, by thread
        self._access = access_tally.AccessTally(self._write_access, settle_timeout_s=busy_timeout_s)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(busy_timeout_s))) as db:
                started = time.monotonic()
                self._migrated(migrate(db, self.schema), time.monotonic() - started)
                self._dialect = dialect(db.info.server_version)
                self._instance_id = instance_id(db, self.schema)
        except ValueError as newer:
            raise StorageError(
                f"store {name!r} has schema version {newer}, newer than this mnemo understands ({len(MIGRATIONS)})",
                store=name,
            ) from newer
        except psycopg.OperationalError as exc:
            raise Unavailable(f"store {name!r}: cannot reach its PostgreSQL database: {exc}", store=name,
                              retry_after=Unavailable.RETRY_AFTER_S) from exc  # fmt: skip
        except psycopg.Error as exc:
            raise StorageError(f"store {name!r}: cannot open its PostgreSQL database: {exc}", store=name) from exc
        self._pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=pool_timeout_s,
            name=f"mnemo-{name}",
            open=True,
        )

    def _configure(self, db: psycopg.Connection) -> None:
        db.execute(pgsql.SQL("SET search_path TO {}, public").format(pgsql.Identifier(self.schema)))
        db.execute("SET TIME ZONE 'UTC'")
        db.execute(f"SET lock_timeout = {milliseconds(self._failures.busy_timeout_s)}")
        db.execute(f"SET statement_timeout = {milliseconds(self._failures.statement_timeout_s)}")
        register_vector(db)

    # -- connections and transactions -----------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[None]:
        """This thread's writes in the block as one transaction on one connection, each a savepoint in
        it (a write that fails undoes only itself); its reads see them."""
        if self._batch_connection() is not None:
            yield
            return
        with self._tx() as db:
            self._local.db, self._local.unfed = db, []
            try:
                yield
            finally:
                self._local.db, self._local.unfed = None, []
            if db.info.transaction_status is TransactionStatus.INERROR:
                # A statement failed outside any write's savepoint (a read), and PostgreSQL then
                # refuses the rest of the transaction: its COMMIT would quietly roll back.
                raise StorageError(f"store {self.name!r}: a statement of the batch failed; none of it was kept")

    def batching(self) -> bool:
        return self._batch_connection() is not None

    def _batch_connection(self) -> psycopg.Connection | None:
        return getattr(self._local, "db", None)

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        """One transaction on a pooled connection: committed if the block ends, rolled back if it raises
        (in batch(), a savepoint of its transaction)."""
        batched = self._batch_connection()
        if batched is not None:
            with self._failures.translated(), batched.transaction():
                yield batched
            return
        with self._access.held(), self._failures.translated(), self._pool.connection() as db, db.transaction():
            yield db

    def applied_migrations(self) -> list[str]:
        with self._read() as db:
            return [name for (name,) in db.execute("SELECT name FROM migrations ORDER BY applied_at, name")]

    def close(self) -> None:
        self._words.close()
        self._access.close()
        self._pool.close()

    @contextmanager
    def _read(self) -> Iterator[psycopg.Connection]:
        """A pooled connection in autocommit: each statement reads what is committed when it runs
        (no BEGIN and COMMIT round trips; a read of several statements that must agree uses ``_tx``);
        in batch(), its connection, which sees the batch's writes."""
        batched = self._batch_connection()
        if batched is not None:
            with self._failures.translated(), planned_each_time(batched):
                yield batched
            return
        with self._access.held(), self._failures.translated(), self._pool.connection() as db, planned_each_time(db):
            yield db

    def _write(self) -> AbstractContextManager[psycopg.Connection]:
        return self._tx()

    @contextmanager
    def _unbounded(self) -> Iterator[psycopg.Connection]:
        """A transaction whose statements run without the statement timeout: maintenance an operator
        or a bulk write asked for, which a large store makes longer than any call (deleting every
        vector for a reindex, ANALYZE). In batch(), for the rest of the batch's transaction."""
        with self._tx() as db:
            db.execute("SET LOCAL statement_timeout = 0")
            yield db

    # -- single memories (the rest in SQLStore) ---------------------------------------------
    def _same_contents(self, db: psycopg.Connection, new: Sequence[tuple[Memory, datetime]]) -> list[str | None]:
        # READ COMMITTED would let two inserts of the same content both find none: the second waits
        # on a lock named by the content until the first commits, then finds it. The locks are taken
        # in one order (sorted), so two processes importing the same contents cannot deadlock.
        def same(memory: Memory) -> tuple[str, str | None, str | None]:
            return memory.signature, memory.context.user_id, memory.subject_key

        keys = sorted({"\x1f".join(map(str, (self.schema, *same(memory)))) for memory, _ in new})
        db.execute("SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest(%s::text[]) AS k", (keys,))
        held: dict[tuple[str, str | None, str | None], list[tuple[str, datetime | None]]] = {}
        for memory_id, signature, user_id, subject, expires_at in db.execute(
            "SELECT id, signature, user_id, subject_key, expires_at FROM memories WHERE signature = ANY(%s)"
            " AND status IN ('active', 'archived') ORDER BY created_at",
            ([memory.signature for memory, _ in new],),
        ):
            held.setdefault((signature, user_id, subject), []).append((str(memory_id), expires_at))
        return [next((found for found, until in held.get(same(memory), []) if until is None or until > at), None)
                for memory, at in new]  # fmt: skip

    def _next_entry_number(self, db: psycopg.Connection) -> int:
        """One row of settings, updated in the inserting transaction: its lock orders every process's writers."""
        (number,) = db.execute(
            "UPDATE settings SET value = (value::bigint + 1)::text WHERE key = %s RETURNING value::bigint",
            (ENTRY_COUNTER,),
        ).fetchone() or (0,)
        return int(number)

    def _next_change_number(self, db: psycopg.Connection) -> int:
        """The writing transaction's id (64 bits: never reused), so writers never wait on a counter."""
        (number,) = db.execute("SELECT pg_current_xact_id()::text::bigint").fetchone() or (0,)
        return int(number)

    def change_horizon(self) -> tuple[str, int]:
        """Transactions commit out of the order of their ids, but every one below the oldest still
        running has ended: a write that commits later is numbered at or above that. The numbers are
        the cluster's, so the numbering is named by the cluster's system identifier: a store restored
        into another cluster, whose ids may be lower, numbers anew."""
        ((cluster, oldest),) = self._rows(
            "SELECT system_identifier::text, pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
            " FROM pg_control_system()"
        )
        return f"postgresql {cluster}", int(oldest)

    def purge(self, memory_ids: Sequence[str], changes: Sequence[Change]) -> None:
        """Remove memories for good: rows (their tags and vectors with them), links, backups, old content.

        PostgreSQL keeps deleted rows' bytes until (auto)vacuum reuses their space.
        """
        ids = list(memory_ids)
        with self._tx() as db:
            db.execute("DELETE FROM memories WHERE id = ANY(%s)", (ids,))
            db.execute("DELETE FROM backups WHERE memory_id = ANY(%s)", (ids,))
            db.execute("DELETE FROM links WHERE source_id = ANY(%s) OR target_id = ANY(%s)", (ids, ids))
            # History keeps who did what and when, but no longer what the memory said.
            db.execute("UPDATE versions SET previous = NULL WHERE memory_id = ANY(%s)", (ids,))
            for change in changes:
                self._write_change(db, change, None)

    # -- paths (spec 002) ------------------------------------------------------------------
    def path_level(self, prefix: str, filters: Filters) -> tuple[list[Memory], dict[str, int]]:
        """The memories whose path is ``prefix`` + one segment, by path; and each next segment that
        has memories further down, with how many (paths compared and sorted byte-wise, as SQLite does)."""
        where, params = sql.where(filters, self._dialect)
        start = len(prefix) + 1
        memories = self._memories(
            f"{sql.SELECT} WHERE starts_with(m.path, %s) AND strpos(substr(m.path, %s), '/') = 0 AND {where}"
            ' ORDER BY m.path COLLATE "C"',
            [prefix, start, *params],
        )
        with self._tx() as db:
            groups = db.execute(
                "SELECT substr(rest, 1, strpos(rest, '/') - 1) AS segment, COUNT(*) FROM"
                f" (SELECT substr(m.path, %s) AS rest FROM memories m WHERE starts_with(m.path, %s) AND {where}) AS r"
                " WHERE strpos(rest, '/') > 0 GROUP BY segment",
                [start, prefix, *params],
            ).fetchall()
        return memories, {segment: int(n) for segment, n in sorted(groups)}  # by code point, as SQLite sorts

    # -- access counts (access_tally) --------------------------------------------------
    def record_recall(self, memory_ids: Sequence[str], at: datetime) -> None:
        if self.batching():  # the batch's own transaction writes them, with the rest of it
            super().record_recall(memory_ids, at)
        elif memory_ids:
            self._access.add(memory_ids, at)

    def _write_access(self, counts: access_tally.Counts, recalls: access_tally.Recalls) -> None:
        """Tallied recalls' counts, in one transaction of their own (never a read's: see access_tally)."""
        with self._failures.translated(), self._pool.connection() as db, db.transaction():
            postgres_stats.write_access(db, counts, recalls)

    # -- finding -----------------------------------------------------------------------
    # The reads a recall makes before it ranks (_search_read) go on while the last one's access
    # counts are written; SQLStore's among them are marked here.
    subjects_among = _search_read(SQLStore.subjects_among)
    following_in_session = _search_read(SQLStore.following_in_session)
    read_setting = _search_read(SQLStore.read_setting)

    @_search_read
    def search_text(self, terms: Sequence[str], filters: Filters, limit: int) -> list[TextHit]:
        """The best ``limit`` word matches that pass the filters, best first (see postgres_text)."""
        if not terms:
            return []
        where, params = sql.where(filters, self._dialect)
        with self._read() as db:
            cap, scope = max(RANKED_MATCHES, 3 * limit), postgres_text.scope_of(filters)
            return postgres_text.search(db, self._words, terms, where, params, limit, cap, scope)

    # -- vectors -----------------------------------------------------------------------
    def reset_vectors(self, model: str) -> None:
        """Forget every vector and record which model the next ones come from."""
        with self._unbounded() as db:
            db.execute("DELETE FROM vectors")
            unfix_dimension(db)
            self._put_setting(db, "vector_model", model)

    def put_vectors(self, vectors: Sequence[tuple[str, bytes]]) -> None:
        with self._tx() as db:
            written = postgres_vectors.put(db, vectors)
        if self._batch_connection() is not None:
            self._local.unfed.extend(written)

    def unfed_vectors(self) -> list[StoredVector]:
        """The vectors this thread's open batch wrote: the feed gives them to no reader before it
        commits, but the batch's own searches must find them (a near-duplicate of a memory stored
        earlier in an import's batch)."""
        return list(getattr(self._local, "unfed", ())) if self._batch_connection() is not None else []

    @_search_read
    def vectors_after(self, seq: int, limit: int) -> list[StoredVector]:
        """Vectors by their place in the feed, which is their transactions' commit order (postgres_vectors)."""
        with self._read() as db:
            return postgres_vectors.after(db, seq, limit)

    @_search_read
    def last_vector_seq(self) -> int:
        with self._read() as db:
            return postgres_vectors.last_seq(db)

    def vectors_of(self, memory_ids: Sequence[str]) -> dict[str, bytes]:
        with self._read() as db:
            return postgres_vectors.of(db, memory_ids)

    def index_folder(self) -> Path | None:
        """Where this server's snapshot of the store's vectors is kept (see vector_layers): a folder
        of its own under ``index_home`` for this store, which a copy of the database keeps; None
        without ``index_home`` (every vector in memory)."""
        return None if self._index_home is None else self._index_home / f"{self.schema}-{self._instance_id}"

    def refresh_statistics(self) -> None:
        """ANALYZE the tables a bulk write grows. Until autovacuum comes by (a minute or more later)
        the planner sees the store as it was: just after 10,000 memories were loaded into a new store,
        a list by importance sorted all of them (6.5 ms) instead of walking its index (1.1 ms), and a
        word search's choice between fetching its matches and walking the store reads the same
        statistics (``postgres_text``). ~0.2 s at 10,000 memories: ANALYZE reads a sample."""
        with self._unbounded() as db:
            db.execute("ANALYZE memories, vectors, vector_feed, memory_tags")

    @_search_read
    def keys_passing(self, keys: Sequence[int], filters: Filters) -> dict[int, str]:
        return dict(self._passing(keys, filters, "m.rowid, m.id"))

    @_search_read
    def texts_passing(self, keys: Sequence[int], filters: Filters) -> dict[int, StoredText]:
        return sql.stored_texts(self._passing(keys, filters, sql.STORED_TEXT_COLUMNS))

    def _passing(self, keys: Sequence[int], filters: Filters, columns: str) -> list[Any]:
        """Which of these memory keys pass the filters, with these columns of theirs (memories as m)."""
        if not keys:
            return []
        where, params = sql.where(filters, self._dialect)
        with self._read() as db:
            query = f"SELECT {columns} FROM memories m WHERE m.rowid = ANY(%s) AND {where}"
            return list(db.execute(query, [list(keys), *params]))

    @_search_read
    def keys_matching(self, filters: Filters) -> list[int]:
        # As one array, in binary: a user's ~10,000 keys of 1,000,000 memories took 4.5 ms a row
        # each as text, 2.8 ms so.
        where, params = sql.where(filters, self._dialect)
        with self._read() as db, db.cursor(binary=True) as rows:
            (keys,) = rows.execute(f"SELECT array_agg(m.rowid) FROM memories m WHERE {where}", params).fetchone()  # type: ignore[misc]
        return list(keys or ())

    @_search_read
    def keys_holding(self, keys: Sequence[int], terms: Sequence[str]) -> set[int]:
        """Which of these memories hold any of the terms in their words, as the word search matches them."""
        if not keys or not terms:
            return set()
        with self._read() as db:
            lexemes = self._words.lexemes(db, terms)
            if not lexemes:  # stop words alone
                return set()
            rows = db.execute(
                "SELECT rowid FROM memories WHERE rowid = ANY(%s) AND words @@ %s::tsquery",
                (list(keys), postgres_text.tsquery_any(lexemes)),
            )
            return {key for (key,) in rows}

    @_search_read
    def keys_mentioning(self, keys: Sequence[int], subject: str) -> set[int]:
        """Which of these memories are about the subject, or name it in their content or tags."""
        if not keys:
            return set()
        with self._read() as db:
            rows = db.execute(
                "SELECT rowid FROM memories WHERE rowid = ANY(%s)"
                f" AND (subject_key = %s OR words @@ phraseto_tsquery('{WORDS_CONFIG}', %s))",
                (list(keys), subject, subject),
            )
            return {key for (key,) in rows}

    def vector_bytes(self, filters: Filters | None = None) -> int:
        """Bytes of the vectors (4 a dimension, as SQLite holds them) of the memories the filters keep."""
        where, params = sql.where(filters, self._dialect) if filters is not None else ("1 = 1", [])
        return int(
            self._one(
                "SELECT COALESCE(SUM(4 * public.vector_dims(v.embedding)), 0) FROM vectors v"
                f" JOIN memories m ON m.rowid = v.memory_rowid WHERE {where}",
                params,
            )
        )

    # -- archive tiers and store settings ------------------------------------------------
    def packed_bytes(self) -> int:
        return int(self._one("SELECT COALESCE(SUM(octet_length(content_packed)), 0) FROM memories"))

    # -- statistics (SQL in postgres_stats) ------------------------------------------------
    def totals(self, filters: Filters) -> Totals:
        with self._read() as db:
            return postgres_stats.totals(db, *sql.where(filters, self._dialect))

    def event_pattern(self, kind: str, start: datetime, end: datetime) -> EventPattern:
        with self._read() as db:
            return postgres_stats.event_pattern(db, kind, start, end)

    def size_bytes(self) -> int:
        """Bytes the store's schema takes in the database: its tables with their indexes and TOAST."""
        return int(
            self._one(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                [self.schema],
            )
        )

    # -- health ------------------------------------------------------------------------
    def store_file(self) -> StoreFile:
        return StoreFile(f"schema {self.schema}", True, self.size_bytes())

    def check_write_lock(self, timeout_s: float) -> None:
        """``Locked`` if no connection comes free, or the settings row stays locked, within the timeout."""
        limits = self._failures
        wait_ms = int(min(timeout_s, limits.busy_timeout_s) * 1000)
        with (
            limits.translated(),
            self._pool.connection(timeout=min(timeout_s, limits.pool_timeout_s)) as db,
            db.transaction(),
        ):
            db.execute(f"SET LOCAL lock_timeout = {wait_ms}")
            db.execute("SELECT 1 FROM settings WHERE key = %s FOR UPDATE", (ENTRY_COUNTER,))

    def check_integrity(self) -> list[str]:
        """What the store's schema lacks: a table."""
        with self._read() as db:
            tables = {name for (name,) in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                                     (self.schema,))}  # fmt: skip
        return [f"table {table} is missing" for table in sorted(EXPECTED_TABLES - tables)]

    def back_up(self, reason: str, min_interval_s: float = 0.0) -> str | None:
        """None: PostgreSQL stores are backed up by the database's own tools, not at each start."""
        if min_interval_s > 0:
            return None
        raise InvalidInput(
            f"store {self.name!r} is in PostgreSQL: back it up with pg_dump (e.g. `pg_dump -n {self.schema} DBNAME`)"
        )

    def __repr__(self) -> str:
        return f"PostgresStorage({self.name!r}, schema {self.schema!r})"
