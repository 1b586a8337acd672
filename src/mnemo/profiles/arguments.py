"""How a tool call's arguments are read before validation: the SDK's way, minus two surprises.

The SDK parses a string argument as JSON when its field is not a plain ``str`` (so a client that
sends the list ``["a"]`` as the string '["a"]' still works). That also turned the string "null"
into None for every optional field: a filter on the category, subject or agent named "null" was
silently dropped and unrelated memories came back. Here a string never becomes an absent value:
it stays the string, which a text field takes literally and any other field refuses.

The SDK also ignores an argument the tool does not have, so a value put in the wrong place (full's
``tags`` beside ``content`` instead of in ``metadata``) was dropped while the call succeeded. Here
every tool refuses an unknown argument, at any depth (its schema says ``additionalProperties:
false``), and the error says where a misplaced one belongs (``unknown_argument``).
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from pydantic import ConfigDict


class LiteralStrings(FuncMetadata):
    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        parsed = super().pre_parse_json(data)
        return {key: data[key] if value is None else value for key, value in parsed.items()}


def read_arguments_strictly(server: MCPServer) -> None:
    """Read the arguments of every tool registered so far with LiteralStrings, refusing unknown ones."""
    for tool in server._tool_manager.list_tools():  # the SDK offers no public hook for this
        old = tool.fn_metadata
        config = ConfigDict(**{**old.arg_model.model_config, "extra": "forbid"})  # type: ignore[typeddict-item]
        strict = type(old.arg_model.__name__, (old.arg_model,), {"model_config": config, "__module__": __name__})
        tool.fn_metadata = LiteralStrings(
            arg_model=strict, output_schema=old.output_schema, output_model=old.output_model,
            wrap_output=old.wrap_output,
        )  # fmt: skip
        tool.parameters["additionalProperties"] = False


def unknown_argument(schema: dict[str, Any], loc: tuple[str | int, ...]) -> tuple[str, str]:
    """The field and message of an argument the tool does not have, at pydantic's ``loc`` (which
    also names union members and types on the way), saying where the tool takes that name."""
    path: list[str] = []
    node: dict[str, Any] = schema
    for part in loc[:-1]:
        child = _properties(node).get(str(part))
        if child is not None:
            path.append(str(part))
            node = child
    name = str(loc[-1])
    elsewhere = [place for place in _places(schema, name, ()) if place != (*path, name)]
    if elsewhere:
        hint = "it goes in " + " or ".join(f"`{'.'.join(place)}`" for place in elsewhere[:3])
    else:
        hint = "this takes " + (", ".join(f"`{key}`" for key in _properties(node)) or "no argument here")
    return ".".join((*path, name)), f"unknown argument; {hint}"


def _properties(node: dict[str, Any]) -> dict[str, Any]:
    found = dict(node.get("properties", {}))
    for choice in node.get("anyOf", []):
        found.update(_properties(choice))
    return found


def _places(node: dict[str, Any], name: str, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every path in the schema whose last property is ``name``."""
    found = []
    for key, child in _properties(node).items():
        if key == name:
            found.append((*path, key))
        if isinstance(child, dict):
            found += _places(child, name, (*path, key))
    return found
