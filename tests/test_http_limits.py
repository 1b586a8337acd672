"""Rate limits and idempotency keys over HTTP, kept in the store: they hold across two server processes."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

import httpx2
import pytest

from http_server import member_keys, serving
from local_api import Behaviour
from local_api import serving as api_serving
from mcp_calls import answer
from mnemo.config import Settings
from postgres_server import store_connection

MODES = ["legacy", "auto"]


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    return member_keys(tmp_path / "home", "alice", "bob")


@pytest.fixture
def home(tmp_path: Path, keys: dict[str, str]) -> Path:
    return tmp_path / "home"


def _database(settings: Settings) -> dict[str, str]:
    """The environment that puts a server's stores where ``settings`` has them (SQLite: under its home)."""
    return {"MNEMO_DATABASE_URL": settings.database_url} if settings.database_url else {}


@pytest.mark.every_backend  # the ledgers are tables of the store
@pytest.mark.parametrize("mode", MODES)
async def test_a_rate_limit_is_shared_by_two_servers_reached_per_user_and_reset(
    home: Path, keys: dict[str, str], mode: str, settings: Settings
):
    env = {"MNEMO_EMBEDDER": "none", "MNEMO_RATE_LIMITS": "list_memories=3", "MNEMO_RATE_WINDOW_S": "4"}
    env |= _database(settings)
    with serving(home, **env) as one, serving(home, **env) as two:
        # start at the beginning of a window, so that all calls below fall in it
        time.sleep(4 - time.time() % 4 + 0.05)
        seen: list[httpx2.Response] = []
        async with one.client(keys["alice"], mode, responses=seen) as a1, two.client(keys["alice"], mode) as a2:
            assert "memories" in await answer(a1, "list_memories")
            assert "memories" in await answer(a2, "list_memories")
            assert "memories" in await answer(a1, "list_memories")
            over = await answer(a2, "list_memories")
            assert (over["error"]["code"], over["error"]["status"]) == ("RATE_LIMIT_EXCEEDED", 429)
            async with one.client(keys["bob"], mode) as bob:  # another user has a count of their own
                assert "memories" in await answer(bob, "list_memories")
            limited = [r for r in seen if "x-ratelimit-limit" in r.headers]
            assert limited, "no response carried X-RateLimit-* headers"
            assert {r.headers["x-ratelimit-limit"] for r in limited} >= {"3"}
            assert min(int(r.headers["x-ratelimit-remaining"]) for r in limited) <= 1
            reset = int(limited[-1].headers["x-ratelimit-reset"])
            time.sleep(max(0.0, reset - time.time()) + 0.1)
            assert "memories" in await answer(a1, "list_memories")  # a new window


def test_a_request_over_the_limit_that_is_not_a_tool_call_is_http_429(home: Path, keys: dict[str, str]):
    with serving(home, MNEMO_EMBEDDER="none", MNEMO_RATE_LIMITS="*=1", MNEMO_RATE_WINDOW_S="30") as server:
        headers = {"X-API-Key": keys["alice"]}
        statuses = [httpx2.post(server.url, headers=headers, json={"jsonrpc": "2.0", "method": "x"}).status_code
                    for _ in range(3)]  # fmt: skip
        assert statuses[-1] == 429


