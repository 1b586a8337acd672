"""The category read-out: a small classifier fitted once per model to hand-written examples.

Its input for a memory is three views of it side by side: the model's vector of the memory (what
it is about and how it is said), which of the examples' words and word pairs it uses (a word seen
in at least VOCABULARY_MIN_COUNT examples: "remind", "allergic", "wants to", a leading "never"),
and the cue rules' score of each kind (``mnemo.search.enrich.rule_scores``), scaled by RULE_SCALE. A
softmax over the kinds, fitted by plain gradient descent to the hand-written examples the package
ships as data (``data/category_examples/``: ``prototypes.json``, full sentences; ``notes.json``,
sentences and terse notes; ``jottings.json``, terse notes; ``sentences.json``, full sentences over
ten more worlds; each file's ``about`` says how it was written), turns them into a log-probability
per kind. So how far the cue rules are trusted is learned from examples written apart from the
evaluation sets, not set by hand beside them.

Measured by benchmarks/recall_quality.py (category accuracy; the README has the history): on
agent-memory's dev set, which it was not fitted to but the cue rules were written beside, 0.870;
on the prose dev set 0.805; never tuned on, prose validation 0.759 and terse validation 0.631.
Fitting takes a few seconds and embeds the examples: ``mnemo setup`` does it beside the model
files, and the fit is kept (``cached``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.resources
import itertools
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from mnemo.embed import Embedder, Vectors
from mnemo.lazy import numpy as np

log = logging.getLogger(__name__)

# The sets of hand-written examples it is fitted to (1,159 in all), in this order: each a file
# data/category_examples/<set>.json, {"about": [lines], "examples": {kind: [sentence, ...]}}.
EXAMPLE_SETS = ("prototypes", "notes", "jottings", "sentences")
VOCABULARY_MIN_COUNT = 2  # a word seen in one example only says more about that example than its kind
# The rules' weights run to 2-3 (the word features are at most 1), and the rules were written beside
# agent-memory dev: trusted at 0.5 they placed dev 0.900 and the prose dev set 0.722; at 0.15 0.870
# and 0.805 (at 0.1 0.845 and 0.812, without them 0.760 and 0.797). Chosen on those two dev sets.
RULE_SCALE = 0.15
FIT_STEPS = 1000
FIT_STEP_SIZE = 2.0
FIT_L2 = 1e-3
FEATURES_VERSION = 1  # part of the kept fit's name: a change to the features below makes a new fit

_TOKEN = re.compile(r"[a-z]+|\d+")
_FIT_FILE = re.compile(r"category-readout-[0-9a-f]{16}\.npz")  # not another process's partial file
_MONTH = re.compile(r"^(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*$")


ExampleSet = dict[str, tuple[str, ...]]  # kind -> its examples, in the file's order


@functools.cache
def example_sets() -> tuple[ExampleSet, ...]:
    """The example sets of EXAMPLE_SETS, read once from the package's data files (not to be changed:
    the kept fit's name is a hash of them)."""
    folder = importlib.resources.files("mnemo.search") / "data" / "category_examples"
    documents = [json.loads((folder / f"{name}.json").read_text("utf-8")) for name in EXAMPLE_SETS]
    return tuple({kind: tuple(texts) for kind, texts in document["examples"].items()} for document in documents)


def word_features(text: str) -> set[str]:
    """The words and adjacent word pairs of a text, numbers as ``<n>`` and months as ``<m>``, and its
    first word marked (an opening imperative says "instruction")."""
    found = ["<n>" if w.isdigit() else "<m>" if _MONTH.match(w) else w for w in _TOKEN.findall(text.lower())]
    if not found:
        return set()
    return {f"^{found[0]}", *found, *(f"{a} {b}" for a, b in itertools.pairwise(found))}


