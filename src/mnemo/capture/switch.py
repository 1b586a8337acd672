"""The folders where the hooks do nothing (``mnemo hooks disable``), in ``MNEMO_HOME/hooks/disabled.json``.

Read by the hook command's fast path before it reads anything else: standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path

from mnemo.capture.spool import hooks_dir, write_atomically


def disabled_folders(home: Path) -> list[str]:
    path = hooks_dir(home) / "disabled.json"
    if not path.exists():
        return []
    folders = json.loads(path.read_text(encoding="utf-8"))
    return [f for f in folders if isinstance(f, str)] if isinstance(folders, list) else []


def set_disabled(home: Path, folder: Path, disabled: bool) -> None:
    folders = [f for f in disabled_folders(home) if f != str(folder)]
    if disabled:
        folders.append(str(folder))
    write_atomically(hooks_dir(home) / "disabled.json", json.dumps(sorted(folders), indent=2) + "\n")


def is_disabled(home: Path, *folders: Path) -> bool:
    """Whether any of ``folders`` is a disabled folder or lies inside one."""
    off = [Path(f) for f in disabled_folders(home)]
    return any(folder == d or d in folder.parents for folder in folders for d in off)
