"""Fit the calibration of recall's relevance score on the dev sets; prints the coefficients.

    python benchmarks/fit_relevance.py [--data FILE ...]

For every query of the dev sets it collects the candidates hybrid search produces (cosine to the
query, BM25 relative to the query's best) and whether each is a right answer. A class-balanced
logistic regression gives the shape; its bias is then moved so that the threshold 0.7 best
separates the two things a threshold is for: keeping the right answer of answerable queries and
returning nothing for the `negative` ones (most answers kept while at least 80% of the
negatives are rejected). Paste the
printed Calibration into src/mnemo/search.py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.model import subject_key
from mnemo.query import Filters
from mnemo.search import HYBRID, Calibration
from mnemo.words import search_terms
from recall_quality import AFTER_NEWEST, CATEGORY_MAP, end_of_day, load_haystack, parse_time

DEV = [Path(__file__).parents[2] / "shared" / "eval" / name for name in ("agent-memory-dev.json", "locomo-dev.json")]
THRESHOLD = 0.7
MIN_REJECTED = 0.8  # the share of negative queries that must come back empty at the threshold
POOL = 200


@dataclass
class Query:
    features: np.ndarray  # (candidates, 3): cosine, standout, relative BM25
    labels: np.ndarray  # (candidates,) 1 for a right answer
    negative: bool


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
                found = service.searcher.find(q["query"], search_terms(q["query"]), filters, POOL)
                relevant = {loaded.ids[r] for r in q["relevant"]}
                feats = np.array([[c.cosine or 0.0, c.standout, c.text] for c in found.candidates], dtype=np.float64)
                labels = np.array([c.memory_id in relevant for c in found.candidates], dtype=np.float64)
                out.append(Query(feats.reshape(-1, 3), labels, q["kind"] == "negative"))
            service.storage.close()
    return out


def fit(queries: list[Query]) -> tuple[float, float, float, float]:
    """Class-balanced logistic regression by Newton's method: bias and the three feature weights."""
    x = np.concatenate([q.features for q in queries])
    y = np.concatenate([q.labels for q in queries])
    x = np.hstack([np.ones((len(x), 1)), x])
    weight = np.where(y == 1, (y == 0).sum() / max((y == 1).sum(), 1), 1.0)
    beta = np.zeros(4)
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ beta))
        gradient = x.T @ (weight * (p - y))
        hessian = (x * (weight * p * (1 - p))[:, None]).T @ x + 1e-6 * np.eye(4)
        beta -= np.linalg.solve(hessian, gradient)
    return float(beta[0]), float(beta[1]), float(beta[2]), float(beta[3])


def shares(queries: list[Query], calibration: Calibration) -> tuple[float, float]:
    """(answerable queries whose best right answer clears the threshold, negatives with nothing above it)."""
    kept, rejected, answerable, negatives = 0, 0, 0, 0
    for q in queries:
        scores = [calibration.relevance(c, s, t) for c, s, t in q.features]
        if q.negative:
            negatives += 1
            rejected += max(scores, default=0.0) < THRESHOLD
        elif q.labels.any():
            answerable += 1
            kept += max((s for s, label in zip(scores, q.labels, strict=True) if label), default=0.0) >= THRESHOLD
    return kept / max(answerable, 1), rejected / max(negatives, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, nargs="*", default=DEV)
    args = parser.parse_args()
    queries = [q for path in args.data for q in collect(path)]
    bias, *weights = fit(queries)
    best = None
    for shift in np.linspace(-8, 8, 321):
        calibration = Calibration(round(bias + shift, 3), *(round(w, 3) for w in weights))
        kept, rejected = shares(queries, calibration)
        # Keep as many answers as possible while rejecting at least MIN_REJECTED of the negatives.
        score = (rejected >= MIN_REJECTED, kept, rejected)
        if best is None or score > best[0]:
            best = (score, calibration, kept, rejected)
    assert best is not None
    _, calibration, kept, rejected = best
    current = shares(queries, HYBRID)
    print(f"{len(queries)} queries, {sum(len(q.labels) for q in queries)} candidates")
    print(f"current {HYBRID}: answers kept {current[0]:.3f}, negatives rejected {current[1]:.3f}")
    print(f"fitted  {calibration}: answers kept {kept:.3f}, negatives rejected {rejected:.3f}")
    z = -math.log(1 / THRESHOLD - 1)
    print(f"relevance 0.7 needs bias + weights·features ≥ {z:.3f}")


if __name__ == "__main__":
    main()
