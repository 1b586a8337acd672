"""The PostgreSQL schema of a store, as named, ordered migrations.

A store is one PostgreSQL schema (``mnemo_<name>``) in the database the URL names, so several
stores share one database and one backup (``pg_dump``; ``-n mnemo_<name>`` for one store) while
every query stays the one a single store needs (no store column in each row, index and WHERE).
Migrations run in one transaction under an advisory lock, so servers that start together on a new
database migrate it once; ``migrations`` records each by name.

Words: ``memories.words`` is a generated tsvector (content, tags and automatic tags) under a GIN
index, with a configuration like SQLite's porter tokenizer: English stems, no stop words dropped.
Vectors: ``vectors.embedding`` is a pgvector column; its dimension is fixed by the first vector
stored (``fix_dimension``). Each server searches them in its own memory (as on SQLite), reading the
ones written since it last looked from ``vector_feed`` in the order they were committed (m014).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import psycopg
from psycopg import sql

WORDS_CONFIG = "mnemo_words"  # the text search configuration, in the store's schema

ENTRY_COUNTER = "last_entry_number"  # settings key: the last entry number given out (spec 003)
# Settings key (m014): this copy of the store's own id, which names its vectors' snapshots. Not the
# store's sync identity (lifecycle.sync's "store-id"), which a copy keeps: a copy gets a new one.
INSTANCE_ID = "store_id"
_MAX_IDENTIFIER = 63  # PostgreSQL's NAMEDATALEN - 1


def schema_name(store: str) -> str:
    """The schema of a store: ``mnemo_<name>``, or, past PostgreSQL's 63 bytes, a prefix and a hash."""
    name = f"mnemo_{store}"
    if len(name) <= _MAX_IDENTIFIER:
        return name
    digest = hashlib.sha256(store.encode()).hexdigest()[:12]
    return f"{name[: _MAX_IDENTIFIER - 13]}_{digest}"


