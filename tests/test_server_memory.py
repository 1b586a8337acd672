"""A stdio server's own memory stays flat under many recalls (a bounded guard; the full picture is
benchmarks/server_rss.py). Its anonymous memory is measured: the store's file, mapped for reading,
comes and goes with the kernel's page cache and is not the server's to keep."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.transfer.formats import Record
from mnemo.transfer.load import load

WARM_UP, CALLS, BOUND_MIB = 50, 250, 15
PEOPLE = ["Emma", "Liam", "Noah", "Ava", "Mia"]
TOPICS = ["the boiler", "piano lessons", "a trip to Lisbon", "the quarterly report", "marathon training"]


def anonymous_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon")


def child_serving(parent: int) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (
                    f"PPid:\t{parent}\n" in (entry / "status").read_text()
                    and b"serve" in (entry / "cmdline").read_bytes()
                ):
                    return int(entry.name)
            except OSError:
                continue
    raise AssertionError("no mnemo serve child")


async def test_recalls_after_warm_up_do_not_grow_the_servers_memory(tmp_path: Path, installed_model: Path):
    home = tmp_path / "home"
    service = open_service(Settings(home=home, config_dir=home / "config"))
    texts = [f"{PEOPLE[i % 5]} talked about {TOPICS[(i // 5) % 5]} on day {i}" for i in range(300)]
    load(service, [Record(str(i), {"content": text}) for i, text in enumerate(texts)])
    service.storage.close()
    env = {**os.environ, "MNEMO_HOME": str(home), "MNEMO_CONFIG_DIR": str(home / "config")}
    async with Client(StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "serve"], env=env)) as client:
        pid = child_serving(os.getpid())
        for n in range(WARM_UP + CALLS):
            if n == WARM_UP:
                warm = anonymous_mib(pid)
            query = f"what did {PEOPLE[n % 5]} say about {TOPICS[n % 5]} {n}"
            assert not (await client.call_tool("recall_memories", {"query": query, "limit": 10})).is_error
        grown = anonymous_mib(pid) - warm
    print(
        f"server anonymous memory after {WARM_UP} warm-up calls: {warm:.0f} MiB; {CALLS} calls later {grown:+.1f} MiB"
    )
    assert grown < BOUND_MIB
