"""The SQLite schema as named, ordered migrations.

Each migration runs once, inside the transaction that records it in ``migrations``;
``PRAGMA user_version`` holds how many have run, so a database written by a newer mnemo is
recognised and refused instead of misread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from mnemo.storage.sql import CANONICAL_CATEGORY


def _run(db: sqlite3.Connection, script: str) -> None:
    """Run each statement of a script inside the caller's transaction.

    ``executescript`` would commit first, and a migration must commit with its record or not at all.
    """
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""


def m001_create_tables(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            path TEXT UNIQUE,
            content TEXT NOT NULL,
            content_length INTEGER NOT NULL,
            signature TEXT NOT NULL,
            word_signature TEXT NOT NULL,
            type TEXT,
            category TEXT,
            subject TEXT,
            subject_key TEXT,
            tags TEXT NOT NULL DEFAULT '[]',
            auto_tags TEXT NOT NULL DEFAULT '[]',
            importance REAL NOT NULL,
            confidence REAL,
            agent_name TEXT,
            entry_number INTEGER,
            metadata TEXT NOT NULL DEFAULT '{}',
            user_id TEXT,
            conversation_id TEXT,
            session_id TEXT,
            access_level TEXT NOT NULL,
            owner TEXT,
            expires_at TEXT,
            status TEXT NOT NULL,
            archive_tier TEXT,
            forget_reason TEXT,
            forget_details TEXT,
            forgotten_at TEXT,
            recoverable_until TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            accessed_at TEXT NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            version INTEGER NOT NULL
        );
        -- one index per filter and sort field of list_memories; SQLite appends rowid, which is
        -- the keyset tiebreaker, so (status, field) serves "WHERE status ORDER BY field, rowid".
        CREATE INDEX memories_status_created ON memories(status, created_at);
        CREATE INDEX memories_status_updated ON memories(status, updated_at);
        CREATE INDEX memories_status_accessed ON memories(status, accessed_at);
        CREATE INDEX memories_status_importance ON memories(status, importance);
        CREATE INDEX memories_status_access_count ON memories(status, access_count);
        CREATE INDEX memories_status_length ON memories(status, content_length);
        CREATE INDEX memories_category ON memories(category, status);
        CREATE INDEX memories_type ON memories(type, status);
        CREATE INDEX memories_subject ON memories(subject_key, status);
        CREATE INDEX memories_user ON memories(user_id, status, created_at);
        CREATE INDEX memories_conversation ON memories(conversation_id, status, created_at);
        CREATE INDEX memories_access_level ON memories(access_level, status);
        CREATE INDEX memories_signature ON memories(signature, user_id);
        CREATE INDEX memories_status_expires ON memories(status, expires_at);
        CREATE INDEX memories_recoverable ON memories(recoverable_until)
            WHERE recoverable_until IS NOT NULL;

        CREATE TABLE memory_tags (
            tag TEXT NOT NULL,
            memory_rowid INTEGER NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
            PRIMARY KEY (tag, memory_rowid)
        ) WITHOUT ROWID;
        CREATE INDEX memory_tags_memory ON memory_tags(memory_rowid);

        CREATE TABLE links (
            source_id TEXT NOT NULL,
            target_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (source_id, target_id)
        ) WITHOUT ROWID;
        CREATE INDEX links_target ON links(target_id);

        CREATE TABLE versions (
            id TEXT PRIMARY KEY,
            memory_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            action TEXT NOT NULL,
            actor TEXT NOT NULL,
            reason TEXT,
            changed_at TEXT NOT NULL,
            user_id TEXT,
            conversation_id TEXT,
            category TEXT,
            previous TEXT
        );
        CREATE INDEX versions_memory ON versions(memory_id, version);
        CREATE INDEX versions_changed ON versions(changed_at, action);

        CREATE TABLE backups (
            id TEXT PRIMARY KEY,
            memory_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            keep_until TEXT NOT NULL,
            snapshot TEXT NOT NULL
        );
        CREATE INDEX backups_memory ON backups(memory_id);
        CREATE INDEX backups_keep_until ON backups(keep_until);

        CREATE TABLE events (
            rowid INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            at TEXT NOT NULL,
            count INTEGER NOT NULL
        );
        CREATE INDEX events_kind_at ON events(kind, at);

        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, tags, auto_tags, content='memories', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, content, tags, auto_tags)
            VALUES (new.rowid, new.content, new.tags, new.auto_tags);
        END;
        CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, tags, auto_tags)
            VALUES ('delete', old.rowid, old.content, old.tags, old.auto_tags);
        END;
        CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, tags, auto_tags ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, tags, auto_tags)
            VALUES ('delete', old.rowid, old.content, old.tags, old.auto_tags);
            INSERT INTO memories_fts(rowid, content, tags, auto_tags)
            VALUES (new.rowid, new.content, new.tags, new.auto_tags);
        END;
        """,
    )


