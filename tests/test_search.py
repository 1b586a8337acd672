"""Hybrid recall over real SQLite files, with the deterministic fake embedder."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from embedders import FlakyEmbedder
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed import Vectors
from mnemo.embed.fake import FakeEmbedder
from mnemo.engine.service import MemoryService
from mnemo.errors import Duplicate, EmbeddingError
from mnemo.model import Context
from mnemo.query import Filters, Follower
from mnemo.search.searcher import HYBRID, PASSAGE, REPLY_SHARE, REPLY_WITHIN
from mnemo.search.words import search_terms

pytestmark = pytest.mark.every_backend  # the storage contract: SQLite and PostgreSQL


@pytest.fixture
def hybrid(settings: Settings, clock: ManualClock) -> Iterator[MemoryService]:
    svc = open_service(settings, clock=clock, embedder=FakeEmbedder())
    yield svc
    svc.close()


def test_storing_a_memory_stores_its_vector_and_stats_count_its_bytes(hybrid: MemoryService):
    result = hybrid.store("Emma is lactose intolerant")
    assert result.embedded
    assert hybrid.embedder is not None
    assert hybrid.storage.vector_bytes() == 4 * hybrid.embedder.dimension
    size = hybrid.stats(scope="global", metrics=["storage_size"]).statistics["storage_size"]
    assert size["embeddings_bytes"] == 4 * hybrid.embedder.dimension


def test_a_search_alone_searches_its_words_beside_its_vectors_and_one_among_others_itself(
    hybrid: MemoryService, monkeypatch: pytest.MonkeyPatch
):
    hybrid.store("Emma plays the cello")
    searcher, filters = hybrid.searcher, Filters(now=hybrid.clock.now())
    threads: list[str] = []
    search_text = searcher.storage.search_text

    def found() -> list[tuple[str, float]]:
        return [(c.memory_id, c.text) for c in searcher.find("cello", search_terms("cello"), filters, 10).candidates]

    def searched_on_a_thread(*args: object) -> object:
        threads.append(threading.current_thread().name)
        return search_text(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(searcher.storage, "search_text", searched_on_a_thread)
    expected = found()
    assert len(expected) == 1 and expected[0][1] == 1.0  # found by its words as well as its vector
    assert threads[-1].startswith("mnemo-words")
    with searcher._alone():  # another call is searching
        assert found() == expected
    assert threads[-1] == threading.current_thread().name
    with monkeypatch.context() as failing:  # a word search that fails reaches the caller, and ends the call
        failing.setattr(searcher.storage, "search_text", lambda *args: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            found()
    assert found() == expected and threads[-1].startswith("mnemo-words")  # alone again


def test_closing_a_service_stops_its_search_threads(settings: Settings, clock: ManualClock, backend: str):
    service = open_service(settings, clock=clock, embedder=FakeEmbedder())
    before = set(threading.enumerate())
    service.store("Emma plays the cello")
    assert service.recall("cello").hits  # its words and its query's embedding on threads of their own
    started = [t for t in threading.enumerate() if t not in before and t.name.startswith("mnemo-")]
    # PostgreSQL writes a recall's access counts on a thread of its own too (storage.access_tally)
    written_after = {"mnemo-access-counts"} if backend == "postgres" else set()
    assert {t.name.split("_")[0] for t in started} == {"mnemo-words", "mnemo-embed-query"} | written_after

    service.close()

    for thread in started:
        thread.join(timeout=5)
        assert not thread.is_alive()


def test_meaning_finds_a_memory_whose_words_differ(hybrid: MemoryService):
    hybrid.store("Emma is lactose intolerant")
    hybrid.store("The car needs new tyres")
    # No query word equals a memory word; the fake embedder's letter trigrams still overlap.
    found = hybrid.recall("lactose intolerance", limit=1)
    assert found.embedded
    assert found.hits[0].memory.content == "Emma is lactose intolerant"


def test_a_narrow_filter_returns_the_true_nearest_among_the_memories_it_keeps(hybrid: MemoryService):
    embedder = hybrid.embedder
    assert embedder is not None
    for i in range(300):
        code = f"{i * 7919:x}{i * 104729:x}"  # distinct words, so no two notes are near-duplicates
        hybrid.store(f"gardening {code} about roses, tulips and {code[::-1]}", context=Context(user_id="crowd"))
    hybrid.store("roses need pruning in march", context=Context(user_id="rare"))
    hybrid.store("the boiler was serviced", context=Context(user_id="rare"))
    found = hybrid.recall("rose pruning", user_id="rare", limit=2)
    assert [h.memory.context.user_id for h in found.hits] == ["rare"] * len(found.hits)
    assert found.hits[0].memory.content == "roses need pruning in march"


def test_the_nearest_that_pass_the_filters_are_found_past_those_that_do_not(hybrid: MemoryService, clock: ManualClock):
    # The window's first keys are checked first, the rest only when too few of them pass.
    embedder, index = hybrid.embedder, hybrid.searcher.index
    assert embedder is not None and index is not None
    for i in range(40):
        code = f"{i * 7919:x}{i * 104729:x}"
        hybrid.store(f"gardening {code} about roses, tulips and {code[::-1]}")
    vector = embedder.embed_query("rose pruning")
    index.refresh(hybrid.storage)
    nearest = [key for key, _ in index.search(vector, 40)]
    ids = hybrid.storage.keys_passing(nearest, Filters(now=clock.now()))
    gone = set(nearest[:10:2])  # half of the first ten: too few of the first checked pass
    for key in gone:
        hybrid.forget(ids[key])
    found, passing = hybrid.searcher._nearest(vector, Filters(now=clock.now()), 8)
    assert [key for key, _ in found] == [key for key in nearest if key not in gone][:8]
    assert {key: passing[key] for key, _ in found} == {key: ids[key] for key, _ in found}


def test_vectors_written_by_another_service_on_the_same_store_are_found(
    hybrid: MemoryService, settings: Settings, clock: ManualClock
):
    hybrid.recall("anything at all")  # builds this process's index
    other = open_service(settings, clock=clock, embedder=FakeEmbedder())
    other.store("Liam plays the cello on Sundays")
    other.storage.close()
    assert hybrid.recall("cello sundays", limit=1).hits[0].memory.content == "Liam plays the cello on Sundays"


def test_a_failing_model_loses_no_memory_and_embeds_it_later(settings: Settings, clock: ManualClock):
    embedder = FlakyEmbedder()
    svc = open_service(settings, clock=clock, embedder=embedder)
    embedder.broken = True
    with pytest.raises(EmbeddingError) as caught:
        svc.store("Ava's passport expires in June")
    (memory_id,) = caught.value.details["memory_ids"]
    assert svc.get(memory_id).content == "Ava's passport expires in June"
    assert svc.storage.vector_bytes() == 0
    embedder.broken = False
    assert svc.embed_pending() == 1
    assert svc.storage.vector_bytes() > 0
    svc.storage.close()


def test_a_store_embedded_by_another_model_recalls_by_words_and_says_so_until_reindexed(
    hybrid: MemoryService, settings: Settings, clock: ManualClock
):
    hybrid.store("Olivia prefers window seats")
    hybrid.storage.close()
    other = open_service(settings, clock=clock, embedder=FakeEmbedder(dimension=32))
    found = other.recall("window seats")
    assert not found.embedded
    assert any("reindex" in w for w in found.warnings)
    assert [h.memory.content for h in found.hits] == ["Olivia prefers window seats"]
    assert other.reindex() == 1
    found = other.recall("window seats")
    assert found.embedded and not found.warnings
    other.storage.close()


def test_updated_content_is_embedded_again(hybrid: MemoryService):
    memory = hybrid.store("Mia collects stamps").memory
    assert hybrid.update(memory.id, content="Mia collects vinyl records").embeddings_regenerated
    index = hybrid.searcher.index
    assert index is not None
    index.refresh(hybrid.storage)
    (key,) = hybrid.storage.keys_matching(Filters(now=hybrid.clock.now()))
    expected = FakeEmbedder().embed_query("Mia collects vinyl records")
    assert index.similarity(expected, [key])[key] == pytest.approx(1.0, abs=1e-5)


def test_the_same_memory_in_other_words_is_a_duplicate_of_the_first(settings: Settings, clock: ManualClock):
    svc = open_service(settings, clock=clock, embedder=FakeEmbedder(dimension=256))
    first = svc.store("Emma is lactose intolerant and avoids milk")
    with pytest.raises(Duplicate) as caught:
        svc.store("Note: Emma is lactose intolerant and avoids milk!!")
    assert caught.value.existing_id == first.memory.id
    assert caught.value.details["similarity"] >= 0.95
    svc.store("Note: Emma is lactose intolerant and avoids milk!!", context=Context(user_id="someone-else"))
    svc.storage.close()


def test_memories_that_differ_only_in_their_numbers_are_not_duplicates(settings: Settings, clock: ManualClock):
    svc = open_service(settings, clock=clock, embedder=FakeEmbedder(dimension=256))
    svc.store("Deploy window for the billing service is at 10:15 on Fridays")
    svc.store("Deploy window for the billing service is at 11:15 on Fridays")
    assert svc.list().total == 2
    svc.storage.close()


def test_a_model_failing_on_the_query_is_an_embedding_error(settings: Settings, clock: ManualClock):
    embedder = FlakyEmbedder()
    svc = open_service(settings, clock=clock, embedder=embedder)
    svc.store("Ava's passport expires in June")
    embedder.broken = True
    with pytest.raises(EmbeddingError):
        svc.recall("passport")
    svc.storage.close()


def test_the_sign_bit_prefilter_of_a_large_index_finds_what_an_exact_scan_finds(monkeypatch: pytest.MonkeyPatch):
    import numpy as np

    from mnemo.search import vector_index

    monkeypatch.setattr(vector_index, "EXACT_UP_TO", 0)
    monkeypatch.setattr(vector_index, "MIN_RERANK", 200)  # 5% of the index, as 1,000 of 20,000
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(40, 64)).astype(np.float32)
    vectors = centres[rng.integers(0, 40, 4_000)] + 0.3 * rng.normal(size=(4_000, 64)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = vector_index.VectorIndex(64)
    index._add(list(range(100, 4_100)), vectors)
    for row in (0, 1_234, 3_999):
        found = index.search(vectors[row], 5)
        exact = np.argsort(-(vectors @ vectors[row]))[:5] + 100
        assert [key for key, _ in found] == exact.tolist()
        assert found[0] == (row + 100, pytest.approx(1.0, abs=1e-5))


def _clustered(seed: int, clusters: int) -> tuple[Any, Any]:
    """3,000 vectors around ``clusters`` centres, and their index. Members of a cluster lie at
    cosine ~0.75-0.98 from each other: around the floors of a search of the close."""
    from mnemo.search import vector_index

    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, 384)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.uniform(0.005, 0.03, size=(3_000, 1)).astype(np.float32)
    vectors = centres[rng.integers(0, clusters, 3_000)] + noise * rng.normal(size=(3_000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = vector_index.VectorIndex(384)
    index._add(list(range(3_000)), vectors)
    return vectors, index


def test_a_search_of_the_close_finds_what_a_scan_of_every_vector_finds_at_the_floor():
    import numpy as np

    from mnemo.search import vector_index

    vectors, index = _clustered(5, 30)
    for floor in (0.95, 0.92, 0.85, 0.5):
        for row in range(0, 3_000, 150):
            scores = vectors @ vectors[row]
            at_floor = [key for key in np.argsort(-scores)[:10] if scores[key] >= floor]
            assert [key for key, _ in index.close(vectors[row], 10, floor)] == at_floor
    assert vector_index.sign_radius(0.92, 384) < 384 // 3  # far from a scan of every row's floats


def test_a_search_of_the_close_among_thousands_alike_scores_only_the_closest_by_sign(monkeypatch):
    import numpy as np

    from mnemo.search import vector_index

    # ~1,000 a cluster, all within the sign radius of each other: an import of templated notes.
    vectors, index = _clustered(8, 3)
    scored: list[int] = []
    closest = vector_index.closest_by_sign
    monkeypatch.setattr(vector_index, "closest_by_sign", lambda d, n: scored.append(n) or closest(d, n))
    for row in range(0, 3_000, 100):
        scores = vectors @ vectors[row]
        at_floor = [key for key in np.argsort(-scores)[:10] if scores[key] >= 0.92]
        assert [key for key, _ in index.close(vectors[row], 10, 0.92)] == at_floor
    assert scored == [vector_index.CLOSE_KEEP] * 30  # every query had too many rows to score all


class RecordingEmbedder(FakeEmbedder):
    """Remembers the queries it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text: str) -> Vectors:
        self.queries.append(text)
        return super().embed_query(text)


