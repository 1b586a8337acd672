"""The attack suite's sizes, and an MCP client that synchronous Hypothesis tests can call.

Sizes are small by default so CI stays quick and reproducible (derandomized); setting any of the
``MNEMO_ATTACK_*`` variables runs that part bigger, and the fuzzing then draws at random:

    MNEMO_ATTACK_EXAMPLES   fuzzed calls per profile          (CI: 120)
    MNEMO_ATTACK_KILLS      kill -9 trials                    (CI: 30)
    MNEMO_ATTACK_WRITES     writes per concurrent process     (CI: 500)
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from mcp import Client
from mcp.types import CallToolResult, Tool

from mnemo.serve.server import ProfileServer

T = TypeVar("T")


def size(variable: str, default: int) -> int:
    """A size of the suite: the environment's value when set, else the CI default."""
    return int(os.environ.get(variable) or default)


EXAMPLES = size("MNEMO_ATTACK_EXAMPLES", 120)
KILLS = size("MNEMO_ATTACK_KILLS", 30)
WRITES = size("MNEMO_ATTACK_WRITES", 500)
RANDOM = bool(os.environ.get("MNEMO_ATTACK_EXAMPLES"))  # CI draws the same examples every run
CALL_TIMEOUT_S = 120


class LiveClient:
    """An in-memory MCP client of one server, held open on an event loop in a thread of its own.

    Hypothesis drives synchronous functions, and one server with its client should live across all
    of a test's examples; each ``call`` hands one coroutine to that loop and waits for its answer.
    """

    def __init__(self, server: ProfileServer) -> None:
        self._server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="attack-client", daemon=True)
        self._client: Client | None = None
        self._done: asyncio.Event | None = None
        self._held: Future[None] | None = None
        self.tools: dict[str, Tool] = {}

    def __enter__(self) -> LiveClient:
        self._thread.start()
        ready: Future[None] = Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(ready), self._loop)
        ready.result(timeout=CALL_TIMEOUT_S)
        self.tools = {tool.name: tool for tool in self._run(self._list())}
        return self

    def __exit__(self, *exc: object) -> None:
        if self._done is not None:
            self._loop.call_soon_threadsafe(self._done.set)
        if self._held is not None:
            self._held.result(timeout=CALL_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=CALL_TIMEOUT_S)
        self._loop.close()

    async def _hold(self, ready: Future[None]) -> None:
        self._done = asyncio.Event()
        try:
            async with Client(self._server) as client:
                self._client = client
                ready.set_result(None)
                await self._done.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    async def _list(self) -> list[Tool]:
        assert self._client is not None
        return (await self._client.list_tools()).tools

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=CALL_TIMEOUT_S)

    def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult | BaseException:
        """The tool's result, or the exception the client raised (a protocol error, a timeout)."""
        assert self._client is not None
        try:
            return self._run(self._client.call_tool(tool, arguments))
        except Exception as exc:
            return exc
