"""Memory paths (spec 002): where a memory lives, as ``category/sub/name``. No I/O here.

The rule: one to ``MAX_PATH_DEPTH`` segments joined by ``/``, at most ``MAX_PATH_CHARS`` in all;
each segment starts with a letter or digit and holds only letters, digits, ``-``, ``_`` and ``.``
(so no empty segment, no ``.`` or ``..``, no leading, trailing or doubled ``/``). Paths are
case-sensitive. Every segment before the last is a category; categories exist by being part of
a path, so adding a memory creates the categories it names. A memory may also sit at the root.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from mnemo.errors import InvalidInput, NotFound
from mnemo.model import Memory

MAX_PATH_CHARS = 255
MAX_PATH_DEPTH = 10
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SEPARATOR = "/"


def check_path(path: str, field: str = "path") -> str:
    """The path unchanged if it follows the rule; otherwise ``InvalidInput`` saying which part breaks it."""
    if not path:
        raise InvalidInput(f"{field} must not be empty", field=field)
    if len(path) > MAX_PATH_CHARS:
        raise InvalidInput(f"{field} is {len(path)} characters long; at most {MAX_PATH_CHARS} are allowed", field=field)
    segments = path.split(SEPARATOR)
    if len(segments) > MAX_PATH_DEPTH:
        raise InvalidInput(f"{field} has {len(segments)} segments; at most {MAX_PATH_DEPTH} are allowed", field=field)
    for segment in segments:
        if not _SEGMENT.fullmatch(segment):
            raise InvalidInput(
                f"{field} {path!r} has an invalid segment {segment!r}: segments are separated by single '/', start "
                "with a letter or digit and hold only letters, digits, '-', '_' and '.'",
                field=field,
            )
    return path


def check_category(category: str | None) -> str | None:
    """A category is a path too (``None`` is the root); a trailing '/' is forgiven."""
    if category is None:
        return None
    return check_path(category.removesuffix(SEPARATOR), "category")


def prefix(category: str | None) -> str:
    """What the paths of everything under a category start with ("" for the root)."""
    return "" if category is None else category + SEPARATOR


def not_found(path: str, store: str) -> NotFound:
    return NotFound(f"no memory at {path!r} in store {store!r}", path=path, store=store)


@dataclass(frozen=True, slots=True)
class Level:
    """One category level: the memories directly in it, and its sub-categories with how many
    memories each holds at any depth."""

    category: str | None
    memories: list[Memory]
    subcategories: dict[str, int]  # full category path -> memories under it
    now: datetime  # when it was read: what "expired" was judged against