def m002_vectors(db: sqlite3.Connection) -> None:
    """Embeddings beside the memories, and which model made them.

    ``seq`` grows with every write, so an in-memory index (in this or another process) catches
    up by reading the rows after the last ``seq`` it saw.
    """
    _run(
        db,
        """
        CREATE TABLE vectors (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            memory_rowid INTEGER NOT NULL UNIQUE REFERENCES memories(rowid) ON DELETE CASCADE,
            vector BLOB NOT NULL
        );
        CREATE TABLE settings (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        """,
    )


ENTRY_COUNTER = "last_entry_number"  # settings key: the last entry number given out (spec 003)
CHANGE_COUNTER = "last_change_number"  # settings key: the last change number given out
CHANGE_NUMBERING = "change_numbers"  # settings key: the name of this store's numbering of changes


def m003_shared_space(db: sqlite3.Connection) -> None:
    """Spec 003's shared space: the entries agents signed, numbered from a counter that never goes back.

    The counter starts after any number already given. The partial indexes serve listing and
    counting the signed entries (in all, or of one agent) of a store that mostly holds others.
    """
    _run(
        db,
        f"""
        INSERT OR IGNORE INTO settings
            VALUES ('{ENTRY_COUNTER}', (SELECT COALESCE(MAX(entry_number), 0) FROM memories));
        CREATE INDEX memories_signed ON memories(status, created_at) WHERE agent_name IS NOT NULL;
        CREATE INDEX memories_agent ON memories(agent_name, status, created_at) WHERE agent_name IS NOT NULL;
        """,
    )


def m004_expiry_in_user_index(db: sqlite3.Connection) -> None:
    """The index of memories by user also holds expires_at.

    Every query leaves expired memories out, so without it each memory of a user was read from
    the table to check its expiry: the 1,000 memories of one user of a 100,000-memory store took
    2.9 ms to list by key, 0.5 ms from the index alone.
    """
    _run(
        db,
        """
        DROP INDEX memories_user;
        CREATE INDEX memories_user ON memories(user_id, status, created_at, expires_at);
        """,
    )


# Memories the word index holds: all but those whose content is compressed in the row (glacier)
# or held in an archive file (deep_archive); other archived memories included.
_INDEXED = "{row}.archive_tier IS NULL OR {row}.archive_tier NOT IN ('glacier', 'deep_archive')"