def test_a_query_naming_a_subject_is_embedded_without_the_name(settings: Settings, clock: ManualClock):
    embedder = RecordingEmbedder()
    svc = open_service(settings, clock=clock, embedder=embedder)
    try:
        svc.store("Liam lives in Boston", subject="Liam")
        svc.recall("What is Liam's blood type?")
        svc.recall("What is William's blood type?")  # no subject William: nothing to take out
    finally:
        svc.storage.close()
    assert embedder.queries == ["What is blood type?", "What is William's blood type?"]


def test_memories_not_about_the_subject_a_query_names_count_as_elsewhere(hybrid: MemoryService):
    hybrid.store("Liam lives in Boston", subject="Liam")
    hybrid.store("User's blood type is O negative", subject="User")
    hybrid.store("Sofia asked about Liam's school", subject="Sofia")  # names him in its text
    hybrid.store("Passport renewal is due in May", tags=["liam"])  # names him in a tag
    found = hybrid.searcher.find(
        "What is Liam's blood type?", ["liam", "blood", "type"], Filters(now=hybrid.clock.now()), 50
    )
    elsewhere = {hybrid.get(c.memory_id).content: c.elsewhere for c in found.candidates}
    assert elsewhere == {
        "Liam lives in Boston": 0.0,
        "User's blood type is O negative": 1.0,
        "Sofia asked about Liam's school": 0.0,
        "Passport renewal is due in May": 0.0,
    }
    unnamed = hybrid.searcher.find("blood type", ["blood", "type"], Filters(now=hybrid.clock.now()), 50)
    assert {c.elsewhere for c in unnamed.candidates} == {0.0}


