"""How a tool call's arguments are read before validation: the SDK's way, minus one surprise.

The SDK parses a string argument as JSON when its field is not a plain ``str`` (so a client that
sends the list ``["a"]`` as the string '["a"]' still works). That also turned the string "null"
into None for every optional field: a filter on the category, subject or agent named "null" was
silently dropped and unrelated memories came back. Here a string never becomes an absent value:
it stays the string, which a text field takes literally and any other field refuses.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata


class LiteralStrings(FuncMetadata):
    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        parsed = super().pre_parse_json(data)
        return {key: data[key] if value is None else value for key, value in parsed.items()}


def keep_strings_literal(server: MCPServer) -> None:
    """Read the arguments of every tool registered so far with LiteralStrings."""
    for tool in server._tool_manager.list_tools():  # the SDK offers no public hook for this
        old = tool.fn_metadata
        tool.fn_metadata = LiteralStrings(
            arg_model=old.arg_model, output_schema=old.output_schema, output_model=old.output_model,
            wrap_output=old.wrap_output,
        )  # fmt: skip
