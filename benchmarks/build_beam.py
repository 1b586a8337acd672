"""Build an eval set (the format of ``../shared/eval/README.md``) from BEAM's public chats.

    python benchmarks/build_beam.py --source DIR --size 100K --chats 1-20 --out ~/.cache/mnemo-eval/beam-100k.json

BEAM (Tavakoli et al., "Beyond a Million Tokens"; github.com/mohammadtavakoli78/BEAM) holds long
synthetic chats between a user and an assistant about the user's projects, with probing
questions whose source messages are given. The repository has no licence file: its data is never
committed here. ``--source`` is a local copy of it (a clone, or an export of a bare mirror)::

    git --git-dir=PATH/TO/BEAM.git archive HEAD chats/100K chats/500K | tar -x -C DIR

(a mirror that lacks the largest files, as this project's does for most of the 1M and all of the
10M chats, cannot export those folders; the 100K and 500K sets are complete.)

One haystack per chat. Each message is one memory (``"user: …"`` / ``"assistant: …"``, the
generator's ``->-> b,t`` marks ending user messages taken off), its batch as its session
(``metadata.session``, which ``recall_quality.py`` gives as ``context.session_id``), dated by the
chat's time anchors (one per batch, on its first message; a message without one is a minute after
the message before it; a chat without any starts on 2024-01-01). Questions come from
``probing_questions/probing_questions.json``: relevant = their ``source_chat_ids`` (message ids);
a knowledge update lists the updated message first and is ``prefer_newest``; abstention questions
have no answer and are ``kind: "negative"``; the other kinds keep BEAM's names. A question whose
sources name no message of its chat is skipped and counted. ``--chats 1-20`` of the 100K set gives
the dev set issue 46 measures (tune on it only); the 500K set's chats are for checking, never
tuning.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from build_locomo import chosen
from eval_data import write_eval
from mnemo.bounds import MAX_CONTENT_CHARS

# The generator's mark ending a user message: "->-> 2,14" (batch, bullet), also "->-> 2,N/A",
# "->-> 5,14)", "->-> 2,22, 24" and a few with the generator's own remarks or a plan label after it;
# it is always on the message's last line, and nothing after it is the user's.
POSITION_MARK = re.compile(r"\s*->->[^\n]*$")
NEGATIVE_KIND = "negative"  # the eval format's kind for a question with no answer
FIRST_DAY = datetime(2024, 1, 1)  # a chat without any time anchor starts here
STEP = timedelta(minutes=1)
# A memory's content is at most MAX_CONTENT_CHARS; two of the 100K chats' 5,732 messages are longer
# (348,480 and 53,118 characters, an assistant's runaway answers) and keep their beginning.
MAX_MESSAGE_CHARS = MAX_CONTENT_CHARS - len("assistant: ")


def anchor_date(text: str) -> datetime | None:
    """BEAM's "March-15-2024" as a date; None when it reads otherwise."""
    for pattern in ("%B-%d-%Y", "%b-%d-%Y"):
        try:
            return datetime.strptime(text.strip(), pattern)
        except ValueError:
            continue
    return None


def messages(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message of a chat as a memory, batches in order."""
    memories: list[dict[str, Any]] = []
    anchors = (anchor_date(str(m.get("time_anchor", ""))) for b in chat for t in b.get("turns", []) for m in t)
    when = next((a for a in anchors if a is not None), FIRST_DAY) - STEP  # the first message: the first anchor
    for batch in chat:
        for turn in batch.get("turns", []):
            for message in turn:
                anchored = anchor_date(str(message.get("time_anchor", "")))
                when = anchored if anchored is not None and anchored > when else when + STEP
                content = POSITION_MARK.sub("", str(message["content"]).strip())[:MAX_MESSAGE_CHARS]
                memories.append(
                    {
                        "id": str(message["id"]),
                        "content": f"{message['role']}: {content}",
                        "created_at": when.isoformat(),
                        "metadata": {"session": batch["batch_number"], "role": message["role"]},
                    }
                )
    return memories


def sources(question: dict[str, Any]) -> list[str]:
    """A question's source message ids, the updated one first for a knowledge update."""
    given = question.get("source_chat_ids")
    if isinstance(given, dict):
        order = ["updated_info", "original_info"] if "updated_info" in given else sorted(given)
        ids = [i for key in order for i in _flat(given.get(key))]
    else:
        ids = _flat(given)
    return list(dict.fromkeys(str(i) for i in ids))


def _flat(ids: Any) -> list[int | str]:
    """Ids as a list, also when BEAM nests them (one event ordering question lists groups)."""
    if isinstance(ids, int | str):
        return [ids]
    return [i for item in ids for i in _flat(item)] if isinstance(ids, list) else []


def haystack(folder: Path, name: str) -> tuple[dict[str, Any], int]:
    """One chat as a haystack, and how many of its questions named no message of it."""
    memories = messages(json.loads((folder / "chat.json").read_text(encoding="utf-8")))
    known = {memory["id"] for memory in memories}
    probing = json.loads((folder / "probing_questions" / "probing_questions.json").read_text(encoding="utf-8"))
    queries, skipped = [], 0
    for kind, questions in probing.items():
        for number, question in enumerate(questions):
            query: dict[str, Any] = {"id": f"{name}:{kind}:{number}", "query": question["question"]}
            if kind == "abstention":
                queries.append({**query, "relevant": [], "kind": NEGATIVE_KIND})
                continue
            relevant = [i for i in sources(question) if i in known]
            if not relevant:
                skipped += 1
                continue
            queries.append({**query, "relevant": relevant, "kind": kind, **_newest(kind)})
    return {"id": name, "memories": memories, "queries": queries}, skipped


def _newest(kind: str) -> dict[str, Any]:
    return {"prefer_newest": True} if kind == "knowledge_update" else {}


def chats(spec: str, available: list[int]) -> list[int]:
    """Chat numbers from "1-20" or "3,5" (``build_locomo.chosen``); every one when spec is empty."""
    numbers = chosen(spec, max(available)) if spec else available
    if missing := sorted(set(numbers) - set(available)):
        raise SystemExit(f"--chats {spec}: no chat {missing} in the source (it has {available})")
    return numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, required=True, help="a copy of the BEAM repository (its chats/)")
    parser.add_argument("--size", default="100K", help="the chats' size folder: 100K, 500K, 1M, 10M")
    parser.add_argument("--chats", default="", help='which chats: "1-20", "3,5" (default: all)')
    parser.add_argument("--out", type=Path, required=True, help="the eval file to write (outside this repository)")
    args = parser.parse_args()
    root = args.source / "chats" / args.size
    available = sorted(int(p.name) for p in root.iterdir() if p.name.isdigit() and (p / "chat.json").exists())
    built = [haystack(root / str(n), f"beam-{args.size}-{n}") for n in chats(args.chats, available)]
    data = {
        "name": args.out.stem,
        "description": f"BEAM {args.size} chats {args.chats or 'all'}: one haystack per chat, each message one "
        "memory (its batch as session); questions from probing_questions.json, relevant = source_chat_ids.",
        "source": "BEAM (Tavakoli et al.), github.com/mohammadtavakoli78/BEAM; no licence file: not redistributed",
        "haystacks": [h for h, _ in built],
    }
    write_eval(args.out, data, f"{sum(s for _, s in built)} naming no message of their chat skipped")


if __name__ == "__main__":
    main()
