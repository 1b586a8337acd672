"""benchmarks/build_locomo.py turns LoCoMo's public JSON into an eval set that the harness reads.

The fixture has LoCoMo's shape (sessions with their date strings, image captions, evidence written
as one "D1:1; D1:2" string, an adversarial answer, evidence naming no turn) on made-up dialogue.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "locomo10-mini.json"


def build(tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "locomo-mini.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "build_locomo.py"), "--source", str(SOURCE), "--out", str(out),
         *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.read_text(encoding="utf-8")), done.stderr


def test_each_turn_is_a_memory_dated_at_its_session_with_its_caption(tmp_path: Path):
    data, _ = build(tmp_path)
    first = data["haystacks"][0]
    assert first["id"] == "conv-1" and first["speakers"] == ["Ana", "Ben"]
    assert [m["id"] for m in first["memories"]] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert first["memories"][1] == {
        "id": "D1:2",
        "content": "Ben: Lovely! Here is my dog at the beach.",
        "subject": "Ben",
        "created_at": "2023-05-08T13:56:00",
        "metadata": {"session": 1, "turn": 2, "image_caption": "a photo of a dog on a beach"},
    }
    assert first["memories"][3]["created_at"] == "2023-06-20T10:05:00"


def test_questions_keep_their_evidence_kind_and_answer_and_those_without_evidence_are_skipped(tmp_path: Path):
    data, said = build(tmp_path)
    queries = data["haystacks"][0]["queries"]
    assert [(q["id"], q["kind"], q["relevant"]) for q in queries] == [
        ("conv-1:q0", "temporal", ["D1:1"]),
        ("conv-1:q1", "multi-hop", ["D1:1", "D1:2"]),
        ("conv-1:q2", "single-hop", ["D2:1"]),
        ("conv-1:q3", "open-domain", ["D1:3"]),
        ("conv-1:q4", "adversarial", ["D2:1"]),
    ]
    assert queries[4]["answer"] == "Lisbon"  # an adversarial question's answer is its adversarial_answer
    assert "1 without evidence skipped" in said


def test_conversations_are_chosen_by_number(tmp_path: Path):
    data, _ = build(tmp_path, "--conversations", "2")
    assert [h["id"] for h in data["haystacks"]] == ["conv-2"]


def test_the_built_file_runs_through_the_quality_harness(tmp_path: Path):
    build(tmp_path)
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "recall_quality.py"), "--data", str(tmp_path / "locomo-mini.json"),
         "--json"],
        capture_output=True, text=True, check=True, env={**os.environ, "MNEMO_EMBEDDER": "none"},
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report["queries"] == 6
