"""Hypothesis strategies for a tool's arguments, read from the tool's own ``inputSchema``.

Nothing here knows a tool: every strategy comes from the JSON Schema a server lists. For each
value the schema describes, ``attack`` draws a valid value, a value at its boundary (the shortest
and longest string, the smallest and largest number, each enum member), one just past it, or a
hostile one (wrong type, 1 MB string, NUL, lone surrogate, 2**63, NaN, deep nesting, "null").
``Pool`` holds values the store already knows (ids, paths, names), so updates and deletes hit
real records instead of missing them every time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

MEGABYTE = "m" * 1_048_576


def _nested(depth: int, leaf: Any, as_dict: bool) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": value} if as_dict else [value]
    return value


# Edge dates: years the engine may not read back, offsets at their limits, and non-dates.
DATES = [
    "2026-01-15T12:00:00Z",
    "2026-01-15T12:00:00+00:00",
    "2026-01-15",
    "0001-01-01T00:00:00Z",
    "0999-12-31T23:59:59Z",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00+14:00",
]
BAD_DATES = ["2026-02-30T00:00:00Z", "2026-01-15T12:00:00.123456789Z", "not a date", "2026-01-15T25:00:00Z"]
UNKNOWN_KEY = "not_an_argument"  # a key no tool has, added inside hostile objects

HOSTILE: list[Any] = [
    None,
    "null",
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\u202e\ufeff",
    "true",
    "1",
    MEGABYTE,
    2**63,
    -(2**63) - 1,
    2**62,
    2**64,
    -1,
    0,
    1.5,
    math.nan,
    math.inf,
    -math.inf,
    True,
    False,
    [],
    {},
    [MEGABYTE],
    ["x"] * 1000,
    {"": None, "\x00": math.nan},
    # 200 levels: the SDK client refuses to serialise much deeper (raw JSON-RPC lines go further)
    _nested(200, "deep", as_dict=False),
    _nested(200, "deep", as_dict=True),
    *BAD_DATES,
]


@dataclass
class Pool:
    """Values a store holds, offered to every string so calls reach real records."""

    strings: list[str] = field(default_factory=list)

    def strategy(self) -> st.SearchStrategy[str]:
        return st.sampled_from(self.strings) if self.strings else st.nothing()


class Schema:
    """One tool's input schema (served whole, without ``$ref``); draws arguments for it."""

    def __init__(self, schema: dict[str, Any], pool: Pool) -> None:
        self.root = schema
        self.pool = pool

    # -- valid and boundary values --------------------------------------------------------
    def valid(self, schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
        if "anyOf" in schema:
            return st.one_of([self.valid(branch, depth) for branch in schema["anyOf"]])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        kind = schema.get("type")
        if kind == "string":
            return self._string(schema)
        if kind == "integer":
            return self._number(schema, st.integers)
        if kind == "number":
            return self._number(schema, lambda lo, hi: st.floats(lo, hi, allow_nan=False))
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        if kind == "array":
            return self._array(schema, depth)
        if kind == "object" or "properties" in schema:
            return self._object(schema, depth, hostile=False)
        return json_values()

    def _string(self, schema: dict[str, Any]) -> st.SearchStrategy[str]:
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if schema.get("format") == "date-time":
            return st.sampled_from(DATES) | st.datetimes().map(lambda d: d.isoformat() + "Z")
        if "pattern" in schema:  # the only pattern the profiles use is a UUID4
            return self.pool.strategy() | st.uuids(version=4).map(str)
        edges = [("x" * low) or "x"]
        if high is not None:
            edges.append("y" * high)
        texts = st.text(min_size=max(low, 1), max_size=min(high or 40, 40))
        return st.sampled_from(edges) | texts | self.pool.strategy() | st.sampled_from(["null", "None", "*", "%", "_"])

    @staticmethod
    def _number(schema: dict[str, Any], inside: Any) -> st.SearchStrategy[Any]:
        low, high = schema.get("minimum"), schema.get("maximum")
        edges = [v for v in (low, high) if v is not None]
        if high is None and schema.get("type") == "integer":  # no stated maximum: SQLite's and JSON's
            edges += [2**31, 2**53, 2**62, 2**63 - 1]
        return (st.sampled_from(edges) if edges else st.nothing()) | inside(low, high)

    def _array(self, schema: dict[str, Any], depth: int) -> st.SearchStrategy[list[Any]]:
        items = self.valid(schema.get("items", {}), depth + 1)
        low, high = schema.get("minItems", 0), schema.get("maxItems")
        lists = st.lists(items, min_size=low, max_size=min(high or 5, 5))
        if high is None:  # no stated maximum: a thousand values, distinct where they are strings
            return lists | items.map(lambda v: [f"{v}{i}" for i in range(1000)] if isinstance(v, str) else [v] * 1000)
        return lists | st.lists(items, min_size=high, max_size=high)

    def _object(self, schema: dict[str, Any], depth: int, hostile: bool) -> st.SearchStrategy[dict[str, Any]]:
        properties: dict[str, Any] = schema.get("properties", {})
        if not properties:  # free-form JSON (e.g. metadata)
            return st.dictionaries(st.text(max_size=10), json_values(), max_size=4)
        required = set(schema.get("required", []))
        draw = self.attack if hostile else self.valid
        needed = {name: draw(s, depth + 1) for name, s in properties.items() if name in required}
        optional = {name: draw(s, depth + 1) for name, s in properties.items() if name not in required}
        if hostile:  # a key the object does not have, inside it (at the top: ``arguments``)
            optional[UNKNOWN_KEY] = st.sampled_from(HOSTILE)
        return st.fixed_dictionaries(needed, optional=optional)

    # -- anything, valid or not -------------------------------------------------------------
    def attack(self, schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
        """Mostly valid values, sometimes a hostile one; nested objects are attacked inside too."""
        if depth < 3 and (schema.get("type") == "object" or "properties" in schema):
            inner = self._object(schema, depth, hostile=True)
        else:
            inner = self.valid(schema, depth)
        return st.one_of(inner, inner, inner, inner, inner, st.sampled_from(HOSTILE), _past_edges(schema))

    def arguments(self) -> st.SearchStrategy[dict[str, Any]]:
        """A tool's whole arguments: valid ones as often as attacked ones, where a required key may
        be dropped or an extra key added."""
        base = self._object(self.root, 0, hostile=False) | self._object(self.root, 0, hostile=True)
        required = list(self.root.get("required", []))

        @st.composite
        def mutated(draw: st.DrawFn) -> dict[str, Any]:
            args = dict(draw(base))
            choice = draw(st.integers(0, 9))
            if choice == 0 and required:
                args.pop(draw(st.sampled_from(required)), None)
            elif choice == 1:
                args[draw(st.sampled_from(["extra", "__proto__", "id ", ""]))] = draw(st.sampled_from(HOSTILE))
            return args

        return mutated()


def unknown_keys(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Where the value has a key its schema's object does not (every mnemo tool must refuse those)."""
    found: list[str] = []
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        for key, item in value.items():
            if key not in schema["properties"]:
                found.append(f"{path}{key}")
            else:
                found += unknown_keys(item, schema["properties"][key], f"{path}{key}.")
    for choice in schema.get("anyOf", []):
        found += unknown_keys(value, choice, path)
    return found


def _past_edges(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values one step outside the schema's limits (empty when it states none)."""
    values: list[Any] = []
    if "minLength" in schema and schema["minLength"] > 0:
        values.append("x" * (schema["minLength"] - 1))
    if "maxLength" in schema:
        values.append("z" * (schema["maxLength"] + 1))
    for key, step in (("minimum", -1), ("maximum", 1)):
        if key in schema:
            values.append(schema[key] + step)
            values.append(schema[key] + step * 1e-9)
    if "maxItems" in schema:
        values.append(["t"] * (schema["maxItems"] + 1))
    if "enum" in schema:
        values.extend([str(schema["enum"][0]).upper(), f" {schema['enum'][0]}"])
    return st.sampled_from(values) if values else st.nothing()


def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value, with the non-JSON floats a Python client can still hand over."""
    leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    return st.recursive(
        leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    )
