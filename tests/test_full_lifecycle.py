"""Spec 004's archive_memory and restore_memory through an MCP client, on real SQLite files.

Each tier is checked where it keeps the content (the database row, the word index, the vectors,
the archive file), each round trip gives back the same content and metadata, each listed error is
produced by the input that should produce it, and a rejected or dry-run call changes nothing.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from attack_checks import CALL_RECORDS
from mcp_calls import answer as call
from mcp_calls import structured
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed import Vectors
from mnemo.embed.fake import FakeEmbedder
from mnemo.profiles import get_profile
from mnemo.serve.server import ProfileServer
from spec004 import error_of, store

pytestmark = pytest.mark.every_backend  # the storage contract: SQLite and PostgreSQL

TIERS = ["cold", "glacier", "deep_archive"]
KEPT_FIELDS = ("content", "category", "tags", "importance", "created_at", "access_level", "context")


@pytest.fixture
def lifecycle_settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", config_dir=tmp_path / "config", embedder="none")


def build(settings: Settings, clock: ManualClock) -> ProfileServer:
    return ProfileServer(get_profile("full"), open_service(settings, clock=clock, embedder=FakeEmbedder()))


@pytest.fixture
def server(lifecycle_settings: Settings, clock: ManualClock) -> Iterator[ProfileServer]:
    srv = build(lifecycle_settings, clock)
    yield srv
    srv.close()


def database(settings: Settings) -> Path:
    return settings.home / "stores" / "default" / "memory.db"


def rows(settings: Settings, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(database(settings))) as db:
        return db.execute(sql, params).fetchall()


def dump(settings: Settings) -> list[Any]:
    """Every row of every table but the word index's own and the call records: the store's whole state."""
    with closing(sqlite3.connect(database(settings))) as db:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        kept = [t for t in tables if "fts" not in t and t not in CALL_RECORDS]
        return [(t, db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()) for t in kept]


async def listed(client: Client, memory_id: str, status: str = "active") -> dict[str, Any]:
    page = await structured(client, "list_memories", filters={"status": [status]}, pagination={"limit": 100})
    return next(m for m in page["memories"] if m["memory_id"] == memory_id)


@asynccontextmanager
async def connected(server: ProfileServer) -> AsyncIterator[Client]:
    async with Client(server, raise_exceptions=True) as client:
        yield client


CONTENT = "Emma is lactose intolerant — keep dairy out of every dish 🥛"
METADATA = {"category": "instruction", "tags": ["dietary", "health"], "importance": 0.9, "access_level": "shared"}


@pytest.mark.parametrize("tier", TIERS)
async def test_archive_then_restore_gives_back_the_same_content_and_metadata_in_every_tier(
    server, lifecycle_settings, tier
):
    async with connected(server) as client:
        memory_id = await store(client, CONTENT, metadata=METADATA, context={"user_id": "u1", "conversation_id": "c1"})
        before = await listed(client, memory_id)
        archived = await structured(client, "archive_memory", memory_id=memory_id, archive_tier=tier, reason="test")
        assert archived["archived_count"] == 1
        entry = archived["memories_archived"][0]
        assert (entry["memory_id"], entry["archive_tier"]) == (memory_id, tier)
        assert entry["archive_id"]
        assert (await listed(client, memory_id, "archived"))["status"] == "archived"
        restored = await structured(client, "restore_memory", memory_id=memory_id)
        assert restored["memories_restored"][0]["archive_id"] == entry["archive_id"]
        after = await listed(client, memory_id)
    assert {k: after[k] for k in KEPT_FIELDS} == {k: before[k] for k in KEPT_FIELDS}
    assert after["content"].encode() == CONTENT.encode()


async def test_an_archived_memory_leaves_default_recall_and_lists_but_stays_listable_as_archived(server):
    async with connected(server) as client:
        memory_id = await store(client, "The Atlas deploy runs every Friday at 5pm")
        await structured(client, "archive_memory", memory_id=memory_id)
        recalled = await structured(client, "recall_memories", query="Atlas deploy Friday")
        assert memory_id not in [m["memory_id"] for m in recalled["memories"]]
        page = await structured(client, "list_memories")
        assert memory_id not in [m["memory_id"] for m in page["memories"]]
        with_archived = await structured(client, "recall_memories", query="Atlas deploy Friday", include_archived=True)
        assert memory_id in [m["memory_id"] for m in with_archived["memories"]]  # cold stays indexed
        assert (await listed(client, memory_id, "archived"))["content"].startswith("The Atlas deploy")


async def test_glacier_compresses_the_content_and_takes_it_out_of_the_word_and_vector_indexes(
    server, lifecycle_settings
):
    async with connected(server) as client:
        kept = await store(client, "Kenji keeps the spare office keys in the blue drawer")
        dropped = await store(client, "Priya waters the office ficus on Mondays")
        await structured(client, "archive_memory", memory_id=kept, archive_tier="glacier", retain_embeddings=True)
        result = await structured(client, "archive_memory", memory_id=dropped, archive_tier="glacier")
        assert result["storage_saved_bytes"] > 0
        assert result["embeddings_retained"] is False
    row = dict(rows(lifecycle_settings, "SELECT id, content || '|' || length(content_packed) FROM memories"))
    assert row[kept].startswith("|") and row[dropped].startswith("|")  # no plain content, a packed one
    assert not rows(lifecycle_settings, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'ficus OR drawer'")
    with_vector = {i for (i,) in rows(lifecycle_settings, "SELECT m.id FROM vectors v JOIN memories m ON"
                                                           " m.rowid = v.memory_rowid")}  # fmt: skip
    assert kept in with_vector and dropped not in with_vector


async def test_deep_archive_moves_the_content_to_a_checksummed_file_and_back(server, lifecycle_settings):
    folder = lifecycle_settings.home / "stores" / "default" / "archive" / "deep"
    async with connected(server) as client:
        ids = [await store(client, f"Project note {n}: the {word} ships in week {n}") for n, word in
               enumerate(["billing service", "search index", "mobile app"], start=1)]  # fmt: skip
        await structured(client, "archive_memory", memory_ids=ids, archive_tier="deep_archive")
        assert rows(lifecycle_settings, "SELECT DISTINCT content FROM memories") == [("",)]
        files = list(folder.iterdir())
        assert len(files) == 1 and files[0].name.endswith(".jsonl.gz")
        await structured(client, "restore_memory", memory_ids=ids[:2])
        assert files[0].exists()  # the third memory's content is still in it
        await structured(client, "restore_memory", memory_ids=ids[2:])
        assert not files[0].exists()
        recalled = await structured(client, "recall_memories", query="mobile app week")
        assert ids[2] in [m["memory_id"] for m in recalled["memories"]]
    assert len(rows(lifecycle_settings, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'mobile'")) == 1


async def test_a_damaged_archive_file_is_refused_and_nothing_is_half_restored(server, lifecycle_settings):
    folder = lifecycle_settings.home / "stores" / "default" / "archive" / "deep"
    async with connected(server) as client:
        ids = [await store(client, text) for text in ("Noah's locker code is 4417", "Zoe parks in bay 12")]
        await structured(client, "archive_memory", memory_ids=ids, archive_tier="deep_archive")
        archive = next(folder.iterdir())
        archive.write_bytes(archive.read_bytes()[:-5] + b"xxxxx")
        before = dump(lifecycle_settings)
        error = error_of(await call(client, "restore_memory", memory_ids=ids), 422)
        assert error["code"] == "UNPROCESSABLE"
        assert "damaged" in error["message"]
    assert dump(lifecycle_settings) == before


async def test_the_specs_archive_example_archives_what_its_criteria_select(server, clock):
    async with connected(server) as client:
        old_context = await store(client, "We once talked about the weather in Lisbon",
                                  metadata={"category": "context", "importance": 0.1})  # fmt: skip
        old_event = await store(client, "The team lunch happened at the harbour",
                                metadata={"category": "event", "importance": 0.2})  # fmt: skip
        important = await store(client, "The deploy key rotates every quarter",
                                metadata={"category": "context", "importance": 0.9})  # fmt: skip
        clock.advance(days=91)
        fresh = await store(client, "The standup moved to the small room", metadata={"category": "event",
                                                                                      "importance": 0.1})  # fmt: skip
        body = await structured(
            client,
            "archive_memory",
            auto_archive_criteria={"inactive_days": 90, "low_importance": 0.3, "categories": ["context", "event"]},
            archive_tier="cold",
            retain_embeddings=False,
            reason="Quarterly cleanup of low-value memories",
            dry_run=False,
        )
    assert body["success"] is True and body["api_version"] == "1.0.0"
    assert {m["memory_id"] for m in body["memories_archived"]} == {old_context, old_event}
    assert important not in str(body) and fresh not in str(body)
    assert body["total_cost"] == 0 and body["estimated_monthly_savings"] == 0


async def test_a_dry_run_lists_what_would_move_and_changes_nothing(server, lifecycle_settings):
    async with connected(server) as client:
        ids = [await store(client, f"Reminder {n}: renew the {w}") for n, w in enumerate(["passport", "lease"])]
        before = dump(lifecycle_settings)
        body = await structured(client, "archive_memory", memory_ids=ids, archive_tier="deep_archive", dry_run=True)
        assert body["archived_count"] == 2 and body["dry_run"] is True
        assert all(m["archive_id"] is None for m in body["memories_archived"])
    assert dump(lifecycle_settings) == before
    assert not (lifecycle_settings.home / "stores" / "default" / "archive").exists()


async def test_the_specs_restore_example_restores_by_memory_id(server):
    async with connected(server) as client:
        memory_id = await store(client, "The user asked about the Kyoto trip in the archived conversation")
        await structured(client, "archive_memory", memory_id=memory_id, archive_tier="glacier")
        body = await structured(
            client,
            "restore_memory",
            memory_id=memory_id,
            restore_mode="expedited",
            regenerate_embeddings=True,
            reason="User requested information from archived conversation",
            priority="high",
        )
        assert (body["status"], body["restored_count"]) == ("completed", 1)
        assert body["memories_restored"][0]["restore_mode"] == "expedited"
        assert (await listed(client, memory_id))["content"].startswith("The user asked about the Kyoto trip")


async def test_a_memory_is_restored_by_its_archive_id(server):
    async with connected(server) as client:
        memory_id = await store(client, "Mei's visa appointment is on 3 March")
        archived = await structured(client, "archive_memory", memory_id=memory_id, archive_tier="glacier")
        archive_id = archived["memories_archived"][0]["archive_id"]
        body = await structured(client, "restore_memory", archive_id=archive_id)
        assert body["memories_restored"][0]["memory_id"] == memory_id


async def test_metadata_only_makes_a_memory_active_while_its_content_stays_in_its_tier(server, lifecycle_settings):
    async with connected(server) as client:
        memory_id = await store(client, "Oscar's bike lock combination is 0451", metadata={"tags": ["oscar"]})
        await structured(client, "archive_memory", memory_id=memory_id, archive_tier="glacier")
        await structured(client, "restore_memory", memory_id=memory_id, restore_mode="metadata_only")
        assert (await listed(client, memory_id))["status"] == "active"
        assert rows(lifecycle_settings, "SELECT content FROM memories") == [("",)]  # still compressed
        assert not rows(lifecycle_settings, "SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'combination'")
        await structured(client, "restore_memory", memory_id=memory_id)  # the content comes back with a full one
        assert rows(lifecycle_settings, "SELECT content FROM memories") == [("Oscar's bike lock combination is 0451",)]


async def test_retrieval_estimates_come_from_restores_measured_on_this_store(server):
    async with connected(server) as client:
        first = await store(client, "Hana's flight lands at 6am")
        second = await store(client, "Ravi's flight lands at 9pm")
        quoted = await structured(client, "archive_memory", memory_id=first, archive_tier="glacier")
        restored = await structured(client, "restore_memory", memory_id=first)
        measured = restored["memories_restored"][0]["restoration_time_ms"]
        again = await structured(client, "archive_memory", memory_id=second, archive_tier="glacier")
    assert quoted["memories_archived"][0]["retrieval_time_estimate_ms"] == 3.0  # before any measurement
    assert again["memories_archived"][0]["retrieval_time_estimate_ms"] == pytest.approx(measured, abs=0.001)


# -- errors ----------------------------------------------------------------------------------------
async def test_each_listed_error_comes_from_the_input_that_should_produce_it(server, lifecycle_settings):
    async with connected(server) as client:
        memory_id = await store(client, "Ines prefers the aisle seat")
        other = await store(client, "Yusuf prefers the window seat")
        assert error_of(await call(client, "archive_memory"), 400)["code"] == "INVALID_INPUT"
        both = await call(client, "archive_memory", memory_id=memory_id, auto_archive_criteria={"low_importance": 1})
        assert error_of(both, 400)["code"] == "INVALID_INPUT"
        bad_tier = await call(client, "archive_memory", memory_id=memory_id, archive_tier="tape")
        assert error_of(bad_tier, 400)["code"] == "INVALID_INPUT"
        unknown = await call(client, "archive_memory", memory_id="0b6f3c1e-8d2a-4f5b-9c7d-1e2f3a4b5c6d")
        assert error_of(unknown, 404)["code"] == "MEMORY_NOT_FOUND"
        nothing = await call(client, "archive_memory", auto_archive_criteria={"categories": ["goal"]})
        assert error_of(nothing, 422)["code"] == "UNPROCESSABLE"
        assert error_of(await call(client, "restore_memory", memory_id=memory_id), 409)["code"] == "ALREADY_ACTIVE"
        await structured(client, "archive_memory", memory_id=memory_id)
        before = dump(lifecycle_settings)
        again = await call(client, "archive_memory", memory_ids=[other, memory_id])
        assert error_of(again, 409)["code"] == "ALREADY_ARCHIVED"
        assert dump(lifecycle_settings) == before  # the batch is refused whole: `other` is not archived either
        no_archive = await call(client, "restore_memory", archive_id="0b6f3c1e-8d2a-4f5b-9c7d-1e2f3a4b5c6d")
        assert error_of(no_archive, 404)["code"] == "MEMORY_NOT_FOUND"
        bad_mode = await call(client, "restore_memory", memory_id=memory_id, restore_mode="slow")
        assert error_of(bad_mode, 400)["code"] == "INVALID_INPUT"
        too_many = await call(client, "restore_memory", memory_ids=[memory_id] * 101)
        assert error_of(too_many, 400)["code"] == "INVALID_INPUT"
        assert dump(lifecycle_settings) == before


async def test_an_archive_past_its_quota_is_refused_with_507(tmp_path, clock):
    settings = Settings(home=tmp_path / "home", config_dir=tmp_path / "config", embedder="none",
                        archive_quota_bytes=60)  # fmt: skip
    server = build(settings, clock)
    try:
        async with connected(server) as client:
            small = await store(client, "Aisha's badge number is 88")
            large = await store(client, "A long note that does not compress well: " + "qzx7 vbn2 wer9 " * 20)
            await structured(client, "archive_memory", memory_id=small, archive_tier="glacier")
            before = dump(settings)
            error = error_of(await call(client, "archive_memory", memory_id=large, archive_tier="glacier"), 507)
            assert error["code"] == "ARCHIVE_QUOTA_EXCEEDED"
            assert dump(settings) == before
            cold = await structured(client, "archive_memory", memory_id=large, archive_tier="cold")
            assert cold["archived_count"] == 1  # cold keeps content in the database: no archive space used
    finally:
        server.close()


async def test_the_lifecycle_tools_are_annotated_as_writes_that_destroy_nothing(server):
    async with connected(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("archive_memory", "restore_memory"):
        hints = tools[name].annotations
        assert (hints.read_only_hint, hints.destructive_hint, hints.open_world_hint) == (False, False, False)
    schema = tools["archive_memory"].input_schema["properties"]
    assert schema["archive_tier"]["enum"] == TIERS and schema["memory_ids"]["maxItems"] == 1000
    assert tools["restore_memory"].input_schema["properties"]["memory_ids"]["maxItems"] == 100


class HeldEmbedder(FakeEmbedder):
    """Holds every batch of documents until released once ``held`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if self.hold.is_set():
            self.held.set()
            self.release.wait(10)
        return super().embed_documents(texts)


async def test_a_server_closed_during_an_expedited_restore_leaves_its_embedding_to_the_next_start(
    lifecycle_settings: Settings, clock: ManualClock
):
    embedder = HeldEmbedder()
    srv = ProfileServer(get_profile("full"), open_service(lifecycle_settings, clock=clock, embedder=embedder))
    try:
        async with connected(srv) as client:
            memory_id = await store(client, "The Kyoto trip starts on 4 April")
            await structured(client, "archive_memory", memory_id=memory_id, archive_tier="glacier")
            embedder.hold.set()
            await structured(client, "restore_memory", memory_id=memory_id, restore_mode="expedited")
        assert embedder.held.wait(10)  # the restore's thread is embedding
    finally:
        closing_thread = threading.Thread(target=srv.close)
        closing_thread.start()
        time.sleep(0.2)  # close() is waiting for, or has closed under, the held thread
        embedder.release.set()
        closing_thread.join(10)
    time.sleep(0.5)  # the restore's thread ends: a warning, not an unhandled exception (errors under pytest)
    reopened = open_service(lifecycle_settings, clock=clock, embedder=FakeEmbedder())
    try:
        reopened.warm_up()
        assert not reopened.storage.unembedded(10)
    finally:
        reopened.close()
