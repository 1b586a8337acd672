"""MCP over streamable HTTP: one profile for many callers, each authenticated and kept apart.

``mnemo serve --http`` serves the SDK's streamable HTTP app (both protocol eras: the 2025
session-based one, and the stateless 2026-07-28 one, which the SDK's session manager routes to
its single-exchange handler) and the REST API. Every request passes the front door
(``mnemo.serve.front_door``: size, Host, Origin, content type), then the guard
(``mnemo.serve.guard``: request id, key or token, caller), then the request ledger (rate limits,
idempotency keys).

``GET /healthz`` (liveness) and ``GET /readyz`` (readiness: the database answers; the model's
state) answer load balancers without a key, with no store details; the dashboard's files need none
either (the page asks for a key and calls the REST API with it).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import signal
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
from starlette.types import ASGIApp

from mnemo import __version__
from mnemo.access.caller import request_id
from mnemo.access.keys import KeyRing
from mnemo.access.request_ledger import RateLimits, RequestLedger
from mnemo.errors import CorruptedData, MnemoError
from mnemo.serve.dashboard import dashboard_routes
from mnemo.serve.front_door import FrontDoor
from mnemo.serve.guard import Authenticator, Guard
from mnemo.serve.http_calls import CallLedger
from mnemo.serve.oauth import METADATA_PATH, JwtVerifier, OAuthSettings
from mnemo.serve.options import HttpOptions
from mnemo.serve.rest import PREFIX as REST_PREFIX
from mnemo.serve.rest import RestApi

log = logging.getLogger("mnemo.http")

GRACEFUL_SHUTDOWN_S = 30  # in-flight calls get this long to finish after SIGTERM/SIGINT
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
# The front door checks Host and Origin on every route, /mcp included: the SDK's own check is off.
NO_SDK_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(options: HttpOptions, keys: KeyRing, oauth: OAuthSettings | None = None) -> None:
    """Refuse to listen beyond this machine with no key to ask for, or with a damaged key ring;
    say who may call a server that will run."""
    try:
        live = sum(k.revoked_at is None for k in keys.all())
    except CorruptedData as damaged:
        raise SystemExit(f"refusing to serve: {damaged.message}; mend it, or move it away and make new keys") from None
    if not is_loopback(options.host) and oauth is None and not live:
        raise SystemExit(
            f"refusing to serve on {options.host} without authentication: create a key first "
            "(`mnemo keys create --user NAME`), or bind to 127.0.0.1"
        )
    if oauth is None and not keys.set_up():
        log.warning("no API keys: any program on this machine may call this server, as an admin; it listens on "
                    "loopback only. `mnemo keys create --user NAME` turns authentication on")  # fmt: skip
    elif oauth is None and not live:
        log.warning("every API key is revoked: every request is refused until `mnemo keys create` makes one")


def allowed_hosts(options: HttpOptions) -> list[str] | None:
    """The Host values served: the configured ones, else loopback's on a loopback bind; None: any."""
    if options.allowed_hosts:
        return list(options.allowed_hosts)
    if is_loopback(options.host):
        return LOOPBACK_HOSTS
    return None  # behind a reverse proxy the Host varies; keys are what keeps callers out


def build_app(
    server: Any,
    keys: KeyRing,
    options: HttpOptions,
    limits: RateLimits,
    oauth: OAuthSettings | None = None,
    rest_tools: Any = None,
) -> ASGIApp:
    """The whole HTTP app of a ``ProfileServer``: /mcp and the REST API behind the front door, the guard
    and the request ledger; /healthz and the dashboard's files behind the front door."""
    mcp_app = server.streamable_http_app(
        stateless_http=options.stateless, transport_security=NO_SDK_CHECK, host=options.host
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
        """Liveness: the process answers (no store details)."""
        return JSONResponse({"status": "ok", "version": __version__, "profile": server.profile.name})

    async def readyz(request: Request) -> Response:
        """Readiness: the store's database answers (503 while it does not), and the model's state."""
        checks = await anyio.to_thread.run_sync(server.service.readiness)
        ready = checks["database"] == "ok"
        return JSONResponse(
            {"status": "ready" if ready else "unavailable", **checks}, status_code=200 if ready else 503
        )

    routes = [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"]),
              *dashboard_routes()]  # fmt: skip
    if oauth is not None:

        async def resource_metadata(request: Request) -> Response:
            return JSONResponse(oauth.metadata)

        metadata_path = urlsplit(oauth.metadata_url).path
        routes += [Route(path, resource_metadata, methods=["GET"]) for path in {METADATA_PATH, metadata_path}]
    authenticator = Authenticator(keys, JwtVerifier(oauth) if oauth is not None else None)
    rest = Starlette(routes=RestApi(rest_tools or server, ledger).routes())
    app = Starlette(
        routes=[
            *routes,
            Mount(REST_PREFIX, app=Guard(rest, authenticator)),
            Mount("/", app=Guard(CallLedger(mcp_app, ledger, answer_error), authenticator)),
        ],
        lifespan=lambda app: server.session_manager.run(),
    )
    return FrontDoor(app, allowed_hosts(options))


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
        rest_tools: Any, start_background: Callable[[], None]) -> None:  # fmt: skip
    """Serve until SIGINT/SIGTERM, then let in-flight calls finish (up to GRACEFUL_SHUTDOWN_S)."""
    check_bind(options, keys, oauth)
    app = build_app(server, keys, options, limits, oauth, rest_tools)
    start_background()
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
    # uvicorn stops gracefully on SIGTERM or SIGINT (Ctrl-C), then raises the signal again for the
    # handler it found: these turn that into a normal exit (status 0, the stores closed), where
    # Python's own SIGINT handler made click print "Aborted!" and exit 1.
    previous = {number: signal.signal(number, _exit_normally) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        uvicorn.Server(config).run()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _exit_normally(signum: int, frame: object) -> None:
    raise SystemExit(0)
