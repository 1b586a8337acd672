"""What a server loads before its first answer: nothing the handshake does not need (mnemo.lazy)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

BUILD_AND_LIST = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from mnemo.config import Settings
    from mnemo.serve.server import build_server

    server = build_server(Settings(home=Path(sys.argv[1]), model_dir=Path(sys.argv[2])))
    tools = asyncio.run(server.list_tools())
    print(len(tools), "numpy" in sys.modules)
    server.close()
    """
)


def test_a_server_is_built_and_lists_its_tools_without_importing_numpy(tmp_path: Path, installed_model: Path):
    answer = subprocess.run(
        [sys.executable, "-c", BUILD_AND_LIST, str(tmp_path / "home"), str(installed_model)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    tools, numpy_imported = answer.stdout.split()
    assert int(tools) == 10
    assert numpy_imported == "False", "numpy is imported before the first answer: import it from mnemo.lazy"


BLAS_THREADS = textwrap.dedent(
    """
    import ctypes, os
    import mnemo, numpy

    (path,) = {line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line}
    symbols = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")
    blas = ctypes.CDLL(path)
    print(next(getattr(blas, name)() for name in symbols if hasattr(blas, name)))
    """
)


def test_numpy_runs_one_blas_thread_unless_the_environment_says_otherwise():
    # OpenBLAS's idle workers spin: with two of them, each recall burnt a second core (see mnemo/__init__.py).
    def threads(**env: str) -> int:
        clean = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
        answer = subprocess.run([sys.executable, "-c", BLAS_THREADS], env={**clean, **env},
                                capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
        return int(answer.stdout)

    assert threads() == 1
    assert threads(OPENBLAS_NUM_THREADS="2") == min(2, os.cpu_count() or 1)  # OpenBLAS runs no more than the cores