def test_a_subject_the_query_names_by_its_role_counts_as_named(hybrid: MemoryService):
    hybrid.store("Liam is the user's younger brother", subject="Liam")
    hybrid.store("Liam is engaged to Nadia Haddad", subject="Liam")
    hybrid.store("Sofia and Daniel married in June 2012", subject="Sofia")
    query = "Who is my brother marrying?"
    found = hybrid.searcher.find(query, search_terms(query), Filters(now=hybrid.clock.now()), 50)
    assert {hybrid.get(c.memory_id).content: c.elsewhere for c in found.candidates} == {
        "Liam is the user's younger brother": 0.0,
        "Liam is engaged to Nadia Haddad": 0.0,
        "Sofia and Daniel married in June 2012": 1.0,
    }


def test_a_role_tied_to_a_name_no_memory_is_about_names_no_subject(hybrid: MemoryService):
    hybrid.store("Ben is the new intern on Payments")  # no subject: Ben is not one of the store's
    hybrid.store("Payments standup is at 9:30")
    query = "When does the intern start?"
    found = hybrid.searcher.find(query, search_terms(query), Filters(now=hybrid.clock.now()), 50)
    assert {c.elsewhere for c in found.candidates} == {0.0}


def test_a_memory_about_none_of_the_named_subjects_ranks_by_its_content_but_stays_below_0_7():
    #                     cosine text elsewhere when
    features = np.array([[0.9, 1.0, 1.0, 1.0],  # says what is asked, about someone else
                         [0.1, 0.0, 0.0, 0.0],  # about the subject asked about, says nothing asked
                         [0.9, 1.0, 0.0, 1.0],  # the answer
                         [0.9, 1.0, 0.5, 1.0]])  # about one of two subjects asked about  # fmt: skip
    other, unrelated, answer, half = HYBRID.relevance(features)
    assert unrelated < other < 0.7 < half < answer


