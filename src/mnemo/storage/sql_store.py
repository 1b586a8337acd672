"""The Storage methods whose SQL is the same on every SQL backend, written once.

A backend subclasses ``SQLStore`` and supplies its transactions and ``Dialect`` (see
``sql_base``), the driver's unique-violation error, and the few hooks where the databases differ
(``_same_contents``, ``_next_entry_number``). Statistics are ``SQLStatistics``'. No driver is
imported here.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, ClassVar

from mnemo.errors import Conflict, Duplicate, LeaseLost
from mnemo.model import Backup, Change, Memory, to_iso
from mnemo.query import Filters, Follower, Position, RankFields, Sort, SortField, TextHit
from mnemo.storage import LEASED_CALL, IdempotentCall, Job, StoredVector, sql
from mnemo.storage.sql_stats import SQLStatistics

__all__ = ["SQLStore", "TextHit"]


log = logging.getLogger("mnemo.storage")


class SQLStore(SQLStatistics):
    _unique_violation: ClassVar[type[Exception]]  # the driver's error for a broken UNIQUE constraint
    # The SQL of jobs and of the request ledgers, over one connection: modules with put_job, get_job,
    # recent_jobs, running_jobs; count_request, begin_idempotent, renew_idempotent, end_idempotent.
    _jobs: ClassVar[Any]
    _requests: ClassVar[Any]

    def _migrated(self, ran: Sequence[str], seconds: float) -> None:
        """Say which migrations opening the store ran, and for how long: an upgrade may take minutes."""
        if ran and not ran[0].startswith("m001_"):  # a new store's schema is made, not upgraded
            log.info("store %r: schema upgraded (%s) in %.1f s", self.name, ", ".join(ran), seconds)

    @abstractmethod
    def _same_contents(self, db: Any, new: Sequence[tuple[Memory, datetime]]) -> list[str | None]:
        """For each new memory, the id of one held with the same content, user and subject, active
        or archived and unexpired at the time given; inside the insert's transaction, such that a
        concurrent insert of the same content waits for this one."""

    @abstractmethod
    def _next_entry_number(self, db: Any) -> int:
        """The store's next entry number (spec 003), counted inside the insert's transaction."""

    @abstractmethod
    def _next_change_number(self, db: Any) -> int:
        """The number of this transaction's writes of memories (see ``change_horizon``)."""

    @abstractmethod
    def change_horizon(self) -> tuple[str, int]: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def vectors_after(self, seq: int, limit: int) -> list[StoredVector]: ...

    @abstractmethod
    def put_vectors(self, vectors: Sequence[tuple[str, bytes]]) -> None: ...

    def unfed_vectors(self) -> list[StoredVector]:
        """Vectors written that ``vectors_after`` does not give yet but this thread's searches must
        find. SQLite: none, a batch's vectors are in the table by seq as they are written."""
        return []

    @abstractmethod
    def purge(self, memory_ids: Sequence[str], changes: Sequence[Change]) -> None: ...

    def vector_keys(self) -> list[int]:
        return [key for (key,) in self._rows("SELECT memory_rowid FROM vectors")]

    def last_vector_seq(self) -> int:
        return int(self._one("SELECT COALESCE(MAX(seq), 0) FROM vectors"))

    # -- single memories ---------------------------------------------------------------
    def insert(
        self,
        memory: Memory,
        change: Change,
        link_to: Sequence[str] = (),
        unique_content: bool = False,
        numbered: bool = False,
    ) -> Memory:
        """Add a memory; returns it as stored (``numbered``: with the store's next entry number,
        given in this transaction: unique across processes, never reused after deletes)."""
        with self._write() as db:
            if unique_content:
                (existing,) = self._same_contents(db, [(memory, change.at)])
                if existing is not None:
                    raise Duplicate(f"the same content is already stored as memory {existing}", existing_id=existing)
            if numbered:
                memory = memory.evolve(entry_number=self._next_entry_number(db))
            try:
                (rowid,) = db.execute(
                    self._insert_memory() + " RETURNING rowid",
                    (*sql.row_values(memory, self._dialect), self._next_change_number(db)),
                ).fetchone()
            except self._unique_violation as exc:
                raise Conflict(f"memory {memory.id} or its path already exists", memory_id=memory.id) from exc
            self._add_tags(db, rowid, memory.all_tags)
            at = self._dialect.time(change.at)
            self._many(db, self._q("INSERT INTO links VALUES (?, ?, ?) ON CONFLICT DO NOTHING"),
                       [(memory.id, target, at) for target in link_to])  # fmt: skip
            self._write_change(db, change, memory)
        return memory

    def insert_new(self, new: Sequence[tuple[Memory, Change]]) -> list[Memory | str]:
        """Add new memories and their history in one transaction, as ``insert`` with ``unique_content``
        would one after the other, but for the batch's own: each the memory stored, or the id of the
        memory with its content, user and subject held already. ``Conflict`` (an id or a path held)
        writes none of them."""
        with self._write() as db:
            held = self._same_contents(db, [(memory, change.at) for memory, change in new])
            fresh = [(memory, change) for (memory, change), found in zip(new, held, strict=True) if found is None]
            self._insert_rows(db, [memory for memory, _ in fresh])
            self._write_changes(db, [(change, memory) for memory, change in fresh])
        return [found or memory for (memory, _), found in zip(new, held, strict=True)]

    def insert_batch(self, memories: Sequence[Memory]) -> list[int]:
        """Add memories exactly as given, in one transaction and without history: a store's copy,
        a benchmark's fill. Their keys, in order. The engine's writes go through ``insert``."""
        with self._write() as db:
            return self._insert_rows(db, memories)

    def _insert_rows(self, db: Any, memories: Sequence[Memory]) -> list[int]:
        """The memories' rows and tags, in one statement each; their keys, in order."""
        if not memories:
            return []
        number = self._next_change_number(db)
        try:
            self._many(db, self._insert_memory(), [(*sql.row_values(m, self._dialect), number) for m in memories])
        except self._unique_violation as exc:
            raise Conflict(f"one of {len(memories)} memories, or its path, already exists") from exc
        ids = [memory.id for memory in memories]
        key_of = dict(db.execute(self._q(f"SELECT id, rowid FROM memories WHERE id IN ({self._marks(len(ids))})"),
                                 ids).fetchall())  # fmt: skip
        self._tag(db, [(tag, key_of[memory.id]) for memory in memories for tag in memory.all_tags])
        return [key_of[memory_id] for memory_id in ids]

    def _insert_memory(self) -> str:
        """The statement that adds one memory's row (``sql.row_values``, then its change number)."""
        return self._q(
            f"INSERT INTO memories ({sql.COLUMNS}, change_number) VALUES ({self._marks(len(sql.COLUMN_NAMES) + 1)})"
        )

    def _write_tags(self, db: Any, rowid: int, tags: Sequence[str]) -> None:
        """Replace a stored memory's tags."""
        db.execute(self._q("DELETE FROM memory_tags WHERE memory_rowid = ?"), (rowid,))
        self._add_tags(db, rowid, tags)

    def _add_tags(self, db: Any, rowid: int, tags: Sequence[str]) -> None:
        """Tag a memory (a new row has none to replace)."""
        self._tag(db, [(tag, rowid) for tag in tags])

    def _tag(self, db: Any, tagged: Sequence[tuple[str, int]]) -> None:
        """Add (tag, memory key) pairs, in one statement."""
        self._many(db, self._q("INSERT INTO memory_tags VALUES (?, ?) ON CONFLICT DO NOTHING"), tagged)

    def _write_change(self, db: Any, change: Change, memory: Memory | None) -> None:
        self._write_changes(db, [(change, memory)])

    def _write_changes(self, db: Any, changes: Sequence[tuple[Change, Memory | None]]) -> None:
        """Add these versions to the history, in one statement; and mark the idempotent call that
        makes them (if one does) applied, in the same transaction."""
        self._many(db, self._q(f"INSERT INTO versions VALUES ({self._marks(11)})"),
                   [sql.change_values(change, memory, self._dialect.time) for change, memory in changes])  # fmt: skip
        call = LEASED_CALL.get()
        if call is None or call.ledger is not self or not changes:
            return
        marked = db.execute(
            self._q("UPDATE idempotent_calls SET applied_to = COALESCE(applied_to, ?)"
                    " WHERE principal = ? AND key = ? AND holder = ? AND answer IS NULL"),
            (changes[0][0].memory_id, call.principal, call.key, call.holder),
        )  # fmt: skip
        if marked.rowcount == 0:  # another call took the key over: this one must not apply
            raise LeaseLost(f"this server's hold on idempotency key {call.key!r} ran out and another call took"
                            " it over; nothing was written here", key=call.key, retry_after=1)  # fmt: skip

    def get(self, memory_id: str) -> Memory | None:
        found = self.get_many([memory_id])
        return found[0] if found else None

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        if not memory_ids:
            return []
        by_id = {m.id: m for m in self._memories(f"{sql.SELECT} WHERE m.id IN ({self._marks(len(memory_ids))})",
                                                 memory_ids)}  # fmt: skip
        return [by_id[i] for i in memory_ids if i in by_id]

    def rank_fields(self, keys: Sequence[int]) -> dict[int, RankFields]:
        if not keys:
            return {}
        rows = self._rows(
            "SELECT rowid, updated_at, importance, access_count, created_at, user_id, subject_key FROM memories"
            f" WHERE rowid IN ({self._marks(len(keys))})",
            list(keys),
        )
        read = self._dialect.read_time
        return {
            key: RankFields(read(updated), importance, count, read(created), user, subject)
            for key, updated, importance, count, created, user, subject in rows
        }

    def subject_spelling(self, key: str) -> str | None:
        """How the subject with this key was first written, so one subject keeps one name."""
        rows = self._rows(
            "SELECT subject FROM memories WHERE subject_key = ? ORDER BY created_at, rowid LIMIT 1", [key]
        )
        return rows[0][0] if rows else None

    def save(self, changes: Sequence[tuple[Memory, Change]], backups: Sequence[Backup] = ()) -> None:
        assignments = ", ".join(f"{c} = ?" for c in sql.COLUMN_NAMES[1:])
        t = self._dialect.time
        with self._write() as db:
            number = self._next_change_number(db) if changes else None
            for memory, change in changes:
                try:
                    row = db.execute(
                        self._q(f"UPDATE memories SET {assignments}, change_number = ? WHERE id = ? AND version = ?"
                                " RETURNING rowid"),
                        (*sql.row_values(memory, self._dialect)[1:], number, memory.id, memory.version - 1),
                    ).fetchone()  # fmt: skip
                except self._unique_violation as exc:  # the only unique column a save can change is path
                    raise Conflict(f"path {memory.path!r} is already taken", path=memory.path) from exc
                if row is None:
                    raise Conflict(
                        f"memory {memory.id} changed since it was read (expected version {memory.version - 1})",
                        memory_id=memory.id,
                    )
                self._write_tags(db, row[0], memory.all_tags)
                self._write_change(db, change, memory)
            self._many(
                db,
                self._q("INSERT INTO backups VALUES (?, ?, ?, ?, ?)"),
                [(b.id, b.memory.id, t(b.created_at), t(b.keep_until), sql.snapshot(b.memory)) for b in backups],
            )

    def purge_due(self, now: datetime) -> int:
        """Hard-delete soft-deleted memories whose retention has ended; drop lapsed backups."""
        stamp = self._dialect.time(now)
        with self._write() as db:
            forgotten = "SELECT id FROM memories WHERE status = 'forgotten' AND recoverable_until <= ?"
            due = [mid for (mid,) in db.execute(self._q(forgotten), (stamp,))]
            db.execute(self._q("DELETE FROM backups WHERE keep_until <= ?"), (stamp,))
        if due:
            self.purge(due, [])
        return len(due)

    def add_links(self, source_id: str, target_ids: Sequence[str], at: datetime) -> None:
        stamp = self._dialect.time(at)
        with self._write() as db:
            query = "INSERT INTO links (source_id, target_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
            self._many(db, self._q(query), [(source_id, target, stamp) for target in target_ids])

    def linked_ids(self, memory_id: str) -> list[str]:
        query = "SELECT target_id FROM links WHERE source_id = ? UNION SELECT source_id FROM links WHERE target_id = ?"
        return [r[0] for r in self._rows(query, [memory_id, memory_id])]

    def link_counts(self, memory_ids: Sequence[str]) -> dict[str, int]:
        if not memory_ids:
            return {}
        marks = self._marks(len(memory_ids))
        rows = self._rows(
            f"SELECT id, COUNT(*) FROM (SELECT source_id AS id FROM links WHERE source_id IN ({marks})"
            f" UNION ALL SELECT target_id FROM links WHERE target_id IN ({marks})) AS l GROUP BY id",
            list(memory_ids) * 2,
        )
        return {memory_id: int(n) for memory_id, n in rows}

    def history(self, memory_id: str) -> list[Change]:
        rows = self._rows(
            "SELECT id, memory_id, version, action, actor, changed_at, reason, previous FROM versions"
            " WHERE memory_id = ? ORDER BY version, changed_at",
            [memory_id],
        )
        return [sql.change(row, self.name, self._dialect.read_time) for row in rows]

    def backup(self, backup_id: str) -> Backup | None:
        rows = self._rows("SELECT id, created_at, keep_until, snapshot FROM backups WHERE id = ?", [backup_id])
        if not rows:
            return None
        (id_, created, keep_until, snapshot) = rows[0]
        read = self._dialect.read_time
        return Backup(id_, sql.from_snapshot(snapshot, self.name), read(created), read(keep_until))

    # -- paths (spec 002) ------------------------------------------------------------------
    def get_by_path(self, path: str) -> Memory | None:
        found = self._memories(f"{sql.SELECT} WHERE m.path = ?", [path])
        return found[0] if found else None

    def expired_with_path(self, now: datetime) -> list[Memory]:
        """Memories with a path, not forgotten, whose expiry has passed (by path, byte-wise)."""
        return self._memories(
            f"{sql.SELECT} WHERE m.status IN ('active', 'archived', 'outdated') AND m.expires_at <= ?"
            f" AND m.path IS NOT NULL ORDER BY m.path {self._dialect.binary}",
            [self._dialect.time(now)],
        )

    # -- finding -----------------------------------------------------------------------
    def select(
        self, filters: Filters, sort: Sort, limit: int | None, offset: int = 0, after: Position | None = None
    ) -> list[tuple[Memory, Position]]:
        column = sql.SORT_COLUMNS[sort.field]
        direction = "DESC" if sort.descending else "ASC"
        wanted = None if limit is None else offset + limit
        if sort.field is SortField.IMPORTANCE:  # the bands' range is where the page's order starts
            filters = sql.bands_as_range(filters)
        where, params, by_key = self._page_where(filters, wanted)
        if after is not None:
            where += self._q(f" AND (m.{column}, m.rowid) {'<' if sort.descending else '>'} (?, ?)")
            params += [after.value, after.key]
        if by_key:
            order = f"{self._dialect.unindexed}m.{column}"  # the few memories read by key, then sorted
        else:
            order = self._sort_key(column, filters, where, params, wanted)
        rows = self._rows(
            f"{sql.SELECT} WHERE {where} ORDER BY {order} {direction}, m.rowid {direction} LIMIT ? OFFSET ?",
            [*params, self._dialect.no_limit if limit is None else limit, offset],
        )
        index = 1 + sql.COLUMN_NAMES.index(column)

        def position(row: Any) -> Position:  # a time as the ISO text a page cursor carries
            value = row[index]
            return Position(to_iso(value) if isinstance(value, datetime) else value, row[0])

        return [(sql.memory(row, self.name, self._dialect), position(row)) for row in rows]

    def _page_where(self, filters: Filters, wanted: int | None) -> tuple[str, list[Any], bool]:
        """The condition a page of ``wanted`` memories is read with, its parameters, and whether it
        reads them by their keys (a backend may plan it for its planner)."""
        where, params = sql.where(filters, self._dialect)
        return where, params, False

    def _sort_key(self, column: str, filters: Filters, where: str, params: list[Any], wanted: int | None) -> str:
        """What a page is ordered by: the column (a backend may write it so that no index serves it)."""
        return f"m.{column}"

    def _count_matching(self, filters: Filters) -> int:
        """How many memories pass filters that select by more than status and expiry (a backend may
        plan it for its planner)."""
        where, params = sql.where(filters, self._dialect)
        return int(self._one(f"SELECT COUNT(*) FROM memories m WHERE {where}", params))

    def count(self, filters: Filters) -> int:
        """How many memories pass the filters. By status and expiry alone (a list's total, a store's
        quota): the counts kept by status (``memory_counts``, kept by triggers) less the expired ones,
        which an index finds, where counting every memory took most of a list's time at 1,000,000."""
        # A viewer is no attribute to a search (it keeps most memories) but is one to a count.
        if filters.selects_by_attribute or filters.visible_to is not None:
            return self._count_matching(sql.bands_as_range(filters))
        by_status = replace(filters, include_expired=True)
        held, params = sql.where(by_status, self._dialect)
        kept = f"SELECT COALESCE(SUM(m.n), 0) FROM memory_counts m WHERE {held}"
        if filters.include_expired:
            return int(self._one(kept, params))
        expired, expired_params = sql.where(replace(by_status, expired_before=filters.now), self._dialect)
        return int(self._one(f"SELECT ({kept}) - (SELECT COUNT(*) FROM memories m WHERE {expired})",
                             [*params, *expired_params]))  # fmt: skip

    def max_access_count(self) -> int:
        return int(self._one("SELECT COALESCE(MAX(access_count), 0) FROM memories WHERE status = 'active'"))

    def record_recall(self, memory_ids: Sequence[str], at: datetime) -> None:
        if not memory_ids:
            return
        stamp = self._dialect.time(at)
        with self._write() as db:
            # One statement for them all: on PostgreSQL each statement also runs memory_counts'
            # trigger, and ten took 6.6 ms against 4.8 at 1,000,000 memories.
            db.execute(
                self._q("UPDATE memories SET access_count = access_count + 1, accessed_at = ?"
                        f" WHERE id IN ({self._marks(len(memory_ids))})"),
                [stamp, *memory_ids],
            )  # fmt: skip
            db.execute(
                self._q("INSERT INTO events (kind, at, count) VALUES ('recall', ?, ?)"), (stamp, len(memory_ids))
            )

    # -- vectors and settings --------------------------------------------------------------
    def vector_model(self) -> str | None:
        return self.read_setting("vector_model")

    def drop_vectors(self, memory_ids: Sequence[str]) -> None:
        with self._write() as db:
            db.execute(
                self._q("DELETE FROM vectors WHERE memory_rowid IN"
                        f" (SELECT rowid FROM memories WHERE id IN ({self._marks(len(memory_ids))}))"),
                list(memory_ids),
            )  # fmt: skip

    def unembedded(self, limit: int) -> list[Memory]:
        """Active and archived memories that have no vector yet (stored while embedding failed)."""
        return self._memories(
            f"{sql.SELECT} WHERE m.status IN ('active', 'archived')"
            " AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.memory_rowid = m.rowid) LIMIT ?",
            [limit],
        )

    def keys_matching(self, filters: Filters) -> list[int]:
        where, params = sql.where(filters, self._dialect)
        return [key for (key,) in self._rows(f"SELECT m.rowid FROM memories m WHERE {where}", params)]

    def following_in_session(self, keys: Sequence[int], count: int, within: timedelta) -> dict[int, list[Follower]]:
        """For each of these memories that belongs to a session, the next ``count`` of that session's
        memories made at most ``within`` after it, in the order they were made (created_at, then as
        stored), with their length; of any status. One indexed query per memory, whatever the
        session's length."""
        if not keys or count <= 0:
            return {}
        time, read = self._dialect.time, self._dialect.read_time
        following: dict[int, list[Follower]] = {}
        with self._read() as db:
            hits = db.execute(
                self._q(f"SELECT rowid, session_id, created_at FROM memories WHERE rowid IN ({self._marks(len(keys))})"
                        " AND session_id IS NOT NULL"),
                list(keys),
            ).fetchall()  # fmt: skip
            for hit, session, made in hits:
                rows = db.execute(
                    self._q("SELECT rowid, length(content) FROM memories WHERE session_id = ?"
                            " AND created_at >= ? AND created_at <= ? AND (created_at > ? OR rowid > ?)"
                            " ORDER BY created_at, rowid LIMIT ?"),
                    [session, made, time(read(made) + within), made, hit, count],
                ).fetchall()  # fmt: skip
                if rows:
                    following[hit] = [Follower(key, length) for key, length in rows]
        return following

    def subjects_among(self, keys: Sequence[str]) -> set[str]:
        """Which of these subject keys some memory of the store has (an index lookup each)."""
        if not keys:
            return set()
        query = f"SELECT DISTINCT subject_key FROM memories WHERE subject_key IN ({self._marks(len(keys))})"
        return {key for (key,) in self._rows(query, keys)}

    # -- changes: what a sync reads ----------------------------------------------------------
    def changed_from(self, number: int) -> dict[str, int]:
        rows = self._rows("SELECT id, change_number FROM memories WHERE change_number >= ?", [number])
        return {memory_id: int(n) for memory_id, n in rows}

    def first_change_after(self, at: datetime) -> int:
        """The number from which the memories last written after ``at`` by a mnemo that numbered no
        changes (numbered below 0 in the order of their update by the migration that began it) and
        every later write are found."""
        query = "SELECT COALESCE(MIN(change_number), 0) FROM memories WHERE change_number < 0 AND updated_at > ?"
        return int(self._one(query, [self._dialect.time(at)]))

    def read_setting(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM settings WHERE key = ?", [key])
        return str(rows[0][0]) if rows else None

    def _put_setting(self, db: Any, key: str, value: str) -> None:
        db.execute(self._q("INSERT INTO settings VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
                   (key, value))  # fmt: skip

    def write_setting(self, key: str, value: str) -> None:
        with self._write() as db:
            self._put_setting(db, key, value)

    def archive_files_in_use(self) -> set[str]:
        return {
            row[0] for row in self._rows("SELECT DISTINCT archive_file FROM memories WHERE archive_file IS NOT NULL")
        }

    # -- request ledgers and jobs ------------------------------------------------------------
    def count_request(self, principal: str, bucket: str, window: int) -> int:
        with self._write() as db:
            return int(self._requests.count_request(db, principal, bucket, window))

    def begin_idempotent(
        self, principal: str, key: str, request_sha256: str, holder: str, at: datetime, lease_until: datetime,
        forget_before: datetime,
    ) -> IdempotentCall | None:  # fmt: skip
        with self._write() as db:
            call: IdempotentCall | None = self._requests.begin_idempotent(
                db, principal, key, request_sha256, holder, at, lease_until, forget_before
            )
            return call

    def renew_idempotent(self, holder: str, calls: Sequence[tuple[str, str]], lease_until: datetime) -> None:
        with self._write() as db:
            self._requests.renew_idempotent(db, holder, calls, lease_until)

    def end_idempotent(self, principal: str, key: str, holder: str, answer: str | None) -> None:
        with self._write() as db:
            self._requests.end_idempotent(db, principal, key, holder, answer)

    def put_job(self, job: Job) -> None:
        with self._write() as db:
            self._jobs.put_job(db, job)

    def get_job(self, job_id: str) -> Job | None:
        with self._read() as db:
            job: Job | None = self._jobs.get_job(db, job_id)
            return job

    def recent_jobs(self, limit: int) -> list[Job]:
        with self._read() as db:
            return list(self._jobs.recent_jobs(db, limit))

    def running_jobs(self) -> list[Job]:
        with self._read() as db:
            return list(self._jobs.running_jobs(db))
