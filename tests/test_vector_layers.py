"""A SQLite store past its size threshold: recall through a graph snapshot on disk plus the newer
vectors in memory (mnemo.search.vector_layers), on real files, with the deterministic fake embedder."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mnemo.app import open_service, restore_store
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.engine.service import MemoryService
from mnemo.model import Context
from mnemo.query import Filters
from mnemo.search import vector_graph, vector_layers
from mnemo.search.vector_index import sign_bits
from mnemo.search.vector_layers import LayeredIndex
from mnemo.storage.sqlite import SQLiteStorage

THRESHOLD = 60
TOPICS = ["cello", "sourdough", "kayak", "ramen", "chess", "pottery", "sailing", "tango", "orchids", "kites"]


def layered(service: MemoryService) -> LayeredIndex:
    index = service.searcher.index
    assert isinstance(index, LayeredIndex)
    return index


def fact(i: int) -> str:
    return f"Person {i} practises {TOPICS[i % len(TOPICS)]} with friend {i * 7 % 13} on day {i % 29}"


@pytest.fixture
def large(settings: Settings, clock: ManualClock) -> Iterator[MemoryService]:
    """A store of 100 memories whose index keeps a snapshot from 60 vectors on (a new one every 12)."""
    small = settings.model_copy(update={"vector_graph_from": THRESHOLD})
    service = open_service(small, clock=clock, embedder=FakeEmbedder())
    for i in range(100):
        service.store(fact(i), context=Context(user_id=f"user_{i % 4}"))
    index = layered(service)
    index.refresh(service.searcher.storage)
    index.settle()  # the one the stores started
    assert index.build(service.searcher.storage)  # and one of all 100, so each test starts alike
    yield service
    service.close()


def exact_top(service: MemoryService, query: np.ndarray, k: int, among: set[int] | None = None) -> list[float]:
    """The scores of the true top k, by a scan of every vector the store holds (keys may tie)."""
    storage = service.searcher.storage
    stored = [v for v in storage.vectors_after(0, 10_000) if among is None or v.key in among]
    matrix = np.stack([np.frombuffer(v.vector, dtype=np.float32) for v in stored])
    return sorted((matrix @ query).tolist(), reverse=True)[:k]


def test_past_the_threshold_a_snapshot_is_written_and_searched_with_exact_scores(large: MemoryService):
    index = layered(large)
    assert index.snapshot_seq is not None
    assert index.in_memory < THRESHOLD  # only what came after the snapshot stays in memory
    embedder = FakeEmbedder()
    for topic in TOPICS[:5]:
        query = embedder.embed_query(f"who practises {topic}")
        found = index.search(query, 5)
        assert [score for _, score in found] == pytest.approx(exact_top(large, query, 5), abs=1e-5)
        vectors = index.vectors([key for key, _ in found])
        for key, score in found:
            assert score == pytest.approx(float(vectors[key] @ query), abs=1e-5)


def test_a_snapshot_finds_the_rows_of_keys_by_its_table_as_by_binary_search(
    large: MemoryService, monkeypatch: pytest.MonkeyPatch
):
    snapshot = layered(large)._snapshot
    assert snapshot is not None and snapshot._row_of is not None  # rowids are dense: looked up in a table
    held = snapshot.keys.tolist()
    asked = [held[5], -1, 0, held[-1] + 1, held[-1] + 10**9, held[0], *held[40:60]]  # absent ones too
    by_table = snapshot.rows(asked)

    monkeypatch.setattr(snapshot, "_row_of", None)  # as for sparse keys
    by_search = snapshot.rows(asked)

    for found, expected in zip(by_table, by_search, strict=True):
        assert found.tolist() == expected.tolist()
    assert by_search[0].tolist() == [held[5], held[0], *held[40:60]]
    assert vector_graph._rows_by_key(np.array([1, 10**7], dtype=np.int64)) is None  # too sparse for a table


def test_recall_over_the_snapshot_finds_new_updated_and_not_forgotten_memories(large: MemoryService):
    new = large.store("Zoe keeps bees on the roof of the old mill").memory
    old = large.recall("practises cello", limit=1).hits[0].memory
    large.update(old.id, content="Person 0 gave up music and now breeds alpacas")
    gone = large.recall("practises kayak", limit=1).hits[0].memory
    large.forget(gone.id, reason="outdated")
    assert large.recall("bees on a roof", limit=1).hits[0].memory.id == new.id
    assert large.recall("breeds alpacas", limit=1).hits[0].memory.id == old.id
    assert gone.id not in {hit.memory.id for hit in large.recall("practises kayak", limit=20).hits}


def test_a_snapshot_built_from_the_last_holds_exactly_the_store_s_current_vectors(large: MemoryService):
    # The next snapshot merges the last one's rows still current with the vectors stored since:
    # re-embedded memories take their new vector, deleted ones leave, new ones join, in key order.
    storage = large.searcher.storage
    for i in (3, 50, 97):
        large.update(large.recall(fact(i), limit=1).hits[0].memory.id, content=f"Person {i} now keeps goats")
    large.store("Zoe keeps bees on the roof of the old mill")
    storage.drop_vectors([large.recall(fact(20), limit=1).hits[0].memory.id])
    index = layered(large)
    index.refresh(storage)
    assert index.build(storage)
    snapshot = index._snapshot
    assert snapshot is not None
    held = {v.key: np.frombuffer(v.vector, dtype=np.float32) for v in storage.vectors_after(0, 10_000)}
    assert snapshot.keys.tolist() == sorted(held) == sorted(storage.vector_keys())
    assert np.array_equal(np.asarray(snapshot.vectors), np.stack([held[key] for key in sorted(held)]))
    assert snapshot.signs is not None and np.array_equal(snapshot.signs, sign_bits(np.asarray(snapshot.vectors)))
    assert snapshot.meta.count == len(held)


def test_a_graph_built_with_other_links_is_built_again_whole_by_the_next_snapshot(
    large: MemoryService, monkeypatch: pytest.MonkeyPatch
):
    # An older mnemo's graphs had other links a node: the next snapshot does not add to one.
    storage = large.searcher.storage
    index = layered(large)
    for links, note in ((8, "Zoe keeps bees on the roof of the old mill"), (vector_graph.CONNECTIVITY, fact(200))):
        with monkeypatch.context() as patched:
            patched.setattr(vector_graph, "CONNECTIVITY", links)
            large.store(note)
            index.refresh(storage)
            assert index.build(storage)
        snapshot = index._snapshot
        assert snapshot is not None and snapshot.connectivity == links
        assert (
            sorted(np.asarray(snapshot._graph.keys).tolist()) == snapshot.keys.tolist() == sorted(storage.vector_keys())
        )
        # The note itself is found (the fake model's vectors are close to random, where a graph's
        # next few answers are approximate: an 8-link graph once missed the true fourth).
        (_, score), *_ = index.search(FakeEmbedder().embed_query(note), 5)
        assert score == pytest.approx(1.0, abs=1e-5)


def test_a_discarded_key_leaves_the_snapshot_s_answers(large: MemoryService):
    index = layered(large)
    query = FakeEmbedder().embed_query(fact(42))
    best = index.search(query, 1)[0][0]
    index.discard([best])
    assert best not in [key for key, _ in index.search(query, 10)]
    assert best not in index.vectors([best]) and best not in index.similarity(query, [best])


def test_a_search_of_the_close_over_both_layers_keeps_the_search_s_hits_at_the_floor(large: MemoryService):
    index = layered(large)
    for i in (105, 106, 107):  # beyond the snapshot of 100: in the recent layer
        large.store(fact(i) + " again", context=Context(user_id="user_1"))
    index.refresh(large.searcher.storage)
    for text in (fact(7), fact(105), "practises kayak with friend 3"):
        query = FakeEmbedder().embed_query(text)
        hits = index.search(query, 6)
        floor = hits[3][1]  # some of the six above it, some below
        assert index.close(query, 6, floor) == [hit for hit in hits if hit[1] >= floor]


def test_a_filtered_search_over_the_snapshot_returns_the_true_top_k_among_the_matching(large: MemoryService):
    index = layered(large)
    storage = large.searcher.storage
    among = set(storage.keys_matching(Filters(now=large.clock.now(), user_id="user_3")))
    query = FakeEmbedder().embed_query("practises sailing on day 3")
    found = index.search(query, 5, among=sorted(among))
    assert [score for _, score in found] == pytest.approx(exact_top(large, query, 5, among), abs=1e-5)
    assert all(key in among for key, _ in found)
    hits = large.recall("practises sailing", user_id="user_3", limit=5).hits
    assert hits and {hit.memory.context.user_id for hit in hits} == {"user_3"}


def test_a_search_among_many_of_the_snapshot_s_keys_scores_those_closest_by_sign(large: MemoryService):
    # Dense vectors in clusters, as a model's are (the fake embedder's are mostly zeros, whose
    # signs say little): a memory's cluster lies closest to it by sign as by cosine.
    storage = large.searcher.storage
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(10, 64)).astype(np.float32)
    ids = [memory.id for memory in large.list(limit=100).memories]
    vectors = centres[rng.integers(0, 10, len(ids))] + 0.3 * rng.normal(size=(len(ids), 64)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    storage.put_vectors([(memory_id, vector.tobytes()) for memory_id, vector in zip(ids, vectors, strict=True)])
    index = layered(large)
    index.refresh(storage)
    index.settle()  # the snapshot the new vectors started
    assert index.build(storage)
    snapshot = index._snapshot
    assert snapshot is not None and index.in_memory == 0
    keys, rows = snapshot.rows(snapshot.keys)
    for query in vectors[::10]:
        kept, scores = snapshot.best_among(query, keys, rows, 30)
        assert 30 <= len(kept) < len(keys)  # the 30 closest by sign (and ties), not all 100
        assert sorted(scores.tolist(), reverse=True)[:5] == pytest.approx(exact_top(large, query, 5), abs=1e-5)
        held = index.vectors(kept.tolist())
        assert scores.tolist() == pytest.approx([float(held[key] @ query) for key in kept.tolist()], abs=1e-5)


def test_a_snapshot_written_without_signs_scores_every_key_searched_among(large: MemoryService):
    snapshot = layered(large)._snapshot
    assert snapshot is not None
    (snapshot.folder / "signs.npy").unlink()  # as a snapshot of an earlier mnemo
    older = vector_graph.Snapshot(snapshot.folder, snapshot.meta)
    keys, rows = older.rows(older.keys)
    query = FakeEmbedder().embed_query("who practises chess")
    kept, scores = older.best_among(query, keys, rows, 30)
    assert kept.tolist() == keys.tolist()
    assert sorted(scores.tolist(), reverse=True)[:5] == pytest.approx(exact_top(large, query, 5), abs=1e-5)


def test_closing_the_service_stops_a_snapshot_being_written_and_leaves_nothing_of_it(
    large: MemoryService, monkeypatch: pytest.MonkeyPatch
):
    index = layered(large)
    first = index.snapshot_seq
    writing = threading.Event()
    write_sorted = vector_graph._write_sorted

    def held(*args: Any) -> None:  # holds the build between two batches until it is told to stop
        writing.set()
        check = args[-1]
        for _ in range(1_000):
            check()
            time.sleep(0.01)
        write_sorted(*args)

    monkeypatch.setattr(vector_graph, "_write_sorted", held)
    for i in range(100, 125):  # a fifth of the snapshot: the next refresh starts the next one
        large.store(fact(i))
    index.refresh(large.searcher.storage)
    assert writing.wait(10)

    large.close()  # while the storage's connections are still open, the build stops

    assert index._builder is not None and not index._builder.is_alive()
    folder = large.searcher.storage.index_folder()
    assert folder is not None and [p.name for p in folder.iterdir() if p.name.startswith(".building")] == []
    assert vector_graph.latest(folder, index.model, index.dimension)[1].seq == first  # type: ignore[index]
    closed = large.searcher.storage  # refuses any use now: the same store opened again is refreshed from
    reopened = SQLiteStorage(closed.folder, closed.name)  # type: ignore[attr-defined]
    try:
        index.refresh(reopened)
        assert not index._builder.is_alive()  # none started after
    finally:
        reopened.close()


EXIT_WHILE_WRITING = """
import sys, threading, time
from pathlib import Path
from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
from mnemo.search import vector_graph
writing, write_sorted = threading.Event(), vector_graph._write_sorted
def held(*args):  # holds the build between two batches until it is told to stop
    writing.set()
    for _ in range(3_000):
        args[-1]()
        time.sleep(0.01)
    write_sorted(*args)
