"""Fit the calibration of recall's relevance score on the dev sets; prints the coefficients.

    python benchmarks/fit_relevance.py [--data FILE ...]

For every query of the dev sets it collects the candidates hybrid search produces (cosine to the
query without the names of the subjects it asks about, BM25 relative to the query's best, the
share of those subjects the memory is not about, whether it was made in the time the query
names) and whether each is a right answer. For each fusion of a grid (the features' relative
weights), a class-balanced logistic regression on the fused score gives scale and bias, so
relevance reads as the probability of a right answer with answers and non-answers weighed
equally; relevance is that times search.OTHER_SUBJECT's doubt, and the fusion kept is the one whose
ranking by relevance gives the best R@5 summed over both sets. It also prints how many right
answers clear 0.7 and how many `negative` queries return nothing above it. Paste the printed
Calibration into src/mnemo/search/searcher.py: as HYBRID for the default model, or under the model's
name in CALIBRATIONS for another (MNEMO_MODEL=all-mpnet-base-v2 fits that model's).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from eval_data import EVAL_DIR_VARIABLE, dev_files, required_folder
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.engine.lists import SEARCH_MATCH
from mnemo.engine.recall import RECALL_POOL
from mnemo.model import subject_key
from mnemo.query import Filters
from mnemo.search.searcher import HYBRID, Calibration, calibration_for
from mnemo.search.words import search_terms
from recall_quality import AFTER_NEWEST, CATEGORY_MAP, end_of_day, load_haystack, parse_time

THRESHOLD = 0.7


@dataclass
class Query:
    features: np.ndarray  # (candidates, 4): cosine, relative BM25, subjects elsewhere, made when asked about
    labels: np.ndarray  # (candidates,) 1 for a right answer
    negative: bool
    relevant: int  # right answers the query has, found among the candidates or not


def collect(path: Path) -> list[Query]:
    data = json.loads(path.read_text())
    out: list[Query] = []
    for haystack in data["haystacks"]:
        memories = haystack["memories"]
        clock = ManualClock(min((parse_time(m["created_at"]) for m in memories), default=datetime.now(UTC)))
        with tempfile.TemporaryDirectory() as home:
            service = open_service(Settings(home=Path(home)), clock=clock)
            loaded = load_haystack(service, clock, memories)
            for q in haystack["queries"]:
                clock.set(end_of_day(q["as_of"]) if q.get("as_of") else loaded.newest + AFTER_NEWEST)
                f = q.get("filters") or {}
                filters = Filters(
                    now=clock.now(),
                    user_id=f.get("user_id"),
                    subject_key=subject_key(f["subject"]) if f.get("subject") else None,
                    categories=(CATEGORY_MAP.get(f["category"], f["category"]),) if f.get("category") else None,
                )
                found = service.searcher.find(q["query"], search_terms(q["query"]), filters, RECALL_POOL)
                relevant = {loaded.ids[r] for r in q["relevant"]}
                rows = [[c.cosine or 0.0, c.text, c.elsewhere, c.when] for c in found.candidates]
                feats = np.array(rows, dtype=np.float64)
                labels = np.array([c.memory_id in relevant for c in found.candidates], dtype=np.float64)
                out.append(Query(feats.reshape(-1, 4), labels, q["kind"] == "negative", len(relevant)))
            service.storage.close()
    return out


def recall_at_5(queries: list[Query], calibration: Calibration) -> float:
    found = []
    for q in queries:
        if q.negative or not q.relevant:
            continue
        top = np.argsort(-calibration.relevance(q.features), kind="stable")[:5]
        found.append(q.labels[top].sum() / q.relevant)
    return float(np.mean(found))


def calibrated(queries: list[Query], direction: np.ndarray) -> Calibration:
    bias, scale = fit_scale(queries, direction)
    return Calibration(round(bias, 3), *(round(float(scale * w), 3) for w in direction))


def best_fit(sets: list[list[Query]]) -> Calibration:
    """The calibrated fusion (cosine 1) whose ranking gives the best R@5, summed over the data sets."""
    queries = [q for queries in sets for q in queries]
    grid = [
        np.array([1.0, t, e, w])
        for t in (0.0, 0.1, 0.2, 0.3, 0.4)
        for e in (0.0, -0.05, -0.1, -0.2)
        for w in (0.0, 0.1, 0.2, 0.3)
    ]
    fits = [calibrated(queries, direction) for direction in grid]
    return max(fits, key=lambda fit: sum(recall_at_5(queries, fit) for queries in sets))


def fit_scale(queries: list[Query], direction: np.ndarray) -> tuple[float, float]:
    """Class-balanced logistic regression on the one fused score: (bias, scale), by Newton's method."""
    score = np.concatenate([q.features @ direction for q in queries])
    y = np.concatenate([q.labels for q in queries])
    x = np.stack([np.ones_like(score), score], axis=1)
    weight = np.where(y == 1, (y == 0).sum() / max((y == 1).sum(), 1), 1.0)
    beta = np.zeros(2)
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ beta))
        gradient = x.T @ (weight * (p - y))
        hessian = (x * (weight * p * (1 - p))[:, None]).T @ x + 1e-6 * np.eye(2)
        beta -= np.linalg.solve(hessian, gradient)
    return float(beta[0]), float(beta[1])