def m001_create_tables(db: psycopg.Connection) -> None:
    db.execute(f"""
        CREATE TEXT SEARCH DICTIONARY mnemo_stem (TEMPLATE = snowball, Language = english);
        CREATE TEXT SEARCH CONFIGURATION {WORDS_CONFIG} (COPY = pg_catalog.english);
        ALTER TEXT SEARCH CONFIGURATION {WORDS_CONFIG}
            ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part WITH mnemo_stem;

        CREATE TABLE memories (
            rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
            importance DOUBLE PRECISION NOT NULL,
            confidence DOUBLE PRECISION,
            agent_name TEXT,
            entry_number BIGINT,
            metadata TEXT NOT NULL DEFAULT '{{}}',
            user_id TEXT,
            conversation_id TEXT,
            session_id TEXT,
            access_level TEXT NOT NULL,
            owner TEXT,
            expires_at TIMESTAMPTZ,
            status TEXT NOT NULL,
            archive_tier TEXT,
            forget_reason TEXT,
            forget_details TEXT,
            forgotten_at TIMESTAMPTZ,
            recoverable_until TIMESTAMPTZ,
            created_at TIMESTAMPTZ NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL,
            accessed_at TIMESTAMPTZ NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            version INTEGER NOT NULL,
            content_packed BYTEA,
            archive_id TEXT,
            archived_at TIMESTAMPTZ,
            archive_file TEXT,
            -- glacier and deep-archived memories keep their content elsewhere: out of the word index
            words TSVECTOR GENERATED ALWAYS AS (
                CASE WHEN COALESCE(archive_tier, '') IN ('glacier', 'deep_archive') THEN NULL
                ELSE to_tsvector('{WORDS_CONFIG}', content || ' ' || tags || ' ' || auto_tags) END
            ) STORED
        );
        -- rowid is the keyset tiebreaker, so (status, field, rowid) serves "WHERE status ORDER BY field, rowid"
        CREATE INDEX memories_status_created ON memories(status, created_at, rowid);
        CREATE INDEX memories_status_updated ON memories(status, updated_at, rowid);
        CREATE INDEX memories_status_accessed ON memories(status, accessed_at, rowid);
        CREATE INDEX memories_status_importance ON memories(status, importance, rowid);
        CREATE INDEX memories_status_access_count ON memories(status, access_count, rowid);
        CREATE INDEX memories_status_length ON memories(status, content_length, rowid);
        CREATE INDEX memories_category ON memories(category, status);
        CREATE INDEX memories_type ON memories(type, status);
        CREATE INDEX memories_subject ON memories(subject_key, status);
        CREATE INDEX memories_user ON memories(user_id, status, created_at, expires_at);
        CREATE INDEX memories_conversation ON memories(conversation_id, status, created_at);
        CREATE INDEX memories_access_level ON memories(access_level, status);
        CREATE INDEX memories_signature ON memories(signature, user_id);
        CREATE INDEX memories_status_expires ON memories(status, expires_at);
        CREATE INDEX memories_recoverable ON memories(recoverable_until) WHERE recoverable_until IS NOT NULL;
        CREATE INDEX memories_signed ON memories(status, created_at) WHERE agent_name IS NOT NULL;
        CREATE INDEX memories_agent ON memories(agent_name, status, created_at) WHERE agent_name IS NOT NULL;
        CREATE UNIQUE INDEX memories_archive_id ON memories(archive_id) WHERE archive_id IS NOT NULL;
        CREATE INDEX memories_archive_file ON memories(archive_file) WHERE archive_file IS NOT NULL;
        CREATE INDEX memories_words ON memories USING gin (words);

        CREATE TABLE memory_tags (
            tag TEXT NOT NULL,
            memory_rowid BIGINT NOT NULL REFERENCES memories(rowid) ON DELETE CASCADE,
            PRIMARY KEY (tag, memory_rowid)
        );
        CREATE INDEX memory_tags_memory ON memory_tags(memory_rowid);

        CREATE TABLE links (
            source_id TEXT NOT NULL,
            target_id TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (source_id, target_id)
        );
        CREATE INDEX links_target ON links(target_id);

        CREATE TABLE versions (
            id TEXT PRIMARY KEY,
            memory_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            action TEXT NOT NULL,
            actor TEXT NOT NULL,
            reason TEXT,
            changed_at TIMESTAMPTZ NOT NULL,
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
            created_at TIMESTAMPTZ NOT NULL,
            keep_until TIMESTAMPTZ NOT NULL,
            snapshot TEXT NOT NULL
        );
        CREATE INDEX backups_memory ON backups(memory_id);
        CREATE INDEX backups_keep_until ON backups(keep_until);

        CREATE TABLE events (
            rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind TEXT NOT NULL,
            at TIMESTAMPTZ NOT NULL,
            count INTEGER NOT NULL
        );
        CREATE INDEX events_kind_at ON events(kind, at);

        CREATE SEQUENCE vector_seq;
        CREATE TABLE vectors (
            memory_rowid BIGINT PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
            seq BIGINT NOT NULL DEFAULT nextval('vector_seq'),
            embedding public.vector NOT NULL
        );
        CREATE INDEX vectors_seq ON vectors(seq);
        CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO settings VALUES ('{ENTRY_COUNTER}', '0');

        CREATE TABLE request_counts (
            principal TEXT NOT NULL, bucket TEXT NOT NULL, "window" BIGINT NOT NULL, count INTEGER NOT NULL,
            PRIMARY KEY (principal, bucket, "window")
        );
        CREATE TABLE idempotent_calls (
            principal TEXT NOT NULL, key TEXT NOT NULL, request_sha256 TEXT NOT NULL,
            answer TEXT, created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (principal, key)
        );
        CREATE INDEX idempotent_calls_created ON idempotent_calls(created_at);

        CREATE TABLE jobs (
            id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, started_at TIMESTAMPTZ NOT NULL,
            ended_at TIMESTAMPTZ, done BIGINT NOT NULL DEFAULT 0, total BIGINT, detail TEXT NOT NULL DEFAULT '{{}}',
            error TEXT, host TEXT NOT NULL, pid INTEGER NOT NULL
        );
        CREATE INDEX jobs_started ON jobs(started_at);
    """)  # type: ignore[call-overload]  # a constant script, not built from input


