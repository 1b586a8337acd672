"""MCP over streamable HTTP: one profile for many callers, each authenticated and kept apart.

``mnemo serve --http`` wraps the SDK's streamable HTTP app (both protocol eras: the 2025
session-based one, and the stateless 2026-07-28 one, which the SDK's session manager routes to
its single-exchange handler) in a guard that, for every request:

- gives it a request id (the caller's ``X-Request-Id`` when it is a short token, else a new one),
  sent back as ``X-Request-Id``, written in every log line of the request and in spec 004's
  error answers;
- authenticates it when keys exist (``mnemo keys create``): ``Authorization: Bearer <key>`` or
  ``X-API-Key: <key>``; no or a bad key is a 401 with ``WWW-Authenticate: Bearer``;
- runs it as that key's caller (``mnemo.caller.acting_as``), whose access rules the engine applies.
  The SDK hands each message's context to its handler, so the caller reaches the tool in both eras.

``GET /healthz`` answers load balancers without a key (no store details). Host and Origin headers
are checked against DNS rebinding on a loopback bind (the SDK's check), and against
``MNEMO_HTTP_ALLOWED_HOSTS`` when set.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import signal
import threading
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
import uvicorn
from mcp import MCPError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from mnemo import __version__
from mnemo.caller import Caller, acting_as, request_id
from mnemo.errors import MnemoError
from mnemo.keys import PREFIX as KEY_PREFIX
from mnemo.keys import KeyRing
from mnemo.request_ledger import RateLimits, RequestLedger
from mnemo.serve.asgi import ASGIApp, Message, Receive, Scope, Send
from mnemo.serve.dashboard import dashboard_routes
from mnemo.serve.http_calls import CallLedger
from mnemo.serve.oauth import METADATA_PATH, JwtVerifier, OAuthSettings
from mnemo.serve.options import HttpOptions
from mnemo.serve.rest import PREFIX as REST_PREFIX
from mnemo.serve.rest import RestApi

log = logging.getLogger("mnemo.http")

GRACEFUL_SHUTDOWN_S = 30  # in-flight calls get this long to finish after SIGTERM/SIGINT
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(options: HttpOptions, keys: KeyRing, oauth: OAuthSettings | None = None) -> None:
    """Refuse to listen beyond this machine with no key to ask for: anyone could read every memory."""
    if not is_loopback(options.host) and oauth is None and not any(k.revoked_at is None for k in keys.all()):
        raise SystemExit(
            f"refusing to serve on {options.host} without authentication: create a key first "
            "(`mnemo keys create --user NAME`), or bind to 127.0.0.1"
        )


def transport_security(options: HttpOptions) -> TransportSecuritySettings | None:
    if options.allowed_hosts:
        origins = [f"{scheme}://{host}" for host in options.allowed_hosts for scheme in ("http", "https")]
        return TransportSecuritySettings(allowed_hosts=list(options.allowed_hosts), allowed_origins=origins)
    if is_loopback(options.host):
        return TransportSecuritySettings(allowed_hosts=LOOPBACK_HOSTS, allowed_origins=LOOPBACK_ORIGINS)
    return None  # behind a reverse proxy the Host varies; keys are what keeps callers out


class Guard:
    """The ASGI layer before the MCP app: request id, authentication, the caller of the request."""

    def __init__(self, app: ASGIApp, keys: KeyRing, tokens: JwtVerifier | None = None) -> None:
        self.app = app
        self.keys = keys
        self.tokens = tokens

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
            admitted, caller = await self._authenticate(headers)
            if not admitted:
                log.info("refused %s %s: no valid key or token", scope.get("method"), scope.get("path"))
                metadata = self.tokens.settings.metadata_url if self.tokens else None
                await unauthorized(request_id, metadata)(scope, receive, send_with_id)
                return
            with acting_as(caller, request_id):
                await self.app(scope, receive, send_with_id)

    async def _authenticate(self, headers: dict[str, str]) -> tuple[bool, Caller | None]:
        """Whether to admit the request, and as whom: no caller when neither keys nor tokens are
        set up (an open, loopback-only server: ``check_bind``)."""
        if self.tokens is None and not any(k.revoked_at is None for k in self.keys.all()):
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


def unauthorized(request_id: str, metadata_url: str | None = None) -> Response:
    body = {"error": "invalid_token", "error_description": "a valid API key or bearer token is required",
            "request_id": request_id}  # fmt: skip
    challenge = 'Bearer realm="mnemo", error="invalid_token"'
    if metadata_url:  # RFC 9728: where a client learns which authorization server to ask
        challenge += f', resource_metadata="{metadata_url}"'
    return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": challenge})


def build_app(
    server: Any,
    keys: KeyRing,
    options: HttpOptions,
    limits: RateLimits,
    oauth: OAuthSettings | None = None,
    rest_tools: Any = None,
) -> Starlette:
    """The whole HTTP app of a ``ProfileServer``: /mcp behind the guard and the request ledger, and /healthz."""
    mcp_app = server.streamable_http_app(
        stateless_http=options.stateless, transport_security=transport_security(options), host=options.host
    )
    ledger = RequestLedger(server.service.storage, server.service.clock, limits)

    def answer_error(error: MnemoError, request_id: Any) -> dict[str, Any]:
        """A JSON-RPC response that refuses a tool call in the profile's own error shape."""
        try:
            result = server.profile.error_result(error, server.service.clock.now())
        except MCPError as protocol_error:  # spec 002 fails the request itself
            return {"jsonrpc": "2.0", "id": request_id, "error": protocol_error.error.model_dump(exclude_none=True)}
        shown = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return {"jsonrpc": "2.0", "id": request_id, "result": shown}

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__, "profile": server.profile.name})

    routes = [Route("/healthz", healthz, methods=["GET"]), *dashboard_routes()]
    if oauth is not None:

        async def resource_metadata(request: Request) -> Response:
            return JSONResponse(oauth.metadata)

        metadata_path = urlsplit(oauth.metadata_url).path
        routes += [Route(path, resource_metadata, methods=["GET"]) for path in {METADATA_PATH, metadata_path}]
    tokens = JwtVerifier(oauth) if oauth is not None else None
    rest = Starlette(routes=RestApi(rest_tools or server, ledger).routes())
    return Starlette(
        routes=[
            *routes,
            Mount(REST_PREFIX, app=Guard(rest, keys, tokens)),
            Mount("/", app=Guard(CallLedger(mcp_app, ledger, answer_error), keys, tokens)),
        ],
        lifespan=lambda app: server.session_manager.run(),
    )


