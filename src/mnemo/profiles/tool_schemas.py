"""The tool schemas a server advertises: whole (no ``$ref`` into ``$defs``) and without pydantic's titles.

pydantic writes a nested model once under ``$defs`` and points at it with ``$ref``. That is valid
JSON Schema, but several MCP clients do not follow the pointers (a tool then shows no parameters or
is refused at listing), and a client that checks every answer against the output schema resolves
each pointer on every call: for a 10-result recall that is ~0.4 of the Python SDK client's ~1.5 ms
of checking. So every tool's input and output schema is served with its definitions inlined.

pydantic also titles every property and model after its name ("memory_id" gets "Memory Id"). The
title says nothing the name does not, and a client hands the input schemas to its model on every
turn: they were a sixth of full's (3.2 of 18.1 KB). mnemo sets no title of its own in a schema, so
they are all left out.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer

DEFS_PREFIX = "#/$defs/"
# Keywords whose value is data, not a schema: nothing inside them is a title or a reference.
VALUE_KEYWORDS = frozenset({"default", "const", "enum", "examples"})


def served(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as a tool advertises it: each ``$ref`` replaced by its definition, without
    ``$defs`` and without the ``title`` keyword (a property may still be named "title").

    Keywords beside a ``$ref`` (a field's own description or default) are kept over the
    definition's. A definition that refers to itself has no finite inlining and is refused.
    """
    definitions = schema.get("$defs", {})

    def walk(node: Any, seen: tuple[str, ...], names: bool = False) -> Any:
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        if names:  # a "properties" map: names → schemas
            return {name: walk(value, seen) for name, value in node.items()}
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.removeprefix(DEFS_PREFIX)
            if not ref.startswith(DEFS_PREFIX) or name not in definitions:
                raise ValueError(f"schema refers to {ref!r}, which is not among its $defs")
            if name in seen:
                raise ValueError(f"schema definition {name!r} refers to itself")
            beside = {key: value for key, value in node.items() if key != "$ref"}
            return walk({**definitions[name], **beside}, (*seen, name))
        return {
            key: value if key in VALUE_KEYWORDS else walk(value, seen, names=key == "properties")
            for key, value in node.items()
            if key not in ("$defs", "title")
        }

    whole: dict[str, Any] = walk(schema, ())
    return whole


def serve_lean_schemas(server: MCPServer) -> None:
    """Advertise every tool registered so far with ``served`` input and output schemas."""
    for tool in server._tool_manager.list_tools():  # the SDK offers no public hook for this
        tool.parameters = served(tool.parameters)
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = served(tool.fn_metadata.output_schema)
