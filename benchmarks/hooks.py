"""Automatic memory through Claude Code's hooks, replayed: latency, what is kept, what is shown, what leaks.

    python benchmarks/hooks.py [--split train|validation|all] [--embedder local|none] [--store-size N]
                               [--data DIR] [--all-tools] [--details] [--json]

Plays every session of the replay corpus (``benchmarks/data/hook_sessions/``, built by
``hook_sessions.py``) in corpus order through real ``python -m mnemo hook EVENT`` processes, each
given the recorded payload on stdin, as Claude Code runs them: MNEMO_HOME, MNEMO_CONFIG_DIR and HOME
in a temporary folder, the corpus' project folders created there with a ``.git`` marker and every
path in the payloads rewritten onto them. A PostToolUse / PostToolUseFailure call is sent only when
mnemo's installed matcher (``capture/clients.py``) takes its tool, as Claude Code would
(``--all-tools`` sends every one). ``--store-size N`` first fills the store with N unrelated
memories of the same projects and others (the engine's bulk store), as a store used for months.

After each session's last hook the store is polled (up to 10 s) until its memories stop changing,
so captures that are acknowledged at once and written a moment later are counted. Then, per split
(the sessions scored; every session is always played, since later sessions build on earlier ones):

- hook latency p50 / p95 per event: wall time from spawn to exit, process start-up included;
- memories captured per session (mean, max), summaries included;
- noise: captured memories that hold none of the project's labelled facts and are not a session
  summary, over all captured;
- facts kept: labelled facts some captured memory holds;
- secrets stored: planted secret strings found in any memory (content, tags, metadata) or in the
  bytes of any file under MNEMO_HOME and MNEMO_CONFIG_DIR (the SQLite database included, and its
  zlib-packed contents), or in what a hook printed; must be 0;
- tokens injected per prompt (characters / 4; mean, p95), and of the session-start index;
- needed-recall: of the prompts with labelled needs, the share whose injected context (the index
  of that session's SessionStart plus that prompt's injection) holds a memory with every needed
  fact (and the share of needed facts so found).

``--details`` lists the facts missed, the noise kept and the needs not met; ``--json`` prints it all
as JSON instead of the table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemo.app import open_service
from mnemo.config import Settings
from mnemo.model import Memory

DATA = Path(__file__).parent / "data" / "hook_sessions"
EVENTS = ("session-start", "user-prompt-submit", "post-tool-use", "post-tool-use-failure", "stop", "session-end",
          "pre-compact")  # fmt: skip
SETTLE_TIMEOUT_S = 10.0
SETTLE_POLL_S = 0.25
CHARS_PER_TOKEN = 4
MEMORY_ID = re.compile(r"^- \[([^\]]+)\]", re.MULTILINE)
FILLER_TOPICS = ("the nightly export", "the onboarding email", "the audit log", "the feature flags", "the cache layer",
                 "the admin users page", "the retry policy", "the search index", "the metrics endpoint")  # fmt: skip
FILLER_NOTES = ("Edited {t} to fix a typo in a comment", "{t} was slow on Tuesday, it recovered by itself",
                "Looked into {t}; nothing to change for now", "Meeting notes: {t} is owned by the platform team",
                "{t} gets a rewrite next quarter, maybe", "Checked {t} after the upgrade, it still works")  # fmt: skip


def installed_matchers() -> dict[str, str | None]:
    """The tool matcher of each hook event as ``mnemo hooks install`` writes it for Claude Code."""
    try:
        from mnemo.capture.clients import client

        return {hook.event: hook.matcher for hook in client("claude-code").hooks}
    except ImportError:  # before clients.py: install.py held Claude Code's hooks
        from mnemo.capture import install

        hooks: dict[str, tuple[str, str | None]] = getattr(install, "CLAUDE_HOOKS", {})
        return dict(hooks.values()) or {"post-tool-use": "Edit|MultiEdit|Write|NotebookEdit|Bash",
                                        "post-tool-use-failure": "Bash"}  # fmt: skip


def normal(text: str) -> str:
    return " ".join(text.lower().split())


# -- playing ---------------------------------------------------------------------------------
@dataclass
class Played:
    """What one session's hooks did."""

    label: dict[str, Any]
    latencies: list[tuple[str, float]] = field(default_factory=list)  # (event, ms)
    prompts: dict[int, tuple[str, str]] = field(default_factory=dict)  # line -> (index context, prompt context)
    printed: list[str] = field(default_factory=list)  # everything the hooks printed
    skipped: int = 0  # tool calls the installed matchers do not send


