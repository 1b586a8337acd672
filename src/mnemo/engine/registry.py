"""The store registry (spec 002): a TOML file that maps store names to folders.

    # written by `mnemo stores`
    [stores]
    work = "/home/me/memories/work"

``default`` is always known, at ``MNEMO_HOME/stores/default``, whether the file names it or not;
it cannot be registered elsewhere or removed. Removing a store only unregisters it: its files stay.
The file is read with the standard library's ``tomllib`` and written whole to a temporary file
that then replaces it, so a reader never sees half a registry.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import tomllib
from pathlib import Path

from mnemo.errors import Conflict, InvalidInput, NotFound, StorageError, reason_of

DEFAULT_STORE = "default"
MAX_NAME_CHARS = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name) or len(name) > MAX_NAME_CHARS:
        raise InvalidInput(
            f"invalid store name {name!r}: up to {MAX_NAME_CHARS} letters, digits, '-' and '_', starting with a "
            "letter or digit",
            field="store",
        )
    return name


def load(file: Path) -> dict[str, Path]:
    """The stores the file registers, by name (none when there is no file yet)."""
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise StorageError(f"the store registry ({file.name}) cannot be read: {reason_of(exc)}") from exc
    stores = data.get("stores", {})
    if not isinstance(stores, dict) or not all(isinstance(v, str) for v in stores.values()):
        raise StorageError(f'the store registry ({file.name}) needs a [stores] table of name = "folder"')
    return {name: Path(folder) for name, folder in stores.items()}


def known(file: Path, home: Path) -> dict[str, Path]:
    """Every store a name can reach: ``default`` and the registered ones, sorted by name."""
    stores = {DEFAULT_STORE: home / "stores" / DEFAULT_STORE, **load(file)}
    return dict(sorted(stores.items()))


def _toml_string(text: str) -> str:
    # A JSON string is a TOML basic string, except that TOML also forbids a raw DEL.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def save(file: Path, stores: dict[str, Path]) -> None:
    lines = ["# mnemo's store registry: name = folder. Edit with `mnemo stores add|remove`.", "[stores]"]
    lines += [f"{name} = {_toml_string(str(folder))}" for name, folder in sorted(stores.items())]
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=file.parent, delete=False, suffix=".tmp") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(out.name, file)
    except OSError as exc:
        raise StorageError(f"the store registry ({file.name}) cannot be written: {reason_of(exc)}") from exc


def add(file: Path, home: Path, name: str, folder: Path) -> Path:
    """Register a folder (made absolute; it need not exist yet) under a new name; returns the folder."""
    check_name(name)
    stores = known(file, home)
    if name in stores:
        raise Conflict(f"store {name!r} is already registered, at {stores[name]}", store=name)
    folder = folder.expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise InvalidInput(f"{folder} is a file, not a folder", field="path")
    twin = next((other for other, path in stores.items() if path.expanduser().resolve() == folder), None)
    if twin is not None:
        raise Conflict(f"{folder} is already registered as store {twin!r}", store=twin)
    save(file, {**load(file), name: folder})
    return folder


def remove(file: Path, name: str) -> Path:
    """Unregister a store; its folder and files are kept. Returns the folder it pointed at."""
    if name == DEFAULT_STORE:
        raise InvalidInput(f"store {DEFAULT_STORE!r} is always known and cannot be removed", field="store")
    stores = load(file)
    if name not in stores:
        raise NotFound(f"no store named {name!r} is registered", store=name)
    folder = stores.pop(name)
    save(file, stores)
    return folder


def is_path(location: str) -> bool:
    """A sync location that names a folder (or its memory.db) rather than a store of the registry."""
    return "/" in location or location.startswith((".", "~"))