class RequestIdFilter(logging.Filter):
    """Puts the running request's id on every log record (``-`` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id() or "-"
        return True


class JsonLines(logging.Formatter):
    """One JSON object per log line: what log shippers read without a parsing rule."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "request_id": getattr(record, "request_id", "-"),
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def run(server: Any, keys: KeyRing, options: HttpOptions, limits: RateLimits, oauth: OAuthSettings | None,
        rest_tools: Any, warm_up: Callable[[], None]) -> None:  # fmt: skip
    """Serve until SIGINT/SIGTERM, then let in-flight calls finish (up to GRACEFUL_SHUTDOWN_S)."""
    check_bind(options, keys, oauth)
    app = build_app(server, keys, options, limits, oauth, rest_tools)
    threading.Thread(target=warm_up, name="mnemo-warm-up", daemon=True).start()
    config = uvicorn.Config(
        app,
        host=options.host,
        port=options.port,
        log_config=None,  # mnemo's logging (JSON lines with request ids) is already set up
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        lifespan="on",
    )
    log.info("mnemo %s serving profile %s on http://%s:%d/mcp", __version__, server.profile.name, options.host,
             options.port)  # fmt: skip
    # uvicorn stops gracefully on SIGTERM, then raises the signal again for the handler it found:
    # this one turns that into a normal exit, so the stores are closed and the exit status is 0.
    previous = signal.signal(signal.SIGTERM, _exit_normally)
    try:
        uvicorn.Server(config).run()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_normally(signum: int, frame: object) -> None:
    raise SystemExit(0)