class Replay:
    def __init__(self, folder: Path, data: Path, embedder: str, all_tools: bool) -> None:
        self.labels = json.loads((data / "labels.json").read_text(encoding="utf-8"))
        self.data = data
        self.home, self.config, self.user = folder / "mnemo-home", folder / "config", folder / "user"
        self.roots: dict[str, Path] = {}
        self.rewrites: list[tuple[str, str]] = []
        for name, project in self.labels["projects"].items():
            root = folder / "projects" / name
            (root / ".git").mkdir(parents=True)
            self.roots[name] = root
            self.rewrites.append((project["root"], str(root)))
        self.rewrites.append((self.labels["home"], str(self.user)))
        self.user.mkdir()
        self.env = os.environ | {"MNEMO_HOME": str(self.home), "MNEMO_CONFIG_DIR": str(self.config),
                                 "MNEMO_EMBEDDER": embedder, "HOME": str(self.user),
                                 "MNEMO_HOOKS_IDLE_S": "120"}  # a capture process left behind exits soon  # fmt: skip
        if embedder == "local":  # found before HOME moves: the model lives in the real user's cache
            from mnemo.embed.model_files import default_model_dir

            self.env["MNEMO_MODEL_DIR"] = str(default_model_dir())
        self.settings = Settings(home=self.home, config_dir=self.config, embedder="none")
        self.matchers = {e: None if all_tools or not m else re.compile(m) for e, m in installed_matchers().items()}

    def rewrite(self, line: str) -> str:
        for old, new in self.rewrites:  # project roots first: they lie under the home folder
            line = line.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
        return line

    def fill(self, count: int, embedder: str) -> None:
        subjects = [str(root) for root in self.roots.values()] + ["/srv/other-service", "/home/dana/notes"]
        settings = Settings(home=self.home, config_dir=self.config, embedder="local" if embedder == "local" else "none")
        service = open_service(settings, create=True)
        try:
            notes = [
                FILLER_NOTES[i % len(FILLER_NOTES)].format(t=FILLER_TOPICS[i // 6 % len(FILLER_TOPICS)])
                for i in range(count)
            ]
            calls = [
                {"content": f"{note} (#{i})", "subject": subjects[i % len(subjects)], "category": "event",
                 "tags": ["filler"], "metadata": {"source": "filler"}}
                for i, note in enumerate(notes)
            ]  # fmt: skip
            for start in range(0, count, 1_000):
                service.store_many(calls[start : start + 1_000])
        finally:
            service.close()

    def play(self, label: dict[str, Any]) -> Played:
        played = Played(label)
        index = ""
        for line_number, line in enumerate((self.data / label["file"]).read_text(encoding="utf-8").splitlines()):
            call = json.loads(self.rewrite(line))
            event, payload = call["event"], call["payload"]
            Path(payload.get("cwd") or self.user).mkdir(parents=True, exist_ok=True)  # Claude Code runs in it
            matcher = self.matchers.get(event)
            if matcher is not None and not matcher.fullmatch(str(payload.get("tool_name", ""))):
                played.skipped += 1
                continue
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "mnemo", "hook", event], input=json.dumps(payload).encode(),
                                  env=self.env, capture_output=True, timeout=60)  # fmt: skip
            played.latencies.append((event, (time.perf_counter() - started) * 1000))
            output = done.stdout.decode()
            if done.returncode != 0:
                where = f"{label['file']}:{line_number + 1}: {event}"
                print(f"{where} exited {done.returncode}: {done.stderr.decode()[-300:]}", file=sys.stderr)
            played.printed.append(output)
            context = json.loads(output)["hookSpecificOutput"]["additionalContext"] if output.strip() else ""
            if event == "session-start":
                index = context if payload.get("source") != "compact" else context or index
            elif event == "user-prompt-submit":
                played.prompts[line_number] = (index, context)
        self.settle()
        return played

    def fingerprint(self) -> tuple[Any, ...] | None:
        """The store's memories as they stand (count, versions, last change); None before it exists."""
        path = self.store_file()
        if path is None:
            return None
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2) as db:
                return tuple(db.execute("SELECT count(*), sum(version), max(updated_at) FROM memories").fetchone())
        except sqlite3.Error:
            return None

    def store_file(self) -> Path | None:
        found = sorted(self.home.glob("stores/*/memory.db"))
        return found[0] if found else None

    def settle(self) -> None:
        """Wait until the store stops changing (a hook may acknowledge first and write a moment later)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        last, steady = self.fingerprint(), 0
        while time.monotonic() < deadline and steady < 2:
            time.sleep(SETTLE_POLL_S)
            now = self.fingerprint()
            queued = any((self.home / "hooks" / "queue").glob("*"))  # a capture process's queue, if any
            steady = steady + 1 if now == last and now is not None and not queued else 0
            last = now

    def stop(self) -> None:
        """Stop the capture process the hooks may have started for this MNEMO_HOME (by its pid)."""
        subprocess.run([sys.executable, "-m", "mnemo", "hooks", "stop"], env=self.env, capture_output=True, timeout=60)
        pid_file = self.home / "hooks" / "run" / "capture.pid"  # still there: the command failed or is absent
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)

    def memories(self) -> list[Memory]:
        if self.store_file() is None:
            return []
        service = open_service(self.settings, embedder=None)
        try:
            return list(service.list(limit=None).memories)
        finally:
            service.close()

    def written_bytes(self) -> list[bytes]:
        """Every file under MNEMO_HOME and the config folder, and the database's zlib-packed values."""
        chunks = [p.read_bytes() for folder in (self.home, self.config) for p in folder.rglob("*") if p.is_file()]
        path = self.store_file()
        if path is not None:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                for table in tables:
                    try:
                        rows = db.execute(f'SELECT * FROM "{table}"').fetchall()
                    except sqlite3.Error:
                        continue
                    for value in (v for row in rows for v in row if isinstance(v, bytes)):
                        with contextlib.suppress(zlib.error):
                            chunks.append(zlib.decompress(value))
        return chunks