def m005_archive_tiers(db: sqlite3.Connection) -> None:
    """Spec 004's archive tiers: where an archived memory's content is held, and the word index without it.

    ``content_packed`` holds a glacier memory's content compressed (``content`` is then empty);
    ``archive_file`` names the archive file (and its checksum) holding a deep-archived memory's.
    The word index now reads a view of the indexed memories, so its own integrity check agrees with
    what it holds, and the triggers keep glacier and deep-archived memories out of it.
    """
    old_indexed, new_indexed = _INDEXED.format(row="old"), _INDEXED.format(row="new")
    _run(
        db,
        f"""
        ALTER TABLE memories ADD COLUMN content_packed BLOB;
        ALTER TABLE memories ADD COLUMN archive_id TEXT;
        ALTER TABLE memories ADD COLUMN archived_at TEXT;
        ALTER TABLE memories ADD COLUMN archive_file TEXT;
        CREATE UNIQUE INDEX memories_archive_id ON memories(archive_id) WHERE archive_id IS NOT NULL;
        CREATE INDEX memories_archive_file ON memories(archive_file) WHERE archive_file IS NOT NULL;

        DROP TRIGGER memories_fts_insert;
        DROP TRIGGER memories_fts_delete;
        DROP TRIGGER memories_fts_update;
        DROP TABLE memories_fts;
        CREATE VIEW memories_indexed AS
            SELECT rowid AS rowid, content, tags, auto_tags FROM memories m WHERE {_INDEXED.format(row="m")};
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, tags, auto_tags, content='memories_indexed', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');
        CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories WHEN {new_indexed}
        BEGIN
            INSERT INTO memories_fts(rowid, content, tags, auto_tags)
            VALUES (new.rowid, new.content, new.tags, new.auto_tags);
        END;
        CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN {old_indexed}
        BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, tags, auto_tags)
            VALUES ('delete', old.rowid, old.content, old.tags, old.auto_tags);
        END;
        CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, tags, auto_tags, archive_tier ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, tags, auto_tags)
            SELECT 'delete', old.rowid, old.content, old.tags, old.auto_tags
            WHERE {old_indexed};
            INSERT INTO memories_fts(rowid, content, tags, auto_tags)
            SELECT new.rowid, new.content, new.tags, new.auto_tags
            WHERE {new_indexed};
        END;
        """,
    )


def m006_request_ledgers(db: sqlite3.Connection) -> None:
    """What HTTP servers of one store share about requests: how many each caller made per tool and
    minute (rate limits), and the first answer to each idempotency key (retried writes)."""
    _run(
        db,
        """
        CREATE TABLE request_counts (
            principal TEXT NOT NULL, bucket TEXT NOT NULL, window INTEGER NOT NULL, count INTEGER NOT NULL,
            PRIMARY KEY (principal, bucket, window)
        ) WITHOUT ROWID;
        CREATE TABLE idempotent_calls (
            principal TEXT NOT NULL, key TEXT NOT NULL, request_sha256 TEXT NOT NULL,
            answer TEXT, created_at TEXT NOT NULL,
            PRIMARY KEY (principal, key)
        ) WITHOUT ROWID;
        CREATE INDEX idempotent_calls_created ON idempotent_calls(created_at);
        """,
    )


def m007_jobs(db: sqlite3.Connection) -> None:
    """Long operations (archive and restore runs, imports, re-embedding) recorded durably: what,
    where they stand, and how they ended, readable by id from any process of the store."""
    _run(
        db,
        """
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, started_at TEXT NOT NULL,
            ended_at TEXT, done INTEGER NOT NULL DEFAULT 0, total INTEGER, detail TEXT NOT NULL DEFAULT '{}',
            error TEXT, host TEXT NOT NULL, pid INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX jobs_started ON jobs(started_at);
        """,
    )


def m008_session_index(db: sqlite3.Connection) -> None:
    """An index of memories by session, in the order they were made, for recall's look at the memories
    that follow a hit in its session (search/searcher.py, FOLLOWING)."""
    _run(db, "CREATE INDEX memories_session ON memories(session_id, created_at) WHERE session_id IS NOT NULL;")