def shares(queries: list[Query], calibration: Calibration) -> tuple[float, float]:
    """(answerable queries whose best right answer clears 0.7, negatives with nothing above it)."""
    kept, rejected, answerable, negatives = 0, 0, 0, 0
    for q in queries:
        scores = calibration.relevance(q.features)
        if q.negative:
            negatives += 1
            rejected += max(scores, default=0.0) < THRESHOLD
        elif q.labels.any():
            answerable += 1
            kept += max((s for s, label in zip(scores, q.labels, strict=True) if label), default=0.0) >= THRESHOLD
    return kept / max(answerable, 1), rejected / max(negatives, 1)


def matches(queries: list[Query], calibration: Calibration, threshold: float) -> tuple[float, float]:
    """(right answers with at least this relevance, mean candidates per query with at least it)."""
    scores = [calibration.relevance(q.features) for q in queries]
    found = sum(int((s[q.labels == 1] >= threshold).sum()) for s, q in zip(scores, queries, strict=True))
    answers = sum(int(q.labels.sum()) for q in queries)
    return found / max(answers, 1), float(np.mean([(s >= threshold).sum() for s in scores]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", type=Path, nargs="*", default=None,
        help=f"eval files (default: the dev sets in ${EVAL_DIR_VARIABLE})",
    )  # fmt: skip
    args = parser.parse_args()
    args.data = args.data or dev_files(required_folder(parser, None))
    sets = [collect(path) for path in args.data]
    queries = [q for queries in sets for q in queries]
    fitted = best_fit(sets)
    print(f"{len(queries)} queries, {sum(len(q.labels) for q in queries)} candidates")
    settings = Settings()
    current = calibration_for(settings.model) if settings.embedder == "local" else HYBRID
    print(f"model: {settings.model if settings.embedder == 'local' else settings.embedder}")
    for label, calibration in (("current", current), ("fitted", fitted)):
        print(f"{label} {calibration}")
        for name, queries_of_set in zip(args.data, sets, strict=True):
            kept, rejected = shares(queries_of_set, calibration)
            found, matched = matches(queries_of_set, calibration, SEARCH_MATCH)
            print(
                f"  {name.name}: R@5 of the ranking by relevance {recall_at_5(queries_of_set, calibration):.3f};"
                f" at 0.7 the right answer of {kept:.3f} of the queries, negatives rejected {rejected:.3f};"
                f" at {SEARCH_MATCH} (a search's match) {found:.3f} of right answers, {matched:.1f} matches a query"
            )
    # Without a model only the words' candidates exist: their BM25 speaks, and the named subjects.
    with_words = [
        Query(q.features[q.features[:, 1] > 0] * [0, 1, 1, 0], q.labels[q.features[:, 1] > 0], q.negative, q.relevant)
        for q in queries
    ]
    words_only = calibrated(with_words, np.array([0.0, 1.0, 0.0, 0.0]))
    kept, rejected = shares(with_words, words_only)
    print(f"words only {words_only}: answers kept at 0.7 {kept:.3f}, negatives rejected {rejected:.3f}")


if __name__ == "__main__":
    main()