# -- scoring ---------------------------------------------------------------------------------
def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(share * 100) - 1]


def holds(text: str, fact: str) -> bool:
    return normal(fact) in normal(text)


def score(replay: Replay, played: list[Played], sessions: set[str], memories: list[Memory]) -> dict[str, Any]:
    chosen = [p for p in played if p.label["file"] in sessions]
    by_id = {m.id: m for m in memories}
    captured = [m for m in memories if m.metadata.get("source") != "filler"]
    session_of = {p.label["session_id"]: p.label for p in played}
    project_facts: dict[str, list[str]] = defaultdict(list)
    for p in played:
        project_facts[p.label["project"]].extend(p.label["facts"])

    mine = [m for m in captured if (session_of.get(m.context.session_id or "") or {}).get("file") in sessions]
    per_session = [sum(1 for m in mine if m.context.session_id == p.label["session_id"]) for p in chosen]
    summaries = [m for m in mine if "session-summary" in m.tags]
    noise = [m for m in mine if m not in summaries and not any(
        holds(m.content, f) for f in project_facts[session_of[m.context.session_id or ""]["project"]])]  # fmt: skip

    facts = [(p.label["project"], f) for p in chosen for f in p.label["facts"]]
    missed = [(project, f) for project, f in facts if not any(
        holds(m.content, f) for m in captured if m.subject == str(replay.roots[project]))]  # fmt: skip

    secrets = sorted({s for p in chosen for s in p.label["secrets"]})
    stored_text = [m.content + json.dumps(m.metadata) + " ".join(m.tags) for m in memories]
    written = replay.written_bytes()
    leaked = [s for s in secrets if any(s in t for t in stored_text) or any(s.encode() in b for b in written)]
    printed = [s for s in secrets if any(s in out for p in chosen for out in p.printed)]

    prompt_tokens = [len(prompt) / CHARS_PER_TOKEN for p in chosen for _, prompt in p.prompts.values()]
    index_tokens = [len(index) / CHARS_PER_TOKEN for p in chosen for index, _ in p.prompts.values()]
    served, fact_hits, fact_total, unmet = 0, 0, 0, []
    for p in chosen:
        for need in p.label["needs"]:
            index, prompt = p.prompts.get(need["line"], ("", ""))
            shown = index + "\n" + prompt
            texts = [shown] + [by_id[i].content for i in MEMORY_ID.findall(shown) if i in by_id]
            found = [f for f in need["facts"] if any(holds(t, f) for t in texts)]
            fact_hits, fact_total = fact_hits + len(found), fact_total + len(need["facts"])
            served += len(found) == len(need["facts"])
            unmet += [f"{p.label['file']} prompt {need['prompt']}: {f}" for f in need["facts"] if f not in found]
    needs = sum(len(p.label["needs"]) for p in chosen)

    latency: dict[str, dict[str, float]] = {}
    for event in EVENTS:
        values = [ms for p in chosen for e, ms in p.latencies if e == event]
        if values:
            latency[event] = {
                "calls": len(values),
                "p50_ms": statistics.median(values),
                "p95_ms": percentile(values, 0.95),
            }
    return {
        "sessions": len(chosen),
        "hook_calls": sum(len(p.latencies) for p in chosen),
        "tool_calls_not_sent": sum(p.skipped for p in chosen),
        "latency": latency,
        "captured": len(mine),
        "captured_per_session_mean": statistics.fmean(per_session) if per_session else 0.0,
        "captured_per_session_max": max(per_session, default=0),
        "summaries": len(summaries),
        "noise": len(noise),
        "noise_share": len(noise) / len(mine) if mine else 0.0,
        "noise_by_kind": {k: sum(1 for m in noise if k in m.tags) for k in ("edit", "stated", "fix")},
        "facts": len(facts),
        "facts_kept": len(facts) - len(missed),
        "secrets_planted": len(secrets),
        "secrets_stored": len(leaked),
        "secrets_printed": len(printed),
        "prompts": len(prompt_tokens),
        "prompts_injected": sum(1 for t in prompt_tokens if t),
        "prompt_tokens_mean": statistics.fmean(prompt_tokens) if prompt_tokens else 0.0,
        "prompt_tokens_p95": percentile(prompt_tokens, 0.95),
        "index_tokens_mean": statistics.fmean(index_tokens) if index_tokens else 0.0,
        "prompts_with_needs": needs,
        "needed_recall": served / needs if needs else float("nan"),
        "needed_facts_recall": fact_hits / fact_total if fact_total else float("nan"),
        "details": {
            "missed_facts": [f"{project}: {f}" for project, f in missed],
            "noise": [f"[{','.join(m.tags)}] {m.content}" for m in noise],
            "unmet_needs": unmet,
            "secrets_stored": leaked,
        },
    }


