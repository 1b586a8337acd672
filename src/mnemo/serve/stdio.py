"""MCP over stdin/stdout, guarded: every request gets an answer and no line stops the server.

The SDK's stdio transport parses each line with one pydantic call and hands a line it cannot read
to the session as an exception, which logs and drops it. So a request holding a lone surrogate
escape, NaN, 100,000 nested arrays or bytes that are not UTF-8 was never answered, and one whose id
is a float, an object or null was read as a notification: its client waited until its timeout. An
answer that cannot be serialised stopped the SDK's writer task, and with it the server.

Here each line is screened before the SDK sees it (size, UTF-8, strict JSON, depth, text,
envelope); a line that fails is refused with a JSON-RPC error (-32700 parse error, -32600 invalid
request) that carries the request's id when one can be found, and the next line is read as usual.

The input ends when the client closes stdin, or on SIGINT (Ctrl-C) or SIGTERM. Either way every
request already read is answered (for up to ``DRAIN_TIMEOUT_S``) before the server stops: the SDK
cancels what is in flight when its input ends, so the end is passed on only once they are done.
A second signal stops at once. Stdin is read by a daemon thread of its own, so a read that never
returns cannot keep the process from exiting.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 16 * 1024 * 1024  # one message; a longer line is refused, never held whole
MAX_DEPTH = 64  # nesting of arrays and objects; real MCP messages need well under 10
DRAIN_TIMEOUT_S = 30  # how long requests in flight may take to answer once the input has ended
_ID_PREFIX_CHARS = 4096  # where the id of a line that cannot be parsed is looked for
_SURROGATE = re.compile("[\ud800-\udfff]")
# The id of a line that cannot be parsed, read from its text: the first "id" member with a plain value.
_ID_IN_TEXT = re.compile(r'"id"\s*:\s*(-?\d{1,30}(?![\d.eE])|"(?:[^"\\]|\\.){0,256}")')


@dataclass(frozen=True, slots=True)
class Refusal:
    """A JSON-RPC error answer to a line the server will not pass on."""

    id: Any  # the request's id as sent (a float too), or None when it cannot be found
    code: int
    message: str

    def line(self) -> bytes:
        # ASCII-only JSON: an echoed id holding a lone surrogate is written as its escape.
        answer = {"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}}
        return json.dumps(answer, separators=(",", ":")).encode("ascii") + b"\n"


def screen(line: bytes) -> SessionMessage | Refusal | None:
    """What to do with one line from the client: pass a message on, answer a refusal, or skip it."""
    raw = line.strip()
    if not raw:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refusal(
            _id_of(raw.decode("utf-8", "replace")), PARSE_ERROR, f"Parse error: byte {exc.start} is not UTF-8"
        )
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        return Refusal(_id_in_text(text), PARSE_ERROR, f"Parse error: nested deeper than {MAX_DEPTH} levels")
    except ValueError as exc:  # JSONDecodeError, and NaN / Infinity
        return Refusal(_id_of(text), PARSE_ERROR, f"Parse error: {exc}")
    problem = _shape_problem(value)
    if problem is not None:
        code, message = problem
        return Refusal(_usable_id(value), code, message)
    return _message(value)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _shape_problem(value: Any) -> tuple[int, str] | None:
    """Nesting past ``MAX_DEPTH``, or a lone surrogate in any string (it cannot be stored or sent as UTF-8)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                return INVALID_REQUEST, f"Invalid request: nested deeper than {MAX_DEPTH} levels"
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                if isinstance(key, str) and _SURROGATE.search(key):
                    return PARSE_ERROR, "Parse error: a lone UTF-16 surrogate escape is not text"
                pending.append((child, depth + 1))
        elif isinstance(item, str) and _SURROGATE.search(item):
            return PARSE_ERROR, "Parse error: a lone UTF-16 surrogate escape is not text"
    return None


def _message(value: Any) -> SessionMessage | Refusal | None:
    if isinstance(value, list):
        return Refusal(None, INVALID_REQUEST, "Invalid request: batches (JSON arrays) are not supported")
    if not isinstance(value, dict):
        return Refusal(None, INVALID_REQUEST, "Invalid request: a JSON-RPC message is a JSON object")
    is_response = "result" in value or "error" in value
    if "id" in value and not _is_request_id(value["id"]):
        if is_response:  # the client's answer to no request of ours: answering it back could loop
            log.warning("dropped a response with an unusable id")
            return None
        return Refusal(_usable_id(value), INVALID_REQUEST, "Invalid request: id must be a string or an integer")
    try:
        message = jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as exc:
        if "id" not in value or is_response:
            log.warning("dropped an unreadable notification or response: %s", exc.errors()[0]["msg"])
            return None
        first = exc.errors()[0]
        return Refusal(value["id"], INVALID_REQUEST, f"Invalid request: {first['msg']}")
    return SessionMessage(message)


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _usable_id(value: Any) -> Any:
    """The message's id if it can be echoed to help the client match the answer: a string or any number."""
    if not isinstance(value, dict):
        return None
    found = value.get("id")
    return found if isinstance(found, str | int | float) and not isinstance(found, bool) else None


def _id_of(text: str) -> Any:
    """The id of a line refused before it was read: from a lenient parse, else from its text."""
    try:
        return _usable_id(json.loads(text))
    except (ValueError, RecursionError):
        return _id_in_text(text)


def _id_in_text(text: str) -> Any:
    match = _ID_IN_TEXT.search(text[:_ID_PREFIX_CHARS])
    if match is None:
        return None
    with suppress(ValueError):
        return json.loads(match.group(1))
    return None