def m002_session_index(db: psycopg.Connection) -> None:
    """An index of memories by session, in the order they were made, for recall's look at the memories
    that follow a hit in its session (search/searcher.py, FOLLOWING)."""
    db.execute("CREATE INDEX memories_session ON memories(session_id, created_at, rowid) WHERE session_id IS NOT NULL")


# How many words a tsvector was made of (its positions), as FTS5 measures a document's length.
TOKENS = "(SELECT COALESCE(sum(COALESCE(array_length(p.positions, 1), 1)), 0) FROM unnest({words}) AS p)"
STRIPES = 16  # rows a kept total (word totals, memory counts) is spread over: concurrent writers seldom share one


def m003_word_totals(db: psycopg.Connection) -> None:
    """BM25's store totals (memories with words, and their words), kept by triggers as memories are
    written, so that a search reads two numbers instead of counting every memory's words.

    A statement-level trigger sees all the rows one statement wrote (a batch of thousands is one
    change to the totals) and adds the change to the row of its session's stripe: writers in other
    sessions seldom wait on the same row, and a statement that changes no words (an access count)
    writes nothing. The functions keep the store's schema as their search path, so a statement
    from a session with another one (an administrator's psql) still finds the totals. The totals
    are back-filled from the memories already stored.
    """
    documents = "count(*) FILTER (WHERE {rows}.words IS NOT NULL)"
    tokens = f"COALESCE(sum({TOKENS.format(words='{rows}.words')}), 0)"
    on_conflict = (
        " ON CONFLICT (stripe) DO UPDATE SET documents = t.documents + EXCLUDED.documents,"
        " tokens = t.tokens + EXCLUDED.tokens"
    )
    added = f"SELECT {documents.format(rows='n')} AS documents, {tokens.format(rows='n')} AS tokens FROM new_rows n"
    removed = f"SELECT {documents.format(rows='o')} AS documents, {tokens.format(rows='o')} AS tokens FROM old_rows o"
    changed = (
        f"SELECT {documents.format(rows='n')} - {documents.format(rows='o')} AS documents,"
        f" {tokens.format(rows='n')} - {tokens.format(rows='o')} AS tokens"
        " FROM new_rows n JOIN old_rows o ON o.rowid = n.rowid WHERE n.words IS DISTINCT FROM o.words"
    )
    db.execute(
        "CREATE TABLE word_totals (stripe SMALLINT PRIMARY KEY, documents BIGINT NOT NULL, tokens BIGINT NOT NULL)"
    )
    db.execute(
        f"INSERT INTO word_totals SELECT 0, {documents.format(rows='m')}, {tokens.format(rows='m')} FROM memories m"
    )  # type: ignore[call-overload]  # built from constants, not from input
    for name, delta, sign in (("added", added, 1), ("removed", removed, -1), ("changed", changed, 1)):
        db.execute(f"""
            CREATE FUNCTION word_totals_{name}() RETURNS trigger LANGUAGE plpgsql
            SET search_path FROM CURRENT AS $$
            DECLARE d BIGINT; k BIGINT;
            BEGIN
                SELECT {sign} * c.documents, {sign} * c.tokens INTO d, k FROM ({delta}) AS c;
                IF COALESCE(d, 0) <> 0 OR COALESCE(k, 0) <> 0 THEN
                    INSERT INTO word_totals AS t VALUES ((pg_backend_pid() % {STRIPES}), d, k){on_conflict};
                END IF;
                RETURN NULL;
            END $$
        """)  # type: ignore[call-overload]  # built from constants, not from input
    db.execute(
        "CREATE TRIGGER memories_words_added AFTER INSERT ON memories REFERENCING NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION word_totals_added()"
    )
    db.execute(
        "CREATE TRIGGER memories_words_removed AFTER DELETE ON memories REFERENCING OLD TABLE AS old_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION word_totals_removed()"
    )
    db.execute(
        "CREATE TRIGGER memories_words_changed AFTER UPDATE ON memories"
        " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION word_totals_changed()"
    )


