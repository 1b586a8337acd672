"""How a tool call's arguments are read before validation: the SDK's way, minus two surprises.

The SDK parses a string argument as JSON when its field is not a plain ``str`` (so a client that
sends the list ``["a"]`` as the string '["a"]' still works). That also turned the string "null"
into None for every optional field: a filter on the category, subject or agent named "null" was
silently dropped and unrelated memories came back. Here a string never becomes an absent value:
it stays the string, which a text field takes literally and any other field refuses.

The SDK also ignores an argument the tool does not have, so a value put in the wrong place (full's
``tags`` beside ``content`` instead of in ``metadata``) was dropped while the call succeeded. Here
every tool refuses an unknown argument, at any depth (its schema says ``additionalProperties:
false``), and the error says where a misplaced one belongs (``unknown_argument``). The arguments
are walked for one before validation, which stops at the first: validation itself would make an
error object per unknown key, and a body of 4 MiB holds hundreds of thousands.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from pydantic import ConfigDict, Field

from mnemo.errors import InvalidInput

SHOWN_UNKNOWN = 10  # unknown arguments named in one refusal; the walk stops there


class LiteralStrings(FuncMetadata):
    input_schema: dict[str, Any] = Field(default_factory=dict)  # the tool's served input schema (no $ref)

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        parsed = super().pre_parse_json(data)
        return {key: data[key] if value is None else value for key, value in parsed.items()}

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        found: list[tuple[str, ...]] = []
        unknown_keys(arguments_to_validate, self.input_schema, (), found)
        if found:
            problems = [dict(zip(("field", "message"), unknown_argument(self.input_schema, path), strict=True))
                        for path in found]  # fmt: skip
            summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
            raise InvalidInput(f"invalid input: {summary}", errors=problems)
        return super().validate_arguments(arguments_to_validate)


def read_arguments_strictly(server: MCPServer) -> None:
    """Read the arguments of every tool registered so far with LiteralStrings, refusing unknown ones
    (after ``serve_lean_schemas``: the walk for unknown keys reads the schema whole)."""
    for tool in server._tool_manager.list_tools():  # the SDK offers no public hook for this
        old = tool.fn_metadata
        config = ConfigDict(**{**old.arg_model.model_config, "extra": "forbid"})  # type: ignore[typeddict-item]
        strict = type(old.arg_model.__name__, (old.arg_model,), {"model_config": config, "__module__": __name__})
        tool.parameters["additionalProperties"] = False
        tool.fn_metadata = LiteralStrings(
            arg_model=strict, output_schema=old.output_schema, output_model=old.output_model,
            wrap_output=old.wrap_output, input_schema=tool.parameters,
        )  # fmt: skip


def unknown_keys(value: Any, schema: dict[str, Any], path: tuple[str, ...], found: list[tuple[str, ...]]) -> None:
    """Add to ``found`` the paths of keys in ``value`` that its schema's objects do not have, until it
    holds SHOWN_UNKNOWN. A list longer than its schema allows is not walked: validation refuses it
    by its length alone."""
    if isinstance(value, dict):
        properties = _properties(schema)
        closed = any(c.get("additionalProperties") is False for c in [schema, *schema.get("anyOf", [])])
        if not properties and not closed:  # free-form JSON (metadata), or not an object here
            return
        for key, item in value.items():
            if len(found) >= SHOWN_UNKNOWN:
                return
            if key in properties:
                unknown_keys(item, properties[key], (*path, key), found)
            else:
                found.append((*path, str(key)))
    elif isinstance(value, list):
        choices = [schema, *schema.get("anyOf", [])]
        items = next((c["items"] for c in choices if isinstance(c.get("items"), dict)), None)
        most = next((c["maxItems"] for c in choices if "maxItems" in c), None)
        if items is not None and (most is None or len(value) <= most):
            for number, item in enumerate(value):
                if len(found) >= SHOWN_UNKNOWN:
                    return
                unknown_keys(item, items, (*path, str(number)), found)


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
