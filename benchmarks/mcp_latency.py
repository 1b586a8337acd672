"""What the MCP server path adds to a search: the engine, the tool layer, and a real stdio round trip.

    python benchmarks/mcp_latency.py [--memories 10000] [--calls 200] [--store-dir DIR]

Fills a store with N synthetic memories (local model; with --store-dir, a store there that
already holds memories is used as it is, such as the one ``latency.py --store-dir`` filled: a
1,000,000-memory store takes too long to fill each run), then times each query four ways, back to
back and in rotating order, for each profile's search tool: the engine's call in process
(``MemoryService.recall`` / ``query``), the profile's tool in process (``ProfileServer.call_tool``:
argument validation, the output model, its JSON), ``mcp.Client`` over stdio to ``mnemo serve``
(adds both processes' JSON, the pipes, and the Python SDK client's own work: its session, its
check of the answer against the tool's output schema), and a plain JSON-RPC client over stdio to
a second ``mnemo serve`` (WireClient: writes the request line, reads and parses the answer line;
what the server path costs a client that does no more). Then the floor: full's answer returned by
a bare SDK server with no search behind it (FLOOR_SERVER). Prints p50/p95 in ms, the median of the
per-query differences between each stdio way and the engine (paired, so the machine's drifting
load cancels), the CPU each way uses per call (ms: the engine in process; over stdio, the
server's and the client's), and the answer's size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from mcp import Client, StdioServerParameters
from mcp.types import LATEST_PROTOCOL_VERSION, PROTOCOL_VERSION_META_KEY, TextContent

from import_speed import sentences
from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.engine.service import MemoryService
from mnemo.query import Filters
from mnemo.serve.server import DAILY_BACKUP_S, build_server
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


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sdk_server_pid(others: Collection[int] = ()) -> int:
    """The stdio server ``mcp.Client`` spawned: the one child process of this one not in ``others``."""
    children = {
        int(pid) for task in Path("/proc/self/task").iterdir() for pid in (task / "children").read_text().split()
    }
    (pid,) = children - set(others)
    return pid


class WireClient:
    """A plain JSON-RPC client of a stdio server (MCP 2026-07-28: stateless, no handshake): each call
    writes one request line and reads and parses the answer line, and checks nothing else."""

    META: ClassVar[dict[str, Any]] = {
        PROTOCOL_VERSION_META_KEY: LATEST_PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.requests = 0

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.requests += 1
        params = {"name": name, "arguments": arguments, "_meta": self.META}
        request = {"jsonrpc": "2.0", "id": self.requests, "method": "tools/call", "params": params}
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        if "result" not in answer or answer["result"].get("isError"):
            raise RuntimeError(f"{name} failed: {answer}")
        result: dict[str, Any] = answer["result"]
        return result

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


async def settled(pid: int) -> None:
    """Once the server's start-up work (warm-up, its daily back-up, the maintenance pass) is over."""
    used = cpu_seconds(pid)
    while True:
        await asyncio.sleep(0.5)
        now = cpu_seconds(pid)
        if now - used < 0.02:
            return
        used = now


WAYS = ("engine", "tool", "stdio", "wire")
# The floor of the path: an SDK server whose one tool returns a saved answer of full's recall as the
# same output model, with no search behind it. What stdio costs beyond it is mnemo's to cut.
FLOOR_SERVER = textwrap.dedent(
    """
    import json, sys
    from mcp.server.mcpserver import MCPServer
    from mnemo.profiles.full_schemas import RecallMemoriesResult
    from mnemo.profiles.tool_schemas import serve_lean_schemas

    answer = json.loads(open(sys.argv[1]).read())
    server = MCPServer("floor")


    @server.tool()
    def recall_memories(query: str, limit: int = 10) -> RecallMemoriesResult:
        return RecallMemoriesResult.model_validate(answer)


    serve_lean_schemas(server)  # the output schema mnemo serves, so the client checks the same
    server.run()
    """
)


@dataclass
class Timings:
    """Each way's wall times (ms) and the CPU it used in all (s): this process's, and over stdio the
    server's too (as ``"<way> server"``)."""

    wall: dict[str, list[float]] = field(default_factory=lambda: {way: [] for way in WAYS})
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys([*WAYS, "stdio server", "wire server"], 0.0))
    answer_bytes: int = 0
    answer: dict[str, Any] | None = None  # the last structured answer over stdio


async def timed_rounds(
    ways: dict[str, Callable[[str], Awaitable[Any]]], servers: dict[str, int], queries: list[str]
) -> Timings:
    """Each query timed every way back to back, the order rotating from query to query, so that the
    machine's load drifts over all of them alike and the differences can be taken query by query;
    after a warm-up (the model loads, the store is read in, on every side) and once the stdio
    servers' start-up work is over. ``servers``: the pid serving each stdio way, whose CPU is
    counted over that way's calls."""
    for query in queries[:30]:
        for way in ways.values():
            await way(query)
    for pid in servers.values():
        await settled(pid)
    timings = Timings()
    names = list(ways)
    for turn, query in enumerate(queries):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            server = servers.get(name)
            started, cpu = time.perf_counter(), time.process_time()
            server_cpu = cpu_seconds(server) if server else 0.0
            await ways[name](query)
            timings.wall[name].append((time.perf_counter() - started) * 1000)
            timings.cpu[name] += time.process_time() - cpu
            if server:
                timings.cpu[f"{name} server"] += cpu_seconds(server) - server_cpu
    return timings


