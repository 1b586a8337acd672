"""Measure the cosine threshold for near-duplicate memories on the dev sets; prints a table.

    python benchmarks/near_duplicates.py

Two sides: how close a memory's nearest *other* memory of the same user is (every memory in the
dev sets is a distinct fact, so anything above the threshold is a false alarm; memories whose
numbers differ are never compared, as in mnemo), and how close
light rewrites of a memory (a prefix, lower case, a trailing aside, "User" → "The user") stay to
the original (they should be caught). Needs `mnemo setup`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from mnemo.embed.local import LocalEmbedder
from mnemo.search import numbers_in

EVAL = Path(__file__).parents[2] / "shared" / "eval"
THRESHOLDS = (0.90, 0.92, 0.94, 0.95, 0.96, 0.98)


def nearest_other(memories: list[dict]) -> np.ndarray:
    embedder = LocalEmbedder()
    vectors = embedder.embed_documents([m["content"] for m in memories])
    similarity = vectors @ vectors.T
    users = np.array([m.get("user_id") or "" for m in memories])
    texts = np.array([m["content"].strip().casefold() for m in memories])
    numbers = np.array([" ".join(numbers_in(m["content"])) for m in memories])
    comparable = (users[:, None] == users[None, :]) & (texts[:, None] != texts[None, :])
    comparable &= numbers[:, None] == numbers[None, :]  # mnemo never calls facts with other numbers twins
    similarity[~comparable] = -1.0
    best = similarity.max(axis=1)
    return best[best > -1.0]


def rewrites(text: str) -> list[str]:
    base = text.rstrip(".")
    return [f"Note: {base}.", base.lower(), f"{base} (as mentioned before)", re.sub(r"\bUser\b", "The user", base)]


def rewrite_similarity(memories: list[dict]) -> np.ndarray:
    embedder = LocalEmbedder()
    originals = embedder.embed_documents([m["content"] for m in memories])
    out = [embedder.embed_documents(rewrites(m["content"])) @ originals[i] for i, m in enumerate(memories)]
    return np.concatenate(out)


def main() -> None:
    distinct = []
    for name in ("agent-memory-dev.json", "locomo-dev.json"):
        for haystack in json.loads((EVAL / name).read_text())["haystacks"]:
            distinct.append(nearest_other(haystack["memories"]))
    others = np.concatenate(distinct)
    agent = json.loads((EVAL / "agent-memory-dev.json").read_text())["haystacks"][0]["memories"]
    rewritten = rewrite_similarity(agent)
    print(f"{len(others):,} distinct memories; {len(rewritten):,} rewrites of {len(agent)} agent-memory memories")
    print(f"nearest other memory, cosine p50 {np.median(others):.3f}, p99 {np.percentile(others, 99):.3f}")
    print(f"rewrite to original, cosine p5 {np.percentile(rewritten, 5):.3f}, p50 {np.median(rewritten):.3f}\n")
    print("| threshold | distinct memories flagged | rewrites caught |\n| ---: | ---: | ---: |")
    for t in THRESHOLDS:
        print(f"| {t:.2f} | {np.mean(others >= t):.4f} | {np.mean(rewritten >= t):.3f} |")


if __name__ == "__main__":
    main()
