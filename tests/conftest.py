"""Shared fixtures: every test gets its own data dir with real SQLite files in it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mcp import Client

from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.local import LocalEmbedder
from mnemo.embed.model_files import default_model_dir
from mnemo.engine.service import MemoryService
from mnemo.serve.server import ProfileServer, build_server
from postgres_server import postgres_server, postgres_url  # noqa: F401  (fixtures)

START = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def installed_model() -> Path:
    """The local model's folder; skips where it is not installed, but fails under CI (which runs setup)."""
    directory = default_model_dir()
    if not LocalEmbedder.available(directory):
        if os.environ.get("CI"):
            pytest.fail(f"the embedding model is not installed in {directory}; CI must run `mnemo setup` first")
        pytest.skip(f"the embedding model is not installed in {directory}; run `mnemo setup`")
    return directory


@pytest.fixture(autouse=True)
def _own_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's real configuration (the store registry lives there)."""
    monkeypatch.setenv("MNEMO_CONFIG_DIR", str(tmp_path / "config"))


BACKENDS = ("sqlite", "postgres")


@pytest.fixture
def backend() -> str:
    """The storage backend of ``settings``: SQLite, but every backend in a test or module marked
    ``every_backend`` (the storage contract), unless it parametrises ``backend`` itself."""
    return "sqlite"


# A test of what only a SQLite file has (its pages, its user_version, damage to the file, its write
# lock) in a module marked every_backend runs on SQLite alone: it says so with this mark.
sqlite_only = pytest.mark.parametrize("backend", ["sqlite"])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "every_backend: run the test against SQLite and PostgreSQL")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("every_backend") is None:
        return
    if any(mark.args and mark.args[0] == "backend" for mark in metafunc.definition.iter_markers("parametrize")):
        return  # e.g. sqlite_only
    metafunc.parametrize("backend", BACKENDS)


@pytest.fixture
def settings(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Settings:
    # Words only: most tests check rules, not meaning; tests of meaning pass an embedder.
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else None
    return Settings(home=tmp_path / "home", config_dir=tmp_path / "config", embedder="none", database_url=url)


def serve_env(settings: Settings) -> dict[str, str]:
    """The environment of a ``mnemo serve`` process over the same stores as ``settings`` (words only)."""
    env = {"MNEMO_HOME": str(settings.home), "MNEMO_CONFIG_DIR": str(settings.config_dir), "MNEMO_EMBEDDER": "none"}
    return env | ({"MNEMO_DATABASE_URL": settings.database_url} if settings.database_url else {})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def service(settings: Settings, clock: ManualClock) -> Iterator[MemoryService]:
    svc = open_service(settings, clock=clock)
    yield svc
    svc.close()


@pytest.fixture
def server(settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    srv = build_server(settings, "full", clock=clock)
    yield srv
    srv.close()


@pytest.fixture
async def client(server: ProfileServer) -> AsyncIterator[Client]:
    """An in-memory MCP client, entered and left in one task of its own.

    pytest-asyncio runs an async fixture's setup and teardown as two tasks, and the client's anyio
    cancel scope must be left by the task that entered it.
    """
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def hold() -> None:
        async with Client(server, raise_exceptions=True) as c:
            ready.set_result(c)
            await done.wait()

    task = asyncio.create_task(hold())
    await asyncio.wait([ready, task], return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        task.result()  # raises what kept the client from starting
    yield ready.result()
    done.set()
    await task


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The attack suite's figures (calls fuzzed, kill trials, writes), printed with the results."""
    from attack_checks import FIGURES

    if FIGURES:
        terminalreporter.section("attack suite figures")
        for name, count in sorted(FIGURES.items()):
            terminalreporter.write_line(f"{name}: {count}")