vector_graph._write_sorted = held
settings = Settings(home=Path(sys.argv[1]), config_dir=Path(sys.argv[2]), embedder="none", vector_graph_from=60)
service = open_service(settings, embedder=FakeEmbedder())
for i in range(80):
    service.store(f"Person {i} keeps {i} bee hives on the hill of day {i % 29}")
service.searcher.index.refresh(service.searcher.storage)
assert writing.wait(30)
print(service.searcher.storage.index_folder(), flush=True)
"""  # returns without closing the service


def test_a_process_that_exits_while_writing_a_snapshot_stops_it_and_leaves_nothing_of_it(settings: Settings):
    """A script that opened a service and returned: the build in the graph library's native code
    would abort the process at its exit (SIGABRT), or be frozen there, leaving its folder behind."""
    run = subprocess.run(
        [sys.executable, "-c", EXIT_WHILE_WRITING, str(settings.home), str(settings.config_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    folder = Path(run.stdout.split()[-1])
    assert [p.name for p in folder.iterdir() if p.name.startswith(".building")] == []


@pytest.mark.parametrize("gone", ["keys.npy", "vectors.npy", "graph.usearch"])
def test_a_snapshot_removed_as_it_is_opened_leaves_the_search_on_the_one_in_use(large: MemoryService, gone: str):
    index = layered(large)
    storage = large.searcher.storage
    first = index.snapshot_seq
    assert first is not None
    for i in range(100, 105):
        large.store(fact(i))
    folder = storage.index_folder()
    assert folder is not None
    # Another process wrote a newer snapshot and is removing this one: its meta.json is still
    # there, some of its files already gone, when this process finds it.
    vanishing = folder / str(storage.last_vector_seq())
    shutil.copytree(folder / str(first), vanishing)
    meta = json.loads((vanishing / vector_graph.META).read_text())
    (vanishing / vector_graph.META).write_text(json.dumps({**meta, "seq": storage.last_vector_seq()}))
    (vanishing / gone).unlink()

    assert large.recall(fact(102), limit=1).hits[0].memory.content == fact(102)
    assert index.snapshot_seq == first

    shutil.rmtree(vanishing)
    index.settle()
    assert index.build(storage)  # a whole newer one is taken up as before
    assert large.recall(fact(103), limit=1).hits[0].memory.content == fact(103)
    assert index.snapshot_seq == storage.last_vector_seq()


def test_a_search_among_most_of_the_snapshot_asks_the_graph_and_keeps_to_the_keys(
    large: MemoryService, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(vector_layers, "EXACT_AMONG_UP_TO", 10)
    index = layered(large)
    among = {v.key for v in large.searcher.storage.vectors_after(0, 10_000)}
    among = set(sorted(among)[: int(0.9 * len(among))])
    query = FakeEmbedder().embed_query("practises tango with friend 4")
    found = index.search(query, 3, among=sorted(among))
    assert [score for _, score in found] == pytest.approx(exact_top(large, query, 3, among), abs=1e-5)
    assert all(key in among for key, _ in found)


def test_another_process_starts_from_the_snapshot_and_reads_only_the_newer_vectors(
    large: MemoryService, settings: Settings, clock: ManualClock
):
    large.store("Zoe keeps bees on the roof of the old mill")
    other = open_service(
        settings.model_copy(update={"vector_graph_from": THRESHOLD}), clock=clock, embedder=FakeEmbedder()
    )
    try:
        index = layered(other)
        index.refresh(other.searcher.storage)
        layered(large).refresh(large.searcher.storage)
        assert index.snapshot_seq == layered(large).snapshot_seq
        assert index.in_memory == layered(large).in_memory
        assert other.recall("bees on a roof", limit=1).hits[0].memory.content.startswith("Zoe keeps bees")
    finally:
        other.close()


def test_the_next_snapshot_takes_in_the_recent_vectors_and_every_process_moves_to_it(
    large: MemoryService, settings: Settings, clock: ManualClock
):
    first = layered(large).snapshot_seq
    other = open_service(
        settings.model_copy(update={"vector_graph_from": THRESHOLD}), clock=clock, embedder=FakeEmbedder()
    )
    try:
        layered(other).refresh(other.searcher.storage)
        for i in range(100, 130):  # past the 12 after which the next snapshot is written
            large.store(fact(i))
        layered(large).refresh(large.searcher.storage)
        layered(large).settle()
        second = layered(large).snapshot_seq
        assert second is not None and first is not None and second > first
        snapshots = [p for p in (settings.home / "stores" / "default" / "vector-index").iterdir() if p.is_dir()]
        assert [p.name for p in snapshots] == [str(second)]  # the older one was removed
        layered(other).refresh(other.searcher.storage)
        assert layered(other).snapshot_seq == second
        assert other.recall("Person 117 practises", limit=1).hits[0].memory.content == fact(117)
    finally:
        other.close()


def test_snapshots_of_another_model_unfinished_builds_and_damaged_ones_are_ignored(
    settings: Settings, clock: ManualClock
):
    small = settings.model_copy(update={"vector_graph_from": THRESHOLD})
    service = open_service(small, clock=clock, embedder=FakeEmbedder())
    try:
        for i in range(30):
            service.store(fact(i))
        folder = service.searcher.storage.index_folder()
        assert folder is not None
        foreign = folder / "999"
        foreign.mkdir(parents=True)
        (foreign / "meta.json").write_text(json.dumps({"seq": 5, "model": "other", "dimension": 64, "count": 1}))
        (folder / "7").mkdir()
        (folder / "7" / "meta.json").write_text("{not json")
        abandoned = folder / ".building-999999999-12"  # a build killed midway: no meta.json
        abandoned.mkdir()
        index = layered(service)
        index.refresh(service.searcher.storage)
        assert index.snapshot_seq is None  # none of them is taken
        assert service.recall(fact(3), limit=1).hits[0].memory.content == fact(3)
        assert index.build(service.searcher.storage)
        assert index.snapshot_seq is not None
        assert not abandoned.exists()  # its process is gone: cleaned up by the next build
    finally:
        service.close()


BUILD_IN_ANOTHER_PROCESS = """
import sys
from pathlib import Path
from mnemo.app import open_service, restore_store
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
home, config = Path(sys.argv[1]), Path(sys.argv[2])
settings = Settings(home=home, config_dir=config, embedder="none", vector_graph_from=10_000)
service = open_service(settings, embedder=FakeEmbedder())
for i in range(200, 260):
    service.store(f"Person {i} keeps {i} bee hives on the hill of day {i % 29}")
