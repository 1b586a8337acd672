"""What each rule of the search layer earns on each data set: R@5 with every rule, then with one off.

    python benchmarks/rule_ablation.py --data FILE [FILE ...] [--stores DIR] [--rules following,passage]

Issue 46's test of a rule: it earns its place on every data set, or it goes. For every data file
(the format of ``recall_quality.py``) this asks each query by relevance alone (as the headline of
``recall_quality.py`` does) with all the rules, then again with each rule of RULES switched off by
setting the constants that turn it off, and prints R@5 / R@10 per data set and rule: the figures
with all rules, then how far each rule's absence moves them (negative: the rule earns that much).
``--stores DIR`` keeps the loaded stores between runs, as in ``recall_quality.py`` (a folder per
data file under DIR); without it every data file is loaded once for all the rules.
Not a test: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo.clock import ManualClock
from mnemo.search import searcher

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from recall_metrics import Metrics, Outcome, metrics
from recall_quality import RELEVANCE_ONLY, ask, haystack_store, parse_time


@dataclass(frozen=True)
class Rule:
    name: str
    what: str
    off: dict[str, Any]  # searcher's constants, and the values that switch the rule off


RULES = [
    Rule("words", "BM25 in the relevance", {"HYBRID": replace(searcher.HYBRID, text_weight=0.0)}),
    Rule("when", "made in the time the question names", {"HYBRID": replace(searcher.HYBRID, when_weight=0.0)}),
    Rule("elsewhere", "named subjects' weight in the sum", {"HYBRID": replace(searcher.HYBRID, elsewhere_weight=0.0)}),
    Rule("doubt", "at most 0.7 when about none of the named subjects", {"OTHER_SUBJECT": 1.0}),
    Rule("name-only", "half the word credit for the names alone", {"NAME_ONLY": 1.0}),
    Rule("roles", "a role names the subject a note ties it to", {"LINKS": 0}),
    Rule("passage", "a long memory counts as one paragraph, in words and lent relevance", {"PASSAGE": sys.maxsize}),
    Rule("following", "the turns after a hit share its relevance", {"FOLLOWING": 0}),
]


@contextmanager
def switched_off(rule: Rule | None) -> Iterator[None]:
    """The search layer with the rule's constants set to switch it off (None: every rule on)."""
    saved = {name: getattr(searcher, name) for name in (rule.off if rule else {})}
    try:
        for name, value in (rule.off if rule else {}).items():
            setattr(searcher, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(searcher, name, value)


def ablate(data: dict[str, Any], rules: list[Rule], stores: Path | None) -> dict[str, Metrics]:
    """Relevance-only metrics of the data with every rule ("all"), and with each rule off (its name)."""
    outcomes: dict[str, list[Outcome]] = {"all": [], **{rule.name: [] for rule in rules}}
    for haystack in data["haystacks"]:
        memories = haystack["memories"]
        clock = ManualClock(min((parse_time(m["created_at"]) for m in memories), default=datetime.now(UTC)))
        with haystack_store(memories, clock, None, stores, haystack["id"]) as (service, loaded):
            for label, rule in [("all", None), *((rule.name, rule) for rule in rules)]:
                with switched_off(rule):
                    outcomes[label] += [
                        ask(service, clock, q, loaded.ids, loaded.newest, RELEVANCE_ONLY) for q in haystack["queries"]
                    ]
    return {label: metrics(found) for label, found in outcomes.items()}


def table(results: dict[str, dict[str, Metrics]], rules: list[Rule]) -> str:
    sets = list(results)
    lines = [
        "R@5 / R@10 by relevance alone; with every rule, then the change when one rule is off",
        "(negative: what the rule earns)",
        "",
        "| | " + " | ".join(sets) + " |",
        "| --- |" + " ---: |" * len(sets),
        "| every rule | " + " | ".join(_pair(results[s]["all"]) for s in sets) + " |",
    ]
    for rule in rules:
        cells = [_change(results[s][rule.name], results[s]["all"]) for s in sets]
        lines.append(f"| without {rule.name} ({rule.what}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pair(m: Metrics) -> str:
    return f"{m.recall_at_5 or 0.0:.3f} / {m.recall_at_10 or 0.0:.3f}"


def _change(off: Metrics, on: Metrics) -> str:
    at_5 = (off.recall_at_5 or 0.0) - (on.recall_at_5 or 0.0)
    return f"{at_5:+.3f} / {(off.recall_at_10 or 0.0) - (on.recall_at_10 or 0.0):+.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", required=True, help="eval files (recall_quality.py's format)")
    parser.add_argument("--stores", type=Path, default=None, metavar="DIR", help="keep the loaded stores in DIR")
    parser.add_argument("--rules", default=None, help=f"comma-separated, of: {', '.join(r.name for r in RULES)}")
    args = parser.parse_args()
    wanted = args.rules.split(",") if args.rules else [r.name for r in RULES]
    unknown = set(wanted) - {r.name for r in RULES}
    if unknown:
        parser.error(f"unknown rules: {', '.join(sorted(unknown))}")
    rules = [r for r in RULES if r.name in wanted]
    results = {}
    with ExitStack() as stack:
        root = args.stores or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mnemo-ablation-")))
        for path in args.data:
            results[path.stem] = ablate(json.loads(path.read_text(encoding="utf-8")), rules, root / path.stem)
    print(table(results, rules))


if __name__ == "__main__":
    main()
