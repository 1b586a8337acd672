"""Finding the memories a query means: words (BM25 from FTS5) and meaning (vectors), fused.

Each candidate gets a calibrated ``relevance`` in [0, 1]: a logistic function of its cosine
similarity to the query without the names of the subjects it asks about (see focus.py), of its
BM25 score relative to the query's best (a long memory's counted as one paragraph's, see PASSAGE),
and of whether it was made in the stretch of time the query names (see when.py), times a doubt
for memories about none of the subjects the query names.
``benchmarks/fit_relevance.py`` fits it on the dev sets; a relevance of 0.7 is meant to be read
as "probably an answer".
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import copy_context
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property

from mnemo.embed import Embedder, Vectors
from mnemo.errors import EmbeddingError
from mnemo.lazy import numpy as np
from mnemo.query import Filters
from mnemo.search import superseded, twins
from mnemo.search.candidate import Candidate
from mnemo.search.focus import possible_names, without_names
from mnemo.search.roles import named_by_role, role_words
from mnemo.search.vector_index import VectorIndex
from mnemo.search.vector_layers import GRAPH_FROM, LayeredIndex
from mnemo.search.when import stretch
from mnemo.search.words import search_terms
from mnemo.storage import Storage, VectorSearch

WINDOW_FACTOR = 3  # nearest neighbours checked against status/expiry filters per wanted result


# The most a memory about none of the subjects a question names can be an answer: "User's blood
# type is O negative" says what "What is Liam's blood type?" asks, but about someone else. A
# product, not a weight in the sum, so such a memory still ranks above ones that say nothing
# relevant (LoCoMo's questions with a wrong premise have the other speaker's turn as evidence),
# yet it never clears the 0.7 that means "probably an answer" (agent-memory's unanswerable questions).
# Refitted with it, agent-memory's rejected negatives went from 3 to 8 of 10, its R@5 from 0.839 to
# 0.844, and LoCoMo's R@5 from 0.632 to 0.611. A weight in the sum strong enough for the negatives
# cost LoCoMo 0.06.
OTHER_SUBJECT = 0.7

# The word-match credit of a memory that shares only the subjects' names with a question: "Does
# Aisha have any siblings?" matched "Aisha reports to the user" on "aisha" alone, and as the best
# word match it scored as high as a memory sharing every word. Half the credit, chosen as a round
# value; on agent-memory dev the unanswerable questions rejected went from 8 to 9 of 10 (R@5 0.844
# to 0.840, LoCoMo 0.611 to 0.612) and on the validation set from 0.38 to 0.45 (R@5 0.779 to 0.782).
NAME_ONLY = 0.5

# A memory longer than a paragraph has that many more chances to share a query's words: on BEAM's
# chats (long assistant answers beside the short requests that hold most answers) the word credit
# let answers of 3,000-8,000 characters that echo a question's words crowd out the request it
# asks about. So the word credit of a memory longer than PASSAGE characters (about 100 words) is
# its relative BM25 times PASSAGE / its length: what one paragraph of it would earn. Memories up to
# a paragraph long (every memory of agent-memory, LoCoMo, the prose and terse sets) are untouched.
# Measured by relevance (recall_quality.py, R@5 / R@10): BEAM 100K 0.426 / 0.512 to 0.503 / 0.583
# (plain cosine 0.436 / 0.532), preference following 0.333 to 0.530 (cosine 0.470), instruction
# following 0.175 / 0.225 to 0.250 / 0.431 (0.275 / 0.344); the other sets unchanged. 250 to 1,000
# characters gave the same within 0.015 (replayed candidates); 500 is a round paragraph.
PASSAGE = 500


def one_paragraph(length: int) -> float:
    """The share of a memory of ``length`` characters that one PASSAGE of it is, at most 1."""
    return min(1.0, PASSAGE / max(length, 1))


# A memory made in a session (``context.session_id``: one conversation, one task) is read in its
# order: the memories that follow a hit are often what the hit was about, as the reply follows the
# question that a query echoes. So each of the FOLLOWING memories after one of the LENDERS most
# relevant candidates in its session counts at REPLY_SHARE of that candidate's relevance when that
# is more than its own. Memories without a session are untouched. On LoCoMo dev (one memory per
# dialogue turn, its session as session_id; recall_quality.py), relevance only, 347 of the 586
# questions with an answer outside the top 5 had a top-5 hit within two turns of it, and 65% of
# those answers came after the hit. Measured: R@5 0.612 to 0.636, R@10 0.726 to 0.765, MRR 0.483
# to 0.491 (default weights R@5 0.609 to 0.633); agent-memory dev and the validation set, which
# have no sessions, unchanged. Replaying the ranked candidates: the turns before a hit lose (R@5
# 0.604) and add nothing to the following ones; one following turn gives R@5 0.632, three 0.627.
# At 0.7 a lent relevance stays below the 0.7 that means "probably an answer", so no follower makes
# an unanswerable question look answered; 0.5 gave R@5 0.620, 0.8 0.642 but R@10 0.758 (0.766 at
# 0.7). Lending from the first 2 candidates or from all 50 gives the same as from 5.
# Only memories made within REPLY_WITHIN of the hit follow it, as a reply follows what it answers:
# an agent's notes of one session are not a conversation, and lending to the next notes whatever
# their distance cost agent-memory dev R@5 0.840 to 0.794 and the validation set 0.782 to 0.726
# when their notes were put in sessions of 8 by date (most are hours apart; LoCoMo's turns of a
# session all bear its time). Ten minutes is a round value, not fitted: both sets gain nothing from it.
# A follower longer than a PASSAGE is lent one paragraph's share (REPLY_SHARE · PASSAGE / its
# length), as its word credit is: what answers the hit is one paragraph of a long reply, and lent
# in full, BEAM's 3,000-8,000-character assistant answers took the places of the short requests
# they follow. Measured by relevance (R@5 / R@10): BEAM 100K 0.503 / 0.583 to 0.506 / 0.593
# (instruction following 0.250 to 0.275, cosine's; lending nothing at all: 0.508 / 0.592), never
# tuned on, BEAM 500K 0.343 / 0.448 to 0.347 / 0.452; LoCoMo (no turn over 500 characters) and
# the sets without sessions unchanged.
FOLLOWING = 2
REPLY_SHARE = 0.7
REPLY_WITHIN = timedelta(minutes=10)
LENDERS = 5  # the first results an agent reads (superseded.EXAMINED)


# A question that names a subject by its role ("Who is my brother marrying?") asks about the
# subject that one of its first LINKS candidates ties that role to ("Liam is the user's younger
# brother", see roles.py), when the store has memories about that subject: it then counts as named,
# so memories about someone else count as elsewhere. Measured by relevance (recall_quality.py, R@5 /
# R@10): agent-memory dev 0.840 / 0.919 to 0.858 / 0.935, prose dev 0.853 / 0.885 to 0.857 / 0.885
# (negatives rejected 1 to 2 of 6), LoCoMo 0.636 / 0.765 to 0.635 / 0.764; never tuned on: prose
# validation 0.871 / 0.932 to 0.871 / 0.945, terse validation 0.784 / 0.861 to 0.784 / 0.866, and
# R@1 0.514 to 0.500 and 0.470 to 0.465 there (the note that ties the role often comes first).
LINKS = 5


@dataclass(frozen=True, slots=True)
class Calibration:
    """relevance = (1 - (1 - OTHER_SUBJECT)·elsewhere) / (1 + exp(-(bias + Σ weight·feature))).

    ``elsewhere`` (the share of the named subjects a memory is not about) scales the logistic
    function of the features, and may also weigh in the sum.
    """

    bias: float
    cosine_weight: float
    text_weight: float
    elsewhere_weight: float
    when_weight: float

    def relevance(self, features: np.ndarray) -> np.ndarray:
        """The relevance of each row of features: cosine, text, elsewhere, when (see Candidate)."""
        weights = np.array([self.cosine_weight, self.text_weight, self.elsewhere_weight, self.when_weight])
        z = self.bias + features @ weights
        return (1.0 - (1.0 - OTHER_SUBJECT) * features[:, 2]) / (1.0 + np.exp(-z))


# Fitted by benchmarks/fit_relevance.py on the dev sets (README: "Evaluation data") with all-MiniLM-L6-v2 (1,505
# queries, recall's 122k candidates; ranking by relevance R@5 0.844 on agent-memory, 0.611 on
# LoCoMo). At 0.7 it keeps the right answer of 60% of agent-memory's questions (LoCoMo 62%) and
# rejects 8 of its 10 unanswerable ones (9 since NAME_ONLY, with 57% kept; refitting with it moved
# nothing by more than 0.003, so the fit stands); the one left asks about an attribute of a known
# subject that another memory of that subject resembles ("Is Noah allergic to cats?" against "Noah
# is also allergic to sesame"), which this model scores as close as right answers are to theirs.
HYBRID = Calibration(bias=-3.389, cosine_weight=8.249, text_weight=2.475, elsewhere_weight=-0.412, when_weight=2.475)
# Fits for other models, by the model's name (an embedder's name up to its "/"); a model without
# one uses HYBRID. Each was fitted the same way, on the dev sets only, with that model's vectors.
CALIBRATIONS: dict[str, Calibration] = {
    # 124k candidates of the same 1,505 dev queries; ranking by relevance R@5 0.892 on agent-memory
    # (0.861 with HYBRID), 0.647 on LoCoMo (0.648); its negatives rejected at 0.7: 9 of 10 (8).
    "all-mpnet-base-v2": Calibration(
        bias=-4.082, cosine_weight=10.462, text_weight=2.092, elsewhere_weight=0.0, when_weight=2.092
    ),
}


def calibration_for(embedder_name: str) -> Calibration:
    """The relevance calibration fitted for the model that makes ``embedder_name``'s vectors."""
    return CALIBRATIONS.get(embedder_name.split("/", 1)[0], HYBRID)


