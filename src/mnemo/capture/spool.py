"""Where hook calls wait to be captured, and where the capture process listens; standard library only.

A hook call worth capturing is written to the queue before the hook exits: one JSON file per call
in ``MNEMO_HOME/hooks/queue/``, written whole to a temporary name, flushed to disk, then renamed, so
a file in the queue is always complete. The capture process (``capture/daemon.py``) takes them in
name order (the time they were written) and deletes each after the engine committed what it kept;
a crash in between captures that call again, which the near-duplicate rule makes harmless.

This module is imported by the hook command's fast path (``capture/client.py``): nothing here may
import more than the standard library and platformdirs.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any, BinaryIO

QUEUE_LIMIT = 10_000  # calls waiting at most; past it the oldest are kept and a new one is refused
_COUNTER = itertools.count()
# A Unix socket's path must fit in about 104 bytes (sun_path); a longer home puts it in the temp folder.
SOCKET_PATH_LIMIT = 100


def mnemo_home() -> Path:
    """MNEMO_HOME as ``mnemo.config.Settings`` reads it from the environment (the hooks' environment
    is the client's: a home set only in a ``.env`` file is not seen here)."""
    if home := os.environ.get("MNEMO_HOME"):
        return Path(home).expanduser()
    import platformdirs  # a few milliseconds, and only when MNEMO_HOME is unset

    return Path(platformdirs.user_data_dir("mnemo", appauthor=False))


def hooks_dir(home: Path) -> Path:
    return home / "hooks"


def queue_dir(home: Path) -> Path:
    return hooks_dir(home) / "queue"


def run_dir(home: Path) -> Path:
    """The capture process's folder (its socket, lock and pid), readable by this user only."""
    folder = hooks_dir(home) / "run"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    return folder


def socket_path(home: Path) -> Path:
    path = run_dir(home) / "capture.sock"
    if len(os.fsencode(path)) <= SOCKET_PATH_LIMIT:
        return path
    import hashlib  # only for a long home
    import tempfile

    digest = hashlib.sha256(os.fsencode(home.resolve())).hexdigest()[:20]
    folder = Path(tempfile.gettempdir()) / f"mnemo-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.stat().st_uid != os.getuid() or folder.stat().st_mode & 0o077:
        raise PermissionError(f"{folder} is not this user's own private folder")
    return folder / f"{digest}.sock"


def take_lock(home: Path) -> BinaryIO | None:
    """The capture process's lock for ``home``, held while the returned file stays open; None when
    another process holds it. Taken before anything heavy is imported, so that of many processes
    started at once all but one exit at once."""
    import fcntl  # Unix only, as the capture process is

    lock = open(run_dir(home) / "capture.lock", "a+b")  # noqa: SIM115 (held open for the process's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    return lock


def put(home: Path, item: dict[str, Any]) -> Path | None:
    """Write ``item`` to the queue durably; None when the queue is full (the call is not captured)."""
    folder = queue_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    if len(os.listdir(folder)) >= QUEUE_LIMIT:
        return None
    name = f"{time.time_ns():020d}-{os.getpid()}-{next(_COUNTER)}.json"
    temporary = folder / f".{name}.tmp"
    with open(temporary, "wb") as file:
        file.write(json.dumps(item, ensure_ascii=False).encode())
        file.flush()
        os.fsync(file.fileno())
    final = folder / name
    temporary.replace(final)
    return final


def waiting(home: Path) -> list[Path]:
    """The queued calls, oldest first."""
    folder = queue_dir(home)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith("."))


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` whole: a reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
