"""Deep-archive files: the content of a batch of memories, out of the live database.

One gzip-compressed JSON Lines file per archiving run, under ``<store>/archive/deep/``, written to a
temporary name, flushed to disk and renamed, so a file either is whole or is not there. The
database keeps each memory's ``archive_file`` as ``<name>:<sha256 of the file>``; reading checks
the checksum first, so a damaged file is refused instead of half-restored.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from mnemo.errors import Unprocessable

DEEP_FOLDER = ("archive", "deep")


def folder_of(store_folder: Path) -> Path:
    return store_folder.joinpath(*DEEP_FOLDER)


def write(store_folder: Path, name: str, contents: Iterable[tuple[str, str]]) -> str:
    """Write (memory_id, content) pairs to a new archive file; returns its ``archive_file`` reference."""
    folder = folder_of(store_folder)
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"memory_id": i, "content": c}) + "\n" for i, c in contents)
    packed = gzip.compress(lines.encode("utf-8", "surrogatepass"), compresslevel=9, mtime=0)
    target = folder / f"{name}.jsonl.gz"
    partial = target.with_suffix(".partial")
    with open(partial, "wb") as out:
        out.write(packed)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, target)
    return f"{target.name}:{hashlib.sha256(packed).hexdigest()}"


def read(store_folder: Path, reference: str) -> dict[str, str]:
    """Every memory's content in the archive file a reference names, checked against its checksum."""
    name, _, checksum = reference.rpartition(":")
    path = folder_of(store_folder) / Path(name).name
    try:
        packed = path.read_bytes()
    except OSError as exc:
        raise Unprocessable(f"archive file {name} cannot be read: {exc.strerror}", archive_file=name) from exc
    if hashlib.sha256(packed).hexdigest() != checksum:
        raise Unprocessable(f"archive file {name} is damaged (checksum mismatch)", archive_file=name)
    rows = (json.loads(line) for line in gzip.decompress(packed).decode("utf-8", "surrogatepass").splitlines())
    return {row["memory_id"]: row["content"] for row in rows}


def size(store_folder: Path) -> int:
    folder = folder_of(store_folder)
    return sum(p.stat().st_size for p in folder.glob("*.jsonl.gz")) if folder.is_dir() else 0


def discard_unused(store_folder: Path, references: Iterable[str], in_use: set[str]) -> None:
    """Delete these archive files once no memory refers to them (all their memories were restored).

    Only files named here are considered: a file another process has just written is not yet
    referred to by any memory, and must not be taken for an unused one.
    """
    used = {reference.rpartition(":")[0] for reference in in_use}
    for reference in references:
        name = Path(reference.rpartition(":")[0]).name
        if name not in used:
            (folder_of(store_folder) / name).unlink(missing_ok=True)
