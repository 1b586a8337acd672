"""What every ``mnemo`` command shares: error reporting, the --store and --json options, output."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from pydantic import ValidationError

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.engine.lists import STATUS_NAMES
from mnemo.engine.service import MemoryService
from mnemo.errors import MnemoError
from mnemo.model import Memory, to_iso
from mnemo.query import SortField

if TYPE_CHECKING:  # rich loads when a command prints, not before `mnemo serve` answers its client
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

F = TypeVar("F", bound=Callable[..., Any])

TABLE_CONTENT_CHARS = 80
STATUS_LABELS = {status: name for name, status in STATUS_NAMES.items()}  # forgotten is "deleted" here


# -- plumbing ------------------------------------------------------------------------------
class MnemoGroup(click.Group):
    """A group that reports domain and settings errors as one line, without a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MnemoError as error:
            _fail(ctx, f"{error.code}: {error.message}")
        except ValidationError as error:  # raised by Settings() for a bad MNEMO_* variable
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            _fail(ctx, f"INVALID_INPUT: setting {where}: {first['msg']}")


def _fail(ctx: click.Context, message: str) -> NoReturn:
    click.secho(f"error: {message}", err=True, fg="red")
    ctx.exit(1)


def store_option(command: F) -> F:
    """``--store`` on a command; it wins over the group's ``--store``."""
    return click.option("--store", default=None, help="Store to use (default: the group's --store or MNEMO_STORE).")(
        command
    )


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")(command)


def _store_name(store: str | None) -> str | None:
    """The command's ``--store``, else the group's, else ``None`` (``Settings().store``)."""
    return store or click.get_current_context().find_root().params.get("store")


@contextmanager
def _service(store: str | None) -> Iterator[MemoryService]:
    service = open_service(Settings(), _store_name(store), actor="mnemo-cli")
    try:
        yield service
    finally:
        service.close()


def _plain(value: Any) -> Any:
    """Dataclasses become dicts; datetimes become ISO 8601 UTC text (in ``_dump``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _iso_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return to_iso(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _dump(payload: Mapping[str, Any]) -> None:
    click.echo(json.dumps({k: _plain(v) for k, v in payload.items()}, default=_iso_default, ensure_ascii=False))


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False, markup=False, emoji=False)  # memories are text, not markup


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else "-"


def _day(value: datetime) -> str:
    return value.strftime("%Y-%m-%d")


def _snippet(content: str, limit: int = TABLE_CONTENT_CHARS) -> str:
    flat = " ".join(content.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _table(title: str | None = None, **options: Any) -> Table:
    from rich import box
    from rich.table import Table

    return Table(title=title, **{"box": box.SIMPLE_HEAD, "title_justify": "left", "pad_edge": False, **options})


def _memory_table(memories: list[Memory], title: str, sort_field: SortField, *, with_status: bool) -> Table:
    """Full ids, so that one can be pasted into ``show`` or ``forget``; beside them the value the
    list is sorted by, and the content in what width is left."""
    table = _table(title)
    table.add_column("id", no_wrap=True)
    table.add_column(sort_field.value, justify="right", no_wrap=True)
    table.add_column("category\nstatus" if with_status else "category", no_wrap=True)
    table.add_column("content", ratio=1)
    for m in memories:
        category = m.category or "-"
        if with_status:
            category += f"\n{STATUS_LABELS.get(m.status, m.status.value)}"
        table.add_row(m.id, _sort_value(m, sort_field), category, _content(m))
    return table


def _content(memory: Memory) -> Text:
    """A memory's content in a table, after the subject it is about in bold where it has one: an
    imported knowledge graph's observation ("Speaks fluent Spanish") names it nowhere else."""
    from rich.text import Text

    return Text.assemble((f"{memory.subject}: ", "bold") if memory.subject else "", _snippet(memory.content))


def _sort_value(memory: Memory, sort_field: SortField) -> str:
    match sort_field:
        case SortField.CREATED_AT:
            return _day(memory.created_at)
        case SortField.UPDATED_AT:
            return _day(memory.updated_at)
        case SortField.ACCESSED_AT:
            return _day(memory.accessed_at)
        case SortField.IMPORTANCE:
            return f"{memory.importance:.2f}"
        case SortField.ACCESS_COUNT:
            return str(memory.access_count)
        case SortField.CONTENT_LENGTH:
            return str(memory.content_length)
