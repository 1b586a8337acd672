"""Who an HTTP request runs as: the ASGI layer before /mcp and the REST API.

For every request the guard

- gives it a request id (the caller's ``X-Request-Id`` when it is a short token, else a new one),
  sent back as ``X-Request-Id``, written in every log line of the request and in spec 004's
  error answers;
- authenticates it (``Authenticator``): ``Authorization: Bearer <key or token>`` or
  ``X-API-Key: <key>``; no or a bad key is a 401 with ``WWW-Authenticate: Bearer``;
- runs it as that key's caller (``mnemo.access.caller.acting_as``), whose access rules the engine applies.
  The SDK hands each message's context to its handler, so the caller reaches the tool in both eras.
"""

from __future__ import annotations

import logging
import re
import uuid

import anyio.to_thread
from starlette.responses import JSONResponse, Response

from mnemo.access.caller import Caller, acting_as
from mnemo.access.keys import PREFIX as KEY_PREFIX
from mnemo.access.keys import KeyRing
from mnemo.serve.asgi import ASGIApp, Message, Receive, Scope, Send
from mnemo.serve.oauth import JwtVerifier

log = logging.getLogger("mnemo.http")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class Authenticator:
    """Decides whether a request is admitted, and as whom; it fails closed.

    A key ring that exists (keys were made, even if every one is revoked since) or an OAuth issuer
    makes every request show a key or token. Once that is so it stays so for the life of the
    process, whatever later happens to ``keys.json`` (emptied of live keys, deleted, damaged): a
    server that started with authentication never runs without it. Only a server that never had
    either admits requests without a key, as the unrestricted local caller, and ``check_bind``
    keeps that one on loopback.
    """

    def __init__(self, keys: KeyRing, tokens: JwtVerifier | None = None) -> None:
        self.keys = keys
        self.tokens = tokens
        self._required = tokens is not None or keys.set_up()

    @property
    def required(self) -> bool:
        if not self._required and self.keys.set_up():  # a key made while serving turns it on for good
            log.warning("a key ring appeared: from now on every request must show a key")
            self._required = True
        return self._required

    async def admit(self, headers: dict[str, str]) -> tuple[bool, Caller | None]:
        """Whether to admit the request, and as whom (None: the local caller of an open server)."""
        if not self.required:
            return True, None
        bearer = headers.get("authorization", "")
        token = bearer[7:].strip() if bearer[:7].lower() == "bearer " else headers.get("x-api-key", "").strip()
        if not token:
            return False, None
        if token.startswith(KEY_PREFIX) or self.tokens is None:
            key = self.keys.verify(token)
            return (False, None) if key is None else (True, key.caller)
        caller = await anyio.to_thread.run_sync(self.tokens.verify, token)  # may fetch the issuer's keys
        return caller is not None, caller


class Guard:
    """The ASGI layer before an app: request id, authentication, the caller of the request."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        given = headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID.fullmatch(given) else f"req_{uuid.uuid4().hex[:16]}"

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        with acting_as(None, request_id):
            admitted, caller = await self.authenticator.admit(headers)
            if not admitted:
                log.info("refused %s %s: no valid key or token", scope.get("method"), scope.get("path"))
                tokens = self.authenticator.tokens
                await unauthorized(request_id, tokens.settings.metadata_url if tokens else None)(
                    scope, receive, send_with_id
                )
                return
            with acting_as(caller, request_id):
                await self.app(scope, receive, send_with_id)


def unauthorized(request_id: str, metadata_url: str | None = None) -> Response:
    body = {"error": "invalid_token", "error_description": "a valid API key or bearer token is required",
            "request_id": request_id}  # fmt: skip
    challenge = 'Bearer realm="mnemo", error="invalid_token"'
    if metadata_url:  # RFC 9728: where a client learns which authorization server to ask
        challenge += f', resource_metadata="{metadata_url}"'
    return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": challenge})
