"""Crash safety: ``mnemo serve`` killed with SIGKILL at random moments while it writes.

Two stores take turns: one served by the ``full`` profile (stores, updates, forgets) and one by
``shared`` with a five-entry limit (adds that rotate the oldest into the archive, updates, deletes,
and clears that write a backup first). Each trial starts a new server on its store, checks that
it answers, runs writes until a timer kills it, then checks the store's files: every write the
server acknowledged is there, ``PRAGMA integrity_check`` and the FTS index are sound, and every
backup and archive file parses.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attack_checks import FIGURES
from attack_live import KILLS, RANDOM
from attack_stdio import RawServer, check_store
from mnemo.app import open_service
from mnemo.config import Settings

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]


@dataclass
class Acknowledged:
    """What the servers of one store confirmed, and must therefore still be there."""

    versions: dict[str, int] = field(default_factory=dict)  # memory id -> least version
    forgotten: set[str] = field(default_factory=set)
    cleared: set[str] = field(default_factory=set)  # entries a confirmed clear moved into a backup


def _text(rng: random.Random, n: int = 6) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + f" {rng.randrange(10**9)}"


def _full_step(server: RawServer, rng: random.Random, acked: Acknowledged) -> bool:
    known = sorted(acked.versions)
    roll = rng.random()
    if roll < 0.5 or not known:
        result = server.call("store_memory", {"content": _text(rng), "context": {"user_id": rng.choice(WORDS)}})
        if result is None:
            return False
        acked.versions[result["structuredContent"]["memory_id"]] = 1
    elif roll < 0.85:
        target = rng.choice(known)
        updates = {"content": _text(rng)} if target not in acked.forgotten else {"importance": rng.random()}
        result = server.call("update_memory", {"memory_id": target, "updates": updates})
        if result is None:
            return False
        if not result.get("isError"):
            acked.versions[target] = result["structuredContent"]["version"]
    else:
        target = rng.choice(known)
        result = server.call("forget_memory", {"memory_id": target, "reason": "outdated"})
        if result is None:
            return False
        if not result.get("isError"):
            acked.forgotten.add(target)
    return True


def _shared_step(server: RawServer, rng: random.Random, acked: Acknowledged) -> bool:
    roll = rng.random()
    known = sorted(acked.versions)
    if roll < 0.6 or not known:
        args = {"agent_name": rng.choice(WORDS), "content": _text(rng), "tags": [rng.choice(WORDS)]}
        result = server.call("add_memory", args)
    elif roll < 0.8:
        result = server.call("update_memory", {"entry_id": rng.choice(known), "content": _text(rng)})
    elif roll < 0.93:
        target = rng.choice(known)
        result = server.call("delete_memory", {"entry_id": target})
        if result is not None and not result.get("isError"):
            del acked.versions[target]
    else:
        result = server.call("clear_memory", {"confirm": True})
        if result is not None and not result.get("isError"):
            acked.cleared = set(acked.versions)
            acked.versions.clear()
    if result is None:
        return False
    if not result.get("isError") and roll < 0.6:
        acked.versions[json.loads(result["content"][0]["text"])["entry_id"]] = 1
    return True


def _saved_ids(folder: Path) -> set[str]:
    """Ids in the shared space's backups and archive."""
    ids = set()
    for backup in (folder / "backups").glob("*.json"):
        ids |= {entry["id"] for entry in json.loads(backup.read_text(encoding="utf-8"))["entries"]}
    for archive in (folder / "archive").glob("*.jsonl"):
        ids |= {json.loads(text)["entry"]["id"] for text in archive.read_text(encoding="utf-8").splitlines()}
    return ids


def _lost(folder: Path, acked: Acknowledged) -> list[str]:
    """Acknowledged writes the store no longer shows."""
    with closing(sqlite3.connect(folder / "memory.db")) as db:
        rows = {i: (v, s) for i, v, s in db.execute("SELECT id, version, status FROM memories")}
    saved = _saved_ids(folder) if (folder / "backups").is_dir() or (folder / "archive").is_dir() else set()
    lost = [f"{i} (cleared into a backup)" for i in acked.cleared if i not in rows and i not in saved]
    for memory_id, version in acked.versions.items():
        if memory_id not in rows:
            lost += [] if memory_id in saved else [f"{memory_id} is gone"]
        elif rows[memory_id][0] < version:
            lost.append(f"{memory_id} is at version {rows[memory_id][0]}, {version} was acknowledged")
    lost += [
        f"{i} was forgotten but is {rows[i][1]}" for i in acked.forgotten if rows.get(i, (0, ""))[1] != "forgotten"
    ]
    return lost


def _trial(home: Path, profile: str, rng: random.Random, acked: Acknowledged) -> list[str]:
    server = RawServer(home, profile, store=profile, MNEMO_SHARED_MAX_ENTRIES="5")
    try:
        if server.initialize() is None or server.request("tools/list") is None:
            return [f"a new {profile} server did not answer after the last kill"]
        step = _full_step if profile == "full" else _shared_step
        killer = threading.Timer(rng.uniform(0.02, 0.5), server.kill)
        killer.start()
        while step(server, rng, acked):
            FIGURES["crash: calls before a kill"] += 1
        killer.join()
    finally:
        server.kill()
        server.close()
    folder = home / "stores" / profile
    return [f"{profile}: {p}" for p in check_store(folder) + _lost(folder, acked)]


def test_a_server_killed_at_random_moments_keeps_every_acknowledged_write_and_sound_files(tmp_path: Path):
    home = tmp_path / "home"
    for store in ("full", "shared"):  # a store is made on purpose before a server may serve it
        open_service(
            Settings(home=home, config_dir=tmp_path / "config", embedder="none"), store, create=True
        ).storage.close()
    rng = random.Random() if RANDOM else random.Random(13)
    acked = {"full": Acknowledged(), "shared": Acknowledged()}
    problems: list[str] = []
    for trial in range(KILLS):
        profile = ("full", "shared")[trial % 2]
        problems += [f"trial {trial}: {p}" for p in _trial(home, profile, rng, acked[profile])]
        FIGURES["crash: kill trials"] += 1
    for profile in acked:  # the last kill too leaves a store a new server can open
        server = RawServer(home, profile, store=profile)
        try:
            answer: dict[str, Any] | None = server.initialize() and server.request("tools/list")
            if answer is None or "result" not in answer:
                problems.append(f"{profile}: no server answered after the last kill")
        finally:
            server.close()
    FIGURES["crash: acknowledged writes checked"] += sum(len(a.versions) + len(a.cleared) for a in acked.values())
    assert problems == [], "\n".join(problems[:40])
