"""A real ``mnemo serve --http`` process on loopback, and MCP clients that call it with a key."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mnemo.access.caller import Role
from mnemo.access.keys import KeyRing

START_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class HttpServer:
    url: str  # the MCP endpoint
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    @asynccontextmanager
    async def client(
        self,
        key: str | None,
        mode: str = "auto",
        headers: dict[str, str] | None = None,
        responses: list[httpx2.Response] | None = None,
    ) -> AsyncIterator[Client]:
        """An MCP client that sends ``key`` as X-API-Key; mode "legacy" (2025, sessions) or "auto" (2026).

        ``responses`` collects every HTTP response it gets (for their headers)."""
        sent = {**({"X-API-Key": key} if key else {}), **(headers or {})}

        async def seen(response: httpx2.Response) -> None:
            if responses is not None:
                responses.append(response)

        async with (
            httpx2.AsyncClient(headers=sent, timeout=60, event_hooks={"response": [seen]}) as http,
            Client(streamable_http_client(self.url, http_client=http), mode=mode) as client,
        ):
            yield client


def member_keys(home: Path, *users: str) -> dict[str, str]:
    """A member's API key for each user, made in the home's key ring."""
    ring = KeyRing(home)
    return {user: ring.create(user, Role.MEMBER)[1] for user in users}


def server_env(home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(home / "config"), **extra}
    env.pop("MNEMO_STORE", None)
    return env


@contextmanager
def serving(home: Path, *args: str, **env: str) -> Iterator[HttpServer]:
    """``mnemo serve --http`` on a free loopback port, until the block ends (then SIGTERM)."""
    port = free_port()
    log = home / "serve-http.log"
    home.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "mnemo", "serve", "--http", "--port", str(port), *args],
            stdout=out, stderr=subprocess.STDOUT, env=server_env(home, **env),
        )  # fmt: skip
    server = HttpServer(f"http://127.0.0.1:{port}/mcp", process, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"mnemo serve --http exited {process.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx2.get(f"{server.base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mnemo serve --http did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
