"""Start-up: from spawning a server to its first answers over stdio, beside a bare SDK server.

    python benchmarks/startup.py [--runs 10] [--memories 0,10000]

Each run spawns the process, writes an ``initialize`` request at once and times its answer (the
first answer after spawn), then ``tools/list``, then one search (which, in mnemo, may wait for the
model to load). The baseline is the smallest server the MCP SDK makes (``MCPServer`` with one
tool): what it takes is the SDK's import and start, which mnemo cannot go below. mnemo runs with
the profile ``full`` and its defaults (the local model) on a store of each size given, filled
once through ``mnemo import``'s loader (10,000 memories take about a minute to embed); its first
search waits for the model, which loads after the handshake. Runs are interleaved so that load
on the machine falls on both alike.
Prints p50 / p95 in ms and the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.transfer.formats import Record
from mnemo.transfer.load import load

PROTOCOL_VERSION = "2025-06-18"
BARE_SERVER = textwrap.dedent(
    """
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bare")


    @server.tool()
    def echo(text: str) -> str:
        return text


    server.run()
    """
)


def request(request_id: int, method: str, params: dict[str, object]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + "\n").encode()


def one_run(command: list[str], env: dict[str, str], search: tuple[str, dict[str, object]]) -> list[float]:
    """Milliseconds from spawn to the answers of initialize, tools/list and a search call."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert process.stdin is not None and process.stdout is not None
    info = {"name": "startup-benchmark", "version": "1"}
    process.stdin.write(
        request(1, "initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": info})
    )
    process.stdin.flush()
    taken = []
    process.stdout.readline()
    taken.append((time.perf_counter() - started) * 1000)
    process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    process.stdin.write(request(2, "tools/list", {}))
    process.stdin.flush()
    process.stdout.readline()
    taken.append((time.perf_counter() - started) * 1000)
    name, arguments = search
    process.stdin.write(request(3, "tools/call", {"name": name, "arguments": arguments}))
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    taken.append((time.perf_counter() - started) * 1000)
    if "error" in answer or answer["result"].get("isError"):
        raise RuntimeError(f"the search failed: {answer}")
    process.stdin.close()
    process.wait(timeout=30)
    return taken


def filled_home(root: Path, memories: int) -> Path:
    home = root / f"home-{memories}"
    service = open_service(Settings(home=home))
    try:
        words = ["coffee", "deploy", "garden", "invoice", "piano", "ledger", "pager", "tulip"]
        load(
            service,
            (
                Record(f"note {i}", {"content": f"Note {i}: {words[i % 8]} and {words[i * 7 % 8]}"})
                for i in range(memories)
            ),
        )
    finally:
        service.storage.close()
    return home


def cell(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):7.0f} | {ordered[int(0.95 * (len(ordered) - 1))]:5.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--memories", default="0,10000", help="comma-separated store sizes for mnemo")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.memories.split(",")]
    with tempfile.TemporaryDirectory(prefix="mnemo-startup-") as tmp:
        root = Path(tmp)
        bare = root / "bare_server.py"
        bare.write_text(BARE_SERVER)
        mnemo = [sys.executable, "-m", "mnemo", "serve"]
        subjects: dict[str, tuple[list[str], dict[str, str], tuple[str, dict[str, object]]]] = {
            "bare SDK server (MCPServer, 1 tool)": (
                [sys.executable, str(bare)],
                dict(os.environ),
                ("echo", {"text": "hi"}),
            )
        }
        for size in sizes:
            env = {**os.environ, "MNEMO_HOME": str(filled_home(root, size))}
            subjects[f"mnemo serve, full, {size:,} memories"] = (mnemo, env, ("recall_memories", {"query": "coffee"}))
        results: dict[str, list[list[float]]] = {name: [] for name in subjects}
        for _ in range(args.runs):
            for name, (command, env, search) in subjects.items():
                results[name].append(one_run(command, env, search))
    print(f"{args.runs} runs each, interleaved; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'ms from spawn, p50 | p95':<40} {'initialize':>15} {'tools/list':>15} {'first search':>15}")
    for name, runs in results.items():
        columns = [cell([run[i] for run in runs]) for i in range(3)]
        print(f"{name:<40} " + " ".join(f"{c:>15}" for c in columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
