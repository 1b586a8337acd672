"""PostgreSQL's HNSW index: a search whose best match is weak walks it again at the widest (a query
far from every stored vector is where the walk stops in the wrong place: benchmarks/graph_recall.py),
and a store filled whole builds it once at the end (benchmarks/migrate_speed.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.storage import postgres_vectors
from mnemo.storage.postgres import PostgresStorage
from mnemo.storage.postgres_schema import advise_buffers, schema_name, vector_index_and_buffers
from mnemo.storage.postgres_vectors import MAX_EF_SEARCH, SEARCH_BREADTH, WEAK_NEAREST, nearest

DIMENSION = 64


def test_a_walk_whose_best_is_weak_is_made_again_at_the_widest_in_a_large_index(
    postgres_url: str, tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
):
    settings = Settings(home=tmp_path / "home", embedder="none", database_url=postgres_url)
    service = open_service(settings, clock=clock, embedder=FakeEmbedder(DIMENSION))
    topics = ["cello lessons", "chess club", "vinyl records", "garden roses", "sourdough bread"]
    for i in range(200):
        service.store(f"Note {i} about {topics[i % 5]} on day {i % 17}")
    service.close()
    embedder = FakeEmbedder(DIMENSION)
    near, far = embedder.embed_query("chess club on day 3"), embedder.embed_query("xylophone quasar")
    with psycopg.connect(postgres_url, autocommit=True) as db:
        register_vector(db)
        db.execute(f"SET search_path TO {schema_name('default')}, public")
        db.execute("ANALYZE vectors")  # as an import's end or autovacuum leaves the statistics
        stored = db.execute("SELECT memory_rowid, embedding FROM vectors").fetchall()
        keys = np.array([key for key, _ in stored])
        matrix = np.stack([embedding.to_numpy() for _, embedding in stored])

        def walked(query: np.ndarray) -> str:
            cosines = matrix @ query
            with db.transaction():
                found = nearest(db, query, 10)
                (breadth,) = db.execute("SHOW hnsw.ef_search").fetchone() or ("",)
            assert [cosine for _, cosine in found] == pytest.approx(sorted(cosines, reverse=True)[:10], abs=1e-5)
            assert {key for key, _ in found} <= set(keys[cosines >= sorted(cosines)[-10] - 1e-6].tolist())
            return str(breadth)

        assert (matrix @ near).max() >= WEAK_NEAREST > (matrix @ far).max()
        assert walked(near) == walked(far) == str(SEARCH_BREADTH)  # 200 vectors: one walk finds them
        monkeypatch.setattr(postgres_vectors, "WIDER_WALK_FROM", 200)  # as if the index were large
        assert walked(near) == str(SEARCH_BREADTH)
        assert walked(far) == str(MAX_EF_SEARCH)


def test_vectors_written_in_a_bulk_block_are_indexed_once_at_its_end_even_if_it_fails(
    postgres_url: str, tmp_path: Path, clock: ManualClock
):
    settings = Settings(home=tmp_path / "home", embedder="none", database_url=postgres_url)
    service = open_service(settings, clock=clock)  # words only: the vectors are written below
    ids = [service.store(f"Note {i} about the garden").memory.id for i in range(30)]
    storage = service.searcher.storage  # the store itself, below the engine's access checks
    assert isinstance(storage, PostgresStorage)
    embedder = FakeEmbedder(DIMENSION)
    vectors = embedder.embed_documents([f"Note {i} about the garden" for i in range(30)])
    missing = ["index vectors_hnsw is missing"]
    try:
        with storage.vectors_indexed_at_end():
            storage.put_vectors([(i, v.tobytes()) for i, v in zip(ids[:20], vectors[:20], strict=True)])
            assert storage.check_integrity() == missing  # not taken in one by one
        assert storage.check_integrity() == []
        with pytest.raises(RuntimeError), storage.vectors_indexed_at_end():
            assert storage.check_integrity() == missing  # dropped for the block
            storage.put_vectors([(i, v.tobytes()) for i, v in zip(ids[20:], vectors[20:], strict=True)])
            raise RuntimeError("the copy failed")
        assert storage.check_integrity() == []  # built all the same
        query = embedder.embed_query("Note 25 about the garden")
        assert storage.vector_search().search(query, 1)[0][1] == pytest.approx(1.0, abs=1e-5)
    finally:
        service.close()


def test_a_store_says_when_its_vector_index_outgrows_the_servers_shared_buffers(
    postgres_url: str, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
):
    settings = Settings(home=tmp_path / "home", embedder="none", database_url=postgres_url)
    service = open_service(settings, clock=clock, embedder=FakeEmbedder(DIMENSION))
    with psycopg.connect(postgres_url, autocommit=True) as db:
        assert vector_index_and_buffers(db, schema_name("default")) is None  # no vector yet: no index
        service.store("Zoe tunes her cello every morning")
        (buffers,) = db.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone() or (0,)
        sizes = vector_index_and_buffers(db, schema_name("default"))
        assert sizes is not None and 0 < sizes[0] < sizes[1] == buffers
    service.close()
    storage = PostgresStorage(postgres_url, "default")  # opened again: the index fits, nothing said
    try:
        assert "shared_buffers" not in caplog.text
        advise_buffers("default", (2 * buffers, buffers))  # as a store of millions would measure
        assert f"vector index ({2 * buffers >> 20} MB) is larger than PostgreSQL's shared_buffers" in caplog.text
    finally:
        storage.close()