# -- printing --------------------------------------------------------------------------------
def table(results: dict[str, dict[str, Any]], header: str) -> str:
    splits = list(results)
    rows: list[tuple[str, list[str]]] = [
        ("sessions (hook calls)", [f"{r['sessions']} ({r['hook_calls']})" for r in results.values()])
    ]
    for event in EVENTS:
        cells = [f"{r['latency'][event]['p50_ms']:.0f} / {r['latency'][event]['p95_ms']:.0f}" if event in r["latency"]
                 else "-" for r in results.values()]  # fmt: skip
        rows.append((f"  {event} p50 / p95 ms", cells))
    rows += [
        ("memories captured / session (mean, max)",
         [f"{r['captured_per_session_mean']:.1f}, {r['captured_per_session_max']}" for r in results.values()]),
        ("captured (of them summaries)", [f"{r['captured']} ({r['summaries']})" for r in results.values()]),
        ("noise share", [f"{r['noise_share']:.0%} ({r['noise']})" for r in results.values()]),
        ("  of which edit / stated / fix",
         [" / ".join(str(n) for n in r["noise_by_kind"].values()) for r in results.values()]),
        ("facts kept", [f"{r['facts_kept']} / {r['facts']}" for r in results.values()]),
        ("secrets stored (must be 0)", [f"{r['secrets_stored']} of {r['secrets_planted']}" for r in results.values()]),
        ("tokens injected / prompt (mean, p95)",
         [f"{r['prompt_tokens_mean']:.0f}, {r['prompt_tokens_p95']:.0f}" for r in results.values()]),
        ("prompts given context", [f"{r['prompts_injected']} / {r['prompts']}" for r in results.values()]),
        ("session-start index tokens (mean)", [f"{r['index_tokens_mean']:.0f}" for r in results.values()]),
        ("needed-recall (prompts; facts)", [f"{r['needed_recall']:.0%} of {r['prompts_with_needs']}; "
                                            f"{r['needed_facts_recall']:.0%}" for r in results.values()]),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows) + 2
    widths = [max(len(s), *(len(cells[i]) for _, cells in rows)) + 2 for i, s in enumerate(splits)]
    lines = [header, "", f"{'':<{width}}" + "".join(f"{s:>{w}}" for s, w in zip(splits, widths, strict=True))]
    lines += [
        f"{name:<{width}}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)) for name, cells in rows
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="The corpus folder (labels.json and the sessions).")
    parser.add_argument("--split", choices=("train", "validation", "all"), default="all")
    parser.add_argument("--embedder", choices=("local", "none"), default="local")
    parser.add_argument("--store-size", type=int, default=0, help="Filler memories stored before the sessions.")
    parser.add_argument("--all-tools", action="store_true", help="Send every tool call, not only the matched ones.")
    parser.add_argument("--details", action="store_true", help="List missed facts, noise and unmet needs.")
    parser.add_argument("--json", action="store_true", help="Print JSON instead of the table.")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mnemo-hooks-") as folder:
        replay = Replay(Path(folder), args.data, args.embedder, args.all_tools)
        if args.store_size:
            replay.fill(args.store_size, args.embedder)
        try:
            played = [replay.play(label) for label in replay.labels["sessions"]]
            memories = replay.memories()
        finally:
            replay.stop()
        splits = ("train", "validation", "all") if args.split == "all" else (args.split,)
        results = {
            split: score(
                replay, played, {p.label["file"] for p in played if split in ("all", p.label["split"])}, memories
            )
            for split in splits
        }
    seconds = time.perf_counter() - started
    if args.json:
        settings = {"embedder": args.embedder, "store_size": args.store_size, "all_tools": args.all_tools,
                    "seconds": round(seconds, 1), "load_average": os.getloadavg(), "cpus": os.cpu_count()}  # fmt: skip
        print(json.dumps({"settings": settings, "splits": results}, indent=2))
        return
    tools = "all tool calls" if args.all_tools else "tool calls the installed matchers send"
    header = f"hook replay: {args.embedder} embedder, {args.store_size} filler memories, {tools}; {seconds:.0f} s"
    print(table(results, header))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")
    if args.details:
        for split, result in results.items():
            for kind, items in result["details"].items():
                print(f"\n{split}: {kind.replace('_', ' ')} ({len(items)})")
                print("\n".join(f"  {item}" for item in items) or "  -")


if __name__ == "__main__":
    main()
