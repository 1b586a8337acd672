"""The REST API: spec 004's operations as HTTP resources, over the same engine, auth and limits.

Each route calls the ``full`` profile's tool in process (``ProfileServer.call_tool``), so an
operation validates, acts and answers exactly as the MCP tool does: the success body is the
tool's output object, a failure is spec 004's common error object with its ``status`` as the HTTP
status. The OpenAPI document (``/api/v1/openapi.json``) is built from the same tools' input and
output schemas, so it cannot drift from what the routes accept.

Starlette rather than FastAPI: the schemas already exist, as the tools' own JSON Schemas; FastAPI
would have the routes restate them as signatures, a second copy to keep in step.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mnemo.access.caller import current
from mnemo.access.request_ledger import RequestLedger, retry_after
from mnemo.errors import InvalidInput, MnemoError, RateLimited
from mnemo.model import to_iso
from mnemo.profiles.full_schemas import listed_memory
from mnemo.serve.rest_openapi import Endpoint, QueryParam, openapi_document

PREFIX = "/api/v1"
ANONYMOUS = "-"


INTEGER = {"type": "integer", "minimum": 0, "maximum": 2**62}
ENDPOINTS = (
    Endpoint("POST", "/memories", "store_memory", "Store a memory", body=True, created=True),
    Endpoint(
        "GET",
        "/memories",
        "list_memories",
        "List memories, newest first",
        query=(
            QueryParam("limit", {"type": "integer", "minimum": 1, "maximum": 100}, ("pagination", "limit")),
            QueryParam("offset", INTEGER, ("pagination", "offset")),
            QueryParam(
                "sort_by",
                {"type": "string", "enum": ["created_at", "updated_at", "last_accessed", "importance", "access_count"]},
                ("sort", "field"),
            ),
            QueryParam("order", {"type": "string", "enum": ["asc", "desc"]}, ("sort", "order")),
            QueryParam("status", {"type": "string", "enum": ["active", "archived", "deleted"]}, ("filters", "status")),
            QueryParam("category", {"type": "string"}, ("filters", "categories")),
            QueryParam("tag", {"type": "string"}, ("filters", "tags")),
        ),
    ),
    Endpoint("POST", "/memories/list", "list_memories", "List memories with every filter", body=True),
    Endpoint("POST", "/memories/recall", "recall_memories", "Recall memories by meaning", body=True),
    Endpoint("POST", "/memories/consolidate", "consolidate_memories", "Consolidate memories", body=True),
    Endpoint("PATCH", "/memories/{memory_id}", "update_memory", "Update a memory", body=True),
    Endpoint(
        "DELETE",
        "/memories/{memory_id}",
        "forget_memory",
        "Forget a memory",
        query=(
            QueryParam(
                "reason",
                {
                    "type": "string",
                    "enum": ["user_request", "privacy", "outdated", "incorrect", "duplicate", "expired", "other"],
                },
                ("reason",),
            ),
            QueryParam("hard_delete", {"type": "boolean"}, ("hard_delete",)),
        ),
    ),
    Endpoint("POST", "/memories/{memory_id}/archive", "archive_memory", "Archive a memory", body=True),
    Endpoint("POST", "/memories/{memory_id}/restore", "restore_memory", "Restore an archived memory", body=True),
    Endpoint(
        "GET",
        "/stats",
        "get_memory_stats",
        "Statistics",
        query=(
            QueryParam("scope", {"type": "string", "enum": ["global", "user", "conversation", "category"]}, ("scope",)),
            QueryParam("scope_id", {"type": "string"}, ("scope_id",)),
            QueryParam("include_trends", {"type": "boolean"}, ("include_trends",)),
            QueryParam("granularity", {"type": "string", "enum": ["hour", "day", "week", "month"]}, ("granularity",)),
        ),
    ),
)
LISTS = {("filters", "status"), ("filters", "categories"), ("filters", "tags")}  # one query value, a list argument


class RestApi:
    def __init__(self, tools: Any, ledger: RequestLedger) -> None:
        self.tools = tools  # a ProfileServer of the full profile over the served store
        self.ledger = ledger

    def routes(self) -> list[Route]:
        """The routes, relative to PREFIX (where the app mounts them)."""
        made = [
            Route("/openapi.json", self.openapi, methods=["GET"]),
            Route("/memories/{memory_id}", self.get_memory, methods=["GET"]),
        ]
        for endpoint in ENDPOINTS:
            made.append(Route(endpoint.path, self._handler(endpoint), methods=[endpoint.method]))
        return made

    async def openapi(self, request: Request) -> Response:
        tools = {tool.name: tool for tool in await self.tools.list_tools()}
        return JSONResponse(openapi_document(ENDPOINTS, tools, PREFIX))

    # -- calls -------------------------------------------------------------------------
    def _handler(self, endpoint: Endpoint) -> Any:
        async def handle(request: Request) -> Response:
            try:
                arguments = await _arguments(endpoint, request)
            except InvalidInput as bad:
                return self._error(bad)
            return await self._call(endpoint.tool, arguments, request, 201 if endpoint.created else 200)

        return handle

    async def get_memory(self, request: Request) -> Response:
        """A memory as list_memories shows it, with its version history (not a spec 004 tool)."""
        return await self._call("", {"memory_id": request.path_params["memory_id"]}, request, 200)

    async def _call(self, tool: str, arguments: dict[str, Any], request: Request, ok: int) -> Response:
        caller = current()
        principal = caller.user_id if caller is not None else ANONYMOUS
        try:
            state = await anyio.to_thread.run_sync(self.ledger.count, principal, tool or "get_memory")
        except RateLimited as limited:
            return self._error(
                limited,
                {
                    "X-RateLimit-Limit": str(limited.details["limit"]),
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(limited.details["reset"]),
                },
            )
        except MnemoError as failed:  # the store's database out of reach, say
            return self._error(failed, retry_after(failed))
        headers = state.headers if state else {}
        key = request.headers.get("x-idempotency-key")
        if key is not None and tool and request.method != "GET":
            try:
                kept = await anyio.to_thread.run_sync(self.ledger.begin, principal, key, tool, arguments)
            except MnemoError as refused:
                return self._error(refused, headers | retry_after(refused))
            if kept is not None:
                status, body = json.loads(kept)
                return JSONResponse(body, status, {**headers, "Idempotent-Replayed": "true"})
            answer: str | None = None
            try:
                with self.ledger.applying(principal, key) as running:
                    status, body = await self._run(tool, arguments, ok)
                answer = None if running.retry_later else json.dumps([status, body])
            finally:
                await anyio.to_thread.run_sync(self.ledger.end, principal, key, answer)
            return JSONResponse(body, status, headers | _retry_after(body))
        status, body = await self._run(tool, arguments, ok)
        return JSONResponse(body, status, headers | _retry_after(body))

    async def _run(self, tool: str, arguments: dict[str, Any], ok: int) -> tuple[int, Any]:
        if not tool:
            return await anyio.to_thread.run_sync(self._memory_with_history, arguments["memory_id"], ok)
        result = await self.tools.call_tool(tool, arguments)
        if result.is_error:
            body = json.loads(result.content[0].text)
            return int(body["error"]["status"]), body
        return ok, result.structured_content

    def _memory_with_history(self, memory_id: str, ok: int) -> tuple[int, Any]:
        service = self.tools.service
        try:
            memory = service.get(memory_id)
            versions = service.history(memory_id)
        except MnemoError as error:
            return self._error_body(error)
        body = {
            "api_version": "1.0.0",
            "success": True,
            "memory": listed_memory(memory).model_dump(mode="json", exclude_none=True),
            "versions": [
                {"version": c.version, "action": c.action, "actor": c.actor, "at": to_iso(c.at), "reason": c.reason}
                for c in versions
            ],
        }
        return ok, body

    def _error_body(self, error: MnemoError) -> tuple[int, Any]:
        body = json.loads(self.tools.profile.error_result(error, self.tools.service.clock.now()).content[0].text)
        return int(body["error"]["status"]), body

    def _error(self, error: MnemoError, headers: dict[str, str] | None = None) -> Response:
        status, body = self._error_body(error)
        return JSONResponse(body, status, headers)


def _retry_after(body: Any) -> dict[str, str]:
    """``Retry-After`` for an error answer that says when to retry (its store's database out of reach)."""
    error = body.get("error") if isinstance(body, dict) and body.get("success") is False else None
    details = error.get("details") if isinstance(error, dict) else None
    if not isinstance(details, dict) or "retry_after" not in details:
        return {}
    return {"Retry-After": str(details["retry_after"])}


async def _arguments(endpoint: Endpoint, request: Request) -> dict[str, Any]:
    """The tool's arguments from the JSON body or the query string, and the path's memory_id."""
    arguments: dict[str, Any] = {}
    if endpoint.body:
        raw = await request.body()
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise InvalidInput(f"the body is not JSON: {exc}") from exc
        except RecursionError:  # the parser's own depth limit
            raise InvalidInput("the body is not JSON this server reads: nested too deeply") from None
        if not isinstance(parsed, dict):
            raise InvalidInput("the body must be a JSON object of the operation's arguments")
        arguments = parsed
    for param in endpoint.query:
        if param.name in request.query_params:
            value = _query_value(param, request.query_params[param.name])
            _place(arguments, param.argument, [value] if param.argument in LISTS else value)
    if "memory_id" in request.path_params:
        arguments["memory_id"] = request.path_params["memory_id"]
    return arguments


def _query_value(param: QueryParam, text: str) -> Any:
    kind = param.schema["type"]
    if kind == "integer":
        if not text.lstrip("-").isdigit():
            raise InvalidInput(f"{param.name} must be an integer", field=param.name)
        return int(text)
    if kind == "boolean":
        if text not in ("true", "false"):
            raise InvalidInput(f"{param.name} must be true or false", field=param.name)
        return text == "true"
    return text


def _place(arguments: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        arguments = arguments.setdefault(part, {})
    arguments[path[-1]] = value