@pytest.mark.every_backend
@pytest.mark.parametrize("mode", MODES)
async def test_a_retried_write_with_the_same_key_runs_once_across_servers(
    home: Path, keys: dict[str, str], mode: str, settings: Settings
):
    env = {"MNEMO_EMBEDDER": "none"} | _database(settings)
    with serving(home, **env) as one, serving(home, **env) as two:
        key = {"X-Idempotency-Key": "write-0001"}
        replies: list[httpx2.Response] = []
        async with (
            one.client(keys["alice"], mode, headers=key) as first,
            two.client(keys["alice"], mode, headers=key, responses=replies) as retry,
        ):
            stored = await answer(first, "store_memory", content="Invoice 88 was paid on Tuesday")
            again = await answer(retry, "store_memory", content="Invoice 88 was paid on Tuesday")
            assert again == stored
            assert any(r.headers.get("idempotent-replayed") == "true" for r in replies)
            other = await answer(retry, "store_memory", content="Invoice 89 was paid on Wednesday")
            assert other["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
        async with one.client(keys["alice"], mode) as plain:
            assert [m["content"] for m in (await answer(plain, "list_memories"))["memories"]] == [
                "Invoice 88 was paid on Tuesday"
            ]
        async with two.client(keys["bob"], mode, headers=key) as bob:  # keys are per user
            assert "memory_id" in await answer(bob, "store_memory", content="Bob's own invoice note")


def test_a_retry_after_the_server_was_killed_mid_call_runs_the_call_once(home: Path, keys: dict[str, str]):
    def embeddings(body: dict[str, Any]) -> dict[str, Any]:
        return {"data": [{"index": i, "embedding": [1.0, 0.0]} for i in range(len(body["input"]))]}

    slow = Behaviour()
    headers = {"X-API-Key": keys["alice"], "X-Idempotency-Key": "write-after-crash"}
    note = {"content": "Invoice 92 was paid on Thursday"}
    with api_serving({"/v1/embeddings": embeddings}, slow) as model_url:
        env = {"MNEMO_EMBEDDER": "http", "MNEMO_EMBEDDING_URL": model_url, "MNEMO_EMBEDDING_MODEL": "m",
               "MNEMO_EMBEDDING_DIMENSION": "2"}  # fmt: skip
        with serving(home, **env) as killed:
            asked, slow.delay_s = len(slow.requests), 20.0  # embedding the note takes 20 s: the call is in flight

            def store() -> None:
                with suppress(httpx2.HTTPError):
                    httpx2.post(f"{killed.base}/api/v1/memories", json=note, headers=headers, timeout=60)

            caller = threading.Thread(target=store)
            caller.start()
            deadline = time.monotonic() + 30
            while len(slow.requests) == asked:
                assert time.monotonic() < deadline, "the call did not reach the embedder"
                time.sleep(0.05)
            killed.process.kill()
            killed.process.wait()
            caller.join()
        slow.delay_s = 0.0
        with serving(home, **env) as restarted:
            deadline, waits = time.monotonic() + 45, []  # the killed call's lease runs out within 15 s
            while (
                retry := httpx2.post(f"{restarted.base}/api/v1/memories", json=note, headers=headers, timeout=60)
            ).status_code == 409:
                assert retry.json()["error"]["code"] == "CALL_IN_PROGRESS"
                assert time.monotonic() < deadline, "the killed call's key was never freed"
                waits.append(int(retry.headers.get("retry-after", "0")))
                time.sleep(1.0)
            assert retry.status_code == 201
            assert all(1 <= wait <= 15 for wait in waits), waits  # each refusal said when the lease runs out
            again = httpx2.post(f"{restarted.base}/api/v1/memories", json=note, headers=headers, timeout=60)
            assert again.headers["idempotent-replayed"] == "true" and again.json() == retry.json()
            listed = httpx2.get(f"{restarted.base}/api/v1/memories", headers={"X-API-Key": keys["alice"]}).json()
            assert [m["content"] for m in listed["memories"]] == [note["content"]]


async def test_a_call_applied_before_its_server_died_is_refused_on_retry_not_run_again(
    home: Path, keys: dict[str, str]
):
    """The server dies after a write commits and before its answer is kept (a trigger makes keeping
    any answer fail, then the server is killed): over REST and over MCP, the retry on a restarted
    server is told the call was applied, and nothing is applied twice."""
    alice = {"X-API-Key": keys["alice"]}
    append = {"updates": {"content": "Paid by card."}, "merge_strategy": "append"}
    mcp_note = "Invoice 94 was paid on Saturday"
    with serving(home, MNEMO_EMBEDDER="none") as killed:
        made = httpx2.post(f"{killed.base}/api/v1/memories", json={"content": "Invoice 93 was paid"}, headers=alice)
        memory_id = made.json()["memory_id"]
        (database,) = home.rglob("memory.db")
        with sqlite3.connect(database) as db:
            db.execute("CREATE TRIGGER lose_answers BEFORE UPDATE OF answer ON idempotent_calls"
                       " WHEN NEW.answer IS NOT NULL BEGIN SELECT RAISE(ABORT, 'answer lost'); END")  # fmt: skip

        def send_append(base: str) -> httpx2.Response:
            return httpx2.patch(f"{base}/api/v1/memories/{memory_id}", json=append,
                                headers=alice | {"X-Idempotency-Key": "rest-1"}, timeout=60)  # fmt: skip

        assert send_append(killed.base).status_code == 500  # applied, but its answer could not be kept
        with suppress(Exception):  # the answer may reach the client, or the connection drop under it
            async with killed.client(keys["alice"], headers={"X-Idempotency-Key": "mcp-1"}) as client:
                await answer(client, "store_memory", content=mcp_note)
        killed.process.kill()
        killed.process.wait()
        with sqlite3.connect(database) as db:
            db.execute("DROP TRIGGER lose_answers")
    with serving(home, MNEMO_EMBEDDER="none") as restarted:
        deadline = time.monotonic() + 45  # the killed server's leases run out within 15 s
        while (retry := send_append(restarted.base)).json()["error"]["code"] == "CALL_IN_PROGRESS":
            assert time.monotonic() < deadline, "the killed call's lease never ran out"
            time.sleep(1.0)
        assert (retry.status_code, retry.json()["error"]["code"]) == (409, "IDEMPOTENT_ANSWER_LOST")
        assert memory_id in retry.json()["error"]["message"]
        async with restarted.client(keys["alice"], headers={"X-Idempotency-Key": "mcp-1"}) as client:
            refused = await answer(client, "store_memory", content=mcp_note)
            assert refused["error"]["code"] == "IDEMPOTENT_ANSWER_LOST"
        listed = httpx2.get(f"{restarted.base}/api/v1/memories", headers=alice).json()["memories"]
        assert sorted(m["content"] for m in listed) == ["Invoice 93 was paid\nPaid by card.", mcp_note]


@pytest.mark.parametrize("backend", ["postgres"])  # where the memories can be locked apart from the ledger
async def test_a_call_that_failed_for_now_is_run_again_by_its_retry_not_answered_from_the_first(
    home: Path, keys: dict[str, str], settings: Settings
):
    """A write whose store stayed busy answers "retry later" (423): that answer is not kept under its
    key, so the retry with the same key runs the call, over REST and over MCP."""
    alice = {"X-API-Key": keys["alice"]}
    env = {"MNEMO_EMBEDDER": "none", "MNEMO_BUSY_TIMEOUT_S": "1"} | _database(settings)
    with serving(home, **env) as server:

        def store_over_rest() -> httpx2.Response:
            return httpx2.post(f"{server.base}/api/v1/memories", json={"content": "Invoice 95 was paid"},
                               headers=alice | {"X-Idempotency-Key": "rest-busy"}, timeout=60)  # fmt: skip

        async def store_over_mcp() -> dict[str, Any]:
            async with server.client(keys["alice"], headers={"X-Idempotency-Key": "mcp-busy"}) as client:
                return await answer(client, "store_memory", content="Invoice 96 was paid")

        assert settings.database_url is not None
        with closing(store_connection(settings.database_url)) as other:
            other.execute("BEGIN")
            other.execute("LOCK TABLE memories IN EXCLUSIVE MODE")  # another writer holds the memories
            busy = store_over_rest()
            assert (busy.status_code, busy.json()["error"]["code"]) == (423, "MEMORY_LOCKED")
            assert (await store_over_mcp())["error"]["code"] == "MEMORY_LOCKED"
            other.execute("ROLLBACK")
        stored = store_over_rest()
        assert stored.status_code == 201 and "idempotent-replayed" not in stored.headers
        assert "memory_id" in await store_over_mcp()
        listed = httpx2.get(f"{server.base}/api/v1/memories", headers=alice).json()["memories"]
        assert sorted(m["content"] for m in listed) == ["Invoice 95 was paid", "Invoice 96 was paid"]
