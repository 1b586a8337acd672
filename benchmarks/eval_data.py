"""Where the benchmarks find the evaluation sets: ``--data``, else ``MNEMO_EVAL_DIR``.

The sets are not in this repository (LoCoMo is CC BY-NC; the agent-memory set is the project's
dev data). Each is one JSON file in the format README.md describes ("Evaluation data");
``benchmarks/build_locomo.py`` builds LoCoMo's from the public ``locomo10.json``. A benchmark
that reads a folder takes the files named below from it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

EVAL_DIR_VARIABLE = "MNEMO_EVAL_DIR"
DEV_SETS = ("agent-memory-dev.json", "locomo-dev.json")
_HELP = (
    f"folder of the eval sets ({', '.join(DEV_SETS)}); default ${EVAL_DIR_VARIABLE}; "
    "build LoCoMo's with benchmarks/build_locomo.py"
)


def add_data_folder(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=None, help=_HELP)


def data_folder(given: Path | None) -> Path | None:
    """The folder given, else the one the environment names; None if neither is a folder."""
    folder = given or (Path(os.environ[EVAL_DIR_VARIABLE]) if os.environ.get(EVAL_DIR_VARIABLE) else None)
    return folder if folder is not None and folder.is_dir() else None


def required_folder(parser: argparse.ArgumentParser, given: Path | None) -> Path:
    folder = data_folder(given)
    if folder is None:
        parser.error(f"no eval folder: pass --data DIR or set {EVAL_DIR_VARIABLE} ({_HELP})")
    return folder


def dev_files(folder: Path) -> list[Path]:
    """The dev sets the folder holds."""
    return [folder / name for name in DEV_SETS if (folder / name).is_file()]


def write_eval(path: Path, data: dict[str, Any], skipped: str) -> None:
    """Write a built eval file and say on stderr what it holds (``skipped``: what was left out, and why)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False) + "\n", encoding="utf-8")
    memories = sum(len(h["memories"]) for h in data["haystacks"])
    queries = sum(len(h["queries"]) for h in data["haystacks"])
    print(f"{path}: {len(data['haystacks'])} haystacks, {memories} memories, {queries} questions ({skipped})",
          file=sys.stderr)  # fmt: skip
