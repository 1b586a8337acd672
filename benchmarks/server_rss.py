"""Does `mnemo serve` stop growing? RSS of a stdio server after every 100 recall calls, per profile.

    python benchmarks/server_rss.py [--memories 10000] [--calls 1000] [--profiles full,agent,memento,stores,shared]

Fills one store with N synthetic memories (the local model, through `mnemo import`'s loader), then
for each profile starts `mnemo serve` on it, calls its search tool (recall_memories,
query_memories, search_memories, list_memories, search_memory) with varied queries through the
real `mcp.Client` over stdio, and prints the server's RSS (VmRSS) at start, after warm-up and after
every 100 calls, then the growth from the warm-up mark to the last call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from import_speed import sentences
from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.transfer.formats import Record
from mnemo.transfer.load import load

WARM_UP = 20
WORDS = ["report", "Lisbon", "boiler", "piano", "Atlas", "allergy", "shed", "laptop", "migration", "marathon",
         "Emma", "Liam", "Noah", "Ava", "planning", "worries", "postponed", "paid"]  # fmt: skip


def search_call(profile: str, query: str) -> tuple[str, dict[str, Any]]:
    calls: dict[str, tuple[str, dict[str, Any]]] = {
        "full": ("recall_memories", {"query": query, "limit": 10}),
        "agent": ("query_memories", {"search": query, "limit": 10}),
        "memento": ("search_memories", {"query": query, "limit": 10, "threshold": 0}),
        "stores": ("list_memories", {"store": "default"}),
        "shared": ("search_memory", {"query": query.split()[0]}),
    }
    return calls[profile]


def rss_mib(pid: int) -> tuple[float, float]:
    """VmRSS and, of it, RssAnon (the process's own memory; the rest is mostly the store's file,
    mapped for reading, which the kernel can drop)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["RssAnon"].split()[0]) / 1024


def server_pid(parent: int) -> int:
    """The `mnemo serve` child of this process (the stdio client spawned it)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if f"PPid:\t{parent}\n" in status and b"serve" in cmdline:
                return int(entry.name)
    raise RuntimeError("no mnemo serve child found")


async def measure(home: Path, profile: str, calls: int) -> list[tuple[str, tuple[float, float]]]:
    env = {**os.environ, "MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(home / "config")}
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "serve", "--profile", profile],
                                       env=env)  # fmt: skip
    rng = random.Random(1)
    marks: list[tuple[str, tuple[float, float]]] = []
    async with Client(parameters) as client:
        pid = server_pid(os.getpid())
        await client.list_tools()
        marks.append(("start", rss_mib(pid)))
        for n in range(1, WARM_UP + calls + 1):
            tool, args = search_call(profile, " ".join(rng.sample(WORDS, 3)))
            await client.call_tool(tool, args)
            if n == WARM_UP:
                marks.append((f"after {WARM_UP} (warm)", rss_mib(pid)))
            elif n > WARM_UP and (n - WARM_UP) % 100 == 0:
                marks.append((f"+{n - WARM_UP}", rss_mib(pid)))
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--profiles", default="full,agent,memento,stores,shared")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-rss-") as scratch:
        home = Path(scratch) / "home"
        service = open_service(Settings(home=home, config_dir=home / "config"))
        started = time.perf_counter()
        records = [Record(f"#{i}", {"content": text, "path": f"notes/n{i}" if i < 500 else None,
                                    "agent_name": "bench" if i < 500 else None})
                   for i, text in enumerate(sentences(args.memories))]  # fmt: skip
        summary = load(service, records)
        service.storage.close()
        print(f"store: {summary.imported} memories in {time.perf_counter() - started:.0f} s; "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}\n")  # fmt: skip
        for profile in args.profiles.split(","):
            marks = asyncio.run(measure(home, profile, args.calls))
            warm = dict(marks)[f"after {WARM_UP} (warm)"]
            shown = ", ".join(f"{label} {rss:.0f} ({anon:.0f})" for label, (rss, anon) in marks)
            print(f"{profile}: RSS (of it anonymous) MiB: {shown}")
            rss_growth, anon_growth = marks[-1][1][0] - warm[0], marks[-1][1][1] - warm[1]
            print(
                f"  growth after warm-up over {args.calls} calls: RSS {rss_growth:+.1f} MiB, "
                f"anonymous {anon_growth:+.1f} MiB\n"
            )


if __name__ == "__main__":
    main()
