"""Tool schemas are served with their definitions inlined and without titles (see mnemo.profiles.tool_schemas)."""

from __future__ import annotations

import pytest

from mnemo.profiles.tool_schemas import served


def test_a_reference_becomes_its_definition_and_the_fields_own_keywords_win():
    schema = {
        "type": "object",
        "properties": {
            "when": {"$ref": "#/$defs/Range", "description": "the field's own words"},
            "many": {"type": "array", "items": {"$ref": "#/$defs/Range"}},
        },
        "$defs": {
            "Range": {"type": "object", "description": "a range", "properties": {"start": {"$ref": "#/$defs/Day"}}},
            "Day": {"type": "string", "format": "date"},
        },
    }
    day = {"type": "string", "format": "date"}
    a_range = {"type": "object", "description": "a range", "properties": {"start": day}}
    assert served(schema) == {
        "type": "object",
        "properties": {
            "when": {"type": "object", "description": "the field's own words", "properties": {"start": day}},
            "many": {"type": "array", "items": a_range},
        },
    }


def test_a_definition_that_refers_to_itself_is_refused():
    node = {"properties": {"children": {"items": {"$ref": "#/$defs/Node"}}}}
    tree = {"$ref": "#/$defs/Node", "$defs": {"Node": node}}
    with pytest.raises(ValueError, match="refers to itself"):
        served(tree)


def test_a_reference_outside_the_definitions_is_refused():
    with pytest.raises(ValueError, match="not among its \\$defs"):
        served({"properties": {"a": {"$ref": "https://example.com/schema.json"}}})


def test_titles_go_but_a_property_named_title_and_values_that_hold_one_stay():
    schema = {
        "title": "NoteArguments",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string", "default": "untitled"},
            "meta": {"title": "Meta", "type": "object", "default": {"title": "kept"}, "examples": [{"title": "x"}]},
        },
    }
    assert served(schema) == {
        "type": "object",
        "properties": {
            "title": {"type": "string", "default": "untitled"},
            "meta": {"type": "object", "default": {"title": "kept"}, "examples": [{"title": "x"}]},
        },
    }


def test_a_default_that_looks_like_a_reference_is_data():
    schema = {
        "properties": {"a": {"$ref": "#/$defs/A", "default": {"$ref": "#/nowhere"}}},
        "$defs": {"A": {"title": "A"}},
    }
    assert served(schema) == {"properties": {"a": {"default": {"$ref": "#/nowhere"}}}}
