"""PostgreSQL's vectors reach every server's own index through ``vector_feed``, in the order their
transactions commit (postgres_schema.m014): a server that read up to a place in the feed never
misses a vector committed after it, whichever transaction took its place first."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.search.vector_layers import LayeredIndex
from mnemo.storage.postgres import PostgresStorage
from postgres_server import store_connection, undo_m014

DIMENSION = 64


def _settings(postgres_url: str, home: Path) -> Settings:
    return Settings(home=home, embedder="none", database_url=postgres_url)


def _key(postgres_url: str, memory_id: str) -> int:
    with store_connection(postgres_url) as db:
        (key,) = db.execute("SELECT rowid FROM memories WHERE id = %s", (memory_id,)).fetchone() or (0,)
    return int(key)


def _vector(seed: int) -> bytes:
    values = np.random.default_rng(seed).standard_normal(DIMENSION).astype("<f4")
    return (values / np.linalg.norm(values)).tobytes()


def test_vectors_take_their_place_in_the_feed_in_the_order_their_transactions_commit(
    postgres_url: str, tmp_path: Path, clock: ManualClock
):
    service = open_service(_settings(postgres_url, tmp_path / "home"), clock=clock)  # words only: vectors below
    first, second, gone, fixing = (service.store(f"Note {i} about the garden").memory.id for i in range(4))
    storage = PostgresStorage(postgres_url, "default")
    storage.put_vectors([(fixing, _vector(4))])  # the first vector gives the column its dimension
    seen = storage.last_vector_seq()
    with store_connection(postgres_url) as early, store_connection(postgres_url) as late:
        early.execute("BEGIN")
        early.execute(
            "INSERT INTO vectors SELECT rowid, %s::real[]::vector FROM memories WHERE id = %s",
            (np.frombuffer(_vector(1), "<f4").tolist(), first),
        )  # the earlier write, committed last
        storage.put_vectors([(second, _vector(2))])  # another connection's, committed at once
        (after_second,) = [v.seq for v in storage.vectors_after(seen, 10)]
        assert [v.key for v in storage.vectors_after(seen, 10)] == [_key(postgres_url, second)]
        committed = threading.Event()

        def commit_early() -> None:
            early.execute("COMMIT")
            committed.set()

        threading.Thread(target=commit_early).start()
        assert committed.wait(10)
        # Stored and deleted in one transaction: nothing to feed, and the commit does not fail.
        late.execute("BEGIN")
        late.execute(
            "INSERT INTO vectors SELECT rowid, %s::real[]::vector FROM memories WHERE id = %s",
            (np.frombuffer(_vector(3), "<f4").tolist(), gone),
        )
        late.execute("DELETE FROM vectors WHERE memory_rowid = (SELECT rowid FROM memories WHERE id = %s)", (gone,))
        late.execute("COMMIT")
    # A reader that had seen the second vector's place finds the first after it.
    newer = storage.vectors_after(after_second, 10)
    assert [v.key for v in newer] == [_key(postgres_url, first)] and newer[0].seq > after_second
    assert newer[0].vector == _vector(1)
    storage.close()
    service.close()


def test_a_vector_written_through_one_server_is_found_by_another_servers_index_at_once(
    postgres_url: str, tmp_path: Path, clock: ManualClock
):
    one = open_service(_settings(postgres_url, tmp_path / "one"), clock=clock, embedder=FakeEmbedder(DIMENSION))
    other = open_service(_settings(postgres_url, tmp_path / "other"), clock=clock, embedder=FakeEmbedder(DIMENSION))
    try:
        assert other.recall("Zoe tunes her cello every morning").hits == []
        stored = one.store("Zoe tunes her cello every morning").memory
        (hit,) = other.recall("Zoe tunes her cello every morning").hits
        assert hit.memory.id == stored.id and hit.scores.semantic_similarity > 0.99
        one.update(stored.id, content="Liam restores old bicycles in his garage")  # embedded again
        hits = other.recall("Liam restores old bicycles in his garage").hits
        assert hits[0].memory.id == stored.id and hits[0].scores.semantic_similarity > 0.99
    finally:
        one.close()
        other.close()


def test_each_server_keeps_its_snapshot_of_a_large_store_in_its_own_home(
    postgres_url: str, tmp_path: Path, clock: ManualClock
):
    settings = _settings(postgres_url, tmp_path / "one")
    service = open_service(settings, clock=clock, embedder=FakeEmbedder(DIMENSION))
    service.searcher.graph_from = 40  # as if the store were past GRAPH_FROM
    texts = [f"Note {i} about {('cello', 'chess', 'roses', 'bread')[i % 4]} on day {i}" for i in range(60)]
    for text in texts:
        service.store(text)
    try:
        service.recall("cello")
        index = service.searcher.index
        assert isinstance(index, LayeredIndex)
        index.settle(60)
        service.recall("cello")  # moves to the snapshot just written
        assert index.snapshot_seq is not None and index.folder.parent == settings.home / "stores" / "default" / (
            "vector-index"
        )
        (hit,) = service.recall(texts[37], limit=1).hits
        assert hit.memory.content == texts[37] and hit.scores.semantic_similarity > 0.99
    finally:
        service.close()


def test_a_store_from_before_the_feed_keeps_every_vector_in_its_order(
    postgres_url: str, tmp_path: Path, clock: ManualClock
):
    settings = _settings(postgres_url, tmp_path / "home")
    service = open_service(settings, clock=clock, embedder=FakeEmbedder(DIMENSION))
    stored = [service.store(f"Note {i}: the garden roses need {i} litres of water").memory for i in range(12)]
    service.close()
    with store_connection(postgres_url) as db:  # the store as m013 left it: seq beside each vector
        undo_m014(db)
        before = db.execute("SELECT memory_rowid, seq FROM vectors ORDER BY seq").fetchall()
    assert len(before) == 12

    upgraded = open_service(settings, clock=clock, embedder=FakeEmbedder(DIMENSION))
    try:
        with store_connection(postgres_url) as db:
            assert db.execute("SELECT memory_rowid, seq FROM vector_feed ORDER BY seq").fetchall() == before
            tables = {
                name for (name,) in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
            }
            assert ("vector_signs",) not in tables
        storage = PostgresStorage(postgres_url, "default")
        assert storage.check_integrity() == []
        storage.close()
        (hit,) = upgraded.recall(stored[7].content, limit=1).hits
        assert hit.memory.id == stored[7].id and hit.scores.semantic_similarity > 0.99
        upgraded.store("Zoe tunes her cello every morning")  # a new vector after the old ones
        with store_connection(postgres_url) as db:
            (last,) = db.execute("SELECT max(seq) FROM vector_feed").fetchone() or (0,)
        assert last > before[-1][1]
    finally:
        upgraded.close()