def m004_keys_in_user_index(db: psycopg.Connection) -> None:
    """The user index carries each memory's key, so that a user filter (every recall on a team
    server) reads the keys it keeps from the index alone, as SQLite's indexes do (they hold the
    rowid): at 200,000 memories of 20 users, a user's 9,795 keys took 24 ms with a visit to each
    memory's row and 4 ms from the index. The rows' pages must be marked all-visible (autovacuum
    does it), else each row is still visited."""
    db.execute("DROP INDEX memories_user")
    db.execute("CREATE INDEX memories_user ON memories(user_id, status, created_at, expires_at) INCLUDE (rowid)")


def m005_sign_bits_in_user_index(db: psycopg.Connection) -> None:
    """Each memory carries the signs of its vector's numbers (one bit a dimension: 48 bytes at 384), and
    the user index carries them with its key, so that a search filtered by user ranks the user's
    memories by the Hamming distance of their signs from the index alone and then scores only the
    closest exactly (postgres_vectors.search_passing): scoring all of a user's 10,000 vectors read
    10,000 rows, each on its own page, as users' memories are interleaved. ``sign_bits`` makes them
    the same way for stored vectors (postgres_vectors.put) and for a query."""
    db.execute("""
        CREATE FUNCTION sign_bits(v public.vector) RETURNS varbit LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT string_agg(CASE WHEN x > 0 THEN '1' ELSE '0' END, '' ORDER BY i)::varbit
            FROM unnest(v::real[]) WITH ORDINALITY AS t(x, i)
        $$
    """)
    db.execute("ALTER TABLE memories ADD COLUMN sign_bits varbit")
    db.execute("UPDATE memories m SET sign_bits = sign_bits(v.embedding) FROM vectors v WHERE v.memory_rowid = m.rowid")
    db.execute("DROP INDEX memories_user")
    db.execute(
        "CREATE INDEX memories_user ON memories(user_id, status, created_at, expires_at) INCLUDE (rowid, sign_bits)"
    )


def m006_sign_bits_beside_vectors(db: psycopg.Connection) -> None:
    """The sign bits move from the memory's row to a table of their own, ``vector_signs``, with the
    memory's key and user, under an index on the user that holds both: a search filtered by user
    reads the user's bits from it and the user's keys that pass the filter from the user index, and
    joins the two, still without a visit to a memory's row or its vector. Writing the bits into
    ``memories`` (m005) made every vector write a new version of the memory's row, which each of its
    twenty indexes took in (its words' GIN too): re-writing 5,000 vectors took 7.5 s against 6.0 s
    with a table of bits at 200,000 memories, and a 1,000,000-memory fill had written 31% of its
    vectors 45 minutes after it began (docs/postgresql-performance.md). A row of ``vector_signs`` goes with
    its vector (deleting the vector deletes it), and a trigger carries a change of the memory's user."""
    db.execute("ALTER TABLE memories DROP COLUMN sign_bits")  # and the user index, which includes it
    db.execute("CREATE INDEX memories_user ON memories(user_id, status, created_at, expires_at) INCLUDE (rowid)")
    db.execute("""
        CREATE TABLE vector_signs (
            memory_rowid BIGINT PRIMARY KEY REFERENCES vectors(memory_rowid) ON DELETE CASCADE,
            user_id TEXT,
            bits varbit NOT NULL
        )
    """)
    db.execute(
        "INSERT INTO vector_signs SELECT v.memory_rowid, m.user_id, sign_bits(v.embedding)"
        " FROM vectors v JOIN memories m ON m.rowid = v.memory_rowid"
    )
    db.execute("CREATE INDEX vector_signs_user ON vector_signs(user_id) INCLUDE (memory_rowid, bits)")
    db.execute("""
        CREATE FUNCTION vector_signs_follow_user() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
            UPDATE vector_signs SET user_id = NEW.user_id WHERE memory_rowid = NEW.rowid;
            RETURN NULL;
        END $$
    """)
    db.execute(
        "CREATE TRIGGER memories_user_changed AFTER UPDATE OF user_id ON memories FOR EACH ROW"
        " WHEN (OLD.user_id IS DISTINCT FROM NEW.user_id) EXECUTE FUNCTION vector_signs_follow_user()"
    )


