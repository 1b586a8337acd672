"""Checks of the values callers give the engine's operations: each raises InvalidInput."""

from __future__ import annotations

from mnemo import bounds
from mnemo.errors import InvalidInput
from mnemo.model import MAX_PAGE, MemoryType


def check_content(content: str) -> None:
    if not content.strip():
        raise InvalidInput("content must not be empty", field="content")
    bounds.fields(content=content)


def checked_category(category: str | None) -> str | None:
    """Spec 004's categories, or a caller's own label of up to MAX_CATEGORY_CHARS (spec 000)."""
    if category is None:
        return None
    label = category.strip()
    if not label:
        raise InvalidInput("category must not be empty", field="category")
    bounds.fields(category=label)
    return label


def check_type(memory_type: str | None) -> None:
    if memory_type is not None and memory_type not in MemoryType.__members__.values():
        raise InvalidInput(
            f"unknown type {memory_type!r}; choose one of {', '.join(t.value for t in MemoryType)}", field="type"
        )


def check_unit(name: str, value: float | None) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise InvalidInput(f"{name} must be between 0 and 1, not {value}", field=name)


def check_page(limit: int, offset: int, maximum: int = MAX_PAGE) -> None:
    if not 1 <= limit <= maximum:
        raise InvalidInput(f"limit must be between 1 and {maximum}", field="limit")
    bounds.offset(offset)
