"""One module per spec: each declares its tools, validates, calls the service, formats.

A profile is a thin adapter. Its ``register`` adds the spec's tools to a server, and its
``error_result`` turns a mnemo error (or a schema violation) into the spec's error shape;
the server calls that once, for every tool, so no handler catches errors itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from mcp.server import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from mnemo.bounds import MAX_LIST_ITEMS
from mnemo.config import PROFILE_NAMES
from mnemo.engine.named_stores import NamedStores
from mnemo.engine.service import MemoryService
from mnemo.errors import MnemoError

T = TypeVar("T")

# ``X | Omitted`` is an optional argument whose schema shows only X (no ``null``): the specs
# describe optional fields as absent, not as nullable.
Omitted = SkipJsonSchema[None]

# A list argument: at most MAX_LIST_ITEMS, its schema's maxItems (a list with a lower bound of its
# own states that one instead).
Listed = Annotated[list[T], Field(max_length=MAX_LIST_ITEMS)]


def hints(title: str, *, read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """A tool's annotations; every mnemo tool works on its own store only (closed world)."""
    return ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def counts_access(title: str) -> ToolAnnotations:
    """A finding tool that counts what it returns as accessed (access_count, accessed_at feed
    ranking): not read-only, and each call adds to the counts, so not idempotent either."""
    return hints(title, read_only=False, destructive=False, idempotent=False)


async def run(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run one blocking service operation on a worker thread, off the event loop."""
    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))


@dataclass(frozen=True)
class Profile:
    """A spec's tool surface. ``register`` adds its tools over the one store the server serves;
    a profile whose calls name their store (spec 002) gives ``register_stores`` instead, and
    gets every registered store."""

    name: str
    spec: str
    instructions: str
    register: Callable[[MCPServer, MemoryService], None] | None
    error_result: Callable[[MnemoError, datetime], CallToolResult]
    register_stores: Callable[[MCPServer, NamedStores], None] | None = None

    def __post_init__(self) -> None:
        if (self.register is None) == (self.register_stores is None):
            raise ValueError(f"profile {self.name!r} needs exactly one of register and register_stores")


def get_profile(name: str) -> Profile:
    """The profile of that name; its module (``mnemo.profiles.<name>``) defines ``PROFILE``."""
    if name not in PROFILE_NAMES:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILE_NAMES)}")
    profile: Profile = importlib.import_module(f"mnemo.profiles.{name}").PROFILE
    return profile