# The readers' tokens of a memory in the word index's ``scope`` column: its user, its owner and its
# access level, each hex-encoded between a letter and a 0 (one token the stemmer leaves as it is).
# A search filtered by user or visibility asks for them (sqlite_text.scope_of), so that the newest
# matches of common words it ranks are the newest of the memories it may return.
_SCOPE = " || ".join(
    f"CASE WHEN {{row}}.{column} IS NULL THEN '' ELSE '{kind}' || hex({{row}}.{column}) || '0 ' END"
    for kind, column in (("u", "user_id"), ("o", "owner"), ("l", "access_level"))
)


def m009_word_index_knows_readers(db: sqlite3.Connection) -> None:
    """The word index gets a ``scope`` column of each memory's readers' tokens (see _SCOPE), weighed 0
    in BM25 (though counted in a memory's length: single questions of the quality sets moved, README
    "A team server over HTTP"), and is rebuilt; its triggers follow a change of the memory's user,
    owner or access level.
    Before, a search filtered by user ranked the newest matches of its common words in the whole
    store, of which few might be the user's (README, "A team server over HTTP")."""
    old_indexed, new_indexed = _INDEXED.format(row="old"), _INDEXED.format(row="new")
    old_scope, new_scope = _SCOPE.format(row="old"), _SCOPE.format(row="new")
    _run(
        db,
        f"""
        DROP TRIGGER memories_fts_insert;
        DROP TRIGGER memories_fts_delete;
        DROP TRIGGER memories_fts_update;
        DROP TABLE memories_fts;
        DROP VIEW memories_indexed;
        CREATE VIEW memories_indexed AS
            SELECT rowid AS rowid, content, tags, auto_tags, {_SCOPE.format(row="m")} AS scope
            FROM memories m WHERE {_INDEXED.format(row="m")};
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, tags, auto_tags, scope, content='memories_indexed', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');
        CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories WHEN {new_indexed}
        BEGIN
            INSERT INTO memories_fts(rowid, content, tags, auto_tags, scope)
            VALUES (new.rowid, new.content, new.tags, new.auto_tags, {new_scope});
        END;
        CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN {old_indexed}
        BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, tags, auto_tags, scope)
            VALUES ('delete', old.rowid, old.content, old.tags, old.auto_tags, {old_scope});
        END;
        CREATE TRIGGER memories_fts_update
        AFTER UPDATE OF content, tags, auto_tags, archive_tier, user_id, owner, access_level ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content, tags, auto_tags, scope)
            SELECT 'delete', old.rowid, old.content, old.tags, old.auto_tags, {old_scope}
            WHERE {old_indexed};
            INSERT INTO memories_fts(rowid, content, tags, auto_tags, scope)
            SELECT new.rowid, new.content, new.tags, new.auto_tags, {new_scope}
            WHERE {new_indexed};
        END;
        """,
    )


def m010_memory_counts(db: sqlite3.Connection) -> None:
    """How many memories each status holds, kept by triggers as memories are written, so that a count
    by status and expiry alone (a list's total, a store's quota) reads a few numbers and the expired
    memories instead of counting every memory (sql_store.SQLStore.count)."""
    _run(
        db,
        """
        CREATE TABLE memory_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL);
        INSERT INTO memory_counts SELECT status, count(*) FROM memories GROUP BY status;
        CREATE TRIGGER memory_counts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memory_counts VALUES (new.status, 1) ON CONFLICT (status) DO UPDATE SET n = n + 1;
        END;
        CREATE TRIGGER memory_counts_delete AFTER DELETE ON memories BEGIN
            UPDATE memory_counts SET n = n - 1 WHERE status = old.status;
        END;
        CREATE TRIGGER memory_counts_update AFTER UPDATE OF status ON memories WHEN new.status IS NOT old.status
        BEGIN
            UPDATE memory_counts SET n = n - 1 WHERE status = old.status;
            INSERT INTO memory_counts VALUES (new.status, 1) ON CONFLICT (status) DO UPDATE SET n = n + 1;
        END;
        """,
    )