def _fit_softmax(x: np.ndarray, labels: np.ndarray, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression by plain gradient descent: deterministic, no dependencies.

    On features of length about one the loss is smooth enough for a fixed step; a thousand steps settle it.
    """
    weights = np.zeros((x.shape[1], classes), dtype=np.float32)
    bias = np.zeros(classes, dtype=np.float32)
    target = np.eye(classes, dtype=np.float32)[labels]
    for _ in range(FIT_STEPS):
        logits = x @ weights + bias
        logits -= logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        gradient = (probabilities - target) / len(x)
        weights -= FIT_STEP_SIZE * (x.T @ gradient + FIT_L2 * weights)
        bias -= FIT_STEP_SIZE * gradient.sum(axis=0)
    return weights, bias


RuleScores = Callable[[str], Sequence[float]]  # a text's rule score per kind, in the read-out's order


class CategoryReadout:
    """Log-probabilities of the kinds for a memory's text and vector (see the module's docstring)."""

    def __init__(self, vocabulary: Sequence[str], weights: np.ndarray, bias: np.ndarray) -> None:
        self.vocabulary = {word: index for index, word in enumerate(vocabulary)}
        self.weights, self.bias = weights, bias
        self.dimension = weights.shape[0] - len(self.vocabulary) - bias.shape[0]  # the vectors'

    @staticmethod
    def examples(kinds: Sequence[str]) -> tuple[list[str], np.ndarray]:
        written = [
            (text, index) for index, kind in enumerate(kinds) for source in example_sets() for text in source[kind]
        ]
        return [text for text, _ in written], np.array([index for _, index in written])

    @classmethod
    def fit(cls, embedder: Embedder, kinds: Sequence[str], rules: RuleScores) -> CategoryReadout:
        texts, labels = cls.examples(kinds)
        counts = Counter(feature for text in texts for feature in word_features(text))
        vocabulary = sorted(word for word, count in counts.items() if count >= VOCABULARY_MIN_COUNT)
        unfitted = cls(vocabulary, np.zeros((0, 0), dtype=np.float32), np.zeros(len(kinds), dtype=np.float32))
        vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        x = np.vstack(
            [unfitted._features(text, vector, rules(text)) for text, vector in zip(texts, vectors, strict=True)]
        )
        return cls(vocabulary, *_fit_softmax(x, labels, len(kinds)))

    @classmethod
    def cached(
        cls, embedder: Embedder, kinds: Sequence[str], rules: RuleScores, rules_recipe: str, cache_dirs: Iterable[Path]
    ) -> CategoryReadout:
        """Fitted once per model, examples and rules (``rules_recipe`` names them), then read back from
        the first folder that has it.

        A fit made here is kept in the first folder that takes the file, whose older fits it replaces;
        if none takes it, it is still used.
        """
        folders = list(cache_dirs)
        recipe = json.dumps(
            [embedder.name, kinds, example_sets(), rules_recipe,
             FEATURES_VERSION, VOCABULARY_MIN_COUNT, RULE_SCALE, FIT_STEPS, FIT_STEP_SIZE, FIT_L2],
            sort_keys=True,
        )  # fmt: skip
        name = f"category-readout-{hashlib.sha256(recipe.encode()).hexdigest()[:16]}.npz"
        for folder in folders:
            if (folder / name).exists():
                with np.load(folder / name) as saved:
                    return cls(saved["vocabulary"].tolist(), saved["weights"], saved["bias"])
        log.info("fitting the category read-out to %s (once; `mnemo setup` does it ahead)", embedder.name)
        fitted = cls.fit(embedder, kinds, rules)
        for folder in folders:
            partial = folder / f"{name}.{os.getpid()}.tmp.npz"  # another process may write it too
            try:
                folder.mkdir(parents=True, exist_ok=True)
                vocabulary = np.array(list(fitted.vocabulary), dtype=str)
                np.savez(partial, vocabulary=vocabulary, weights=fitted.weights, bias=fitted.bias)
                os.replace(partial, folder / name)
                _remove_older_fits(folder, keep=name)
                break
            except OSError:  # a read-only folder (or no folder at all): try the next
                with contextlib.suppress(OSError):
                    partial.unlink(missing_ok=True)
        return fitted

    def _features(self, text: str, vector: Vectors, rule_row: Sequence[float]) -> np.ndarray:
        words = np.zeros(len(self.vocabulary), dtype=np.float32)
        found = [self.vocabulary[w] for w in word_features(text) if w in self.vocabulary]
        words[found] = 1.0 / max(len(found), 1) ** 0.5  # unit length, as the vector is
        scores = RULE_SCALE * np.asarray(rule_row, dtype=np.float32)
        return np.concatenate([np.asarray(vector, dtype=np.float32), words, scores])

    def log_probabilities(self, text: str, vector: Vectors, rule_row: Sequence[float]) -> np.ndarray:
        """Each kind's log-probability; ``rule_row``: the text's rule scores, in the read-out's order."""
        logits = self._features(text, vector, rule_row) @ self.weights + self.bias
        logits -= logits.max()
        return logits - np.log(np.exp(logits).sum())


def _remove_older_fits(folder: Path, keep: str) -> None:
    """Remove the fits of other examples or settings (an older mnemo's) from a model's folder: each
    change of them makes a new fit, and the old files would pile up there."""
    for stale in folder.iterdir():
        if stale.name != keep and _FIT_FILE.fullmatch(stale.name):
            with contextlib.suppress(OSError):
                stale.unlink()
