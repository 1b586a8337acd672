"""Property-based fuzzing of every tool of every profile, from each tool's own input schema.

One server and one in-memory ``mcp.Client`` per profile serve all of a test's examples, on a store
seeded with a few records whose ids, paths and names the strategies reuse. Every call is judged
(``attack_checks.judge``) and a rejected call must leave every table of the database as it was.
Failures are collected rather than raised, so one run reports every class it found, each with
its first reproducer; the figures go to the terminal summary.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from attack_checks import FIGURES, difference, dump, judge
from attack_live import EXAMPLES, RANDOM, LiveClient
from attack_schema import Pool, Schema, unknown_keys
from conftest import START
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.serve.server import build_server

# A few records per profile, so updates and deletes find something to change.
SEEDS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "full": [
        ("store_memory", {"content": "Emma is lactose intolerant", "context": {"user_id": "emma"}}),
        ("store_memory", {"content": "Liam plays chess on Sundays", "metadata": {"tags": ["games"]}}),
        ("store_memory", {"content": "The deploy key rotates monthly", "context": {"conversation_id": "c1"}}),
    ],
    "agent": [
        ("store_memory", {"type": "core", "content": "User prefers pytest", "tags": ["python"]}),
        ("store_memory", {"type": "task", "content": "Ship the release notes", "category": "work"}),
        ("store_memory", {"type": "learning", "content": "Tabs break the YAML parser", "importance": "high"}),
    ],
    "memento": [
        ("store_memory", {"content": "Emma is lactose intolerant", "subject": "Emma", "category": "restriction"}),
        ("store_memory", {"content": "Liam studies calculus", "subject": "Liam", "category": "skill", "tags": ["m"]}),
        ("store_memory", {"content": "Gordon moved to Oslo", "subject": "Gordon", "category": "history"}),
    ],
    "stores": [
        ("add_memory", {"store": "default", "path": "people/emma", "content": "Emma is lactose intolerant"}),
        ("add_memory", {"store": "default", "path": "work/deploy", "content": "Deploys on Tuesday", "tags": ["ops"]}),
        ("add_memory", {"store": "default", "path": "notes/chess", "content": "Liam plays chess"}),
    ],
    "shared": [
        ("add_memory", {"agent_name": "claude-alpha", "content": "Found 3 insights", "tags": ["analysis"]}),
        ("add_memory", {"agent_name": "gpt-beta", "content": "Deployed the fix", "priority": "high"}),
        ("add_memory", {"agent_name": "claude-alpha", "content": "Reviewed the plan", "metadata": {"step": 2}}),
    ],
}
PROFILES = list(SEEDS)
# Failures are collected, not raised, so there is nothing to shrink; CI draws the same calls each run.
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=not RANDOM,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def _known_strings(home: Path) -> list[str]:
    """Ids, paths, names and tags the store holds, and the store's own name."""
    found = {"default"}
    for db_file in home.rglob("*.db"):
        with closing(sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)) as db:
            for row in db.execute("SELECT id, path, subject, agent_name, user_id, category FROM memories"):
                found.update(v for v in row if isinstance(v, str))
            found.update(tag for (tag,) in db.execute("SELECT DISTINCT tag FROM memory_tags"))
    paths = {v for v in found if "/" in v}
    found |= {p.split("/")[0] for p in paths}  # categories of the stores profile
    return sorted(found)


def _short(value: Any, depth: int = 0) -> Any:
    """A reproducer small enough to print: long strings and deep nesting summarised."""
    if depth > 6:
        return "<nested deeper>"
    if isinstance(value, str) and len(value) > 60:
        return f"<{len(value)} x {value[:1]!r}>"
    if isinstance(value, list):
        return [_short(v, depth + 1) for v in value[:5]] + ([f"<{len(value)} items>"] if len(value) > 5 else [])
    if isinstance(value, dict):
        return {k: _short(v, depth + 1) for k, v in value.items()}
    return value


class Findings:
    """Problems grouped by tool and kind, each with a count and its first reproducer."""

    def __init__(self, profile: str) -> None:
        self.profile = profile
        self.seen: dict[tuple[str, str], tuple[int, Any, str]] = {}

    def add(self, tool: str, problem: str, arguments: dict[str, Any]) -> None:
        key = (tool, problem[:48])
        count, first, detail = self.seen.get(key, (0, _short(arguments), problem))
        self.seen[key] = (count + 1, first, detail)

    def report(self) -> str:
        return "\n".join(
            f"[{self.profile}] {tool} x{count}: {detail}\n    reproducer: {args!r:.600}"
            for (tool, _), (count, args, detail) in sorted(self.seen.items())
        )


def _fuzz(profile: str, home: Path, tmp_path: Path) -> Findings:
    config = Settings(home=home, config_dir=tmp_path / "config", embedder="none", shared_max_entries=50)
    server = build_server(config, profile, clock=ManualClock(START))
    findings = Findings(profile)
    try:
        with LiveClient(server) as live:
            for tool, arguments in SEEDS[profile]:
                verdict = judge(profile, live.call(tool, arguments), live.tools[tool].output_schema, home)
                assert verdict.accepted and not verdict.problems, (tool, verdict)
            pool = Pool(_known_strings(home))
            strategies = {name: Schema(t.input_schema, pool).arguments() for name, t in live.tools.items()}

            @FUZZ_SETTINGS
            @given(st.data())
            def attack(data: st.DataObject) -> None:
                tool = data.draw(st.sampled_from(sorted(strategies)), label="tool")
                _attack(live, profile, home, findings, tool, data.draw(strategies[tool], label="arguments"))

            attack()
    finally:
        server.close()
    return findings


def _attack(live: LiveClient, profile: str, home: Path, findings: Findings, tool: str, args: dict[str, Any]) -> None:
    before = dump(home)
    verdict = judge(profile, live.call(tool, args), live.tools[tool].output_schema, home)
    unknown = unknown_keys(args, live.tools[tool].input_schema)
    if unknown and verdict.accepted:  # an argument is used or refused, never dropped
        verdict.problems.append(f"an unknown argument was accepted and ignored: {unknown}")
    FIGURES["fuzz: calls"] += 1
    FIGURES["fuzz: accepted" if verdict.accepted else "fuzz: rejected"] += 1
    if not verdict.accepted:
        changed = difference(before, dump(home))
        if changed:
            verdict.problems.append(f"a rejected call changed the store: {changed}")
    for problem in verdict.problems:
        findings.add(tool, problem, args)
    if verdict.problems:
        FIGURES["fuzz: failing calls"] += 1


@pytest.mark.parametrize("profile", PROFILES)
def test_no_input_drawn_from_a_tools_schema_crashes_the_profile_or_changes_the_store_when_refused(
    profile: str, tmp_path: Path
):
    findings = _fuzz(profile, tmp_path / "home", tmp_path)
    FIGURES[f"fuzz: failure kinds ({profile})"] += len(findings.seen)
    assert not findings.seen, "\n" + findings.report()
