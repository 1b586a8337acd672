"""BM25's statistics on PostgreSQL: the totals the triggers keep (postgres_schema.m003_word_totals)
and the document frequencies counted up to a bound and estimated beyond it (postgres_text).

Against a real PostgreSQL: every total is compared with a count over the memories themselves,
the way word search read it before the triggers kept it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.engine.results import TagEdit
from mnemo.engine.service import MemoryService
from mnemo.model import Context
from mnemo.query import Filters
from mnemo.storage import postgres_text
from mnemo.storage.postgres_schema import TOKENS, schema_name
from postgres_server import store_connection, undo_m005, undo_m006, undo_m007, undo_m008

RECOUNT = f"SELECT count(*), COALESCE(sum({TOKENS.format(words='words')}), 0) FROM memories WHERE words IS NOT NULL"
KEPT = "SELECT COALESCE(sum(documents), 0), COALESCE(sum(tokens), 0) FROM word_totals"


def _service(tmp_path: Path, url: str) -> MemoryService:
    return open_service(Settings(home=tmp_path / "home", embedder="none", database_url=url))


def _totals(url: str) -> tuple[tuple[int, int], tuple[int, int]]:
    with store_connection(url) as db:
        return tuple(db.execute(KEPT).fetchone()), tuple(db.execute(RECOUNT).fetchone())  # type: ignore[return-value]


def test_the_totals_follow_stores_updates_and_deletions(tmp_path: Path, postgres_url: str):
    service = _service(tmp_path, postgres_url)
    try:
        ids = [service.store(f"Note {i}: the boiler was serviced on a {i} of the month.").memory.id for i in range(6)]
        service.update(ids[0], content="A much longer note now, with many more words in it than it had before.")
        service.update(ids[1], tags=TagEdit(add=("plumbing", "heating")))  # tags are words too
        service.recall("boiler")  # an access count changes no words
        with psycopg.connect(postgres_url, autocommit=True) as admin:  # the default search path
            admin.execute(
                sql.SQL("DELETE FROM {}.memories WHERE id = %s").format(sql.Identifier(schema_name("default"))),
                (ids[2],),
            )
        kept, recounted = _totals(postgres_url)
        assert kept == recounted
        assert kept[0] == 5
    finally:
        service.storage.close()


def test_writers_in_several_sessions_lose_no_change_to_the_totals(tmp_path: Path, postgres_url: str):
    services = [_service(tmp_path, postgres_url) for _ in range(4)]
    try:

        def write(service: MemoryService, writer: int) -> None:
            for i in range(25):
                service.store(f"Writer {writer} wrote note number {i} about the garden shed.")

        threads = [threading.Thread(target=write, args=(s, n)) for n, s in enumerate(services)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        kept, recounted = _totals(postgres_url)
        assert kept == recounted == (100, recounted[1])
    finally:
        for service in services:
            service.storage.close()


def test_a_store_made_before_the_totals_gets_them_from_its_memories(tmp_path: Path, postgres_url: str):
    service = _service(tmp_path, postgres_url)
    for i in range(5):
        service.store(f"Memory {i} from before the upgrade, about apples and pears.")
    service.storage.close()
    with store_connection(postgres_url) as db:  # the store as m002 left it
        undo_m006(db)
        undo_m005(db)
        db.execute("DROP TABLE word_totals")
        for name in ("added", "removed", "changed"):
            db.execute(f"DROP FUNCTION word_totals_{name}() CASCADE")  # type: ignore[call-overload]
        db.execute("DELETE FROM migrations WHERE name IN ('m003_word_totals', 'm004_keys_in_user_index')")
        db.execute("UPDATE memories SET content = content || ' and a few more words'")  # uncounted
    reopened = _service(tmp_path, postgres_url)
    try:
        kept, recounted = _totals(postgres_url)
        assert kept == recounted
        assert kept[0] == 5
        assert [hit.memory.content for hit in reopened.recall("pears", limit=3).hits]
    finally:
        reopened.storage.close()


def _words_index(db: psycopg.Connection) -> tuple[list[str], int]:
    """The words index's options and how many pages its pending list holds."""
    options = db.execute("SELECT reloptions FROM pg_class WHERE oid = 'memories_words'::regclass").fetchone()
    pending = db.execute("SELECT pending_pages FROM pgstatginindex('memories_words')").fetchone()
    return options[0], pending[0]  # type: ignore[index]


