"""Build an eval set (the format of README.md's "Evaluation data") from LoCoMo's public JSON.

    python benchmarks/build_locomo.py --source locomo10.json --conversations 1-7 --out locomo-dev.json

``--source`` is ``data/locomo10.json`` of snap-research/LoCoMo (Maharana et al., ACL 2024;
CC BY-NC 4.0), downloaded by you: nothing is fetched here. One haystack per conversation; each
dialogue turn is one memory ("Speaker: text", dated at its session's time, its image caption in
metadata); the questions are queries whose relevant ids are their evidence turns, and whose kind
is LoCoMo's category. Evidence that names no turn of the conversation is dropped (a question left
with none is skipped and counted). ``--conversations 1-7`` gives the dev set the README reports.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from eval_data import write_eval

# LoCoMo's QA categories, by the paper's counts (4: 841 single-hop, 1: 282 multi-hop, ...)
KINDS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
EVIDENCE = re.compile(r"D\d+:\d+")


def session_time(text: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as "2023-05-08T13:56:00"."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").isoformat()


def turns(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """Every dialogue turn of a conversation as a memory, sessions in order."""
    numbers = sorted(int(key.split("_")[1]) for key in conversation if re.fullmatch(r"session_\d+", key))
    memories = []
    for number in numbers:
        when = session_time(conversation[f"session_{number}_date_time"])
        for turn in conversation[f"session_{number}"]:
            metadata: dict[str, Any] = {"session": number, "turn": int(turn["dia_id"].split(":")[1])}
            if turn.get("blip_caption"):
                metadata["image_caption"] = turn["blip_caption"]
            memories.append(
                {
                    "id": turn["dia_id"],
                    "content": f"{turn['speaker']}: {turn['text']}",
                    "subject": turn["speaker"],
                    "created_at": when,
                    "metadata": metadata,
                }
            )
    return memories


def haystack(sample: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """One conversation as a haystack, and how many of its questions had no usable evidence."""
    conversation = sample["conversation"]
    memories = turns(conversation)
    known = {memory["id"] for memory in memories}
    queries, skipped = [], 0
    for index, qa in enumerate(sample["qa"]):
        # evidence is sometimes written "D8:6; D9:17" in one string: read every id out of it
        relevant = list(dict.fromkeys(e for item in qa.get("evidence", []) for e in EVIDENCE.findall(item)))
        relevant = [memory_id for memory_id in relevant if memory_id in known]
        if not relevant:
            skipped += 1
            continue
        answer = qa.get("answer", qa.get("adversarial_answer"))
        queries.append(
            {
                "id": f"{sample['sample_id']}:q{index}",
                "query": qa["question"],
                "relevant": relevant,
                "kind": KINDS[int(qa["category"])],
                **({"answer": str(answer)} if answer is not None else {}),
            }
        )
    speakers = [conversation["speaker_a"], conversation["speaker_b"]]
    return {"id": sample["sample_id"], "speakers": speakers, "memories": memories, "queries": queries}, skipped


def chosen(spec: str, count: int) -> list[int]:
    """Conversation numbers (1-based) from "1-7" or "8,9,10"; every one when spec is empty."""
    if not spec:
        return list(range(1, count + 1))
    numbers: list[int] = []
    for part in spec.split(","):
        first, _, last = part.partition("-")
        numbers.extend(range(int(first), int(last or first) + 1))
    if not all(1 <= n <= count for n in numbers):
        raise SystemExit(f"--conversations {spec}: the source has conversations 1-{count}")
    return numbers


def build(source: Path, conversations: str, name: str) -> tuple[dict[str, Any], int]:
    samples = json.loads(source.read_text(encoding="utf-8"))
    numbers = chosen(conversations, len(samples))
    built = [haystack(samples[n - 1]) for n in numbers]
    data = {
        "name": name,
        "description": f"LoCoMo conversations {conversations or 'all'}: one haystack per conversation; each "
        "dialogue turn is one memory; queries are the QA questions, relevant = evidence turns; "
        "kind = question category.",
        "source": "LoCoMo (Maharana et al., ACL 2024), data/locomo10.json of snap-research/LoCoMo",
        "license": "CC BY-NC 4.0",
        "haystacks": [h for h, _ in built],
    }
    return data, sum(skipped for _, skipped in built)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, required=True, help="LoCoMo's locomo10.json")
    parser.add_argument("--conversations", default="", help='which, 1-based: "1-7", "8,9,10" (default: all)')
    parser.add_argument("--out", type=Path, required=True, help="the eval file to write")
    args = parser.parse_args()
    data, skipped = build(args.source, args.conversations, args.out.stem)
    write_eval(args.out, data, f"{skipped} without evidence skipped")


if __name__ == "__main__":
    main()
