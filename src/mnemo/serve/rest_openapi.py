"""The REST API's OpenAPI 3.1 document, built from the full profile's tool schemas.

The routes it describes are declared here (``Endpoint``, ``QueryParam``) and served by ``rest.py``,
which imports them: the document never imports the routes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mnemo import __version__


@dataclass(frozen=True, slots=True)
class QueryParam:
    name: str
    schema: dict[str, Any]
    argument: tuple[str, ...]  # where in the tool's arguments it goes: ("pagination", "limit")


@dataclass(frozen=True, slots=True)
class Endpoint:
    method: str
    path: str  # under the API's prefix (rest.py's PREFIX); {memory_id} becomes the tool's memory_id argument
    tool: str
    summary: str
    body: bool = False  # the JSON body is the tool's arguments
    query: tuple[QueryParam, ...] = field(default_factory=tuple)
    created: bool = False  # 201 on success


ERROR = {
    "type": "object",
    "description": "spec 004's common error object",
    "required": ["success", "error"],
    "properties": {
        "api_version": {"type": "string"},
        "success": {"const": False},
        "error": {
            "type": "object",
            "required": ["code", "message", "status"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "status": {"type": "integer"},
                "details": {"type": "object"},
                "timestamp": {"type": "string"},
                "request_id": {"type": "string"},
            },
        },
    },
}
UNAUTHORIZED = {
    "type": "object",
    "description": "no valid API key or bearer token (RFC 6750's error fields)",
    "required": ["error"],
    "properties": {
        "error": {"type": "string"},
        "error_description": {"type": "string"},
        "request_id": {"type": "string"},
    },
}
MEMORY_WITH_HISTORY = {
    "type": "object",
    "required": ["success", "memory", "versions"],
    "properties": {
        "api_version": {"type": "string"},
        "success": {"const": True},
        "memory": {"type": "object"},
        "versions": {"type": "array", "items": {"type": "object"}},
    },
}
SECURITY: list[dict[str, list[str]]] = [{"bearer": []}, {"apiKey": []}]


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _without(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """The schema without one property (it comes from the path)."""
    trimmed = {**schema, "properties": {k: v for k, v in schema.get("properties", {}).items() if k != name}}
    trimmed["required"] = [r for r in schema.get("required", []) if r != name]
    return trimmed


def openapi_document(endpoints: tuple[Endpoint, ...], tools: dict[str, Any], prefix: str) -> dict[str, Any]:
    components: dict[str, Any] = {
        "Error": ERROR,
        "Unauthorized": UNAUTHORIZED,
        "MemoryWithHistory": MEMORY_WITH_HISTORY,
    }
    paths: dict[str, dict[str, Any]] = {}
    errors = {
        "401": _json({"$ref": "#/components/schemas/Unauthorized"}, "no valid key or token"),
        "default": _json({"$ref": "#/components/schemas/Error"}, "spec 004's error object"),
    }
    memory_id = {"name": "memory_id", "in": "path", "required": True, "schema": {"type": "string"}}
    for endpoint in endpoints:
        tool = tools[endpoint.tool]
        operation: dict[str, Any] = {
            "operationId": f"{endpoint.method.lower()}{endpoint.path}".replace("/", "_"),
            "summary": endpoint.summary,
            "security": SECURITY,
        }
        parameters = [memory_id] if "{memory_id}" in endpoint.path else []
        parameters += [{"name": p.name, "in": "query", "required": False, "schema": p.schema} for p in endpoint.query]
        if parameters:
            operation["parameters"] = parameters
        if endpoint.body:
            body = tool.input_schema
            if "{memory_id}" in endpoint.path:
                body = _without(body, "memory_id")
            operation["requestBody"] = {"required": False, "content": {"application/json": {"schema": body}}}
        output = tool.output_schema or {"type": "object"}
        ok = "201" if endpoint.created else "200"
        operation["responses"] = {ok: _json(output, "the tool's answer"), **errors}
        paths.setdefault(prefix + endpoint.path, {})[endpoint.method.lower()] = operation
    paths.setdefault(f"{prefix}/memories/{{memory_id}}", {})["get"] = {
        "operationId": "get_memories_memory_id",
        "summary": "A memory with its version history",
        "security": SECURITY,
        "parameters": [memory_id],
        "responses": {"200": _json({"$ref": "#/components/schemas/MemoryWithHistory"}, "the memory"), **errors},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mnemo REST API",
            "version": __version__,
            "description": "Spec 004's memory operations over HTTP; bodies and answers are the MCP tools'.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
    }
