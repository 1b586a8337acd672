"""How often the near-duplicate check refuses a distinct fact, and how often it catches a rewrite.

    python benchmarks/near_duplicates.py [--data DIR]

Three measurements, each printed as a table:

1. ``benchmarks/fact_pairs.py``'s pairs, its dev set and its validation set apart: distinct facts
   that differ in one slot (a false merge is one refused as a duplicate of the other) and light
   rewrites of a fact (caught when refused). mnemo refuses a memory when its normalised text equals
   a stored one's, or when its cosine reaches the threshold and ``same_fact.difference`` finds no
   word that tells the two apart; the old rule (cosine and the same numbers) is shown beside it.
2. The eval sets' memories (``--data`` or ``MNEMO_EVAL_DIR``: the folder of agent-memory-dev.json and locomo-dev.json;
   every memory there is a distinct fact): the share whose nearest other memory of the same user
   would be refused.

Needs `mnemo setup` (the local model).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from eval_data import add_data_folder, data_folder, dev_files
from fact_pairs import DEV, VALIDATION, Pair, pairs
from mnemo.embed.local import LocalEmbedder
from mnemo.model import normalise_text
from mnemo.search.same_fact import difference
from mnemo.search.twins import NEAR_DUPLICATE

THRESHOLDS = tuple(sorted({0.90, 0.92, 0.94, 0.95, 0.97, NEAR_DUPLICATE}))
OLD_THRESHOLD = 0.95  # the rule before same_fact: this cosine and the same numbers


def numbers_in(text: str) -> list[str]:
    return sorted(re.findall(r"\d+(?:[.,:]\d+)*", text))


def cosines(embedder: LocalEmbedder, items: list[Pair]) -> np.ndarray:
    first = embedder.embed_documents([p.first for p in items])
    second = embedder.embed_documents([p.second for p in items])
    return np.einsum("ij,ij->i", first, second)


def refused(pair: Pair, cosine: float, threshold: float, rule: str) -> bool:
    if normalise_text(pair.first) == normalise_text(pair.second):
        return True
    if cosine < threshold:
        return False
    if rule == "old":
        return numbers_in(pair.first) == numbers_in(pair.second)
    return difference(pair.first, pair.second) is None


def pair_table(title: str, items: list[Pair], cos: np.ndarray) -> None:
    by_kind: dict[tuple[bool, str], list[int]] = defaultdict(list)
    for i, pair in enumerate(items):
        by_kind[(pair.distinct, pair.kind)].append(i)
    columns = [(t, "new") for t in THRESHOLDS] + [(OLD_THRESHOLD, "old")]
    header = " | ".join(f"{t:.2f}{' old rule' if rule == 'old' else ''}" for t, rule in columns)
    print(f"\n### {title}\n\n| pairs | kind | n | cosine p50 / max | {header} |")
    print("| --- | --- | ---: | ---: |" + " ---: |" * len(columns))
    for distinct in (True, False):
        label = "distinct: refused (false merges)" if distinct else "rewrites: caught"
        kinds = sorted(k for d, k in by_kind if d is distinct)
        for kind in [*kinds, "all"]:
            idx = [i for k in kinds for i in by_kind[(distinct, k)]] if kind == "all" else by_kind[(distinct, kind)]
            shares = [np.mean([refused(items[i], cos[i], t, rule) for i in idx]) for t, rule in columns]
            cells = " | ".join(f"{s:.3f}" for s in shares)
            spread = f"{np.median(cos[idx]):.3f} / {np.max(cos[idx]):.3f}"
            print(f"| {label} | {kind} | {len(idx)} | {spread} | {cells} |")


def eval_memories(data: Path, embedder: LocalEmbedder) -> None:
    flagged: dict[float, int] = dict.fromkeys(THRESHOLDS, 0)
    total = 0
    for path in dev_files(data):
        for haystack in json.loads(path.read_text())["haystacks"]:
            memories = [m["content"] for m in haystack["memories"]]
            users = np.array([m.get("user_id") or "" for m in haystack["memories"]])
            vectors = embedder.embed_documents(memories)
            similarity = vectors @ vectors.T
            np.fill_diagonal(similarity, -1.0)
            similarity[users[:, None] != users[None, :]] = -1.0
            total += len(memories)
            for i, row in enumerate(similarity):
                for t in THRESHOLDS:
                    close = np.flatnonzero(row >= t)
                    if any(difference(memories[i], memories[j]) is None for j in close):
                        flagged[t] += 1
    print(f"\n### The eval sets' {total:,} memories (all distinct facts): share refused as a near-duplicate\n")
    print("| threshold | " + " | ".join(f"{t:.2f}" for t in THRESHOLDS) + " |")
    print("| --- |" + " ---: |" * len(THRESHOLDS))
    print("| refused | " + " | ".join(f"{flagged[t] / total:.4f}" for t in THRESHOLDS) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_folder(parser)
    args = parser.parse_args()
    embedder = LocalEmbedder()
    for title, templates in (("fact_pairs DEV", DEV), ("fact_pairs VALIDATION (never tuned on)", VALIDATION)):
        items = pairs(templates)
        pair_table(f"{title}: {len(items):,} pairs", items, cosines(embedder, items))
    folder = data_folder(args.data)
    if folder is None:
        print("\n(no eval folder given: --data DIR or MNEMO_EVAL_DIR; the eval sets' part is left out)")
    else:
        eval_memories(folder, embedder)
    print(f"\nmnemo's setting: threshold {NEAR_DUPLICATE} with same_fact.difference.")


if __name__ == "__main__":
    main()