def m011_expiry_in_filter_indexes(db: sqlite3.Connection) -> None:
    """The indexes of memories by category, type, subject, access level, conversation and agent also
    hold expires_at, as the user's does (m004): a list's total counts its matches from the index
    alone. At 1,000,000 memories the 310,808 of one label took 220-240 ms to count, each read from
    the table for its expiry, and 17-18 ms from the index; the index took 0.8 s to build."""
    _run(
        db,
        """
        DROP INDEX memories_category;
        CREATE INDEX memories_category ON memories(category, status, expires_at);
        DROP INDEX memories_type;
        CREATE INDEX memories_type ON memories(type, status, expires_at);
        DROP INDEX memories_subject;
        CREATE INDEX memories_subject ON memories(subject_key, status, expires_at);
        DROP INDEX memories_access_level;
        CREATE INDEX memories_access_level ON memories(access_level, status, expires_at);
        DROP INDEX memories_conversation;
        CREATE INDEX memories_conversation ON memories(conversation_id, status, created_at, expires_at);
        DROP INDEX memories_agent;
        CREATE INDEX memories_agent ON memories(agent_name, status, created_at, expires_at)
            WHERE agent_name IS NOT NULL;
        """,
    )


def m012_category_filed_under_index(db: sqlite3.Connection) -> None:
    """An index of memories by the category their label is filed under (sql.CANONICAL_CATEGORY,
    which a query must write exactly as indexed: a change to it needs a migration that rebuilds
    this index). Named categories are found as their labels in memories_category; "custom" is every
    other label, which no index found: at 1,000,000 memories a list of it read every memory (3.0 s
    to find none), 0.1 ms from this index, which took 2.2 s to build."""
    filed_under = CANONICAL_CATEGORY.replace("m.category", "category")
    _run(db, f"CREATE INDEX memories_filed_under ON memories(({filed_under}), status, expires_at);")


def m013_expiry_in_range_indexes(db: sqlite3.Connection) -> None:
    """The indexes of memories by status and creation, update, access or importance also hold
    expires_at, after the rowid that orders a page's ties: a total over a range of one of them (a
    week's memories) or of importance bands (spec 000's "high") counts from the index alone. At
    1,000,000 memories, counting a week's 27,575 took 57-83 ms, 1.5-2.1 from the index; a page and
    total of the 300,526 "high" ones, each read from the table, 318-1,048 ms, 81-183 ms."""
    _run(
        db,
        """
        DROP INDEX memories_status_created;
        CREATE INDEX memories_status_created ON memories(status, created_at, rowid, expires_at);
        DROP INDEX memories_status_updated;
        CREATE INDEX memories_status_updated ON memories(status, updated_at, rowid, expires_at);
        DROP INDEX memories_status_accessed;
        CREATE INDEX memories_status_accessed ON memories(status, accessed_at, rowid, expires_at);
        DROP INDEX memories_status_importance;
        CREATE INDEX memories_status_importance ON memories(status, importance, rowid, expires_at);
        """,
    )