def m007_words_index_without_pending_list(db: psycopg.Connection) -> None:
    """The words' GIN index takes each new memory's words into its tree at once. With its default
    ``fastupdate`` it queued them in a pending list (up to 4 MB) that every word search read whole and
    that one write then merged into the tree: with 172 pages pending at 1,000,000 memories a search
    for a word took 2.1 ms instead of 0.2 and the merge 65 ms; storing took the same time either way
    (20.8 ms mean over 3,000 stores each, at 200,000)."""
    db.execute("ALTER INDEX memories_words SET (fastupdate = off)")
    db.execute("SELECT gin_clean_pending_list('memories_words')")  # what is queued already


# A memory's readers as keys beside its words in their index (m008): its user ('u'), its owner ('o')
# and its access level ('l'), each a prefix and the value. A search's conditions on them must spell
# this expression as it is, or the planner does not see that the index holds it.
READERS = "array_remove(ARRAY['u' || user_id, 'o' || owner, 'l' || access_level], NULL)"


def m008_words_index_knows_readers(db: psycopg.Connection) -> None:
    """The words' index also holds each memory's readers (READERS), so that a word search of one
    user's memories, or of those a member may read, finds the words' matches among them in the index
    (postgres_text.search): before, the newest matches of a query's common words were the store's,
    of which few might be the user's (README, "A team server over HTTP"). No row is rewritten; the
    index was built in 8.5 s at 1,000,000 memories (87 MB before, 97 MB after). ANALYZE gives the
    planner the readers' statistics, from which a search estimates how many memories it would fetch."""
    db.execute(
        f"CREATE INDEX memories_words_readers ON memories USING gin (words, ({READERS})) WITH (fastupdate = off)"
    )
    db.execute("DROP INDEX memories_words")
    db.execute("ALTER INDEX memories_words_readers RENAME TO memories_words")
    db.execute("ANALYZE memories")