def test_without_a_model_a_memory_about_none_of_the_named_subjects_stays_below_0_7(
    settings: Settings, clock: ManualClock
):
    words_only = open_service(settings, clock=clock)  # the settings fixture configures no model
    try:
        words_only.store("Liam lives in Boston", subject="Liam")
        users = words_only.store("User's blood type is O negative", subject="User").memory
        found = words_only.searcher.find(
            "What is Liam's blood type?", ["liam", "blood", "type"], Filters(now=clock.now()), 50
        )
        own = words_only.searcher.find("What is my blood type?", ["blood", "type"], Filters(now=clock.now()), 50)
    finally:
        words_only.storage.close()

    about_someone_else = next(c for c in found.candidates if c.memory_id == users.id)
    assert (about_someone_else.elsewhere, about_someone_else.cosine) == (1.0, None)
    assert about_someone_else.relevance < 0.7
    assert [c.relevance >= 0.7 for c in own.candidates if c.memory_id == users.id] == [True]


def test_memories_made_in_the_time_a_query_names_are_marked_as_such(hybrid: MemoryService):
    clock = hybrid.clock
    assert isinstance(clock, ManualClock)
    hybrid.store("Painted a sunrise over the lake", timestamp=datetime(2023, 10, 13, 18, 0, tzinfo=UTC))
    hybrid.store("Painted the kitchen walls blue", timestamp=datetime(2023, 11, 2, 9, 0, tzinfo=UTC))
    filters = Filters(now=clock.now())
    found = hybrid.searcher.find("What did she paint on October 13, 2023?", ["paint"], filters, 50)
    assert {hybrid.get(c.memory_id).content: c.when for c in found.candidates} == {
        "Painted a sunrise over the lake": 1.0,
        "Painted the kitchen walls blue": 0.0,
    }
    undated = hybrid.searcher.find("What did she paint?", ["paint"], filters, 50)
    assert {c.when for c in undated.candidates} == {0.0}


