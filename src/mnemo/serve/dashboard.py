"""The web dashboard's files (``mnemo/dashboard/``), served beside the API they call.

The page holds no data: it asks for an API key, keeps it in the tab's session storage, and reads
and changes memories through the REST API (``/api/v1``) with it, so the same users, access rules
and limits apply. The files themselves need no key. A strict Content-Security-Policy keeps the
page to its own script and the API.
"""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

FILES = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
         "style.css": "text/css; charset=utf-8"}  # fmt: skip
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def dashboard_routes() -> list[Route]:
    folder = files("mnemo") / "dashboard"

    def serve(name: str) -> Route:
        body = (folder / name).read_bytes()

        async def endpoint(request: Request) -> Response:
            return Response(body, media_type=FILES[name], headers=HEADERS)

        return Route("/dashboard/" + ("" if name == "index.html" else name), endpoint, methods=["GET"])

    async def to_dashboard(request: Request) -> Response:
        return RedirectResponse("/dashboard/")

    return [Route("/dashboard", to_dashboard, methods=["GET"]), *(serve(name) for name in FILES)]