def m014_rowid_in_owner_indexes(db: sqlite3.Connection) -> None:
    """The indexes of memories by user, conversation and agent order their entries by creation and
    then rowid, as a page newest first is ordered (expires_at after them): SQLite walked the status
    index by creation instead, testing each memory's user, as only that one gave the page's whole
    order. At 1,000,000 memories a page of one user's 20 newest took 8.9 ms, 0.08 ms from the user's.

    The indexes created after the user's by m011-m013 are created again after it, in the same
    order: SQLite, which keeps no statistics, takes the newest of two indexes it prices alike (the
    user's and a label's, for a list of one user's memories with one label), and that choice stays
    as it was (one user and a label none has: 0.1-0.7 ms; with the user's index newest, 71-93)."""
    filed_under = CANONICAL_CATEGORY.replace("m.category", "category")
    created_again = [  # in the order they were created, the user's three with the rowid
        ("memories_user", "(user_id, status, created_at, rowid, expires_at)"),
        ("memories_category", "(category, status, expires_at)"),
        ("memories_type", "(type, status, expires_at)"),
        ("memories_subject", "(subject_key, status, expires_at)"),
        ("memories_access_level", "(access_level, status, expires_at)"),
        ("memories_conversation", "(conversation_id, status, created_at, rowid, expires_at)"),
        ("memories_agent", "(agent_name, status, created_at, rowid, expires_at) WHERE agent_name IS NOT NULL"),
        ("memories_filed_under", f"(({filed_under}), status, expires_at)"),
        ("memories_status_created", "(status, created_at, rowid, expires_at)"),
        ("memories_status_updated", "(status, updated_at, rowid, expires_at)"),
        ("memories_status_accessed", "(status, accessed_at, rowid, expires_at)"),
        ("memories_status_importance", "(status, importance, rowid, expires_at)"),
    ]
    for name, columns in created_again:
        db.execute(f"DROP INDEX {name}")
        db.execute(f"CREATE INDEX {name} ON memories{columns}")


def m015_job_owners(db: sqlite3.Connection) -> None:
    """Each job records the user who started it (NULL: a local caller), who alone may read it by id
    (``access.ScopedStorage.get_job``). Jobs recorded before are a local caller's."""
    db.execute("ALTER TABLE jobs ADD COLUMN owner TEXT")


def m016_idempotency_leases(db: sqlite3.Connection) -> None:
    """A call running under an idempotency key holds it (``holder``) by a lease its server renews
    while it runs (``request_ledger``), so a retry may take over the key of a call whose server died.
    A call recorded running before has no lease: a retry may take it over."""
    db.execute("ALTER TABLE idempotent_calls ADD COLUMN holder TEXT")
    db.execute("ALTER TABLE idempotent_calls ADD COLUMN lease_until TEXT")


def m017_change_numbers(db: sqlite3.Connection) -> None:
    """Every write of a memory is numbered (``change_number``, from the counter ``last_change_number``,
    one number a write transaction; ``change_numbers`` names this numbering): a sync reads each side
    from where its last one reached, so what enters a store with an old ``updated_at`` (an import,
    a restore, an earlier sync) travels too. The memories written before are numbered below 0 in the
    order of their update, so a pair's older watermark, a time, still reads from a number
    (``first_change_after``)."""
    _run(
        db,
        f"""
        ALTER TABLE memories ADD COLUMN change_number INTEGER NOT NULL DEFAULT 0;
        UPDATE memories SET change_number = -r.n FROM (SELECT rowid AS key,
            ROW_NUMBER() OVER (ORDER BY updated_at DESC, rowid DESC) AS n FROM memories) AS r
            WHERE memories.rowid = r.key;
        CREATE INDEX memories_changes ON memories(change_number);
        INSERT INTO settings VALUES ('{CHANGE_COUNTER}', '0'), ('{CHANGE_NUMBERING}', lower(hex(randomblob(16))));
        """,
    )


def m018_applied_calls(db: sqlite3.Connection) -> None:
    """A call under an idempotency key marks its key applied (``applied_to``: the first memory it
    changed) in the transaction of its write: a server that dies between that commit and keeping the
    answer leaves the mark, and a retry is told the call was applied instead of running it again."""
    db.execute("ALTER TABLE idempotent_calls ADD COLUMN applied_to TEXT")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_create_tables,
    m002_vectors,
    m003_shared_space,
    m004_expiry_in_user_index,
    m005_archive_tiers,
    m006_request_ledgers,
    m007_jobs,
    m008_session_index,
    m009_word_index_knows_readers,
    m010_memory_counts,
    m011_expiry_in_filter_indexes,
    m012_category_filed_under_index,
    m013_expiry_in_range_indexes,
    m014_rowid_in_owner_indexes,
    m015_job_owners,
    m016_idempotency_leases,
    m017_change_numbers,
    m018_applied_calls,
]