def test_the_words_index_takes_new_words_into_its_tree_at_once(tmp_path: Path, postgres_url: str):
    service = _service(tmp_path, postgres_url)
    for i in range(5):
        service.store(f"Memory {i} about apples and pears.")
    service.storage.close()
    with store_connection(postgres_url) as db:
        db.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple SCHEMA public")
        assert _words_index(db) == (["fastupdate=off"], 0)
        undo_m007(db)  # the store as m006 left it: new words wait in the pending list
        db.execute("UPDATE memories SET content = content || ' and plums'")
        assert _words_index(db)[1] > 0
    reopened = _service(tmp_path, postgres_url)
    try:
        with store_connection(postgres_url) as db:
            assert _words_index(db) == (["fastupdate=off"], 0)
        assert len(reopened.recall("plums", limit=10).hits) == 5
    finally:
        reopened.storage.close()


def test_a_common_word_is_estimated_from_the_newest_memories(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(postgres_text, "COUNT_UP_TO", 5)
    monkeypatch.setattr(postgres_text, "SAMPLE", 10)
    service = _service(tmp_path, postgres_url)
    try:
        for i in range(40):  # "kettle" in every other memory, "teapot" in three
            service.store(f"Entry {i}: " + ("the kettle" if i % 2 else "a teacup") + (" and teapot" if i < 3 else ""))
        with store_connection(postgres_url) as db:
            n, _ = postgres_text.word_totals(db)
            df = postgres_text.counted_frequencies(db, ["kettl", "teapot"], n)
            together = postgres_text.counted_frequencies(db, ["entri", "teapot", "kettl"], n)
        assert n == 40
        assert df == {"kettl": 20, "teapot": 3}  # 5 of the newest 10 hold it: half of 40; the rare one counted
        assert together == {"entri": 40, "kettl": 20, "teapot": 3}  # two common words estimated in one pass
    finally:
        service.storage.close()


@pytest.fixture
def kept_counts(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[MemoryService, postgres_text.WordStats]]:
    """A service on a PostgreSQL store, and word statistics that keep counts from its first memory on."""
    monkeypatch.setattr(postgres_text, "EXACT_BELOW", 1)
    service = _service(tmp_path, postgres_url)
    stats = postgres_text.WordStats(lambda: store_connection(postgres_url))
    try:
        yield service, stats
    finally:
        stats.close()
        service.storage.close()


def test_a_word_counted_too_long_ago_is_counted_again_in_the_background(
    kept_counts: tuple[MemoryService, postgres_text.WordStats], postgres_url: str, monkeypatch: pytest.MonkeyPatch
):
    service, stats = kept_counts
    for i in range(3):
        service.store(f"Entry {i}: the kettle")
    with store_connection(postgres_url) as db:
        assert stats.document_frequencies(db, ["kettl"], 3) == {"kettl": 3}
        for i in range(3, 5):
            service.store(f"Entry {i}: the kettle")
        assert stats.document_frequencies(db, ["kettl"], 5) == {"kettl": 3}  # kept
        monkeypatch.setattr(postgres_text, "STATS_TTL_S", 0.0)
        assert stats.document_frequencies(db, ["kettl"], 5) == {"kettl": 3}  # too old: used, and recounted
        stats.close()  # waits for the recount
        monkeypatch.setattr(postgres_text, "STATS_TTL_S", 60.0)
        assert stats.document_frequencies(db, ["kettl"], 5) == {"kettl": 5}
        monkeypatch.setattr(postgres_text, "STATS_TTL_S", 0.0)
        assert stats.document_frequencies(db, ["kettl"], 5) == {"kettl": 5}  # closed: no recount, no error


def test_a_common_word_a_process_has_not_met_is_estimated_from_the_planner_s_statistics_then_counted(
    kept_counts: tuple[MemoryService, postgres_text.WordStats], postgres_url: str
):
    service, stats = kept_counts
    for i in range(40):  # "kettle" in every other memory
        service.store(f"Entry {i}: " + ("the kettle" if i % 2 else "a teacup"))
    with store_connection(postgres_url) as db:
        db.execute("ANALYZE memories")
        assert postgres_text.planned_shares(db)["kettl"] == pytest.approx(0.5)
        for i in range(40, 50):  # ten more after the statistics were taken, and a word they never saw
            service.store(f"Entry {i}: the kettle" + (" and teapot" if i == 40 else ""))
        first = stats.document_frequencies(db, ["kettl", "teapot"], 50)
        assert first == {"kettl": 25, "teapot": 1}  # half of 50 as the statistics say; the new word counted
        stats.close()  # waits for the background count
        assert stats.document_frequencies(db, ["kettl", "teapot"], 50) == {"kettl": 30, "teapot": 1}


@pytest.mark.parametrize("scoped", [False, True], ids=["store-wide", "one user's"])
def test_the_newest_matches_of_a_common_word_are_the_same_fetched_all_or_walked_to(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch, scoped: bool
):
    service = _service(tmp_path, postgres_url)
    stats = postgres_text.WordStats(lambda: store_connection(postgres_url))
    mine = Context(user_id="u1")
    try:
        service.store("coffee coffee coffee", context=mine)  # the best match, but not among the newest four
        newer = []
        for i in range(6):
            newer.append(service.store(f"coffee break number {i} in the kitchen", context=mine).memory.id)
            service.store(f"coffee break number {i} in the hall", context=Context(user_id="u2"))
        scope = postgres_text.scope_of(Filters(now=service.clock.now(), user_id="u1")) if scoped else None
        found = {}
        with store_connection(postgres_url) as db:
            for way, walk_to_fetch in (("walked", 10**9), ("fetched", 0)):
                monkeypatch.setattr(postgres_text, "WALK_TO_FETCH", walk_to_fetch)
                hits = postgres_text.search(db, stats, ["coffee"], "m.user_id = 'u1'", [], limit=10, cap=4, scope=scope)
                found[way] = {hit.memory_id: hit.score for hit in hits}
        # The newest four that pass the filters, whether the words' index knows the scope or not (the
        # filters are checked where each match is fetched).
        assert set(found["walked"]) == set(found["fetched"]) == set(newer[-4:])
        assert found["fetched"] == pytest.approx(found["walked"])
    finally:
        stats.close()
        service.storage.close()


def test_a_common_word_s_matches_are_fetched_when_walking_to_the_newest_would_read_more():
    # The cases measured at 1,000,000 memories: a name in 4,921 memories (walked 98,000 rows, 59
    # ms; fetched 17 ms) and a word in 120,682 (walked 4 ms; fetched 470 ms).
    assert postgres_text.fetch_every_match(4_921, 1_000_000, 500)
    assert not postgres_text.fetch_every_match(120_682, 1_000_000, 500)
    assert not postgres_text.fetch_every_match(20_000, 1_000_000, 500)


def test_a_search_estimates_how_many_of_a_common_word_s_matches_its_scope_keeps(tmp_path: Path, postgres_url: str):
    service = _service(tmp_path, postgres_url)
    try:
        for i in range(200):  # "coffee" in every other memory; one memory in ten is u1's
            words = "coffee with Emma" if i % 2 else "tea with Liam"
            service.store(f"{words}, entry {i}", context=Context(user_id="u1" if i % 10 == 0 else "u2"))
        scope = postgres_text.scope_of(Filters(now=service.clock.now(), user_id="u1"))
        assert scope is not None
        with store_connection(postgres_url) as db:
            db.execute("ANALYZE memories")
            held = f"SELECT rowid FROM memories WHERE words @@ 'coffe'::tsquery AND {scope[0]}"
            estimate = postgres_text.estimated_rows(db, held, scope[1])
            db.execute("SET enable_seqscan = off")  # 200 memories are read sooner whole
            plan = "\n".join(row[0] for row in db.execute("EXPLAIN " + held, scope[1]))
        assert 3 <= estimate <= 30  # 100 memories with the word, a tenth of them u1's
        assert "Index Cond" in plan and "array_remove" in plan.split("Index Cond")[1]  # the index holds the readers
    finally:
        service.storage.close()


def test_a_store_made_before_the_index_knew_readers_gets_them(tmp_path: Path, postgres_url: str):
    service = _service(tmp_path, postgres_url)
    for i in range(5):
        service.store(f"Memory {i} about apples and pears.", context=Context(user_id=f"u{i % 2}"))
    service.storage.close()
    with store_connection(postgres_url) as db:
        undo_m008(db)  # the store as m007 left it
    reopened = _service(tmp_path, postgres_url)
    try:
        with store_connection(postgres_url) as db:
            columns = db.execute("SELECT indnatts FROM pg_index WHERE indexrelid = 'memories_words'::regclass")
            assert columns.fetchone() == (2,)
            db.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple SCHEMA public")
            assert _words_index(db) == (["fastupdate=off"], 0)
        filters = Filters(now=reopened.clock.now(), user_id="u1")
        found = reopened.storage.search_text(["pears"], filters, limit=10)
        assert len(found) == 2
    finally:
        reopened.storage.close()
