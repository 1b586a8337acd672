"""The tool schemas a server advertises, written out whole: no ``$ref`` into ``$defs``.

pydantic writes a nested model once under ``$defs`` and points at it with ``$ref``. That is valid
JSON Schema, but several MCP clients do not follow the pointers (a tool then shows no parameters or
is refused at listing), and a client that checks every answer against the output schema resolves
each pointer on every call: for a 10-result recall that is ~0.4 of the Python SDK client's ~1.5 ms
of checking. So every tool's input and output schema is served with its definitions inlined.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer

DEFS_PREFIX = "#/$defs/"


def inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without ``$defs``: each ``$ref`` replaced by its definition.

    Keywords beside a ``$ref`` (a field's own description or default) are kept over the
    definition's. A definition that refers to itself has no finite inlining and is refused.
    """
    definitions = schema.get("$defs", {})

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith(DEFS_PREFIX) or ref.removeprefix(DEFS_PREFIX) not in definitions:
                raise ValueError(f"schema refers to {ref!r}, which is not among its $defs")
            name = ref.removeprefix(DEFS_PREFIX)
            if name in seen:
                raise ValueError(f"schema definition {name!r} refers to itself")
            beside = {key: value for key, value in node.items() if key != "$ref"}
            return resolve({**definitions[name], **beside}, (*seen, name))
        return {key: resolve(value, seen) for key, value in node.items() if key != "$defs"}

    resolved: dict[str, Any] = resolve(schema, ())
    return resolved


def inline_schema_refs(server: MCPServer) -> None:
    """Serve every tool registered so far with its input and output schemas inlined."""
    for tool in server._tool_manager.list_tools():  # the SDK offers no public hook for this
        tool.parameters = inlined(tool.parameters)
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = inlined(tool.fn_metadata.output_schema)