async def floor(answer: dict[str, Any], queries: list[str], scratch: Path) -> Timings:
    """The same calls to FLOOR_SERVER answering ``answer``: wall time, and the server's and client's CPU."""
    (scratch / "answer.json").write_text(json.dumps(answer))
    (scratch / "floor_server.py").write_text(FLOOR_SERVER)
    command = [str(scratch / "floor_server.py"), str(scratch / "answer.json")]
    async with Client(StdioServerParameters(command=sys.executable, args=command)) as client:

        async def stdio(query: str) -> None:
            await client.call_tool("recall_memories", {"query": query, "limit": 10})

        return await timed_rounds({"stdio": stdio}, {"stdio": sdk_server_pid()}, queries)


async def interleaved(
    home: Path, profile: str, queries: list[str], engine: Callable[[str], object], tool: Callable[[str], Awaitable[Any]]
) -> Timings:
    """A profile's search timed three ways (see timed_rounds): the engine, its tool in process, over stdio."""
    env = {**os.environ, "MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(home / "config")}
    command = [sys.executable, "-m", "mnemo", "serve", "--profile", profile]
    parameters = StdioServerParameters(command=command[0], args=command[1:], env=env)
    sizes: list[int] = []
    answers: list[dict[str, Any] | None] = []
    wire_client = WireClient(command, env)
    async with Client(parameters) as client:

        async def stdio(query: str) -> None:
            name, arguments = search_call(profile, query)
            result = await client.call_tool(name, arguments)
            sizes.append(sum(len(part.text) for part in result.content if isinstance(part, TextContent)))
            answers.append(result.structured_content)

        async def wire(query: str) -> None:
            wire_client.call_tool(*search_call(profile, query))

        async def in_process(query: str) -> None:
            engine(query)

        wire_pid = wire_client.process.pid
        servers = {"stdio": sdk_server_pid(others=[wire_pid]), "wire": wire_pid}
        ways = {"engine": in_process, "tool": tool, "stdio": stdio, "wire": wire}
        timings = await timed_rounds(ways, servers, queries)
        timings.answer_bytes, timings.answer = int(statistics.median(sizes)), answers[-1]
    wire_client.close()
    return timings


def stored(service: MemoryService) -> int:
    return service.storage.count(Filters(now=service.clock.now()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--store-dir", help="use the store here if it holds memories, else fill it and keep it")
    args = parser.parse_args()
    rng = random.Random(3)
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.calls)]
    with tempfile.TemporaryDirectory(prefix="mnemo-latency-") as scratch:
        home = Path(args.store_dir) if args.store_dir else Path(scratch) / "home"
        settings = Settings(home=home, config_dir=home / "config")
        service = open_service(settings)
        if not stored(service):
            load(service, [Record(str(i), {"content": text}) for i, text in enumerate(sentences(args.memories))])
        service.warm_up()
        # The servers' daily copy of the store at start, made now: not while they are timed.
        service.storage.back_up("at-start", min_interval_s=DAILY_BACKUP_S)
        print(f"{stored(service):,} memories, {args.calls} queries, {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.2f}\n")  # fmt: skip
        print(
            "| profile | engine p50 | p95 | tool in process p50 | p95 | SDK client over stdio p50 | p95 "
            "| minus engine, p50 of pairs | plain client over stdio p50 | p95 | minus engine, p50 of pairs "
            "| CPU per call: engine | SDK client's server | SDK client | plain client's server | plain client "
            "| answer |"
        )
        print("| --- |" + " ---: |" * 16)
        answers: dict[str, dict[str, Any] | None] = {}
        for profile, engine_call in ENGINE.items():
            server = build_server(settings, profile)
            server.service.warm_up()

            async def tool(query: str, server: Any = server, profile: str = profile) -> None:
                await server.call_tool(*search_call(profile, query))

            def engine(query: str, engine_call: Callable[[MemoryService, str], object] = engine_call) -> object:
                return engine_call(service, query)

            timings = asyncio.run(interleaved(home, profile, queries, engine, tool))
            server.close()
            answers[profile] = timings.answer
            wall = timings.wall
            added = {
                way: statistics.median(s - e for s, e in zip(wall[way], wall["engine"], strict=True))
                for way in ("stdio", "wire")
            }
            cpu = {way: f"{1000 * seconds / len(queries):.1f}" for way, seconds in timings.cpu.items()}
            print(f"| {profile} | {percentiles(wall['engine'])} | {percentiles(wall['tool'])} | "
                  f"{percentiles(wall['stdio'])} | {added['stdio']:+.2f} | {percentiles(wall['wire'])} | "
                  f"{added['wire']:+.2f} | {cpu['engine']} | {cpu['stdio server']} | {cpu['stdio']} | "
                  f"{cpu['wire server']} | {cpu['wire']} | {timings.answer_bytes:,} B |")  # fmt: skip
        answer = answers["full"]
        assert answer is not None
        bare = asyncio.run(floor(answer, queries, Path(scratch)))
        cpu = {way: f"{1000 * seconds / len(queries):.1f}" for way, seconds in bare.cpu.items()}
        print(f"| SDK floor: full's answer from a bare tool | | | | | {percentiles(bare.wall['stdio'])} | | | | "
              f"| | {cpu['stdio server']} | {cpu['stdio']} | | | |")  # fmt: skip
        print(f"\nload at the end {os.getloadavg()[0]:.2f}")
        service.storage.close()


if __name__ == "__main__":
    main()