def m009_memory_counts(db: psycopg.Connection) -> None:
    """How many memories each status holds, kept by statement-level triggers as memories are written
    (in stripes, as m003's word totals, so that concurrent writers seldom wait on one row), so that a
    count by status and expiry alone (a list's total, a store's quota) reads a few numbers and the
    expired memories instead of counting every memory (sql_store.SQLStore.count)."""
    db.execute(
        "CREATE TABLE memory_counts (status TEXT NOT NULL, stripe SMALLINT NOT NULL, n BIGINT NOT NULL,"
        " PRIMARY KEY (status, stripe))"
    )
    db.execute("INSERT INTO memory_counts SELECT status, 0, count(*) FROM memories GROUP BY status")
    changes = {
        "added": "SELECT status, count(*) AS n FROM new_rows GROUP BY status",
        "removed": "SELECT status, -count(*) AS n FROM old_rows GROUP BY status",
        "changed": "SELECT s.status, sum(s.n) AS n FROM new_rows n JOIN old_rows o ON o.rowid = n.rowid"
        " CROSS JOIN LATERAL (VALUES (n.status, 1), (o.status, -1)) AS s(status, n)"
        " WHERE n.status <> o.status GROUP BY s.status",
    }
    for name, change in changes.items():
        db.execute(f"""
            CREATE FUNCTION memory_counts_{name}() RETURNS trigger LANGUAGE plpgsql
            SET search_path FROM CURRENT AS $$
            BEGIN
                INSERT INTO memory_counts AS t
                SELECT c.status, pg_backend_pid() % {STRIPES}, c.n FROM ({change}) AS c
                ON CONFLICT (status, stripe) DO UPDATE SET n = t.n + EXCLUDED.n;
                RETURN NULL;
            END $$
        """)  # type: ignore[call-overload]  # built from constants, not from input
    for name, event, tables in (
        ("added", "INSERT", "NEW TABLE AS new_rows"),
        ("removed", "DELETE", "OLD TABLE AS old_rows"),
        ("changed", "UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    ):
        db.execute(
            f"CREATE TRIGGER memory_counts_{name} AFTER {event} ON memories REFERENCING {tables}"
            f" FOR EACH STATEMENT EXECUTE FUNCTION memory_counts_{name}()"
        )  # type: ignore[call-overload]  # built from constants, not from input


def m010_job_owners(db: psycopg.Connection) -> None:
    """Each job records the user who started it (NULL: a local caller), who alone may read it by id
    (``access.ScopedStorage.get_job``). Jobs recorded before are a local caller's."""
    db.execute("ALTER TABLE jobs ADD COLUMN owner TEXT")


def m011_idempotency_leases(db: psycopg.Connection) -> None:
    """A call running under an idempotency key holds it (``holder``) by a lease its server renews
    while it runs (``request_ledger``), so a retry may take over the key of a call whose server died.
    A call recorded running before has no lease: a retry may take it over."""
    db.execute("ALTER TABLE idempotent_calls ADD COLUMN holder TEXT, ADD COLUMN lease_until TIMESTAMPTZ")


def m012_change_numbers(db: psycopg.Connection) -> None:
    """Every write of a memory is numbered (``change_number``): by the id of the transaction that wrote
    it (``PostgresStorage.change_horizon``), so a sync reads each side from where its last one
    reached and what enters a store with an old ``updated_at`` (an import, a restore, an earlier sync)
    travels too. The memories written before are numbered below 0 in the order of their update, so a
    pair's older watermark, a time, still reads from a number (``first_change_after``)."""
    db.execute("ALTER TABLE memories ADD COLUMN change_number BIGINT NOT NULL DEFAULT 0")
    db.execute(
        "UPDATE memories m SET change_number = -r.n FROM (SELECT rowid,"
        " row_number() OVER (ORDER BY updated_at DESC, rowid DESC) AS n FROM memories) AS r WHERE m.rowid = r.rowid"
    )
    db.execute("ALTER TABLE memories ALTER COLUMN change_number DROP DEFAULT")
    db.execute("CREATE INDEX memories_changes ON memories(change_number)")


def m013_applied_calls(db: psycopg.Connection) -> None:
    """A call under an idempotency key marks its key applied (``applied_to``: the first memory it
    changed) in the transaction of its write: a server that dies between that commit and keeping the
    answer leaves the mark, and a retry is told the call was applied instead of running it again."""
    db.execute("ALTER TABLE idempotent_calls ADD COLUMN applied_to TEXT")


# The lock a transaction holds from its first vector's place in ``vector_feed`` to its commit (with
# the store's schema as second key): see m014.
FEED_LOCK = 0x6D6E6D66  # "mnmf"


def m014_vectors_fed_in_commit_order(db: psycopg.Connection) -> None:
    """Vectors are searched in each server's memory, from a feed in commit order, instead of in SQL.

    Through pgvector's HNSW index a search at 1,000,000 memories found 0.61 of the true top 10 for
    three random words at the widest walk it allows, and a recall took 32-37 ms at p95 with the graph
    in shared_buffers (docs/postgresql.md); the in-process snapshot graph that SQLite stores use finds
    more, faster, and each insert no longer pays for the HNSW index (1.2 ms) or the sign bits beside it.

    A server takes in what others wrote by asking for the vectors after the last ``seq`` it saw. A
    sequence alone cannot give that order: concurrent transactions commit their values out of order,
    so a reader could pass a value whose transaction commits later and never read it. So a vector's
    ``seq`` is given at commit time, by a deferred trigger that first takes FEED_LOCK for the rest of
    its transaction: values are handed out in the order their transactions commit, and a reader that
    sees one sees every smaller one that will ever exist. Commits that wrote vectors run one at a time
    (the trigger's statements and the commit's flush), other work of those transactions does not."""
    db.execute("DROP TRIGGER memories_user_changed ON memories")
    db.execute("DROP FUNCTION vector_signs_follow_user()")
    db.execute("DROP TABLE vector_signs")
    db.execute("DROP FUNCTION sign_bits(public.vector)")
    db.execute("DROP INDEX IF EXISTS vectors_hnsw")
    db.execute("""
        CREATE TABLE vector_feed (
            memory_rowid BIGINT PRIMARY KEY REFERENCES vectors(memory_rowid) ON DELETE CASCADE,
            seq BIGINT NOT NULL
        )
    """)
    db.execute("INSERT INTO vector_feed SELECT memory_rowid, seq FROM vectors")
    db.execute("CREATE INDEX vector_feed_seq ON vector_feed(seq)")
    db.execute("ALTER TABLE vectors DROP COLUMN seq")
    # The row may be gone by commit time (stored, then deleted, in one transaction): nothing to feed.
    db.execute(f"""
        CREATE FUNCTION vector_feed_put() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock({FEED_LOCK}, hashtext(current_schema()));
            INSERT INTO vector_feed
                SELECT v.memory_rowid, nextval('vector_seq') FROM vectors v WHERE v.memory_rowid = NEW.memory_rowid
                ON CONFLICT (memory_rowid) DO UPDATE SET seq = excluded.seq;
            RETURN NULL;
        END $$
    """)
    db.execute(f"INSERT INTO settings VALUES ('{INSTANCE_ID}', gen_random_uuid()::text)")
    db.execute(
        "CREATE CONSTRAINT TRIGGER vectors_fed AFTER INSERT OR UPDATE ON vectors"
        " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION vector_feed_put()"
    )


MIGRATIONS: list[Callable[[psycopg.Connection], None]] = [
    m001_create_tables,
    m002_session_index,
    m003_word_totals,
    m004_keys_in_user_index,
    m005_sign_bits_in_user_index,
    m006_sign_bits_beside_vectors,
    m007_words_index_without_pending_list,
    m008_words_index_knows_readers,
    m009_memory_counts,
    m010_job_owners,
    m011_idempotency_leases,
    m012_change_numbers,
    m013_applied_calls,
    m014_vectors_fed_in_commit_order,
]
_LOCK = 0x6D6E656D6F  # "mnemo": the advisory lock that migrations (of any store) run under


def migrate(db: psycopg.Connection, schema: str) -> list[str]:
    """Create the schema and run the migrations it has not had, in one transaction; the names run.

    Raises ``ValueError`` when the schema records more migrations than this mnemo knows.
    """
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        db.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        db.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        db.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(sql.Identifier(schema)))
        db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)")
        done = [name for (name,) in db.execute("SELECT name FROM migrations ORDER BY applied_at, name")]
        if len(done) > len(MIGRATIONS):
            raise ValueError(len(done))
        ran = []
        for migration in MIGRATIONS[len(done) :]:
            migration(db)
            db.execute("INSERT INTO migrations VALUES (%s, clock_timestamp())", (migration.__name__,))
            ran.append(migration.__name__)
        return ran


