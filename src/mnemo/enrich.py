"""What mnemo works out about a memory the caller did not say: category, tags, importance.

Rules over the memory's words, cheap enough to run on every store. Each category has cue words
and phrases; the category with the most cue weight wins, and text with no cue is ``fact`` when it
states something about someone, ``custom`` otherwise.
"""

from __future__ import annotations

import re
from collections import Counter

from mnemo.embed import Embedder, Vectors
from mnemo.model import Category
from mnemo.words import STOPWORDS, words

_CUES: dict[Category, tuple[str, ...]] = {
    Category.PREFERENCE: (
        "prefer", "prefers", "preferred", "preference", "like", "likes", "love", "loves", "enjoy",
        "enjoys", "favorite", "favourite", "dislike", "dislikes", "hate", "hates", "rather",
        "fan of", "wants", "would like",
    ),
    Category.INSTRUCTION: (
        "always", "never", "must", "should", "don't", "do not", "make sure", "remember to",
        "please", "use", "avoid", "instead of", "ensure", "required", "rule",
    ),
    Category.RELATIONSHIP: (
        "wife", "husband", "partner", "daughter", "son", "mother", "father", "mom", "dad",
        "sister", "brother", "friend", "colleague", "manager", "boss", "married", "family",
        "cousin", "aunt", "uncle", "grandmother", "grandfather", "team", "reports to", "works with",
    ),
    Category.SKILL: (
        "knows", "can", "skilled", "expert", "experienced", "proficient", "fluent", "learning",
        "learned", "learnt", "speaks", "plays", "certified", "good at", "years of experience",
    ),
    Category.GOAL: (
        "goal", "goals", "plan", "plans", "planning", "wants to", "hopes", "aim", "aims",
        "trying to", "intends", "target", "deadline", "by next", "dream", "objective",
    ),
    Category.EVENT: (
        "yesterday", "today", "tomorrow", "last week", "last month", "next week", "meeting",
        "happened", "attended", "went", "visited", "appointment", "birthday", "anniversary",
        "conference", "trip", "party", "on monday", "on tuesday", "on wednesday", "on thursday",
        "on friday", "on saturday", "on sunday",
    ),
    Category.CONTEXT: (
        "currently", "working on", "right now", "this week", "project", "session", "status",
        "in progress", "context", "background", "at the moment",
    ),
    Category.FACT: (
        "is", "are", "was", "has", "lives", "born", "works", "allergic", "intolerant", "age",
        "owns", "located", "uses", "runs",
    ),
}  # fmt: skip

# Verbs and nouns that carry more weight than a bare cue.
_STRONG = {"prefer", "prefers", "always", "never", "must", "goal", "allergic", "intolerant", "favorite"}

_IMPORTANT = re.compile(
    r"\b(allerg\w*|intoleran\w*|never|always|must|critical|important|urgent|password|deadline|"
    r"medical|medication|emergency|security|do not|don't)\b",
    re.IGNORECASE,
)


def _cue_weights(text: str) -> Counter[Category]:
    lowered = " " + " ".join(words(text)) + " "
    weights: Counter[Category] = Counter()
    for category, cues in _CUES.items():
        for cue in cues:
            hits = lowered.count(f" {cue} ")
            if hits:
                # Generic verbs of FACT weigh less than the specific cues of other categories.
                base = 0.5 if category is Category.FACT else 1.0
                weights[category] += hits * base * (2.0 if cue in _STRONG else 1.0)
    return weights


def detect_category(text: str) -> Category:
    weights = _cue_weights(text)
    if not weights:
        return Category.CUSTOM
    return weights.most_common(1)[0][0]


class CategoryDetector:
    """Detects a memory's category from its words and, when there is one, its vector."""

    def __init__(self, embedder: Embedder | None) -> None:
        self.embedder = embedder

    def detect(self, text: str, vector: Vectors | None = None) -> Category:
        return detect_category(text)


def auto_tags(text: str, given: tuple[str, ...] = (), limit: int = 5) -> list[str]:
    """The most frequent content words (longest first among equals), not already a given tag."""
    taken = {t.casefold() for t in given}
    counts = Counter(w for w in words(text) if len(w) > 2 and w not in STOPWORDS and not w.isdigit() and w not in taken)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], -len(item[0]), item[0]))
    return [word for word, _ in ranked[:limit]]


def estimate_importance(text: str, category: Category) -> float:
    """0.5, raised by signs that forgetting would hurt (health, hard rules, deadlines)."""
    base = {
        Category.INSTRUCTION: 0.6,
        Category.PREFERENCE: 0.55,
        Category.GOAL: 0.6,
        Category.RELATIONSHIP: 0.55,
        Category.EVENT: 0.45,
        Category.CONTEXT: 0.4,
    }.get(category, 0.5)
    boost = 0.15 * len(_IMPORTANT.findall(text))
    return round(min(1.0, base + boost), 2)
