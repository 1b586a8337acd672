"""Raw JSON-RPC lines the SDK client cannot send, to a real ``mnemo serve`` over stdio.

The lines go one by one to one server (a new one replaces it if a line killed it). Whatever the
line holds, the server must stay alive, answer the line's request when it carries an id (a result
or a JSON-RPC error), and then answer an ordinary request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from attack_checks import FIGURES
from attack_stdio import RawServer

ANSWER_TIMEOUT_S = 10  # a healthy server answers these in well under a second
STORE = {"name": "store_memory", "arguments": {"content": "Emma is lactose intolerant"}}


def _call(request_id: Any, arguments_json: str, tool: str = "store_memory") -> bytes:
    body = f'{{"name": "{tool}", "arguments": {arguments_json}}}'
    return f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "method": "tools/call", "params": {body}}}\n'.encode()


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# (what the line is, its bytes, the id whose answer is due, or None when it carries none).
LINES: list[tuple[str, bytes, Any]] = [
    ("non-UTF-8 bytes in a string", _call(11, '{"content": "caf@"}').replace(b"@", b"\xe9\xff"), 11),
    ("NaN literal", _call(12, '{"content": "x", "metadata": {"importance": NaN}}'), 12),
    ("Infinity literal", _call(13, '{"content": "x", "metadata": {"importance": -Infinity}}'), 13),
    ("lone surrogate escape", _call(14, '{"content": "half \\ud800 a pair"}'), 14),
    ("10 MB line", _call(15, json.dumps({"content": "a" * 10_000_000})), 15),
    ("nesting 100,000 deep", _call(16, f'{{"content": "x", "related_memory_ids": {_deep(100_000)}}}'), 16),
    ("string id", _call("ünï\u2028", json.dumps(STORE["arguments"])), "ünï\u2028"),
    ("empty string id", _call("", json.dumps(STORE["arguments"])), ""),
    ("negative id", _call(-7, json.dumps(STORE["arguments"])), -7),
    ("id past 64 bits", _call(2**70, json.dumps(STORE["arguments"])), 2**70),
    ("fractional id", _call(1.5, json.dumps(STORE["arguments"])), 1.5),
    ("unknown method", b'{"jsonrpc": "2.0", "id": 17, "method": "memories/explode"}\n', 17),
    ("no jsonrpc member", b'{"id": 18, "method": "tools/list"}\n', 18),
    ("params not an object", b'{"jsonrpc": "2.0", "id": 19, "method": "tools/call", "params": [1, 2]}\n', 19),
    ("arguments not an object", _call(20, '"not an object"'), 20),
    ("truncated JSON", b'{"jsonrpc": "2.0", "id": 21, "method": "tools/li\n', None),
    ("bare garbage", b"\x00\x01\x02 not json at all\n", None),
    ("empty batch", b"[]\n", None),
]


class Serving:
    """One server for all the lines; a new one when the last line left it dead or mute."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.server: RawServer | None = None

    def get(self) -> RawServer:
        if self.server is None or self.server.process.poll() is not None:
            self.close()
            self.server = RawServer(self.home, "full")
            assert self.server.initialize() is not None, "no answer to initialize"
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    held = Serving(tmp_path_factory.mktemp("jsonrpc") / "home")
    yield held
    held.close()


CASES = [pytest.param(b, i, id=name) for name, b, i in LINES]


@pytest.mark.parametrize(("line", "request_id"), CASES)
def test_a_hostile_json_rpc_line_gets_an_answer_and_leaves_the_server_serving(
    line: bytes, request_id: Any, serving: Serving
):
    server = serving.get()
    server.send(line)
    FIGURES["json-rpc: hostile lines sent"] += 1
    try:
        if request_id is not None:
            answer = server.answer(request_id, timeout=ANSWER_TIMEOUT_S)
            assert answer is not None, f"no answer to the request with id {request_id!r:.40}"
            assert ("result" in answer) != ("error" in answer), answer
        after = server.request("tools/list")
        assert after is not None and "result" in after, "the server stopped answering"
    except AssertionError:
        serving.close()  # the next line gets a server in a known state
        raise
    FIGURES["json-rpc: lines answered and survived"] += 1