def instance_id(db: psycopg.Connection, schema: str) -> str:
    """This copy of the store's own id (INSTANCE_ID), "" before m014."""
    row = db.execute(
        sql.SQL("SELECT value FROM {}.settings WHERE key = %s").format(sql.Identifier(schema)), (INSTANCE_ID,)
    ).fetchone()
    return str(row[0]) if row else ""


def fix_dimension(db: psycopg.Connection, dimension: int) -> None:
    """Give the vectors column its dimension, once (the first vector's)."""
    if db.execute("SELECT value FROM settings WHERE key = 'vector_dimension'").fetchone() is not None:
        return
    db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
    if db.execute("SELECT value FROM settings WHERE key = 'vector_dimension'").fetchone() is not None:
        return  # another process fixed it while this one waited
    db.execute(sql.SQL("ALTER TABLE vectors ALTER COLUMN embedding TYPE public.vector({})").format(dimension))
    db.execute("INSERT INTO settings VALUES ('vector_dimension', %s)", (str(dimension),))


def unfix_dimension(db: psycopg.Connection) -> None:
    """Forget the vectors' dimension (they are all deleted): the next model's may differ."""
    db.execute("ALTER TABLE vectors ALTER COLUMN embedding TYPE public.vector")
    db.execute("DELETE FROM settings WHERE key = 'vector_dimension'")


EXPECTED_TABLES = frozenset(
    ("memories", "memory_tags", "links", "versions", "backups", "events", "vectors", "settings",
     "request_counts", "idempotent_calls", "jobs", "migrations", "word_totals", "vector_feed",
     "memory_counts")
)  # fmt: skip
