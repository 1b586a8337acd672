"""A bounded soak of `mnemo serve --http` on loopback: many clients, mixed store and recall, nothing lost.

    python benchmarks/http_soak.py [--clients 16] [--seconds 120] [--mode auto|legacy] [--store-share 0.3]

Starts one server (profile full, the local model) on a fresh home, gives each client a key of its
own user, and lets every client call store_memory or recall_memories back to back for the given
time. Prints per tool: calls, errors, p50/p95/p99 latency (ms) and calls per second; then checks
that every store the server acknowledged is in the store (read back from the database after the
server stopped), and prints the server's RSS and the machine's load.
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
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from http_server import serving
from mnemo.access.caller import Role
from mnemo.access.keys import KeyRing
from mnemo.app import open_service
from mnemo.config import Settings

TOPICS = ["deploy", "invoice", "allergy", "standup", "release", "database", "vacation", "budget", "oncall", "design"]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


async def client_loop(server: Any, key: str, user: int, deadline: float, args: argparse.Namespace,
                      timings: dict[str, list[float]], errors: dict[str, int], stored: list[str]) -> None:  # fmt: skip
    rng = random.Random(user)
    async with server.client(key, args.mode) as client:
        n = 0
        while time.monotonic() < deadline:
            n += 1
            topic = rng.choice(TOPICS)
            call: dict[str, Any]
            if rng.random() < args.store_share:
                tool = "store_memory"
                call = {"content": f"User {user} note {n}: the {topic} item number {rng.randrange(10**9)}"}
            else:
                tool, call = "recall_memories", {"query": f"what about the {topic}", "limit": 10}
            started = time.perf_counter()
            try:
                result = await client.call_tool(tool, call)
            except Exception:  # a transport failure counts as an error, and the soak goes on
                errors[tool] += 1
                continue
            timings[tool].append((time.perf_counter() - started) * 1000)
            if result.is_error:
                errors[tool] += 1
            elif tool == "store_memory":
                stored.append(result.structured_content["memory_id"])


async def soak(server: Any, keys: list[str], args: argparse.Namespace) -> tuple[dict, dict, list[str], float]:
    timings: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    stored: list[str] = []
    deadline = time.monotonic() + args.seconds
    peak = 0.0

    async def watch() -> None:
        nonlocal peak
        while time.monotonic() < deadline:
            peak = max(peak, rss_mib(server.process.pid))
            await asyncio.sleep(1)

    await asyncio.gather(
        watch(), *(client_loop(server, key, i, deadline, args, timings, errors, stored) for i, key in enumerate(keys))
    )
    return timings, errors, stored, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--mode", choices=["auto", "legacy"], default="auto", help="2026 stateless or 2025 sessions")
    parser.add_argument("--store-share", type=float, default=0.3, help="share of calls that store (the rest recall)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-soak-") as scratch:
        home = Path(scratch) / "home"
        ring = KeyRing(home)
        keys = [ring.create(f"user{i}", Role.MEMBER)[1] for i in range(args.clients)]
        with serving(home, MNEMO_RATE_LIMITS="off") as server:
            started = rss_mib(server.process.pid)
            timings, errors, stored, peak = asyncio.run(soak(server, keys, args))
            ended = rss_mib(server.process.pid)
        service = open_service(Settings(home=home, config_dir=home / "config", embedder="none"))
        found = {m.id for m in service.storage.get_many(stored)}
        service.storage.close()
    load = os.getloadavg()
    print(f"{args.clients} clients x {args.seconds:.0f} s, mode {args.mode}, {os.cpu_count()} cores, "
          f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")  # fmt: skip
    print("| tool | calls | errors | p50 ms | p95 ms | p99 ms | calls/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for tool in sorted(timings):
        values = timings[tool]
        tail = f"{percentile(values, 0.95):.1f} | {percentile(values, 0.99):.1f}"
        rate = len(values) / args.seconds
        print(f"| {tool} | {len(values)} | {errors[tool]} | {statistics.median(values):.1f} | {tail} | {rate:.1f} |")
    print(f"\nacknowledged stores {len(stored)}, found in the store afterwards {len(found)}, "
          f"lost {len(stored) - len(found)}")  # fmt: skip
    print(f"server RSS: {started:.0f} MiB at start, {peak:.0f} MiB peak, {ended:.0f} MiB at the end")


if __name__ == "__main__":
    main()
