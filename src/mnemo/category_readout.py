"""The prototype vote of category detection: a softmax read-out fitted to the prototypes' vectors.

Its own module so that numpy loads with the model (on first use or a server's warm-up), not with
``mnemo.enrich``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mnemo.category_prototypes import PROTOTYPES
from mnemo.enrich import KINDS

if TYPE_CHECKING:
    from mnemo.embed import Embedder, Vectors

FIT_STEPS = 500
FIT_STEP_SIZE = 2.0
FIT_L2 = 1e-3


def _fit_softmax(x: np.ndarray, labels: np.ndarray, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression by plain gradient descent: deterministic, no dependencies.

    On unit vectors the loss is smooth enough for a fixed step; a few hundred steps settle it.
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


class Readout:
    """A softmax read-out of the embedding space, fitted to the prototype sentences' vectors.

    Against a plain nearest-prototype vote (mean cosine to each kind's nearest examples), the
    fitted read-out weighs the directions that tell the kinds apart over those that tell topics
    apart (the prototypes share topics across kinds on purpose), and it generalises better.
    """

    def __init__(self, weights: np.ndarray, bias: np.ndarray) -> None:
        self.weights, self.bias = weights, bias
        self.dimension = weights.shape[0]

    @classmethod
    def fit(cls, embedder: Embedder) -> Readout:
        texts = [text for kind in KINDS for text in PROTOTYPES[kind]]
        labels = np.array([index for index, kind in enumerate(KINDS) for _ in PROTOTYPES[kind]])
        vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        return cls(*_fit_softmax(vectors, labels, len(KINDS)))

    @classmethod
    def cached(cls, embedder: Embedder, cache_dir: Path | None) -> Readout:
        """Fitted once per model and prototype set, then read back (embedding 245 texts takes ~0.5 s)."""
        if cache_dir is None:
            return cls.fit(embedder)
        recipe = json.dumps([embedder.name, PROTOTYPES, FIT_STEPS, FIT_STEP_SIZE, FIT_L2], sort_keys=True)
        path = cache_dir / f"category-readout-{hashlib.sha256(recipe.encode()).hexdigest()[:16]}.npz"
        if path.exists():
            with np.load(path) as saved:
                return cls(saved["weights"], saved["bias"])
        fitted = cls.fit(embedder)
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp.npz")  # another process may write it too
        np.savez(partial, weights=fitted.weights, bias=fitted.bias)
        os.replace(partial, path)
        return fitted

    def log_probabilities(self, vector: Vectors) -> np.ndarray:
        logits = np.asarray(vector, dtype=np.float32) @ self.weights + self.bias
        logits -= logits.max()
        return logits - np.log(np.exp(logits).sum())
