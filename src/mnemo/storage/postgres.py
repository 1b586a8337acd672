"""The server backend: a store is one schema of a PostgreSQL database (see postgres_schema).

Concurrency policy: a pool of connections (psycopg_pool), each used by one thread at a time, in
autocommit mode with an explicit transaction per operation (READ COMMITTED). What SQLite gets
from ``BEGIN IMMEDIATE`` is asked for where it matters: a save updates only the version it was
computed from (a concurrent save waits on the row, then finds another version: ``Conflict``);
entry numbers come from one row of ``settings`` updated in the inserting transaction (its row lock
orders the writers of every process); a check for the same content takes an advisory lock on
that content first. ``lock_timeout`` is the busy timeout: a writer kept waiting past it, or a
caller left without a connection that long, gets ``Locked``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector
from psycopg import errors
from psycopg import sql as pgsql

from mnemo.bounds import as_utc
from mnemo.errors import Conflict, Duplicate, InvalidInput, Locked, MnemoError, StorageError
from mnemo.model import Backup, Change, Memory, to_iso
from mnemo.query import Filters, Position, RankFields, Sort, TextHit
from mnemo.storage import (
    EventPattern,
    Granularity,
    GroupKey,
    IdempotentCall,
    Job,
    StoredVector,
    StoreFile,
    Totals,
    postgres_ledgers,
    postgres_stats,
    postgres_text,
    postgres_vectors,
    sql,
)
from mnemo.storage.postgres_schema import (
    ENTRY_COUNTER,
    EXPECTED_TABLES,
    HNSW_INDEX,
    MIGRATIONS,
    WORDS_CONFIG,
    migrate,
    schema_name,
    unfix_dimension,
)

RANKED_MATCHES = 500  # matches of a search's common words that are ranked, the newest (as in sqlite.py)
_TIME_COLUMNS = {"created_at", "updated_at", "accessed_at"}


def is_url(location: str) -> bool:
    return bool(re.match(r"postgres(ql)?://", location))


def _dialect(server_version: int) -> sql.Dialect:
    # Spec 003's case-insensitive search folds like Python's str.casefold: PostgreSQL 18's casefold()
    # under the builtin Unicode collation does ("Straße" holds "STRASSE"); before 18, lower().
    fold = "casefold" if server_version >= 180000 else "lower"
    collate = " COLLATE pg_unicode_fast" if server_version >= 180000 else ""

    def contains(text: str, folded: bool) -> str:
        if folded:
            return f"strpos({fold}(normalize({text}, NFKC){collate}), %s) > 0"
        return f"strpos({text}, %s) > 0"

    return sql.Dialect("%s", as_utc, as_utc, contains)


class PostgresStorage:
    """A store kept in schema ``mnemo_<name>`` of the database at ``url``."""

    def __init__(self, url: str, name: str = "default", pool_size: int = 4, busy_timeout_s: float = 30.0) -> None:
        self.name = name
        self.schema = schema_name(name)
        self._busy_timeout_s = busy_timeout_s
        self._words = postgres_text.WordStats()
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(busy_timeout_s))) as db:
                self.applied = migrate(db, self.schema)
                self._dialect = _dialect(db.info.server_version)
        except ValueError as newer:
            raise StorageError(
                f"store {name!r} has schema version {newer}, newer than this mnemo understands ({len(MIGRATIONS)})",
                store=name,
            ) from newer
        except psycopg.Error as exc:
            raise StorageError(f"store {name!r}: cannot open its PostgreSQL database: {exc}", store=name) from exc
        self._pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=busy_timeout_s,
            name=f"mnemo-{name}",
            open=True,
        )

    def _configure(self, db: psycopg.Connection) -> None:
        db.execute(pgsql.SQL("SET search_path TO {}, public").format(pgsql.Identifier(self.schema)))
        db.execute("SET TIME ZONE 'UTC'")
        db.execute(f"SET lock_timeout = {int(self._busy_timeout_s * 1000)}")
        register_vector(db)

    # -- connections and transactions -----------------------------------------------
    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Map the driver's errors onto mnemo's, by class (SQLSTATE), never by message text."""
        try:
            yield
        except MnemoError:
            raise
        except (psycopg_pool.PoolTimeout, errors.LockNotAvailable, errors.QueryCanceled) as exc:
            raise Locked(f"store {self.name!r} stayed busy for {self._busy_timeout_s:g}s") from exc
        except psycopg.Error as exc:
            raise StorageError(f"store {self.name!r} failed: {exc}", store=self.name) from exc

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        """One transaction on a pooled connection: committed if the block ends, rolled back if it raises."""
        with self._translated(), self._pool.connection() as db, db.transaction():
            yield db

    def applied_migrations(self) -> list[str]:
        with self._tx() as db:
            return [name for (name,) in db.execute("SELECT name FROM migrations ORDER BY applied_at, name")]

    def close(self) -> None:
        self._pool.close()

    # -- single memories ---------------------------------------------------------------
    def insert(
        self,
        memory: Memory,
        change: Change,
        link_to: Sequence[str] = (),
        unique_content: bool = False,
        numbered: bool = False,
    ) -> Memory:
        """Add a memory; returns it as stored (``numbered``: with the store's next entry number)."""
        with self._tx() as db:
            if unique_content:
                key = "\x1f".join(map(str, (self.schema, memory.signature, memory.context.user_id, memory.subject_key)))
                db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
                row = db.execute(
                    "SELECT id FROM memories WHERE signature = %s AND user_id IS NOT DISTINCT FROM %s"
                    " AND subject_key IS NOT DISTINCT FROM %s AND status IN ('active', 'archived')"
                    " AND (expires_at IS NULL OR expires_at > %s) ORDER BY created_at LIMIT 1",
                    (memory.signature, memory.context.user_id, memory.subject_key, change.at),
                ).fetchone()
                if row is not None:
                    raise Duplicate(f"the same content is already stored as memory {row[0]}", existing_id=row[0])
            if numbered:
                counted = db.execute(
                    "UPDATE settings SET value = (value::bigint + 1)::text WHERE key = %s RETURNING value::bigint",
                    (ENTRY_COUNTER,),
                ).fetchone()
                assert counted is not None
                memory = memory.evolve(entry_number=int(counted[0]))
            marks = ", ".join(["%s"] * len(sql.COLUMN_NAMES))
            try:
                inserted = db.execute(
                    f"INSERT INTO memories ({sql.COLUMNS}) VALUES ({marks}) RETURNING rowid",
                    sql.row_values(memory, self._dialect),
                ).fetchone()
            except errors.UniqueViolation as exc:
                raise Conflict(f"memory {memory.id} or its path already exists", memory_id=memory.id) from exc
            assert inserted is not None
            self._write_tags(db, inserted[0], memory.all_tags)
            with db.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO links VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    [(memory.id, target, change.at) for target in link_to],
                )
            self._write_change(db, change, memory)
        return memory

    @staticmethod
    def _write_tags(db: psycopg.Connection, rowid: int, tags: Sequence[str]) -> None:
        db.execute("DELETE FROM memory_tags WHERE memory_rowid = %s", (rowid,))
        with db.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory_tags VALUES (%s, %s) ON CONFLICT DO NOTHING", [(t, rowid) for t in tags]
            )

    @staticmethod
    def _write_change(db: psycopg.Connection, change: Change, memory: Memory | None) -> None:
        db.execute(
            "INSERT INTO versions VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            sql.change_values(change, memory, as_utc),
        )

    def get(self, memory_id: str) -> Memory | None:
        found = self.get_many([memory_id])
        return found[0] if found else None

    def subject_spelling(self, key: str) -> str | None:
        """How the subject with this key was first written, so one subject keeps one name."""
        with self._tx() as db:
            row = db.execute(
                "SELECT subject FROM memories WHERE subject_key = %s ORDER BY created_at, rowid LIMIT 1", (key,)
            ).fetchone()
        return None if row is None else row[0]

    def rank_fields(self, keys: Sequence[int]) -> dict[int, RankFields]:
        if not keys:
            return {}
        with self._tx() as db:
            rows = db.execute(
                "SELECT rowid, updated_at, importance, access_count FROM memories WHERE rowid = ANY(%s)", (list(keys),)
            ).fetchall()
        return {key: RankFields(as_utc(updated), importance, count) for key, updated, importance, count in rows}

    def _memories(self, query: str, params: Sequence[Any]) -> list[Memory]:
        with self._tx() as db:
            rows = db.execute(query, params).fetchall()  # type: ignore[arg-type]  # built from constants
        return [sql.memory(row, self.name, self._dialect) for row in rows]

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        if not memory_ids:
            return []
        by_id = {m.id: m for m in self._memories(f"{sql.SELECT} WHERE m.id = ANY(%s)", [list(memory_ids)])}
        return [by_id[i] for i in memory_ids if i in by_id]

    def save(self, changes: Sequence[tuple[Memory, Change]], backups: Sequence[Backup] = ()) -> None:
        assignments = ", ".join(f"{c} = %s" for c in sql.COLUMN_NAMES[1:])
        with self._tx() as db:
            for memory, change in changes:
                try:
                    row = db.execute(
                        f"UPDATE memories SET {assignments} WHERE id = %s AND version = %s RETURNING rowid",
                        (*sql.row_values(memory, self._dialect)[1:], memory.id, memory.version - 1),
                    ).fetchone()
                except errors.UniqueViolation as exc:  # the only unique column a save can change is path
                    raise Conflict(f"path {memory.path!r} is already taken", path=memory.path) from exc
                if row is None:
                    raise Conflict(
                        f"memory {memory.id} changed since it was read (expected version {memory.version - 1})",
                        memory_id=memory.id,
                    )
                self._write_tags(db, row[0], memory.all_tags)
                self._write_change(db, change, memory)
            with db.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO backups VALUES (%s, %s, %s, %s, %s)",
                    [(b.id, b.memory.id, b.created_at, b.keep_until, sql.snapshot(b.memory)) for b in backups],
                )

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

    def purge_due(self, now: datetime) -> int:
        """Hard-delete soft-deleted memories whose retention has ended; drop lapsed backups."""
        with self._tx() as db:
            due = [
                mid
                for (mid,) in db.execute(
                    "SELECT id FROM memories WHERE status = 'forgotten' AND recoverable_until <= %s", (now,)
                )
            ]
            db.execute("DELETE FROM backups WHERE keep_until <= %s", (now,))
        if due:
            self.purge(due, [])
        return len(due)

    def add_links(self, source_id: str, target_ids: Sequence[str], at: datetime) -> None:
        with self._tx() as db, db.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO links (source_id, target_id, created_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                [(source_id, target, at) for target in target_ids],
            )

    def linked_ids(self, memory_id: str) -> list[str]:
        with self._tx() as db:
            rows = db.execute(
                "SELECT target_id FROM links WHERE source_id = %s"
                " UNION SELECT source_id FROM links WHERE target_id = %s",
                (memory_id, memory_id),
            ).fetchall()
        return [r[0] for r in rows]

    def link_counts(self, memory_ids: Sequence[str]) -> dict[str, int]:
        if not memory_ids:
            return {}
        ids = list(memory_ids)
        with self._tx() as db:
            rows = db.execute(
                "SELECT id, COUNT(*) FROM (SELECT source_id AS id FROM links WHERE source_id = ANY(%s)"
                " UNION ALL SELECT target_id FROM links WHERE target_id = ANY(%s)) AS l GROUP BY id",
                (ids, ids),
            ).fetchall()
        return {memory_id: int(n) for memory_id, n in rows}

    def history(self, memory_id: str) -> list[Change]:
        with self._tx() as db:
            rows = db.execute(
                "SELECT id, memory_id, version, action, actor, changed_at, reason, previous FROM versions"
                " WHERE memory_id = %s ORDER BY version, changed_at",
                (memory_id,),
            ).fetchall()
        return [sql.change(row, self.name, as_utc) for row in rows]

    def backup(self, backup_id: str) -> Backup | None:
        with self._tx() as db:
            row = db.execute(
                "SELECT id, created_at, keep_until, snapshot FROM backups WHERE id = %s", (backup_id,)
            ).fetchone()
        if row is None:
            return None
        return Backup(row[0], sql.from_snapshot(row[3], self.name), as_utc(row[1]), as_utc(row[2]))

    # -- paths (spec 002) ------------------------------------------------------------------
    def get_by_path(self, path: str) -> Memory | None:
        found = self._memories(f"{sql.SELECT} WHERE m.path = %s", [path])
        return found[0] if found else None

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

    def expired_with_path(self, now: datetime) -> list[Memory]:
        """Memories with a path, not forgotten, whose expiry has passed."""
        return self._memories(
            f"{sql.SELECT} WHERE m.status IN ('active', 'archived', 'outdated') AND m.expires_at <= %s"
            ' AND m.path IS NOT NULL ORDER BY m.path COLLATE "C"',
            [now],
        )

    # -- finding -----------------------------------------------------------------------
    def search_text(self, terms: Sequence[str], filters: Filters, limit: int) -> list[TextHit]:
        """The best ``limit`` word matches that pass the filters, best first (see postgres_text)."""
        if not terms:
            return []
        where, params = sql.where(filters, self._dialect)
        with self._tx() as db:
            found = postgres_text.search(db, self._words, terms, where, params, limit, max(RANKED_MATCHES, 3 * limit))
        return [TextHit(memory_id, key, score) for memory_id, key, score in found]

    def select(
        self, filters: Filters, sort: Sort, limit: int | None, offset: int = 0, after: Position | None = None
    ) -> list[tuple[Memory, Position]]:
        column = sql.SORT_COLUMNS[sort.field]
        direction = "DESC" if sort.descending else "ASC"
        where, params = sql.where(filters, self._dialect)
        if after is not None:
            where += f" AND (m.{column}, m.rowid) {'<' if sort.descending else '>'} (%s, %s)"
            params += [after.value, after.key]
        with self._tx() as db:
            rows = db.execute(
                f"{sql.SELECT} WHERE {where} ORDER BY m.{column} {direction}, m.rowid {direction} LIMIT %s OFFSET %s",
                [*params, limit, offset],
            ).fetchall()
        index = 1 + sql.COLUMN_NAMES.index(column)
        return [
            (
                sql.memory(row, self.name, self._dialect),
                Position(to_iso(row[index]) if column in _TIME_COLUMNS else row[index], row[0]),
            )
            for row in rows
        ]

    def count(self, filters: Filters) -> int:
        where, params = sql.where(filters, self._dialect)
        return int(self._one(f"SELECT COUNT(*) FROM memories m WHERE {where}", params))

    def _one(self, query: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the one row a query gives."""
        with self._tx() as db:
            row = db.execute(query, params).fetchone()  # type: ignore[arg-type]  # built from constants
        assert row is not None
        return row[0]

    def max_access_count(self) -> int:
        return int(self._one("SELECT COALESCE(MAX(access_count), 0) FROM memories WHERE status = 'active'"))

    def record_recall(self, memory_ids: Sequence[str], at: datetime) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE memories SET access_count = access_count + 1, accessed_at = %s WHERE id = ANY(%s)",
                (at, list(memory_ids)),
            )
            db.execute("INSERT INTO events (kind, at, count) VALUES ('recall', %s, %s)", (at, len(memory_ids)))

    # -- vectors -----------------------------------------------------------------------
    def vector_model(self) -> str | None:
        return self.read_setting("vector_model")

    def reset_vectors(self, model: str) -> None:
        """Forget every vector and record which model the next ones come from."""
        with self._tx() as db:
            db.execute("DELETE FROM vectors")
            unfix_dimension(db)
            self._put_setting(db, "vector_model", model)

    def drop_vectors(self, memory_ids: Sequence[str]) -> None:
        with self._tx() as db:
            db.execute(
                "DELETE FROM vectors WHERE memory_rowid IN (SELECT rowid FROM memories WHERE id = ANY(%s))",
                (list(memory_ids),),
            )

    def put_vectors(self, vectors: Sequence[tuple[str, bytes]]) -> None:
        with self._tx() as db:
            postgres_vectors.put(db, vectors)

    def vectors_after(self, seq: int, limit: int) -> list[StoredVector]:
        """Vectors by seq; not for tailing (see postgres_vectors): searches go to ``vector_search``."""
        with self._tx() as db:
            return postgres_vectors.after(db, seq, limit)

    def last_vector_seq(self) -> int:
        return int(self._one("SELECT COALESCE(MAX(seq), 0) FROM vectors"))

    def vector_search(self) -> postgres_vectors.PostgresVectorSearch:
        return postgres_vectors.PostgresVectorSearch(self._tx)

    def unembedded(self, limit: int) -> list[Memory]:
        """Active and archived memories that have no vector yet (stored while embedding failed)."""
        return self._memories(
            f"{sql.SELECT} WHERE m.status IN ('active', 'archived')"
            " AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.memory_rowid = m.rowid) LIMIT %s",
            [limit],
        )

    def keys_passing(self, keys: Sequence[int], filters: Filters) -> dict[int, str]:
        if not keys:
            return {}
        where, params = sql.where(filters, self._dialect)
        with self._tx() as db:
            rows = db.execute(
                f"SELECT m.rowid, m.id FROM memories m WHERE m.rowid = ANY(%s) AND {where}", [list(keys), *params]
            ).fetchall()
        return dict(rows)

    def keys_matching(self, filters: Filters) -> list[int]:
        where, params = sql.where(filters, self._dialect)
        with self._tx() as db:
            return [key for (key,) in db.execute(f"SELECT m.rowid FROM memories m WHERE {where}", params)]

    def subjects_among(self, keys: Sequence[str]) -> set[str]:
        """Which of these subject keys some memory of the store has (an index lookup each)."""
        if not keys:
            return set()
        with self._tx() as db:
            rows = db.execute("SELECT DISTINCT subject_key FROM memories WHERE subject_key = ANY(%s)", (list(keys),))
            return {key for (key,) in rows}

    def keys_mentioning(self, keys: Sequence[int], subject: str) -> set[int]:
        """Which of these memories are about the subject, or name it in their content or tags."""
        if not keys:
            return set()
        with self._tx() as db:
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
    def read_setting(self, key: str) -> str | None:
        with self._tx() as db:
            row = db.execute("SELECT value FROM settings WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def _put_setting(db: psycopg.Connection, key: str, value: str) -> None:
        db.execute(
            "INSERT INTO settings VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value)
        )

    def write_setting(self, key: str, value: str) -> None:
        with self._tx() as db:
            self._put_setting(db, key, value)

    def packed_bytes(self) -> int:
        return int(self._one("SELECT COALESCE(SUM(octet_length(content_packed)), 0) FROM memories"))

    def archive_files_in_use(self) -> set[str]:
        with self._tx() as db:
            rows = db.execute("SELECT DISTINCT archive_file FROM memories WHERE archive_file IS NOT NULL")
            return {row[0] for row in rows}

    # -- request ledgers and jobs ----------------------------------------------------------
    def count_request(self, principal: str, bucket: str, window: int) -> int:
        with self._tx() as db:
            return postgres_ledgers.count_request(db, principal, bucket, window)

    def begin_idempotent(
        self, principal: str, key: str, request_sha256: str, at: datetime, forget_before: datetime
    ) -> IdempotentCall | None:
        with self._tx() as db:
            return postgres_ledgers.begin_idempotent(db, principal, key, request_sha256, at, forget_before)

    def end_idempotent(self, principal: str, key: str, answer: str | None) -> None:
        with self._tx() as db:
            postgres_ledgers.end_idempotent(db, principal, key, answer)

    def put_job(self, job: Job) -> None:
        with self._tx() as db:
            postgres_ledgers.put_job(db, job)

    def get_job(self, job_id: str) -> Job | None:
        with self._tx() as db:
            return postgres_ledgers.get_job(db, job_id)

    def recent_jobs(self, limit: int) -> list[Job]:
        with self._tx() as db:
            return postgres_ledgers.recent_jobs(db, limit)

    def running_jobs(self) -> list[Job]:
        with self._tx() as db:
            return postgres_ledgers.running_jobs(db)

    # -- statistics (SQL in postgres_stats) ------------------------------------------------
    def totals(self, filters: Filters) -> Totals:
        with self._tx() as db:
            return postgres_stats.totals(db, *sql.where(filters, self._dialect))

    def group_count(self, filters: Filters, key: GroupKey) -> dict[str, int]:
        with self._tx() as db:
            return postgres_stats.group_count(db, *sql.where(filters, self._dialect), key)

    def tag_counts(self, filters: Filters, limit: int | None = None) -> list[tuple[str, int]]:
        with self._tx() as db:
            return postgres_stats.tag_counts(db, *sql.where(filters, self._dialect), limit)

    def duplicate_count(self, filters: Filters) -> int:
        with self._tx() as db:
            return postgres_stats.duplicate_count(db, *sql.where(filters, self._dialect))

    def created_histogram(self, filters: Filters, granularity: Granularity) -> list[tuple[str, int]]:
        with self._tx() as db:
            return postgres_stats.created_histogram(db, *sql.where(filters, self._dialect), granularity)

    def event_pattern(self, kind: str, start: datetime, end: datetime) -> EventPattern:
        with self._tx() as db:
            return postgres_stats.event_pattern(db, kind, start, end)

    def change_counts(self, start: datetime, end: datetime, memory_filters: Filters) -> dict[str, int]:
        with self._tx() as db:
            return postgres_stats.change_counts(db, start, end, memory_filters)

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
        wait_ms = int(min(timeout_s, self._busy_timeout_s) * 1000)
        with (
            self._translated(),
            self._pool.connection(timeout=min(timeout_s, self._busy_timeout_s)) as db,
            db.transaction(),
        ):
            db.execute(f"SET LOCAL lock_timeout = {wait_ms}")
            db.execute("SELECT 1 FROM settings WHERE key = %s FOR UPDATE", (ENTRY_COUNTER,))

    def check_integrity(self) -> list[str]:
        """What the store's schema lacks: a table, or the vectors' HNSW index once they have a dimension."""
        with self._tx() as db:
            tables = {name for (name,) in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                                     (self.schema,))}  # fmt: skip
            indexes = {name for (name,) in db.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s",
                                                      (self.schema,))}  # fmt: skip
            sized = db.execute("SELECT 1 FROM settings WHERE key = 'vector_dimension'").fetchone() is not None
        found = [f"table {table} is missing" for table in sorted(EXPECTED_TABLES - tables)]
        if sized and HNSW_INDEX not in indexes:
            found.append(f"index {HNSW_INDEX} is missing")
        return found

    def back_up(self, reason: str, min_interval_s: float = 0.0) -> str | None:
        """None: PostgreSQL stores are backed up by the database's own tools, not at each start."""
        if min_interval_s > 0:
            return None
        raise InvalidInput(
            f"store {self.name!r} is in PostgreSQL: back it up with pg_dump (e.g. `pg_dump -n {self.schema} DBNAME`)"
        )

    def __repr__(self) -> str:
        return f"PostgresStorage({self.name!r}, schema {self.schema!r})"
