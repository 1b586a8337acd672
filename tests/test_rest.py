"""The REST API over a real `mnemo serve --http`: spec 004's operations as resources, same auth and limits.

Then schemathesis fuzzes every operation from the API's own OpenAPI document: no answer is a 5xx,
and every answer matches its documented schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from attack_checks import FIGURES
from attack_live import EXAMPLES, RANDOM
from http_server import HttpServer, member_keys, serving

API = "/api/v1"


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, dict[str, str]]]:
    home = tmp_path_factory.mktemp("rest") / "home"
    keys = member_keys(home, "alice", "bob")
    with serving(home, MNEMO_EMBEDDER="none", MNEMO_RATE_LIMITS="off") as server:
        yield server, keys


def call(rest: tuple[HttpServer, dict[str, str]], user: str, method: str, path: str, **kwargs: Any) -> httpx2.Response:
    server, keys = rest
    headers = {"X-API-Key": keys[user], **kwargs.pop("headers", {})}
    return httpx2.request(method, server.base + API + path, headers=headers, timeout=60, **kwargs)


def test_every_operation_answers_in_spec_004s_shapes(rest):
    boiler = {"content": "The boiler was serviced in March", "metadata": {"tags": ["house"]}}
    made = call(rest, "alice", "POST", "/memories", json=boiler)
    assert made.status_code == 201
    memory_id = made.json()["memory_id"]
    shown = call(rest, "alice", "GET", f"/memories/{memory_id}").json()
    assert shown["memory"]["content"] == "The boiler was serviced in March"
    assert [v["action"] for v in shown["versions"]] == ["create"]
    updated = call(rest, "alice", "PATCH", f"/memories/{memory_id}", json={"updates": {"content": "Serviced in May"}})
    assert updated.status_code == 200 and updated.json()["version"] == 2
    listed = call(rest, "alice", "GET", "/memories", params={"tag": "house", "limit": 5, "sort_by": "updated_at"})
    assert [m["memory_id"] for m in listed.json()["memories"]] == [memory_id]
    found = call(rest, "alice", "POST", "/memories/recall", json={"query": "serviced"})
    assert found.json()["memories"][0]["memory_id"] == memory_id
    archived = call(rest, "alice", "POST", f"/memories/{memory_id}/archive", json={})
    assert archived.status_code == 200
    assert call(rest, "alice", "POST", f"/memories/{memory_id}/restore", json={}).status_code == 200
    stats = call(rest, "alice", "GET", "/stats", params={"scope": "user"})
    assert stats.status_code == 200 and stats.json()["success"] is True
    forgotten = call(rest, "alice", "DELETE", f"/memories/{memory_id}", params={"reason": "outdated"})
    assert forgotten.json()["deletion_type"] == "soft"
    assert call(rest, "alice", "GET", f"/memories/{memory_id}").json()["memory"]["status"] == "deleted"


def test_errors_carry_their_status_and_the_spec_error_object(rest):
    missing = call(rest, "alice", "GET", "/memories/no-such-memory")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "MEMORY_NOT_FOUND"
    bad_json = call(
        rest, "alice", "POST", "/memories", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert bad_json.status_code == 400 and bad_json.json()["success"] is False
    bad_query = call(rest, "alice", "GET", "/memories", params={"limit": "ten"})
    assert bad_query.status_code == 400
    assert call(rest, "alice", "POST", "/memories", json={"content": ""}).status_code == 400
    server, _ = rest
    assert httpx2.get(server.base + API + "/memories").status_code == 401


def test_one_users_private_memory_is_not_anothers_and_a_shared_one_is_read_only(rest):
    private = call(rest, "alice", "POST", "/memories", json={"content": "Alice's bike lock is 2231"}).json()[
        "memory_id"
    ]
    team = {"content": "Team offsite is in Porto", "metadata": {"access_level": "shared"}}
    shared = call(rest, "alice", "POST", "/memories", json=team).json()["memory_id"]
    assert call(rest, "bob", "GET", f"/memories/{private}").status_code == 404
    assert call(rest, "bob", "GET", f"/memories/{shared}").status_code == 200
    assert call(rest, "bob", "PATCH", f"/memories/{shared}", json={"updates": {"content": "x"}}).status_code == 403
    assert call(rest, "bob", "DELETE", f"/memories/{private}").status_code == 404
    listed = call(rest, "bob", "GET", "/memories").json()["memories"]
    assert private not in {m["memory_id"] for m in listed}


def test_an_idempotency_key_makes_a_retried_create_one_memory(rest):
    key = {"X-Idempotency-Key": "rest-create-1"}
    first = call(rest, "bob", "POST", "/memories", json={"content": "Bob renewed the domain"}, headers=key)
    again = call(rest, "bob", "POST", "/memories", json={"content": "Bob renewed the domain"}, headers=key)
    assert (first.status_code, again.status_code) == (201, 201)
    assert first.json() == again.json() and again.headers["idempotent-replayed"] == "true"
    other = call(rest, "bob", "POST", "/memories", json={"content": "Something else"}, headers=key)
    assert other.status_code == 422


def test_the_openapi_document_names_every_route(rest):
    server, keys = rest
    document = httpx2.get(server.base + API + "/openapi.json", headers={"X-API-Key": keys["alice"]}).json()
    assert document["openapi"] == "3.1.0"
    assert {"/api/v1/memories", "/api/v1/memories/{memory_id}", "/api/v1/stats"} <= set(document["paths"])


# -- fuzzing from the OpenAPI document ------------------------------------------------------------
def test_no_generated_request_gets_a_5xx_or_an_undocumented_answer(rest) -> None:
    """Schemathesis draws requests for every operation from the OpenAPI document (driven by plain
    Hypothesis: its pytest plugin does not run under pytest 9)."""
    server, keys = rest
    auth = {"X-API-Key": keys["alice"]}
    schema = schemathesis.openapi.from_url(server.base + API + "/openapi.json", headers=auth)
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(max_examples=max(5, EXAMPLES // 12), derandomize=not RANDOM, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=operation.as_strategy())
        def answers_well(case: Any) -> None:
            nonlocal calls
            calls += 1
            response = case.call(base_url=server.base, headers=auth, timeout=60)
            asked = f"{case.method} {case.formatted_path} {case.body!r}"
            assert response.status_code < 500, f"{asked}: {response.text[:300]}"
            case.validate_response(response, checks=[schemathesis.checks.response_schema_conformance])

        answers_well()
    FIGURES["rest: fuzzed calls (schemathesis, no 5xx, answers as documented)"] += calls


def test_every_endpoint_tried_on_another_users_memory_leaks_and_changes_nothing(rest):
    secret = call(rest, "alice", "POST", "/memories", json={"content": "Alice's safe opens with 90-12-77"}).json()
    target = secret["memory_id"]
    probes = [
        ("GET", f"/memories/{target}", None, None),
        ("PATCH", f"/memories/{target}", {"updates": {"content": "bob was here"}}, None),
        ("DELETE", f"/memories/{target}", None, {"hard_delete": "true"}),
        ("POST", f"/memories/{target}/archive", {}, None),
        ("POST", f"/memories/{target}/restore", {}, None),
        (
            "POST",
            "/memories/consolidate",
            {"memory_ids": [target, target], "consolidation_strategy": "merge_all"},
            None,
        ),
        ("POST", "/memories/recall", {"query": "safe opens"}, None),
        ("POST", "/memories/recall", {"query": "safe", "filters": {"user_id": "alice"}}, None),
        ("GET", "/memories", None, {"status": "archived"}),
        ("POST", "/memories/list", {"filters": {"user_id": "alice"}}, None),
        ("GET", "/stats", None, {"scope": "user", "scope_id": "alice"}),
        ("GET", "/stats", None, {"scope": "global"}),
        ("POST", "/memories", {"content": "forged", "context": {"user_id": "alice"}}, None),
    ]
    server, _ = rest
    document = httpx2.get(server.base + API + "/openapi.json", headers={"X-API-Key": rest[1]["bob"]}).json()
    tried = {(method, path.replace(target, "{memory_id}")) for method, path, _, _ in probes}
    assert tried == {(method.upper(), path.removeprefix(API)) for path, operations in document["paths"].items()
                     for method in operations}  # fmt: skip
    for method, path, body, params in probes:
        answer = call(rest, "bob", method, path, json=body, params=params)
        assert "90-12-77" not in answer.text, (method, path)
        assert answer.status_code in (200, 201, 400, 403, 404), (method, path, answer.text[:200])
    mine = call(rest, "alice", "GET", f"/memories/{target}").json()["memory"]
    assert (mine["content"], mine["status"], mine["version"]) == ("Alice's safe opens with 90-12-77", "active", 1)