def _too_long(start: bytes) -> Refusal:
    problem = f"Invalid request: a message is at most {MAX_LINE_BYTES} bytes"
    return Refusal(_id_in_text(start.decode("utf-8", "replace")), INVALID_REQUEST, problem)


def encode(message: SessionMessage) -> bytes:
    """One line of JSON for a message of the server; an answer that cannot be written becomes an error."""
    try:
        return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
    except (PydanticSerializationError, ValueError):
        log.exception("an answer could not be written as JSON")
        request_id = getattr(message.message, "id", None)
        if request_id is None:  # a notification: nobody waits for it
            return b""
        return Refusal(request_id, INTERNAL_ERROR, "Internal error: the answer could not be written as JSON").line()


def _read_line(wire: BinaryIO) -> tuple[bytes, bool]:
    """The next line and whether it fits ``MAX_LINE_BYTES``; of a longer one, its start (the rest is dropped)."""
    line = wire.readline(MAX_LINE_BYTES + 1)
    if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
        return line, True
    rest = line
    while rest and not rest.endswith(b"\n"):
        rest = wire.readline(1024 * 1024)
    return line[:_ID_PREFIX_CHARS], False


@contextmanager
def _claimed_std_streams() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """The wire on private descriptors, while fd 0 reads the null device and fd 1 writes to stderr,
    so a stray print or a child process cannot take or corrupt protocol bytes; restored after."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        # Never closed: the reader thread may still block in a read on it after the transport ends
        # (closing it would wait for that read), and closefd=False leaves the descriptor to exit.
        reader = os.fdopen(wire_in, "rb", closefd=False)
        with os.fdopen(wire_out, "wb", closefd=False) as writer:
            yield reader, writer
    finally:
        sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


class _InFlight:
    """The ids of the requests passed to the server and not yet answered."""

    def __init__(self) -> None:
        self.ids: set[str | int] = set()
        self._none_left = anyio.Event()

    def sent(self, message: SessionMessage) -> None:
        if isinstance(message.message, JSONRPCRequest):
            self.ids.add(message.message.id)

    def answered(self, message: SessionMessage) -> None:
        if isinstance(message.message, JSONRPCResponse | JSONRPCError):
            self.ids.discard(message.message.id)  # type: ignore[arg-type]
            if not self.ids:
                self._none_left.set()

    async def drained(self) -> None:
        """Once every request passed on is answered, or DRAIN_TIMEOUT_S has passed."""
        with anyio.move_on_after(DRAIN_TIMEOUT_S):
            while self.ids:
                self._none_left = anyio.Event()
                await self._none_left.wait()
        if self.ids:
            log.warning("stopped with %d requests unanswered after %d s", len(self.ids), DRAIN_TIMEOUT_S)


_END = (b"", True)  # what the line queue holds once the input has ended


def _lines_of(wire: BinaryIO, lines: queue.Queue[tuple[bytes, bool]]) -> None:
    """Read the wire line by line into the queue, then _END (a daemon thread's whole life)."""
    while True:
        line = _read_line(wire)
        lines.put(line)
        if not line[0]:
            return


@asynccontextmanager
async def guarded_stdio() -> AsyncIterator[
    tuple[ObjectReceiveStream[SessionMessage | Exception], ObjectSendStream[SessionMessage]]
]:
    """The (read, write) streams of an MCP server on this process's stdin and stdout."""
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    write_lock = anyio.Lock()
    in_flight = _InFlight()
    lines: queue.Queue[tuple[bytes, bool]] = queue.Queue()

    with _claimed_std_streams() as (wire_in, wire_out):

        async def write(data: bytes) -> None:
            if data:
                async with write_lock:
                    await anyio.to_thread.run_sync(_write_all, wire_out, data)

        async def read_lines() -> None:
            async with to_server:
                while True:
                    line, fits = await anyio.to_thread.run_sync(lines.get, abandon_on_cancel=True)
                    if not line:  # the client closed stdin, or a signal came: the server ends
                        await in_flight.drained()
                        return
                    if not fits:
                        await write(_too_long(line).line())
                        continue
                    verdict = screen(line)
                    if isinstance(verdict, Refusal):
                        log.warning("refused a message: %s", verdict.message)
                        await write(verdict.line())
                    elif verdict is not None:
                        in_flight.sent(verdict)
                        await to_server.send(verdict)

        async def write_answers() -> None:
            async with from_server:
                async for message in from_server:
                    await write(encode(message))
                    in_flight.answered(message)

        threading.Thread(target=_lines_of, args=(wire_in, lines), name="mnemo-stdin", daemon=True).start()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_lines)
            tasks.start_soon(write_answers)
            if threading.current_thread() is threading.main_thread():
                tasks.start_soon(_stop_on_signals, lines, in_flight)
            try:
                yield from_client, to_client
            finally:
                lines.put(_END)  # frees a worker thread still waiting for a line
                tasks.cancel_scope.cancel()


async def _stop_on_signals(lines: queue.Queue[tuple[bytes, bool]], in_flight: _InFlight) -> None:
    """SIGINT or SIGTERM ends the input (what is in flight is answered); a second one ends the process."""
    stopping = False
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for received in signals:
            name = signal.Signals(received).name
            if stopping:
                log.warning("%s again: stopping now", name)
                os._exit(128 + received)
            stopping = True
            log.info("%s: stopping once the %d requests in flight are answered", name, len(in_flight.ids))
            lines.put(_END)


def _write_all(wire: BinaryIO, data: bytes) -> None:
    try:
        wire.write(data)
        wire.flush()
    except BrokenPipeError:  # the client is gone; reading stdin ends the server next
        log.info("the client closed stdout")