index = service.searcher.index
index.refresh(service.searcher.storage)
assert index.build(service.searcher.storage)
print(index.snapshot_seq)
"""


def test_a_snapshot_written_by_another_process_is_taken_up_with_the_writes_since(
    large: MemoryService, settings: Settings
):
    """Two processes on one store: each reads the other's writes by seq and its snapshots by file."""
    run = subprocess.run(
        [sys.executable, "-c", BUILD_IN_ANOTHER_PROCESS, str(settings.home), str(settings.config_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    theirs = int(run.stdout.split()[-1])
    after = large.store("Zoe keeps bees on the roof of the old mill").memory
    index = layered(large)
    index.refresh(large.searcher.storage)
    assert index.snapshot_seq == theirs
    assert index.in_memory == 1  # only the write made after their snapshot
    assert large.recall("Person 237 keeps 237 bee hives", limit=1).hits[0].memory.content.startswith("Person 237")
    assert large.recall("bees on a roof", limit=1).hits[0].memory.id == after.id


def test_restoring_a_backup_removes_the_snapshots_of_the_database_it_replaces(large: MemoryService, settings: Settings):
    storage = large.searcher.storage
    folder = storage.index_folder()
    assert storage.back_up("manual") is not None
    for i in range(100, 140):
        large.store(fact(i))
    layered(large).settle()  # the stores may have started one
    assert layered(large).build(storage)
    assert folder is not None and any(p.is_dir() for p in folder.iterdir())
    large.close()
    restore_store(settings)
    assert not folder.exists()  # they held vectors the restored database does not have
    again = open_service(settings.model_copy(update={"vector_graph_from": THRESHOLD}), embedder=FakeEmbedder())
    try:
        assert again.recall(fact(3), limit=1).hits[0].memory.content == fact(3)
        assert not again.recall(fact(120), limit=5).hits or fact(120) not in [
            hit.memory.content for hit in again.recall(fact(120), limit=5).hits
        ]
    finally:
        again.close()


SNAPSHOT_THEN_MODEL = """
import sys
from pathlib import Path
from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.embed.fake import FakeEmbedder
home, config = Path(sys.argv[1]), Path(sys.argv[2])
service = open_service(Settings(home=home, config_dir=config, embedder="none"), embedder=FakeEmbedder())
for i in range(5):
    service.store(f"note {i} about the harbour")
index = service.searcher.index
index.refresh(service.searcher.storage)
assert index.build(service.searcher.storage)
import onnxruntime  # the local model's runtime, after the graph library: crashed the process once
print("alive")
"""


def test_the_model_s_runtime_loads_after_a_snapshot_was_opened(settings: Settings):
    run = subprocess.run(
        [sys.executable, "-c", SNAPSHOT_THEN_MODEL, str(settings.home), str(settings.config_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["alive"]


def test_a_snapshot_that_cannot_be_written_is_not_tried_again_at_every_search(
    settings: Settings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
):
    attempts = []

    def failing(*args: object) -> None:
        attempts.append(args)
        raise OSError("No space left on device")

    monkeypatch.setattr(vector_graph, "build", failing)
    service = open_service(settings.model_copy(update={"vector_graph_from": 10}), clock=clock, embedder=FakeEmbedder())
    try:
        for i in range(30):
            service.store(fact(i))
            layered(service).settle()
        assert len(attempts) == 1  # then it waits RETRY_AFTER_S; recall still answers from memory
        assert service.recall(fact(3), limit=1).hits[0].memory.content == fact(3)
    finally:
        service.close()


def test_a_search_for_more_candidates_than_the_narrow_walk_gives_walks_the_graph_wide():
    # A recall's 600 candidates walked 600 wide held 0.882 of a far query's true top 10 at 1,000,000
    # memories, walked 1,200 wide 0.950 (vector_graph.WIDE_EXPANSION).
    assert vector_graph.walk_breadth(vector_graph.candidates(10)) == vector_graph.EXPANSION_SEARCH
    assert vector_graph.walk_breadth(vector_graph.candidates(150)) == vector_graph.WIDE_EXPANSION
    assert vector_graph.walk_breadth(2_000) == 2_000  # usearch walks at least as wide as it returns
