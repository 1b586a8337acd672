"""What the MCP server path adds to a search: the engine, the tool layer, and a real stdio round trip.

    python benchmarks/mcp_latency.py [--memories 10000] [--calls 200]

Fills a store with N synthetic memories (local model), then times the same queries three ways for
each profile's search tool: the engine's call in process (``MemoryService.recall`` / ``query``),
the profile's tool in process (``ProfileServer.call_tool``: argument validation, the output model,
its JSON), and ``mcp.Client`` over stdio to ``mnemo serve`` (adds both processes' JSON, the pipes,
and the client's check of the answer against the tool's output schema). Prints p50/p95 in ms and
the answer's size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from import_speed import sentences
from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.server import build_server
from mnemo.service import MemoryService
from mnemo.transfer.formats import Record
from mnemo.transfer.load import load
from server_rss import WORDS, search_call

ENGINE: dict[str, Callable[[MemoryService, str], object]] = {
    "full": lambda service, query: service.recall(query, limit=10),
    "agent": lambda service, query: service.query(search=query, limit=10),
    "memento": lambda service, query: service.recall(query, limit=10),
}


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):.2f} | {ordered[int(0.95 * (len(ordered) - 1))]:.2f}"


async def timed_async(queries: list[str], call: Callable[[str], Awaitable[Any]]) -> list[float]:
    taken = []
    for query in queries:
        started = time.perf_counter()
        await call(query)
        taken.append((time.perf_counter() - started) * 1000)
    return taken


async def over_stdio(home: Path, profile: str, queries: list[str]) -> tuple[list[float], int]:
    env = {**os.environ, "MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(home / "config")}
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "serve", "--profile", profile],
                                       env=env)  # fmt: skip
    sizes: list[int] = []
    async with Client(parameters) as client:

        async def call(query: str) -> None:
            tool, args = search_call(profile, query)
            result = await client.call_tool(tool, args)
            sizes.append(sum(len(part.text) for part in result.content if isinstance(part, TextContent)))

        await timed_async(queries[:30], call)  # warm-up: the model loads, the store is read in
        sizes.clear()
        return await timed_async(queries, call), int(statistics.median(sizes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(3)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.calls)]
    with tempfile.TemporaryDirectory(prefix="mnemo-latency-") as scratch:
        home = Path(scratch) / "home"
        settings = Settings(home=home, config_dir=home / "config")
        service = open_service(settings)
        load(service, [Record(str(i), {"content": text}) for i, text in enumerate(sentences(args.memories))])
        service.warm_up()
        print(f"{args.memories} memories, {args.calls} queries, {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.2f}\n")  # fmt: skip
        print(
            "| profile | engine p50 | p95 | tool in process p50 | p95 | over stdio p50 | p95 | stdio minus engine, p50 "
            "| answer |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for profile, engine_call in ENGINE.items():
            engine = []
            for query in queries:
                started = time.perf_counter()
                engine_call(service, query)
                engine.append((time.perf_counter() - started) * 1000)
            server = build_server(settings, profile)
            server.service.warm_up()

            async def tool_call(query: str, server: Any = server, profile: str = profile) -> None:
                await server.call_tool(*search_call(profile, query))

            tool = asyncio.run(timed_async(queries, tool_call))
            server.close()
            stdio, size = asyncio.run(over_stdio(home, profile, queries))
            added = statistics.median(stdio) - statistics.median(engine)
            print(f"| {profile} | {percentiles(engine)} | {percentiles(tool)} | {percentiles(stdio)} | "
                  f"{added:+.2f} | {size:,} B |")  # fmt: skip
        service.storage.close()


if __name__ == "__main__":
    main()
