"""The ASGI layer that applies the request ledger (``mnemo.access.request_ledger``) to MCP over HTTP.

It reads a POSTed JSON-RPC message before the SDK does (then hands the same bytes on), so it
knows which tool is called: it counts the call against the caller's rate limit, puts
``X-RateLimit-*`` on the response, and answers a call over the limit with the profile's own error
(spec 004: 429 RATE_LIMITED) without running it. A ``tools/call`` with ``X-Idempotency-Key`` runs
once: its answer is kept and given back to a retry with the same request.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.responses import JSONResponse

from mnemo.access.caller import current
from mnemo.access.request_ledger import OTHER_REQUESTS, RateState, RequestLedger, retry_after
from mnemo.errors import MnemoError, RateLimited, Unavailable
from mnemo.serve.asgi import Message, Receive, Scope, Send

ANONYMOUS = "-"  # the principal of an open (keyless, loopback) server
AnswerError = Callable[[MnemoError, Any], dict[str, Any]]  # a JSON-RPC response answering a request with an error


class CallLedger:
    def __init__(self, app: Any, ledger: RequestLedger, answer_error: AnswerError) -> None:
        self.app = app
        self.ledger = ledger
        self.answer_error = answer_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body, replay = await _read_body(receive) if scope["method"] == "POST" else (b"", receive)
        message = _message(body)
        caller = current()
        principal = caller.user_id if caller is not None else ANONYMOUS
        bucket = OTHER_REQUESTS
        if message is not None and message.get("method") == "tools/call" and isinstance(message.get("params"), dict):
            bucket = str(message["params"].get("name"))
        try:
            state = await anyio.to_thread.run_sync(self.ledger.count, principal, bucket)
        except RateLimited as limited:
            over = RateState(limited.details["limit"], 0, limited.details["reset"])
            await self._refuse(message, limited, over)(scope, replay, send)
            return
        except MnemoError as failed:  # the store's database out of reach, say: the profile's own error
            await self._failed(message, failed)(scope, replay, send)
            return
        send = _with_headers(send, state.headers if state else {})
        key = _header(scope, b"x-idempotency-key")
        if key is None or message is None or bucket == OTHER_REQUESTS or "id" not in message:
            await self.app(scope, replay, send)
            return
        await self._once(scope, replay, send, message, principal, key)

    async def _once(self, scope: Scope, receive: Receive, send: Send, message: dict[str, Any], principal: str,
                    key: str) -> None:  # fmt: skip
        """Run the call under its idempotency key, or give back the answer kept for it."""
        params = message["params"]
        try:
            kept = await anyio.to_thread.run_sync(self.ledger.begin, principal, key, params.get("name"),
                                                  params.get("arguments"))  # fmt: skip
        except MnemoError as refused:
            refusal = JSONResponse(self.answer_error(refused, message["id"]), headers=retry_after(refused))
            await refusal(scope, receive, send)
            return
        if kept is not None:
            replayed = {"jsonrpc": "2.0", "id": message["id"], "result": json.loads(kept)}
            await JSONResponse(replayed, headers={"Idempotent-Replayed": "true"})(scope, receive, send)
            return
        sent: list[bytes] = []
        content_type = b""

        async def keep(reply: Message) -> None:
            nonlocal content_type
            if reply["type"] == "http.response.start":
                content_type = dict(reply.get("headers", [])).get(b"content-type", b"")
            elif reply["type"] == "http.response.body":
                sent.append(reply.get("body", b""))
            await send(reply)

        answer: str | None = None
        try:
            with self.ledger.applying(principal, key) as running:
                await self.app(scope, receive, keep)
            answer = None if running.retry_later else _result_for(message["id"], b"".join(sent), content_type)
        finally:  # no answer to keep (a dropped connection, "retry later"): the key is free, unless applied
            await anyio.to_thread.run_sync(self.ledger.end, principal, key, answer)

    def _failed(self, message: dict[str, Any] | None, error: MnemoError) -> JSONResponse:
        if message is not None and "id" in message and message.get("method") == "tools/call":
            return JSONResponse(self.answer_error(error, message["id"]), headers=retry_after(error))
        body = {"error": "store_failed", "error_description": error.message}
        status = 503 if isinstance(error, Unavailable) else 500
        return JSONResponse(body, status_code=status, headers=retry_after(error))

    def _refuse(self, message: dict[str, Any] | None, limited: RateLimited, state: RateState) -> JSONResponse:
        headers = {**state.headers, "Retry-After": str(max(1, state.reset - int(self.ledger.clock.now().timestamp())))}
        if message is not None and "id" in message and message.get("method") == "tools/call":
            return JSONResponse(self.answer_error(limited, message["id"]), headers=headers)  # the spec's error shape
        body = {"error": "rate_limited", "error_description": limited.message}
        return JSONResponse(body, status_code=429, headers=headers)


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's body (up to the SDK's own limit, past which it is not read as a message), and a
    ``receive`` that hands the same bytes on."""
    chunks: list[bytes] = []
    size, more = 0, True
    while more and size <= DEFAULT_MAX_REQUEST_BODY_SIZE:
        part = await receive()
        if part["type"] != "http.request":  # the client went away: let the app see it
            return b"", _replay(chunks, False, receive, part)
        chunks.append(part.get("body", b""))
        size += len(chunks[-1])
        more = part.get("more_body", False)
    return (b"".join(chunks) if not more else b""), _replay(chunks, more, receive, None)


def _replay(chunks: list[bytes], more: bool, receive: Receive, pending: Message | None) -> Receive:
    queue: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": more}]
    if pending is not None:
        queue.append(pending)

    async def replayed() -> Message:
        return queue.pop(0) if queue else await receive()

    return replayed


def _message(body: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(body) if body else None
    except (ValueError, RecursionError):  # the SDK answers what is not JSON (its parser bounds the depth)
        return None
    return message if isinstance(message, dict) else None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _with_headers(send: Send, headers: dict[str, str]) -> Send:
    if not headers:
        return send
    extra = [(k.lower().encode(), v.encode()) for k, v in headers.items()]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return sending


def _result_for(request_id: Any, body: bytes, content_type: bytes) -> str | None:
    """The JSON of the request's ``result`` in a JSON or server-sent-events answer; None if it had none."""
    text = body.decode("utf-8", "replace")
    if content_type.startswith(b"text/event-stream"):
        lines = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    else:
        lines = [text]
    for line in lines:
        try:
            reply = json.loads(line)
        except ValueError:
            continue
        if isinstance(reply, dict) and reply.get("id") == request_id and "result" in reply:
            return json.dumps(reply["result"], ensure_ascii=False)
    return None
