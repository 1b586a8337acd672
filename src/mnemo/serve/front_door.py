"""The checks every HTTP request passes before any route, with a key or without one.

- **Size.** A body over ``MAX_BODY_BYTES`` is refused (413) unread: by its Content-Length, or
  as soon as a chunked body passes the limit.
- **Host.** On a loopback bind only a loopback Host is served, and only ``--allowed-host`` values
  when given: a page whose name was rebound to 127.0.0.1 (DNS rebinding) gets 421.
- **Origin.** A browser names the page that sent a request; one from another origin than the
  server's own (or an allowed host's) gets 403. The dashboard, served by the same server, is same-origin.
- **JSON only.** A body must be ``application/json`` (415 otherwise): the content types a page
  may send cross-site without a preflight (a form, ``text/plain``) are never read as a call.

Together they keep a web page the user visits from calling a keyless loopback server, and cap
what one request may make the server read.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mnemo.serve.asgi import ASGIApp, Receive, Scope, Send

MAX_BODY_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE  # 4 MiB, /mcp's own limit in the SDK
_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class FrontDoor:
    def __init__(self, app: ASGIApp, allowed_hosts: list[str] | None) -> None:
        """``allowed_hosts``: Host values served ("name:port", or "name:*" for any port); None: any."""
        self.app = RequestBodyLimitMiddleware(app, MAX_BODY_BYTES)
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = await self._refusal(Request(scope))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _allowed(self, host: str) -> bool:
        return self.allowed_hosts is None or any(host_matches(host, pattern) for pattern in self.allowed_hosts)

    async def _refusal(self, request: Request) -> Response | None:
        headers = request.headers
        host = headers.get("host", "")
        if not self._allowed(host):
            return _refused(421, f"Invalid Host header: {host[:100]!r} is not a name this server answers to")
        origin = headers.get("origin")
        if origin is not None and not (same_origin(origin, host) or self._allowed_origin(origin)):
            return _refused(403, f"Invalid Origin header: {origin[:100]!r} is not this server's origin")
        if request.method in _WITH_BODY and _has_body(request) and not _is_json(headers.get("content-type", "")):
            return _refused(415, "Unsupported Media Type: a request body must be application/json")
        return None

    def _allowed_origin(self, origin: str) -> bool:
        """A page of an allowed host (of no other, with no list), named exactly as a browser names it."""
        parts = urlsplit(origin)
        return (
            parts.scheme in ("http", "https")
            and origin == f"{parts.scheme}://{parts.netloc}"
            and (self.allowed_hosts is not None and self._allowed(parts.netloc))
        )


def host_matches(host: str, pattern: str) -> bool:
    """Whether a Host value is the pattern: exactly, or its name with any port ("name:*")."""
    if pattern.endswith(":*"):
        name, _, port = host.rpartition(":")
        return name.lower() == pattern[:-2].lower() and port.isdigit()
    return host.lower() == pattern.lower()


def same_origin(origin: str, host: str) -> bool:
    """Whether a browser's Origin names the server the request was sent to (its Host)."""
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and bool(host) and origin.lower() == f"{parts.scheme}://{host}".lower()


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    return "content-type" in request.headers or "transfer-encoding" in request.headers or (length or "0") != "0"


def _is_json(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == "application/json"


def _refused(status: int, reason: str) -> Response:
    return JSONResponse({"error": "refused", "error_description": reason}, status_code=status)
