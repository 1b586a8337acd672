"""Hand-written JSON-RPC lines to a real ``mnemo serve``: each request gets an answer, the server lives on."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.message import SessionMessage
from mcp.types import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, JSONRPCResponse

from mnemo.serve.stdio import MAX_DEPTH, MAX_LINE_BYTES, encode

ANSWER_TIMEOUT_S = 30.0


class RawClient:
    """A ``mnemo serve`` process spoken to in bytes: lines in, parsed answer lines out."""

    def __init__(self, home: Path, config: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mnemo", "serve", "--profile", "full"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(config), "MNEMO_EMBEDDER": "none"},
            cwd=home.parent,
        )
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.answers.put(json.loads(line))  # every line the server writes must be JSON

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        return self.answers.get(timeout=ANSWER_TIMEOUT_S)

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode())
        return self.answer()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self._reader.join(timeout=30)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawClient]:
    (tmp_path / "home").mkdir()
    client = RawClient(tmp_path / "home", tmp_path / "config")
    handshake = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    assert "result" in client.request(0, "initialize", handshake)
    client.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    yield client
    client.close()


def _call(name: str, arguments: str | bytes) -> bytes:
    given = arguments if isinstance(arguments, bytes) else arguments.encode()
    return b'{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"%s","arguments":%s}}' % (
        name.encode(),
        given,
    )


HOSTILE: list[tuple[str, bytes, Any, int]] = [
    # (what, the line (ID stands for its id), the id the answer carries, the error code)
    ("NaN literal", _call("list_memories", '{"limit":NaN}'), "ID", PARSE_ERROR),
    ("Infinity literal", _call("store_memory", '{"content":"x","importance":-Infinity}'), "ID", PARSE_ERROR),
    ("lone surrogate", _call("store_memory", r'{"content":"a\ud800b"}'), "ID", PARSE_ERROR),
    ("lone surrogate in a key", _call("store_memory", r'{"content":"a","\udfff":1}'), "ID", PARSE_ERROR),
    ("100,000 nested arrays", _call("store_memory", "[" * 100_000 + "]" * 100_000), "ID", PARSE_ERROR),
    (
        "nesting past the limit",
        _call("store_memory", "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)),
        "ID",
        INVALID_REQUEST,
    ),
    ("bytes that are not UTF-8", _call("store_memory", b'{"content":"\xff\xfe"}'), "ID", PARSE_ERROR),
    ("not JSON", b"ID hello", None, PARSE_ERROR),
    ("cut short", b'{"jsonrpc":"2.0","id":ID,"method":"ping"', "ID", PARSE_ERROR),
    ("a batch", b'[{"jsonrpc":"2.0","id":ID,"method":"ping"}]', None, INVALID_REQUEST),
    ("a bare number", b"ID", None, INVALID_REQUEST),
    ("no method", b'{"jsonrpc":"2.0","id":ID}', "ID", INVALID_REQUEST),
    ("wrong jsonrpc version", b'{"jsonrpc":"1.0","id":ID,"method":"ping"}', "ID", INVALID_REQUEST),
    ("params not an object", b'{"jsonrpc":"2.0","id":ID,"method":"tools/list","params":[1]}', "ID", INVALID_REQUEST),
    ("float id", b'{"jsonrpc":"2.0","id":ID.5,"method":"ping"}', "ID.5", INVALID_REQUEST),
    ("object id", b'{"jsonrpc":"2.0","id":{"n":ID},"method":"ping"}', None, INVALID_REQUEST),
    ("null id", b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, INVALID_REQUEST),
    ("boolean id", b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, INVALID_REQUEST),
]


def test_every_hostile_request_is_answered_with_a_json_rpc_error_and_the_server_keeps_serving(raw: RawClient):
    for number, (what, line, expected_id, code) in enumerate(HOSTILE, start=100):
        raw.send(line.replace(b"ID", str(number).encode()))
        answer = raw.answer()
        expected = None if expected_id is None else json.loads(expected_id.replace("ID", str(number)))
        assert answer.get("id") == expected, what
        assert answer["error"]["code"] == code, (what, answer)
        assert raw.request(number * 10, "ping") == {"jsonrpc": "2.0", "id": number * 10, "result": {}}, what
    # The store behind it still takes and gives memories.
    stored = raw.request(1, "tools/call", {"name": "store_memory", "arguments": {"content": "Emma likes tea"}})
    assert stored["result"]["structuredContent"]["success"] is True
    listed = raw.request(2, "tools/call", {"name": "list_memories", "arguments": {}})
    assert listed["result"]["structuredContent"]["total_count"] == 1


def test_odd_but_valid_ids_are_echoed_as_sent(raw: RawClient):
    huge = 10**40
    raw.send(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % huge)
    assert raw.answer() == {"jsonrpc": "2.0", "id": huge, "result": {}}
    assert raw.request(-7, "ping")["id"] == -7
    raw.send(json.dumps({"jsonrpc": "2.0", "id": "\u00e9\U0001f600", "method": "ping"}).encode())
    assert raw.answer()["id"] == "\u00e9\U0001f600"


def test_a_ten_megabyte_line_is_answered_and_a_line_past_the_limit_is_refused_without_being_held(raw: RawClient):
    ten_mb = _call("store_memory", json.dumps({"content": "word " * 2_000_000})).replace(b"ID", b"1")
    raw.send(ten_mb)
    answer = raw.answer()
    assert answer["id"] == 1
    assert answer["result"]["isError"] is True  # past the profile's content limit: its own error, in time
    too_long = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"' + b"a" * (MAX_LINE_BYTES + 10) + b'"}}'
    raw.send(too_long)
    refused = raw.answer()
    assert refused["id"] == 2
    assert refused["error"]["code"] == INVALID_REQUEST
    assert raw.request(3, "ping")["result"] == {}


def test_an_answer_that_cannot_be_written_as_json_becomes_an_internal_error_for_its_request():
    answer = SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=5, result={"text": "a\ud800b"}))
    assert json.loads(encode(answer)) == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": INTERNAL_ERROR, "message": "Internal error: the answer could not be written as JSON"},
    }