def test_us_in_a_question_does_not_match_uses_by_its_stem(service: MemoryService):
    service.store("The team uses Postgres for billing")
    assert service.recall("Who told us about the outage?").hits == []  # "us" is no word to search for
    assert [h.memory.content for h in service.recall("What does the team use?").hits] == [
        "The team uses Postgres for billing"
    ]


def _conversation(svc: MemoryService, session: str | None, turns: list[str]) -> list[str]:
    """Store the turns in order, in one session (None: with no session), and return their ids."""
    return [svc.store(turn, context=Context(session_id=session)).memory.id for turn in turns]


TURNS = [
    "Melanie: what did you paint for the autumn exhibition?",  # the question a query echoes
    "Caroline: a harbour at dusk with fishing boats",  # the answer, sharing no word with the query
    "Caroline: it took me three weekends",
    "Melanie: the gallery opens on Friday",  # three turns on: not lifted
]


def test_the_memories_that_follow_a_hit_in_its_session_share_its_relevance(hybrid: MemoryService):
    question, answer, after, later = _conversation(hybrid, "autumn chat", TURNS)
    hits = {h.memory.id: h.scores.semantic_similarity for h in hybrid.recall("paint autumn exhibition").hits}
    assert hits[answer] == pytest.approx(REPLY_SHARE * hits[question])
    assert hits[after] == pytest.approx(REPLY_SHARE * hits[question])
    assert hits.get(later, 0.0) < REPLY_SHARE * hits[question]


def test_a_long_follower_is_lent_one_paragraph_s_share_of_the_hit_s_relevance(hybrid: MemoryService):
    # A long reply holds whatever answers the hit in one paragraph of it, like its word credit.
    steps = " ".join(f"Step {i}: stretch the canvas, prime it twice and let it dry overnight." for i in range(30))
    reply = f"Caroline: here is how I prepare a canvas. {steps}"
    question, long_reply = _conversation(hybrid, "autumn chat", [TURNS[0], reply])
    share = PASSAGE / len(hybrid.get(long_reply).content)
    assert share < 0.25
    hits = {h.memory.id: h.scores.semantic_similarity for h in hybrid.recall("paint autumn exhibition").hits}
    assert hits.get(long_reply, 0.0) < REPLY_SHARE * hits[question] / 2
    assert hits.get(long_reply, 0.0) == pytest.approx(
        max(REPLY_SHARE * share * hits[question], _own_relevance(hybrid, long_reply, "paint autumn exhibition"))
    )


