"""mnemo over streamable HTTP: real `mnemo serve --http` processes on loopback, real MCP clients.

Two members (alice, bob), an admin (root) and a read-only key (carol). Each test tries what one
user could do to another's memories through every tool of a profile, in both protocol eras
(2025 with sessions: mode "legacy"; 2026-07-28 stateless: mode "auto"), and counts leaks.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPError
from mcp.types import CallToolResult

from http_server import HttpServer, server_env, serving
from local_api import Behaviour
from local_api import serving as api_serving
from mcp_calls import answer
from mnemo.access.caller import Role
from mnemo.access.keys import KeyRing
from mnemo.app import open_service
from mnemo.config import Settings

MODES = ["legacy", "auto"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def keys(home: Path) -> dict[str, str]:
    ring = KeyRing(home)
    made = {
        user: ring.create(user, role)[1]
        for user, role in (("alice", Role.MEMBER), ("bob", Role.MEMBER), ("root", Role.ADMIN), ("carol", Role.READER))
    }
    return made


def served(home: Path, profile: str) -> Iterator[HttpServer]:
    with serving(home, "--profile", profile, MNEMO_EMBEDDER="none") as server:
        yield server


@pytest.fixture
def full(home: Path, keys: dict[str, str]) -> Iterator[HttpServer]:
    yield from served(home, "full")


async def refusal(client: Any, tool: str, **args: Any) -> int:
    """The HTTP-style status of a refused call (spec 004's error object)."""
    return int((await answer(client, tool, **args))["error"]["status"])


def contents(found: dict[str, Any]) -> list[str]:
    return [m["content"] for m in found.get("memories", [])]


# -- authentication -----------------------------------------------------------------------------
def test_without_a_key_or_with_a_wrong_one_the_endpoint_answers_401(full: HttpServer, keys: dict[str, str]):
    for headers in ({}, {"X-API-Key": "mnemo_nope_nope"}, {"Authorization": f"Bearer {keys['alice']}x"}):
        response = httpx2.post(full.url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert httpx2.get(f"{full.base}/healthz").json()["status"] == "ok"  # load balancers need no key


@pytest.mark.parametrize("mode", MODES)
async def test_a_key_works_as_bearer_or_x_api_key_and_a_revoked_one_stops_at_once(
    full: HttpServer, keys: dict[str, str], home: Path, mode: str
):
    bearer = {"Authorization": f"Bearer {keys['alice']}"}
    async with full.client(None, mode, headers=bearer) as as_bearer, full.client(keys["alice"], mode) as as_header:
        assert {t.name for t in (await as_bearer.list_tools()).tools} == {
            t.name for t in (await as_header.list_tools()).tools
        }
    ring = KeyRing(home)
    alice_key = next(k for k in ring.all() if k.user_id == "alice")
    ring.revoke(alice_key.key_id)
    response = httpx2.post(full.url, headers=bearer, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401


@pytest.mark.parametrize("mode", MODES)
async def test_a_request_id_is_echoed_and_names_the_error_answer(full: HttpServer, keys: dict[str, str], mode: str):
    async with full.client(keys["bob"], mode, headers={"X-Request-Id": "trace-42"}) as bob:
        error = (await answer(bob, "list_memories", filters={"user_id": "alice"}))["error"]
    assert (error["status"], error["request_id"]) == (403, "trace-42")
    assert '"request_id": "trace-42"' in full.log.read_text()  # the log line of the refusal carries it too
    refused = httpx2.post(full.url, headers={"X-Request-Id": "trace-43"}, json={})
    assert refused.headers["x-request-id"] == "trace-43"
    assert httpx2.post(full.url, json={}).headers["x-request-id"].startswith("req_")  # made up when not given


def test_a_host_header_other_than_loopback_is_refused(full: HttpServer, keys: dict[str, str]):
    response = httpx2.post(
        full.url,
        headers={"X-API-Key": keys["alice"], "Host": "evil.example:80"},
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
    )
    assert response.status_code in (403, 421)


def test_listening_beyond_loopback_without_a_key_is_refused(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "mnemo", "serve", "--http", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=server_env(tmp_path / "empty"),
    )
    assert done.returncode != 0
    assert "without authentication" in done.stderr


# -- isolation in the full profile (spec 004) -----------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_another_users_private_memories_never_reach_a_member(full: HttpServer, keys: dict[str, str], mode: str):
    async with full.client(keys["alice"], mode) as alice, full.client(keys["bob"], mode) as bob:
        secret = (await answer(alice, "store_memory", content="Alice's door code is 4711"))["memory_id"]
        shared = (
            await answer(
                alice, "store_memory", content="The team lunch is on Fridays", metadata={"access_level": "shared"}
            )
        )["memory_id"]
        leaks: list[str] = []
        seen = await answer(bob, "recall_memories", query="door code")
        leaks += [c for c in contents(seen) if "4711" in c]
        listed = await answer(bob, "list_memories")
        assert [m["memory_id"] for m in listed["memories"]] == [shared]  # shared: readable by the team
        stats = await answer(bob, "get_memory_stats", scope="global")
        leaks += ["stats"] if "4711" in json.dumps(stats) else []
        # a private id is as good as unknown; a shared one is readable but not bob's to change
        assert (await answer(bob, "update_memory", memory_id=secret, updates={"content": "x"}))["error"][
            "status"
        ] == 404
        assert (await answer(bob, "forget_memory", memory_id=secret))["error"]["status"] == 404
        assert (await answer(bob, "archive_memory", memory_id=secret))["error"]["status"] == 404
        assert (await answer(bob, "update_memory", memory_id=shared, updates={"content": "x"}))["error"][
            "status"
        ] == 403
        assert (await answer(bob, "forget_memory", memory_id=shared))["error"]["status"] == 403
        merged = await answer(
            bob, "consolidate_memories", memory_ids=[secret, shared], consolidation_strategy="merge_all"
        )
        assert merged["error"]["status"] in (403, 404)
        # naming alice's scope is refused, in every tool that takes a user
        for tool, args in (
            ("list_memories", {"filters": {"user_id": "alice"}}),
            ("recall_memories", {"query": "code", "filters": {"user_id": "alice"}}),
            ("get_memory_stats", {"scope": "user", "scope_id": "alice"}),
            ("store_memory", {"content": "forged", "context": {"user_id": "alice"}}),
        ):
            assert (await answer(bob, tool, **args))["error"]["status"] == 403, tool
        # the same words stored by bob are bob's own memory, not alice's duplicate
        mine = await answer(bob, "store_memory", content="Alice's door code is 4711")
        assert mine["memory_id"] != secret
        assert leaks == []
        assert contents(await answer(alice, "recall_memories", query="door code"))[0].endswith("4711")


@pytest.mark.parametrize("mode", MODES)
async def test_an_admin_reads_everyone_and_a_reader_writes_nothing(full: HttpServer, keys: dict[str, str], mode: str):
    async with (
        full.client(keys["alice"], mode) as alice,
        full.client(keys["root"], mode) as root,
        full.client(keys["carol"], mode) as carol,
    ):
        secret = (await answer(alice, "store_memory", content="Alice banks with Northwind"))["memory_id"]
        listed = await answer(root, "list_memories", filters={"user_id": "alice"})
        assert [m["memory_id"] for m in listed["memories"]] == [secret]
        assert (await answer(carol, "store_memory", content="a reader's note"))["error"]["status"] == 403
        assert (await answer(carol, "list_memories"))["memories"] == []


# -- the other profiles: each principal has a space of their own -----------------------------------
def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content)


OWNERS_VIEW = {
    "agent": ("query_memories", {}),
    "memento": ("list_recent_memories", {}),
    "shared": ("read_memory", {"response_format": "json"}),
    "stores": ("list_memories", {"store": "default", "category": "ops"}),
}


@pytest.mark.parametrize("mode", MODES)
async def test_agent_memento_shared_and_stores_spaces_are_per_user(home: Path, keys: dict[str, str], mode: str):
    for profile in ("agent", "memento", "shared", "stores"):
        with serving(home / profile, "--profile", profile, MNEMO_EMBEDDER="none", MNEMO_HOME=str(home)) as server:
            async with server.client(keys["alice"], mode) as alice, server.client(keys["bob"], mode) as bob:
                if profile == "agent":
                    stored = await alice.call_tool(
                        "store_memory", {"content": "Deploy key rotates Mondays", "type": "core"}
                    )
                    memory_id = stored.structured_content["id"]
                    found = await bob.call_tool("query_memories", {"search": "deploy"})
                    gone = await bob.call_tool("delete_memory", {"id": memory_id})
                elif profile == "memento":
                    stored = await alice.call_tool(
                        "store_memory",
                        {"content": "Emma is allergic to nuts", "subject": "Emma", "category": "restriction"},
                    )
                    memory_id = stored.structured_content["id"]
                    found = await bob.call_tool("search_memories", {"query": "Emma allergy", "threshold": 0})
                    gone = await bob.call_tool("update_memory", {"memory_id": memory_id, "new_content": "x"})
                elif profile == "stores":
                    path = {"store": "default", "path": "ops/build"}
                    stored = await alice.call_tool("add_memory", {**path, "content": "Build is red"})
                    assert not stored.is_error, text_of(stored)
                    memory_id = path["path"]
                    found = await bob.call_tool("list_memories", {"store": "default", "category": "ops"})
                    # spec 002's failures are protocol errors
                    with pytest.raises(MCPError, match="no memory at"):
                        await bob.call_tool("get_memory", path)
                    with pytest.raises(MCPError) as taken:
                        await bob.call_tool("add_memory", {**path, "content": "Bob's build note"})
                    assert "Build is red" not in str(taken.value), profile
                    with pytest.raises(MCPError, match="no memory at"):
                        await bob.call_tool("remove_memory", path)
                    gone = CallToolResult(content=[], is_error=True)  # bob's remove was refused above
                else:
                    stored = await alice.call_tool("add_memory", {"agent_name": "alpha", "content": "Build is red"})
                    memory_id = json.loads(text_of(stored))["entry_id"]
                    found = await bob.call_tool("read_memory", {"response_format": "json"})
                    gone = await bob.call_tool("delete_memory", {"entry_id": memory_id})
                assert memory_id not in text_of(found), profile
                assert "Deploy" not in text_of(found) and "Emma" not in text_of(found), profile
                assert "Build is red" not in text_of(found), profile
                assert gone.is_error, profile
            async with server.client(keys["alice"], mode) as alice_again:  # the owner still has it
                tool, args = OWNERS_VIEW[profile]
                assert memory_id in text_of(await alice_again.call_tool(tool, args)), profile


# -- every tool of every profile, tried by one user on another's memory ----------------------------
SECRET = "Alice's vault code is zebra-4711"


async def said(client: Any, tool: str, args: dict[str, Any]) -> str:
    """Everything an answer shows its caller: the tool's text, or a protocol error's message and data."""
    try:
        result = await client.call_tool(tool, args)
    except MCPError as error:
        return f"{error.message} {error.data}"
    return text_of(result) + json.dumps(result.structured_content or {})


def attacks(profile: str, target: str) -> list[tuple[str, dict[str, Any]]]:
    """Every tool of the profile, aimed at alice's memory ``target`` (an id, an entry id or a path)."""
    path = {"store": "default", "path": target}
    return {
        "full": [
            ("store_memory", {"content": "forged", "context": {"user_id": "alice"}}),
            ("recall_memories", {"query": "vault code zebra"}),
            ("recall_memories", {"query": "vault", "filters": {"user_id": "alice"}}),
            ("update_memory", {"memory_id": target, "updates": {"content": "overwritten"}}),
            ("forget_memory", {"memory_id": target, "hard_delete": True}),
            ("list_memories", {}),
            ("list_memories", {"filters": {"user_id": "alice", "status": ["active", "archived", "deleted"]}}),
            ("get_memory_stats", {"scope": "global"}),
            ("get_memory_stats", {"scope": "user", "scope_id": "alice"}),
            (
                "consolidate_memories",
                {"memory_ids": [target, target[:-1] + "0"], "consolidation_strategy": "merge_all"},
            ),
            ("archive_memory", {"memory_id": target}),
            ("archive_memory", {"auto_archive_criteria": {"low_importance": 1.0}}),
            ("restore_memory", {"memory_id": target}),
            ("sync_memories", {"filters": {"user_id": "alice"}, "destination": "cloud"}),
            ("sync_memories", {"destination": "cloud", "dry_run": True}),
        ],
        "agent": [
            ("store_memory", {"type": "core", "content": "overwritten", "id": target}),
            ("query_memories", {"search": "vault"}),
            ("query_memories", {"archived": True}),
            ("update_memory", {"id": target, "content": "overwritten"}),
            ("delete_memory", {"id": target, "permanent": True}),
            ("get_memory_stats", {}),
        ],
        "memento": [
            ("search_memories", {"query": "vault code", "threshold": 0}),
            ("list_recent_memories", {}),
            ("update_memory", {"memory_id": target, "new_content": "overwritten"}),
            ("update_memory", {"memory_id": target, "mark_outdated": True, "reason": "x"}),
            ("get_memory_stats", {"subject_filter": "Alice"}),
            # last: the same fact about the same subject is bob's own, not alice's "already stored"
            ("store_memory", {"content": SECRET, "subject": "Alice", "category": "fact"}),
        ],
        "shared": [
            ("read_memory", {"response_format": "json"}),
            ("get_memory", {"entry_id": target}),
            ("update_memory", {"entry_id": target, "content": "overwritten"}),
            ("delete_memory", {"entry_id": target}),
            ("search_memory", {"query": "zebra"}),
            ("get_memory_stats", {}),
            ("clear_memory", {"confirm": True}),
            ("health_check", {}),
        ],
        "stores": [
            ("get_memory", path),
            ("update_memory", {**path, "content": "overwritten"}),
            ("move_memory", {"store": "default", "from_path": target, "to_path": "bob/took"}),
            ("remove_memory", path),
            ("list_memories", {"store": "default", "category": target.split("/")[0]}),
            ("prune_memories", {"store": "default"}),
            ("add_memory", {**path, "content": "overwritten"}),
        ],
    }[profile]


async def planted(alice: Any, profile: str) -> str:
    """Alice's memory holding SECRET, and how a tool names it."""
    if profile == "full":
        return str((await answer(alice, "store_memory", content=SECRET))["memory_id"])
    if profile == "agent":
        return str((await answer(alice, "store_memory", type="core", content=SECRET))["id"])
    if profile == "memento":
        made = await answer(alice, "store_memory", content=SECRET, subject="Alice", category="fact")
        return str(made["id"])
    if profile == "shared":
        return str(
            json.loads(text_of(await alice.call_tool("add_memory", {"agent_name": "a", "content": SECRET})))["entry_id"]
        )
    await alice.call_tool("add_memory", {"store": "default", "path": "vault/code", "content": SECRET, "tags": ["x"]})
    return "vault/code"


@pytest.mark.parametrize("profile", ["full", "agent", "memento", "shared", "stores"])
async def test_every_tool_of_every_profile_leaks_nothing_and_changes_nothing_of_another_user(
    home: Path, keys: dict[str, str], profile: str
):
    with serving(home / profile, "--profile", profile, MNEMO_EMBEDDER="none", MNEMO_HOME=str(home)) as server:
        async with server.client(keys["alice"]) as alice, server.client(keys["bob"]) as bob:
            target = await planted(alice, profile)
            tools = {tool.name for tool in (await bob.list_tools()).tools}
            tried = attacks(profile, target)
            assert {tool for tool, _ in tried} | ({"add_memory"} if profile == "shared" else set()) == tools
            leaks = []
            for tool, args in tried:
                shown, asked = await said(bob, tool, args), json.dumps(args)
                # what bob did not send himself must not come back: alice's words, or her memory's id
                leaks += [tool for secret in ("zebra-4711", target) if secret in shown and secret not in asked]
            assert leaks == [], f"{profile}: {leaks}"
            view, args = OWNERS_VIEW.get(profile, ("list_memories", {}))
            if profile == "stores":
                view, args = "get_memory", {"store": "default", "path": target}
            assert SECRET in await said(alice, view, args), profile  # still there, unchanged


# -- graceful shutdown ------------------------------------------------------------------------------
async def test_on_sigterm_a_call_in_flight_finishes_and_the_server_exits_cleanly(home: Path, keys: dict[str, str]):
    slow = Behaviour(delay_s=2.0)  # the synthesis model takes 2 s: the call is in flight when SIGTERM comes
    merged = "Alice drinks tea and coffee"
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": merged}}]}
    with api_serving({"/v1/chat/completions": lambda body: {**reply, "model": body["model"]}}, slow) as model_url:
        env = {"MNEMO_EMBEDDER": "none", "MNEMO_SYNTHESIS_URL": model_url, "MNEMO_SYNTHESIS_MODEL": "m"}
        with serving(home, **env) as server:
            async with server.client(keys["alice"]) as alice:
                ids = [(await answer(alice, "store_memory", content=text))["memory_id"]
                       for text in ("Alice drinks tea", "Alice drinks coffee")]  # fmt: skip

                async def stop_soon() -> None:
                    await anyio.sleep(0.7)
                    server.process.send_signal(signal.SIGTERM)

                async with anyio.create_task_group() as group:
                    group.start_soon(stop_soon)
                    done = await answer(alice, "consolidate_memories", memory_ids=ids,
                                        consolidation_strategy="ai_synthesis")  # fmt: skip
            assert done["success"] is True and done["content"] == merged
            assert server.process.wait(timeout=30) == 0
    assert slow.requests, "the synthesis was asked for"
    service = open_service(Settings(home=home, config_dir=home / "config", embedder="none"))
    try:
        assert service.get(done["consolidated_memory_id"]).content == merged
    finally:
        service.storage.close()


async def test_stateless_mode_serves_2025_clients_without_sessions_so_any_server_can_answer(
    home: Path, keys: dict[str, str]
):
    with (
        serving(home, "--stateless", MNEMO_EMBEDDER="none") as one,
        serving(home, "--stateless", MNEMO_EMBEDDER="none") as two,
    ):
        async with one.client(keys["alice"], "legacy") as first:
            stored = await answer(first, "store_memory", content="Stateless servers share one store")
        seen: list[httpx2.Response] = []
        async with two.client(keys["alice"], "legacy", responses=seen) as second:
            listed = await answer(second, "list_memories")
        assert [m["memory_id"] for m in listed["memories"]] == [stored["memory_id"]]
        assert not any("mcp-session-id" in r.headers for r in seen)  # nothing ties a client to one server
