"""How similar memories must be to be consolidated: the threshold behind consolidate_memories' 409.

    python benchmarks/consolidation_threshold.py [--data DIR]

A set of memories is consolidated only when each of them has a cosine of at least the threshold
with one of the others (``lifecycle.consolidate.MIN_RELATEDNESS``): one memory about something
else makes the set "too dissimilar". Related sets come from the eval sets (``--data DIR`` or
``MNEMO_EVAL_DIR``): the
memories that together answer one question (several relevant ids), and the old and new fact of a
current-state question (``prefer_newest``). Unrelated sets are random pairs of one user's
memories in the same haystack. Prints, per threshold, the share of related sets accepted and of
unrelated pairs refused. Needs `mnemo setup`.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from eval_data import add_data_folder, dev_files, required_folder
from mnemo.embed.local import LocalEmbedder
from mnemo.lifecycle.consolidate import MIN_RELATEDNESS

THRESHOLDS = sorted({0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, MIN_RELATEDNESS})
UNRELATED_PER_HAYSTACK = 200


def weakest_link(vectors: np.ndarray) -> float:
    """The lowest, over the memories, of each one's best cosine with another of the set."""
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1.0)
    return float(similarity.max(axis=1).min())


def sets_of(data: Path, embedder: LocalEmbedder) -> tuple[list[float], list[float]]:
    related: list[float] = []
    unrelated: list[float] = []
    rng = random.Random(7)
    for path in dev_files(data):
        for haystack in json.loads(path.read_text())["haystacks"]:
            memories = haystack["memories"]
            index = {m["id"]: i for i, m in enumerate(memories)}
            vectors = embedder.embed_documents([m["content"] for m in memories])
            for query in haystack["queries"]:
                ids = [index[i] for i in query["relevant"] if i in index]
                if len(ids) >= 2 and (query.get("prefer_newest") or query["kind"] in ("multi", "multi-hop")):
                    related.append(weakest_link(vectors[ids]))
            users: dict[str, list[int]] = {}
            for i, m in enumerate(memories):
                users.setdefault(m.get("user_id") or "", []).append(i)
            for members in users.values():
                for _ in range(UNRELATED_PER_HAYSTACK if len(members) > 1 else 0):
                    pair = rng.sample(members, 2)
                    unrelated.append(weakest_link(vectors[pair]))
    return related, unrelated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_folder(parser)
    args = parser.parse_args()
    related, unrelated = sets_of(required_folder(parser, args.data), LocalEmbedder())
    print(f"{len(related)} related sets (several memories answering one question), {len(unrelated)} random pairs")
    print(f"related weakest link p5 {np.percentile(related, 5):.3f}, p50 {np.median(related):.3f}; "
          f"random pairs p50 {np.median(unrelated):.3f}, p95 {np.percentile(unrelated, 95):.3f}\n")  # fmt: skip
    print("| threshold | related sets accepted | random pairs refused |\n| ---: | ---: | ---: |")
    for t in THRESHOLDS:
        mark = " (mnemo)" if t == MIN_RELATEDNESS else ""
        print(f"| {t:.2f}{mark} | {np.mean(np.array(related) >= t):.3f} | {np.mean(np.array(unrelated) < t):.3f} |")


if __name__ == "__main__":
    main()