def _own_relevance(svc: MemoryService, memory_id: str, query: str) -> float:
    """A memory's relevance to the query by its own features, no follower lent it any."""
    found = svc.searcher.find(query, search_terms(query), Filters(now=svc.clock.now()), 50)
    return next((c.relevance for c in found.candidates if c.memory_id == memory_id), 0.0)


def test_memories_without_a_session_keep_their_own_relevance(hybrid: MemoryService):
    question, answer, after, _ = _conversation(hybrid, None, TURNS)
    hits = {h.memory.id: h.scores.semantic_similarity for h in hybrid.recall("paint autumn exhibition").hits}
    assert max(hits.get(answer, 0.0), hits.get(after, 0.0)) < REPLY_SHARE * hits[question]


def test_only_the_hit_s_own_session_after_it_shares_its_relevance(hybrid: MemoryService):
    before = hybrid.store("Caroline: a harbour at dusk with fishing boats", context=Context(session_id="s")).memory.id
    question = hybrid.store(TURNS[0], context=Context(session_id="s")).memory.id
    elsewhere = hybrid.store("Caroline: it took me three weekends", context=Context(session_id="t")).memory.id
    hits = {h.memory.id: h.scores.semantic_similarity for h in hybrid.recall("paint autumn exhibition").hits}
    assert max(hits.get(before, 0.0), hits.get(elsewhere, 0.0)) < REPLY_SHARE * hits[question]


def test_a_follower_the_filters_leave_out_stays_out(hybrid: MemoryService):
    question, answer, after, _ = _conversation(hybrid, "autumn chat", TURNS)
    hybrid.forget(answer)
    ids = [h.memory.id for h in hybrid.recall("paint autumn exhibition").hits]
    assert question in ids and after in ids and answer not in ids


def test_storage_gives_the_next_memories_of_a_session_in_the_order_they_were_made(hybrid: MemoryService):
    early = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)

    def said(text: str, session: str | None, at: datetime = early) -> str:
        return hybrid.store(text, context=Context(session_id=session), timestamp=at).memory.id

    first, second, third, fourth = (said(f"the {n} turn", "s") for n in ("first", "second", "third", "fourth"))
    opening = said("said before all of them", "s", early.replace(hour=8, minute=55))  # stored last, made first
    alone = said("said an hour before", "s", early.replace(hour=8))  # nothing follows it within ten minutes
    other = said("another session's turn", "t")
    loose = said("a memory of no session", None)
    now = Filters(now=hybrid.clock.now())
    key = {memory_id: k for k, memory_id in hybrid.storage.keys_passing(hybrid.storage.keys_matching(now), now).items()}
    asked = [key[m] for m in (opening, second, fourth, other, loose, alone)]
    following = hybrid.storage.following_in_session(asked, 2, REPLY_WITHIN)
    length = {key[m]: len(hybrid.get(m).content) for m in (first, second, third, fourth)}
    assert following == {
        key[opening]: [Follower(key[first], length[key[first]]), Follower(key[second], length[key[second]])],
        key[second]: [Follower(key[third], length[key[third]]), Follower(key[fourth], length[key[fourth]])],
    }


def test_a_search_for_matching_memories_leaves_the_followers_out(hybrid: MemoryService):
    question = _conversation(hybrid, "autumn chat", TURNS)[0]
    assert [m.id for m in hybrid.query(search="paint autumn exhibition").memories] == [question]


def test_a_long_memory_earns_the_word_credit_of_one_paragraph_of_it(hybrid: MemoryService):
    short = hybrid.store("Always run the tests with pytest before a release").memory.id
    filler = " ".join(f"Step {i}: the build copies assets, renders pages and checks links." for i in range(40))
    long = hybrid.store(f"Run the tests with pytest before a release. {filler}").memory.id
    length = len(hybrid.get(long).content)
    assert length > 4 * PASSAGE
    found = hybrid.searcher.find(
        "pytest release tests", ["pytest", "release", "tests"], Filters(now=hybrid.clock.now()), 50
    )
    text = {c.memory_id: c.text for c in found.candidates}
    # Both hold every query word; the long one's BM25 alone would be near the short one's.
    assert text[short] == pytest.approx(1.0)
    assert 0 < text[long] <= PASSAGE / length
