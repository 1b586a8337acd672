"""OAuth 2.1 resource-server mode: JWT bearer tokens from an issuer whose keys this test makes.

The issuer is a real HTTP server on loopback publishing a JWKS; tokens are signed with its RSA
key (and, to be refused, with another key, a shared secret, a wrong audience or issuer, expired).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from http_server import HttpServer, free_port, serving
from mcp_calls import answer
from mnemo.access.caller import Role
from mnemo.access.keys import KeyRing

AUDIENCE = "mnemo-test"


class Issuer:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def token(self, sub: str = "dana", *, key: Any = None, algorithm: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300, **claims}
        return jwt.encode(body, key or self.key, algorithm=algorithm, headers={"kid": "k1"})


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    made = Issuer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(made.jwks).encode()
            self.send_response(200 if self.path == "/.well-known/jwks.json" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", made.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield made
    server.shutdown()
    server.server_close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def server(home: Path, issuer: Issuer) -> Iterator[HttpServer]:
    env = {"MNEMO_EMBEDDER": "none", "MNEMO_OAUTH_ISSUER": issuer.url, "MNEMO_OAUTH_AUDIENCE": AUDIENCE,
           "MNEMO_OAUTH_ROLE_CLAIM": "mnemo_role", "MNEMO_PUBLIC_URL": "https://mnemo.example.com/mcp"}  # fmt: skip
    with serving(home, **env) as running:
        yield running


def status(server: HttpServer, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx2.post(server.url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_valid_token_acts_as_its_subject(server: HttpServer, issuer: Issuer, mode: str):
    bearer = {"Authorization": f"Bearer {issuer.token('dana')}"}
    async with server.client(None, mode, headers=bearer) as dana:
        stored = await answer(dana, "store_memory", content="Dana's flight lands at 9")
        assert stored["success"] is True
    other = {"Authorization": f"Bearer {issuer.token('erin')}"}
    async with server.client(None, mode, headers=other) as erin:
        assert (await answer(erin, "list_memories"))["memories"] == []  # dana's memory is private to dana
    admin = {"Authorization": f"Bearer {issuer.token('ops', mnemo_role='admin')}"}
    async with server.client(None, mode, headers=admin) as ops:
        listed = await answer(ops, "list_memories", filters={"user_id": "dana"})
        assert [m["content"] for m in listed["memories"]] == ["Dana's flight lands at 9"]


def test_expired_misaddressed_forged_and_symmetric_tokens_are_refused(server: HttpServer, issuer: Issuer):
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    refused = {
        "expired": issuer.token(exp=now - 10),
        "wrong audience": issuer.token(aud="someone-else"),
        "wrong issuer": issuer.token(iss="https://evil.example"),
        "another key": issuer.token(key=stranger),
        "shared secret": issuer.token(key="secret" * 8, algorithm="HS256"),
        "no subject": issuer.token(sub=""),
        "not a jwt": "abc.def.ghi",
    }
    for why, token in refused.items():
        assert status(server, token) == 401, why
    assert status(server, issuer.token()) != 401  # let in (the SDK then wants a handshake first: 400)


def test_the_401_names_the_protected_resource_metadata_which_names_the_issuer(server: HttpServer, issuer: Issuer):
    response = httpx2.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert 'resource_metadata="https://mnemo.example.com/.well-known/oauth-protected-resource/mcp"' in challenge
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        metadata = httpx2.get(server.base + path).json()
        assert metadata["resource"] == "https://mnemo.example.com/mcp"
        assert metadata["authorization_servers"] == [issuer.url]


def test_api_keys_still_work_beside_tokens(server: HttpServer, home: Path):
    _, key = KeyRing(home).create("alice", Role.MEMBER)
    response = httpx2.post(server.url, headers={"X-API-Key": key}, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code != 401
