"""What mnemo works out about a memory by itself: its category, its auto tags, its importance.

Category detection is tested twice: by its cue rules alone (a store without a model) and with the
local model's vectors, whose prototype vote must keep the clear cases and place memories that carry
no cue word. The sentences here are written for these tests, not taken from any evaluation set.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.embed import Vectors
from mnemo.embed.fake import FakeEmbedder
from mnemo.embed.local import LocalEmbedder
from mnemo.errors import EmbeddingError
from mnemo.model import Category
from mnemo.search import enrich
from mnemo.search.enrich import CategoryDetector, auto_tags, estimate_importance

FACT, PREFERENCE, INSTRUCTION = Category.FACT, Category.PREFERENCE, Category.INSTRUCTION
CONTEXT, RELATIONSHIP, SKILL = Category.CONTEXT, Category.RELATIONSHIP, Category.SKILL
GOAL, EVENT, CUSTOM = Category.GOAL, Category.EVENT, Category.CUSTOM
rules_alone = CategoryDetector(None).detect  # what a store without an embedding model gets

# Memories whose words say their kind; the rules alone must place them, and the model must agree.
CLEAR = [
    (FACT, "Mira works as a radiographer at the county hospital."),
    (FACT, "The shop's Wi-Fi router is in the back office."),
    (PREFERENCE, "Mira prefers window seats on trains."),
    (PREFERENCE, "The user hates being called by his surname."),
    (INSTRUCTION, "Always answer Mira in French."),
    (INSTRUCTION, "When planning the user's trips, book hotels near a station."),
    (INSTRUCTION, "Remind the user to renew the parking permit each January."),
    (CONTEXT, "The user is currently preparing for a move to Oslo."),
    (CONTEXT, "Mira is on parental leave until April."),
    (RELATIONSHIP, "Jonah is Mira's younger brother."),
    (RELATIONSHIP, "The user's manager is Beatriz Costa."),
    (SKILL, "Mira speaks Greek fluently."),
    (SKILL, "The user is an experienced woodworker."),
    (GOAL, "Mira wants to climb Kilimanjaro next year."),
    (GOAL, "The user plans to learn the cello."),
    (EVENT, "The user sprained her ankle at the gym yesterday."),
    (EVENT, "Mira gave a talk at the Lisbon design meetup on 12 March 2025."),
]
# Restrictions (memento's category: allergies, diets, limits) are filed under instruction.
RESTRICTIONS = [
    "Mira is allergic to kiwi.",
    "The user can't eat anything fried after his gallbladder surgery.",
    "No more than two hours of video games on weekdays for the twins.",
    "Mira is vegan.",
    "The renovation budget is capped at 30,000 euros.",
]
# Memories without a cue word for their kind: the rules miss them, the model's vote places them.
UNCUED = [
    (PREFERENCE, "The user finds podcasts more relaxing than audiobooks."),
    (CONTEXT, "Theo has exams all of next week and is nervous."),
    (RELATIONSHIP, "The user and Carlos play in the same band."),
    (EVENT, "Nadia defended her thesis in March."),
    (SKILL, "Nadia picks up new programming languages in a weekend."),
    (INSTRUCTION, "Reports for the board go out as a single PDF with a one-page summary on top."),
]


# -- rules alone -------------------------------------------------------------------------------
@pytest.mark.parametrize(("expected", "text"), CLEAR)
def test_the_rules_alone_place_a_memory_whose_words_say_its_kind(expected: Category, text: str):
    assert rules_alone(text) == expected


@pytest.mark.parametrize("text", RESTRICTIONS)
def test_allergies_diets_and_limits_are_restrictions_filed_as_instructions(text: str):
    assert enrich.RESTRICTION_FILED_AS == INSTRUCTION
    assert max(enrich.rule_scores(text).items(), key=lambda item: item[1])[0] == enrich.RESTRICTION
    assert rules_alone(text) == INSTRUCTION


def test_wanting_to_do_something_is_a_goal_but_wanting_a_thing_is_a_preference():
    assert rules_alone("Mira wants to run the Berlin marathon.") == GOAL
    assert rules_alone("Mira wants a standing desk.") == PREFERENCE


def test_a_birthday_with_its_date_is_a_fact_and_a_dated_outing_is_an_event():
    assert rules_alone("Mira's birthday is 4 June.") == FACT
    assert rules_alone("Mira went to the Berlin zoo on 4 June 2024.") == EVENT


def test_a_sentence_no_cue_claims_is_a_fact():
    assert rules_alone("The blue bike in the garage has a flat tyre.") == FACT
    assert rules_alone("The spare key is under the third flowerpot.") == FACT


@pytest.mark.parametrize("text", ["zxq", "42", "", "kubernetes helm charts", "lorem ipsum dolor sit amet"])
def test_text_that_is_no_sentence_and_has_no_cue_is_custom(text: str):
    assert rules_alone(text) == CUSTOM
    assert CategoryDetector(FakeEmbedder()).detect(text, FakeEmbedder().embed_query(text or "x")) == CUSTOM


def test_the_kind_of_a_long_memory_is_read_from_its_opening():
    opening = "The spare key is under the third flowerpot. "
    assert rules_alone(opening + "x " * enrich.RULE_CHARS + "Mira prefers tea.") == FACT


# -- the prototype vote, mechanics (a fake model) ----------------------------------------------
class CountingEmbedder(FakeEmbedder):
    def __init__(self, failures: int = 0) -> None:
        super().__init__()
        self.calls = 0
        self.failures = failures

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        if self.calls <= self.failures:
            raise EmbeddingError("model unavailable")
        return super().embed_documents(texts)


def test_the_prototypes_are_embedded_once_and_only_when_a_vector_comes():
    embedder = CountingEmbedder()
    detector = CategoryDetector(embedder)
    detector.detect("Mira prefers window seats on trains.")
    assert embedder.calls == 0
    for text in ("Mira prefers window seats on trains.", "Jonah is Mira's younger brother."):
        detector.detect(text, embedder.embed_query(text))
    assert embedder.calls == 1 + 2  # the prototypes once, and the two memories embedded above


def test_a_model_failing_on_the_prototypes_leaves_the_rules_to_decide_and_is_tried_again():
    embedder = CountingEmbedder(failures=1)
    detector = CategoryDetector(embedder)
    vector = np.ones(embedder.dimension, dtype=np.float32) / np.sqrt(embedder.dimension)
    assert detector.detect("Mira speaks Greek fluently.", vector) == SKILL
    assert embedder.calls == 1
    detector.detect("Mira speaks Greek fluently.", vector)
    assert embedder.calls == 2  # tried again, and this time the prototypes are in
    detector.detect("Mira speaks Greek fluently.", vector)
    assert embedder.calls == 2


def test_a_vector_of_another_dimension_is_left_out_of_the_vote():
    detector = CategoryDetector(FakeEmbedder(dimension=64))
    other = FakeEmbedder(dimension=32).embed_query("Mira is on parental leave until April.")
    text = "Mira is on parental leave until April."
    assert detector.scores(text, other) == enrich.rule_scores(text)


# -- the prototype vote with the local model ---------------------------------------------------
@pytest.fixture(scope="module")
def model(installed_model: Path) -> LocalEmbedder:
    return LocalEmbedder(installed_model)


@pytest.fixture(scope="module")
def detector(model: LocalEmbedder) -> CategoryDetector:
    detector = CategoryDetector(model)
    detector.load()
    return detector


def _detect_all(detector: CategoryDetector, model: LocalEmbedder, texts: list[str]) -> list[Category]:
    return [detector.detect(text, vector) for text, vector in zip(texts, model.embed_documents(texts), strict=True)]


def test_with_the_model_a_memory_whose_words_say_its_kind_keeps_it(detector: CategoryDetector, model: LocalEmbedder):
    expected = [category for category, _ in CLEAR] + [INSTRUCTION] * len(RESTRICTIONS)
    texts = [text for _, text in CLEAR] + RESTRICTIONS
    assert _detect_all(detector, model, texts) == expected


def test_with_the_model_a_memory_without_cue_words_finds_its_kind(detector: CategoryDetector, model: LocalEmbedder):
    texts = [text for _, text in UNCUED]
    assert [rules_alone(text) for text in texts] == [FACT] * len(UNCUED)  # the rules alone miss them all
    assert _detect_all(detector, model, texts) == [category for category, _ in UNCUED]


def test_a_store_with_the_model_files_a_memory_the_rules_alone_would_call_a_fact(
    tmp_path: Path, clock: ManualClock, model: LocalEmbedder
):
    with_model = open_service(Settings(home=tmp_path / "model"), clock=clock, embedder=model)
    words_only = open_service(Settings(home=tmp_path / "words", embedder="none"), clock=clock)
    try:
        text = "Nadia defended her thesis in March."
        assert with_model.store(text).memory.category == EVENT
        assert words_only.store(text).memory.category == FACT
    finally:
        with_model.storage.close()
        words_only.storage.close()


# -- tags and importance -----------------------------------------------------------------------
def test_auto_tags_leave_out_words_that_only_say_what_kind_of_memory_it_is():
    tags = auto_tags("The user wants a standing desk; the user loves standing desks.")
    assert not {"user", "wants", "loves"} & set(tags)
    assert "standing" in tags


def test_a_possessive_is_tagged_as_its_owner():
    assert auto_tags("Emma's piano teacher comes on Emma's birthday")[0] == "emma"


def test_importance_rises_for_allergies_and_hard_rules():
    allergy = estimate_importance("Mira is allergic to kiwi.", INSTRUCTION)
    rule = estimate_importance("Never share the door code.", INSTRUCTION)
    taste = estimate_importance("Mira likes kiwi.", PREFERENCE)
    assert allergy > taste
    assert rule > taste


def test_the_fitted_readout_is_kept_so_a_second_process_embeds_no_prototypes(tmp_path: Path) -> None:
    from mnemo.embed.fake import FakeEmbedder

    class Counting(FakeEmbedder):
        calls = 0

        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            Counting.calls += 1
            return super().embed_documents(texts)

    first = enrich.CategoryDetector(Counting(), cache_dirs=[tmp_path])
    first.load()
    assert Counting.calls == 1
    second = enrich.CategoryDetector(Counting(), cache_dirs=[tmp_path])
    second.load()
    assert Counting.calls == 1
    vector = FakeEmbedder().embed_query("Emma loves strawberries")
    assert first.detect("Emma loves strawberries", vector) == second.detect("Emma loves strawberries", vector)


def test_the_readout_is_read_from_any_folder_and_kept_in_the_first_that_takes_it(tmp_path: Path) -> None:
    from mnemo.embed.fake import FakeEmbedder

    shipped, home = tmp_path / "model", tmp_path / "home"
    shipped.write_text("a file where a folder should be: nothing can be kept in it")
    enrich.CategoryDetector(FakeEmbedder(), [shipped, home]).load()
    kept = list(home.glob("category-readout-*.npz"))
    assert len(kept) == 1
    assert enrich.CategoryDetector(FakeEmbedder(), [tmp_path / "elsewhere", home]).load()
    assert not (tmp_path / "elsewhere").exists()  # read back from home: nothing fitted, nothing written


def test_a_new_readout_fit_removes_older_fits_but_not_files_being_written(tmp_path: Path) -> None:
    from mnemo.embed.fake import FakeEmbedder

    older = tmp_path / "category-readout-0123456789abcdef.npz"
    partial = tmp_path / "category-readout-fedcba9876543210.npz.4242.tmp.npz"  # another process's
    for path in (older, partial, tmp_path / "model.onnx"):
        path.write_bytes(b"x")
    enrich.CategoryDetector(FakeEmbedder(), [tmp_path]).load()
    kept = sorted(path.name for path in tmp_path.iterdir())
    assert not older.exists()
    assert partial.name in kept and "model.onnx" in kept
    assert len([name for name in kept if name.endswith(".npz") and ".tmp." not in name]) == 1