# The same fit over the candidates words find, by their BM25 alone (recall without a model).
WORDS_ONLY = Calibration(bias=-2.806, cosine_weight=0.0, text_weight=5.596, elsewhere_weight=0.0, when_weight=0.0)


@dataclass(frozen=True, slots=True)
class _Features:
    """What a memory's relevance to one query is computed from, beside the memory itself."""

    calibration: Calibration
    cosines: dict[int, float]  # by key, to the query without the subjects' names
    text: dict[int, tuple[str, float]]  # the word matches by key: their id and relative BM25
    names: Sequence[str]  # the subjects the query names
    period: tuple[datetime, datetime] | None  # the stretch of time it names


@dataclass(frozen=True, slots=True)
class Found:
    candidates: list[Candidate]
    warnings: list[str] = field(default_factory=list)
    embedded: bool = False  # whether the query was embedded (meaning was used)


class Searcher:
    """Hybrid retrieval over one store; the embedder may be absent (words only)."""

    def __init__(self, storage: Storage, embedder: Embedder | None, graph_from: int = GRAPH_FROM) -> None:
        self.storage = storage
        self.embedder = embedder
        self.graph_from = graph_from  # vectors from which a store's index keeps a snapshot on disk
        self._embedding = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-embed-query")
        self._words = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-words")
        self._searching = 0  # calls between their word search and its result (see _alone)
        self._searching_lock = threading.Lock()

    def close(self) -> None:
        """Stop the query-embedding and word-search threads and a vector snapshot being written,
        waiting for those that read the store (a word search still running finishes): the store's
        connections close next."""
        self._embedding.shutdown(wait=False, cancel_futures=True)
        self._words.shutdown(wait=True, cancel_futures=True)
        self._shut_down_index()

    @cached_property
    def index(self) -> VectorSearch | None:
        """The store's vectors in this process's memory and, past ``graph_from`` of them, in a snapshot
        in the store's index folder; made on first use (so numpy loads after a server's handshake)."""
        if self.embedder is None:
            return None
        folder = self.storage.index_folder()
        if folder is None:
            return VectorIndex(self.embedder.dimension)
        return LayeredIndex(self.embedder.dimension, self.embedder.name, folder, graph_from=self.graph_from)

    def reload_index(self) -> None:
        """Read the index again from the store on next use (after writes it saw were rolled back)."""
        self._shut_down_index()
        self.__dict__.pop("index", None)

    def _shut_down_index(self) -> None:
        index = self.__dict__.get("index")  # not made here if no search made it
        if isinstance(index, LayeredIndex):
            index.shutdown()

    def vectors_state(self) -> str | None:
        """None when vectors can be used, else why not (for warnings and health)."""
        if self.embedder is None:
            return "no embedding model is configured: recall uses words only"
        model = self.storage.vector_model()
        if model is not None and model != self.embedder.name:
            return (
                f"this store's vectors were made by {model}, not {self.embedder.name}: recall uses words only "
                "until `mnemo reindex` re-embeds the store"
            )
        return None

    def find(self, query: str, terms: Sequence[str], filters: Filters, pool: int, followers: bool = False) -> Found:
        """The candidates for a query, with their relevance; ``followers``: with the memories that follow
        the first hits in their sessions (see FOLLOWING), as recall ranks them. A search for the
        memories that match a query's text leaves them out: they are context for a hit, not matches."""
        problem = self.vectors_state()
        names = sorted(self.storage.subjects_among(possible_names(query)))
        if problem is not None or self.index is None:  # words alone: BM25 and the named subjects speak
            text = self._text(terms, filters, pool)
            elsewhere = self._elsewhere(list(text), names)
            features = np.array([[0.0, t, elsewhere.get(key, 0.0), 0.0] for key, (_, t) in text.items()]).reshape(-1, 4)
            found = [
                Candidate(mid, key, t, None, float(away), 0.0, float(r))
                for (key, (mid, t)), (_, _, away, _), r in zip(
                    text.items(), features, WORDS_ONLY.relevance(features), strict=True
                )
            ]
            return Found(found, [problem] if problem else [])

        calibration = calibration_for(self.embedder.name) if self.embedder is not None else HYBRID
        # The model embeds the query on another thread while the words are searched, and when no
        # other call is searching the words go on while the vectors are searched: the model, SQLite
        # and PostgreSQL's backends release the GIL, so the costs overlap instead of adding up.
        focused = without_names(query, names)
        embedding = self._embedding.submit(self._embed_query, focused)
        with self._alone() as alone:
            words = self._word_search(terms, search_terms(focused) if names else [], filters, pool, beside=alone)
            vector = embedding.result()
            self.index.refresh(self.storage)
            nearest, passing = self._nearest(vector, filters, pool)
            cosines = dict(nearest)
            text = words.result()
        ids = {key: mid for key, (mid, _) in text.items()}
        missing = [key for key in cosines if key not in ids and key not in passing]
        passing.update(self.storage.keys_passing(missing, filters) if missing else {})
        ids.update((key, passing[key]) for key in cosines if key not in ids and key in passing)
        cosines.update(self.index.similarity(vector, [k for k in text if k not in cosines]))
        period = stretch(query, filters.now)
        given = _Features(calibration, cosines, text, names, period)
        found = self._candidates(ids, given, filters)
        if not names and (resolved := self._roles_named(query, found)):
            given = replace(given, names=resolved)
            found = self._scored(found, resolved, calibration)
        reaches_now = period is None or period[1] > filters.now  # "this year" asks about now too
        if reaches_now and not superseded.asks_about_the_past(query):  # about now: updates come first
            keys = [c.key for c in sorted(found, key=lambda c: -c.relevance)[: superseded.EXAMINED]]
            found = superseded.newest_first(
                found, self.storage.rank_fields(keys), self.index.vectors(keys), superseded.asks_about_now(query)
            )
        return Found(self._with_followers(found, given, vector, filters) if followers else found, embedded=True)

    def _roles_named(self, query: str, found: list[Candidate]) -> list[str]:
        """The subjects the query names by their role, as its first candidates tie them (see roles.py)."""
        asked = role_words(query)
        if not asked:
            return []
        first = [c.memory_id for c in sorted(found, key=lambda c: -c.relevance)[:LINKS]]
        by_id = {m.id: m for m in self.storage.get_many(first)}
        named: dict[str, set[str]] = {}
        for memory_id in first:  # each role by the most relevant note that ties it to a name
            if memory_id in by_id:
                for role, names in named_by_role(by_id[memory_id].content, asked).items():
                    named.setdefault(role, names)
        return sorted(self.storage.subjects_among(sorted(set().union(*named.values()))))

    def _candidates(self, ids: dict[int, str], features: _Features, filters: Filters) -> list[Candidate]:
        """The memories with these keys (which pass the filters) as candidates, with their relevance."""
        dated = self._made_in(list(ids), filters, features.period)
        unscored = [
            Candidate(
                memory_id,
                key,
                features.text[key][1] if key in features.text else 0.0,
                features.cosines.get(key, 0.0),
                0.0,
                float(key in dated),
                0.0,
            )
            for key, memory_id in ids.items()
        ]
        return self._scored(unscored, features.names, features.calibration)

    def _scored(self, candidates: list[Candidate], names: Sequence[str], calibration: Calibration) -> list[Candidate]:
        """The candidates with their share of the named subjects they are not about, and their relevance."""
        elsewhere = self._elsewhere([c.key for c in candidates], names)
        rows = np.array(
            [[c.cosine or 0.0, c.text, elsewhere.get(c.key, 0.0), c.when] for c in candidates], dtype=np.float64
        ).reshape(-1, 4)
        return [
            replace(c, elsewhere=float(away), relevance=float(r))
            for c, away, r in zip(candidates, rows[:, 2], calibration.relevance(rows), strict=True)
        ]

    def _with_followers(
        self, found: list[Candidate], features: _Features, vector: Vectors, filters: Filters
    ) -> list[Candidate]:
        """The candidates, with the FOLLOWING memories of each of the first LENDERS's session at
        REPLY_SHARE of its relevance (of one paragraph's share of it for a long memory) where that
        is more than their own (see FOLLOWING)."""
        lenders = sorted(found, key=lambda c: -c.relevance)[:LENDERS]
        following = self.storage.following_in_session([c.key for c in lenders], FOLLOWING, REPLY_WITHIN)
        if not following:
            return found
        lent: dict[int, float] = {}
        for lender in lenders:
            for follower in following.get(lender.key, ()):
                share = REPLY_SHARE * one_paragraph(follower.length)
                lent[follower.key] = max(lent.get(follower.key, 0.0), share * lender.relevance)
        known = {c.key for c in found}
        assert self.index is not None
        new = self.storage.keys_passing([key for key in lent if key not in known], filters)
        if new:
            cosines = self.index.similarity(vector, list(new))
            found = found + self._candidates(new, replace(features, cosines=cosines), filters)
        return [replace(c, relevance=lent[c.key]) if lent.get(c.key, 0.0) > c.relevance else c for c in found]

    @contextmanager
    def _alone(self) -> Iterator[bool]:
        """Whether this call is the only one of this store searching now. Only then are its words
        searched beside its vectors: under 16 clients at once on 2 cores (benchmarks/http_soak.py)
        every call doing so cost 5-9% of the recalls a second and ~45 ms at the median, one a core
        at a time 3%; a busy machine has no core to spare."""
        with self._searching_lock:
            self._searching += 1
            alone = self._searching == 1
        try:
            yield alone
        finally:
            with self._searching_lock:
                self._searching -= 1

    def _word_search(
        self, terms: Sequence[str], focused_terms: Sequence[str], filters: Filters, pool: int, beside: bool
    ) -> Future[dict[int, tuple[str, float]]]:
        """The word matches: searched on another thread if ``beside``, else at once on this one, while
        the model embeds the query; on this one inside a batch too, whose writes only this thread's
        connection sees."""
        if beside and not self.storage.batching():
            context = copy_context()
            return self._words.submit(context.run, self._word_matches, terms, focused_terms, filters, pool)
        done: Future[dict[int, tuple[str, float]]] = Future()
        done.set_result(self._word_matches(terms, focused_terms, filters, pool))
        return done

    def _word_matches(
        self, terms: Sequence[str], focused_terms: Sequence[str], filters: Filters, pool: int
    ) -> dict[int, tuple[str, float]]:
        """The word matches by key (see _text), those that match only by the subjects' names at NAME_ONLY."""
        return self._beyond_names(self._text(terms, filters, pool), focused_terms)

    def _text(self, terms: Sequence[str], filters: Filters, pool: int) -> dict[int, tuple[str, float]]:
        """The word matches by key: their id and word credit, BM25 relative to the best match's, a
        memory longer than a PASSAGE counted as one passage of it."""
        hits = self.storage.search_text(terms, filters, pool)
        best = max((h.score for h in hits), default=0.0)
        if best <= 0:
            return {h.key: (h.memory_id, 0.0) for h in hits}
        return {h.key: (h.memory_id, h.score / best * one_paragraph(h.length)) for h in hits}

    def _beyond_names(
        self, text: dict[int, tuple[str, float]], focused_terms: Sequence[str]
    ) -> dict[int, tuple[str, float]]:
        """The word matches, those that share no word with the question but the subjects' names at NAME_ONLY."""
        if not focused_terms or not text:
            return text
        beyond = self.storage.keys_holding(list(text), focused_terms)
        return {key: (mid, score if key in beyond else NAME_ONLY * score) for key, (mid, score) in text.items()}

    def _made_in(self, keys: list[int], filters: Filters, period: tuple[datetime, datetime] | None) -> set[int]:
        """Which of these candidates (which pass the filters) were created in the period [start, end)."""
        if period is None:
            return set()
        start, end = period
        dated = replace(filters, created_from=start, created_to=end - timedelta(microseconds=1))
        return set(self.storage.keys_passing(keys, dated))

    def _elsewhere(self, keys: list[int], names: Sequence[str]) -> dict[int, float]:
        """For each memory, the share of the named subjects it is not about."""
        if not names:
            return {}
        about = [self.storage.keys_mentioning(keys, name) for name in names]
        return {key: sum(key not in keys_about for keys_about in about) / len(names) for key in keys}

    def _embed_query(self, query: str) -> Vectors:
        assert self.embedder is not None
        try:
            return self.embedder.embed_query(query)
        except EmbeddingError:
            raise
        except Exception as exc:  # a model's own failure reaches callers as mnemo's error
            raise EmbeddingError(f"the query could not be embedded: {exc}") from exc

    def near_duplicates(
        self, batch: Sequence[twins.NewText], now: datetime, *, visible_to: str | None
    ) -> list[twins.Twin | None]:
        """For each new memory in order, the memory it repeats or None (see mnemo.search.twins)."""
        if self.index is None:
            return [None] * len(batch)
        return twins.find(self.index, self.storage, batch, now, visible_to=visible_to)

    def _nearest(self, vector: Vectors, filters: Filters, pool: int) -> tuple[list[tuple[int, float]], dict[int, str]]:
        """The pool nearest memories that pass the filters (the true top-k among the matching), and
        the memory ids of those found to pass here."""
        assert self.index is not None
        if not filters.selects_by_attribute:
            window = WINDOW_FACTOR * pool
            hits = self.index.search(vector, window)
            keys = [k for k, _ in hits]
            # Most of the nearest pass (active, unexpired): the window's rest is read when they do not
            # fill the pool (at 1,000,000 memories, checking a row reads it: ~3 us, 600 for spec 000).
            checked = pool + pool // 4
            passing = self.storage.keys_passing(keys[:checked], filters)
            if len(passing) < pool and len(keys) > checked:
                passing.update(self.storage.keys_passing(keys[checked:], filters))
            if len(passing) >= pool or len(hits) < window:
                return [(k, s) for k, s in hits if k in passing][:pool], passing
        # Filters may keep few memories: search among exactly those.
        return self.index.search_passing(vector, pool, filters, self.storage), {}
