"""Search quality of mnemo's recall on an evaluation set; prints a table or one JSON object.

    python benchmarks/recall_quality.py --data locomo-dev.json
    python benchmarks/recall_quality.py --data agent-memory-dev.json --json
    python benchmarks/recall_quality.py --data FILE --limit-haystacks 1 --kinds paraphrase,keyword
    python benchmarks/recall_quality.py --data agent-memory-dev.json \
        --extra-queries benchmarks/dev_negatives/agent-memory-dev-negatives.json --kinds negative

The data format and the metrics are README.md's "Evaluation data" (``benchmarks/build_locomo.py``
builds LoCoMo's file from its public JSON).
Each haystack gets a fresh store in a temporary directory and a ``ManualClock``; its memories go
in through ``MemoryService.store`` with their own dates and *without* their category, so that
enrichment detects it, and with the session they were said in (LoCoMo's ``metadata.session``) as
their ``context.session_id``; then every query is asked through ``MemoryService.recall`` (limit 10).

Two rankings are measured on the same store:

- the headline, "relevance only": ranking weights semantic_similarity 1.0, the rest 0. The order
  is the text relevance alone, so the queries are independent of one another.
- "default weights": the profile's default ``ranking.Weights()``, which mixes in recency,
  importance and access frequency. Recall bumps the access count of what it returns, so with a
  non-zero access weight a query's ranking depends on the queries asked before it in the same
  haystack. That dependence is accepted (it is what a real agent would see, in data order) and
  not undone. The default pass runs first on each store; the relevance pass after it is not
  affected by the access counts, because its access weight is 0.

After the headline, the reliability curve of relevance (``reliability.py``): per band of relevance,
the share of returned hits that are right answers.

Beside them, per kind, the two baselines every rule of the ranking must beat
(``recall_baselines.py``), on the same store, among the memories a query's filters allow:
"cosine only" (the query's embedding against every memory's stored vector, same model, exact, no
rule) and "BM25 only" (the store's word search alone). They are not timed, and have no
"negatives rejected" (nothing to reject with: printed "-", null in the JSON).

Metrics (over queries with at least one relevant id, unless said otherwise):

- R@k: the share of the query's relevant memories in the top k, averaged over queries.
- MRR: 1 / rank of the first relevant memory in the returned ranking (10 hits), 0 if none.
- nDCG@10: binary gains, DCG = sum 1 / log2(rank + 1) over relevant hits in the top 10; the ideal
  ranking puts min(#relevant, 10) relevant memories first.
- negatives_rejected: over ``kind: "negative"`` queries, the share whose returned hits all have
  ``scores.semantic_similarity`` below ``NEGATIVE_THRESHOLD`` (memento's default search threshold,
  spec 001), or that return nothing.
- newest (first): over ``prefer_newest`` questions (about the current state), the share whose
  newest fact is in the top 5 and ranked above every older relevant fact.
- category_accuracy: the share of memories with a ``category`` label whose detected category
  equals the label, after mapping the label onto spec 004's categories with ``CATEGORY_MAP``.

``--stores DIR`` keeps each haystack's loaded SQLite store in DIR and, run again on the same
memories with the same model, copies it instead of storing them again (a BEAM run: seconds, not
minutes); each run asks its queries of a fresh copy, so access counts never carry over. The key is
the memories and the model, not mnemo's code: delete DIR after changing how memories are stored
(enrichment, categories, embedding, the schema), as a change to search needs no new stores.

Eval ids are mapped to mnemo ids as memories are stored; an exact duplicate (``Duplicate``)
maps to the memory already stored, and the metrics count distinct mnemo memories.
Not a test: numbers, not assertions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from datetime import time as day_time
from pathlib import Path
from typing import Any

from mnemo.app import open_service
from mnemo.clock import ManualClock
from mnemo.config import Settings
from mnemo.engine.service import MemoryService
from mnemo.errors import Duplicate
from mnemo.model import Category, Context
from mnemo.search import ranking

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by its path (the tests): its siblings too
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from recall_baselines import Ranking, bm25_only, cosine_only
from recall_metrics import LIMIT, NEGATIVE_THRESHOLD, Metrics, Outcome, by_kind, metrics, percentiles
from reliability import curve
from reliability import table as reliability_table

AFTER_NEWEST = timedelta(minutes=1)  # "now" for a query without as_of: just after the newest memory

RELEVANCE_ONLY = ranking.Weights(1.0, 0.0, 0.0, 0.0)
DEFAULT_WEIGHTS = ranking.Weights()

# Eval labels → mnemo's (spec 004) categories. Spec 004's nine are mapped to themselves; memento's
# eight (spec 001) share six of them, and two need a choice:
# - restriction → instruction: a restriction ("no caffeine after 2 pm", "must stay under $18k",
#   "Emma is lactose intolerant") is a rule the agent has to respect when it acts, which is what
#   spec 004's instruction holds. Allergies and diets could also pass as fact; the confusion
#   counts in the report show how many of them mnemo files there.
# - history → event: something that happened at a time.
CATEGORY_MAP: dict[str, str] = {
    **{c.value: c.value for c in Category},
    "restriction": Category.INSTRUCTION.value,
    "history": Category.EVENT.value,
}


@dataclass(frozen=True, slots=True)
class CategoryReport:
    labelled: int
    correct: int
    confusion: dict[str, dict[str, int]]  # eval label → detected mnemo category → count

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.labelled if self.labelled else None


def category_report(pairs: Iterable[tuple[str, str]]) -> CategoryReport:
    """Compare (eval label, detected category) pairs through ``CATEGORY_MAP``."""
    confusion: dict[str, Counter[str]] = {}
    labelled = correct = 0
    for label, detected in pairs:
        expected = CATEGORY_MAP.get(label)
        if expected is None:
            raise ValueError(f"category label {label!r} has no entry in CATEGORY_MAP")
        labelled += 1
        correct += detected == expected
        confusion.setdefault(label, Counter())[detected] += 1
    table = {label: dict(counts.most_common()) for label, counts in sorted(confusion.items())}
    return CategoryReport(labelled, correct, table)


# -- running a haystack ----------------------------------------------------------------------
def parse_time(text: str) -> datetime:
    """An ISO date-time; naive ones are UTC, as mnemo reads them."""
    when = datetime.fromisoformat(text)
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def end_of_day(day: str) -> datetime:
    return datetime.combine(datetime.fromisoformat(day).date(), day_time(23, 59, 59), tzinfo=UTC)


@dataclass
class Loaded:
    ids: dict[str, str]  # eval memory id → mnemo id
    categories: list[tuple[str, str]]  # (eval label, detected) for labelled memories
    duplicates: int
    seconds: float
    newest: datetime
    kept: bool = False  # loaded by an earlier run (kept_store)


def session_of(item: dict[str, Any]) -> str | None:
    """The session a memory was made in, given as its ``context.session_id`` as an agent recording a
    conversation would: LoCoMo's dialogue session (``metadata.session``); None for the other sets."""
    session = (item.get("metadata") or {}).get("session")
    return None if session is None else f"session {session}"


def load_haystack(service: MemoryService, clock: ManualClock, memories: Sequence[dict[str, Any]]) -> Loaded:
    """Store every memory in data order, with its own date and without its category."""
    ids: dict[str, str] = {}
    categories: list[tuple[str, str]] = []
    duplicates = 0
    started = time.perf_counter()
    for item in memories:
        created = parse_time(item["created_at"])
        clock.set(max(clock.now(), created))  # "now" never runs backwards, and is never before the memory
        try:
            stored = service.store(
                item["content"],
                context=Context(user_id=item.get("user_id"), session_id=session_of(item)),
                timestamp=created,
                subject=item.get("subject"),
                tags=item.get("tags") or (),
                importance=item.get("importance"),
                metadata=item.get("metadata"),
            ).memory
            ids[item["id"]] = stored.id
            detected = stored.category
        except Duplicate as duplicate:
            duplicates += 1
            ids[item["id"]] = duplicate.existing_id
            detected = service.get(duplicate.existing_id).category
        if item.get("category"):
            categories.append((item["category"], detected or "-"))
    seconds = time.perf_counter() - started
    newest = max((parse_time(m["created_at"]) for m in memories), default=clock.now())
    return Loaded(ids, categories, duplicates, seconds, newest)


def kept_store(folder: Path, memories: Sequence[dict[str, Any]], earliest: datetime) -> Loaded:
    """The haystack's memories loaded into ``folder``/home: by an earlier run when its record there
    names the same memories and model, else now (anything else there removed first)."""
    settings = Settings(home=folder / "home")
    source = hashlib.sha256(
        json.dumps([memories, settings.embedder, settings.model], sort_keys=True, default=str).encode()
    ).hexdigest()
    record = folder / "loaded.json"
    if record.exists():
        kept = json.loads(record.read_text(encoding="utf-8"))
        if kept["source"] == source:
            categories = [(label, detected) for label, detected in kept["categories"]]
            return Loaded(
                kept["ids"], categories, kept["duplicates"], kept["seconds"], parse_time(kept["newest"]), kept=True
            )
    shutil.rmtree(folder, ignore_errors=True)
    clock = ManualClock(earliest)
    service = open_service(settings, clock=clock)
    try:
        loaded = load_haystack(service, clock, memories)
    finally:
        service.storage.close()
    kept = {**asdict(loaded), "newest": loaded.newest.isoformat(), "source": source}
    record.write_text(json.dumps(kept), encoding="utf-8")  # last: a run cut short leaves no record
    return loaded


@contextmanager
def haystack_store(
    memories: Sequence[dict[str, Any]], clock: ManualClock, postgres: str | None, stores: Path | None, haystack: str
) -> Iterator[tuple[MemoryService, Loaded]]:
    """A service on a store holding the haystack's memories, loaded now (into a fresh database of
    ``postgres`` when given) or copied from its folder in ``stores`` (see kept_store)."""
    if stores is not None and postgres:
        raise ValueError("kept stores are SQLite stores: they cannot stand in for a PostgreSQL database")
    with tempfile.TemporaryDirectory(prefix="mnemo-eval-") as home, ExitStack() as stack:
        url = None
        if postgres:
            from postgres_database import fresh_database  # beside this file; needs psycopg

            url = stack.enter_context(fresh_database(postgres))
        kept = None
        if stores is not None:
            folder = stores / re.sub(r"[^A-Za-z0-9._-]", "_", haystack)
            kept = kept_store(folder, memories, clock.now())
            shutil.copytree(folder / "home", Path(home), dirs_exist_ok=True)
            clock.set(kept.newest)  # where loading them left the clock
        service = open_service(Settings(home=Path(home), database_url=url), clock=clock)
        try:
            yield service, kept or load_haystack(service, clock, memories)
        finally:
            service.storage.close()


def recall_filters(filters: dict[str, str]) -> dict[str, Any]:
    """A query's eval filters as ``recall`` arguments; a category label goes through ``CATEGORY_MAP``."""
    unknown = set(filters) - {"user_id", "subject", "category"}
    if unknown:
        raise ValueError(f"unknown filters {sorted(unknown)}")
    category = filters.get("category")
    return {
        "user_id": filters.get("user_id"),
        "subject": filters.get("subject"),
        "categories": [CATEGORY_MAP.get(category, category)] if category else None,
    }


def ask(
    service: MemoryService,
    clock: ManualClock,
    query: dict[str, Any],
    ids: dict[str, str],
    newest: datetime,
    weights: ranking.Weights,
) -> Outcome:
    clock.set(end_of_day(query["as_of"]) if query.get("as_of") else newest + AFTER_NEWEST)
    missing = [r for r in query["relevant"] if r not in ids]
    if missing:
        raise ValueError(f"query {query['id']} names unknown memories {missing}")
    started = time.perf_counter()
    result = service.recall(
        query["query"],
        **recall_filters(query.get("filters") or {}),
        weights=weights,
        limit=LIMIT,
    )
    latency_ms = (time.perf_counter() - started) * 1000
    return Outcome(
        query_id=query["id"],
        kind=query["kind"],
        relevant=tuple(dict.fromkeys(ids[r] for r in query["relevant"])),
        ranked=tuple(h.memory.id for h in result.hits),
        similarities=tuple(h.scores.semantic_similarity for h in result.hits),
        latency_ms=latency_ms,
        prefer_newest=bool(query.get("prefer_newest")),
    )


def baseline(service: MemoryService, rank: Ranking, query: dict[str, Any], ids: dict[str, str]) -> Outcome:
    """A query's outcome under one of the baselines (no threshold, not timed), among the memories its
    filters allow."""
    filters = query.get("filters")
    allowed = {m.id for m in service.list(**recall_filters(filters), limit=None).memories} if filters else None
    ranked = rank(query["query"], allowed)
    return Outcome(
        query_id=query["id"],
        kind=query["kind"],
        relevant=tuple(dict.fromkeys(ids[r] for r in query["relevant"])),
        ranked=ranked,
        similarities=(),
        latency_ms=0.0,
        prefer_newest=bool(query.get("prefer_newest")),
        declines=False,
    )


@dataclass
class Run:
    """Everything measured over the haystacks of one data file."""

    name: str
    haystacks: int = 0
    memories: int = 0
    duplicates: int = 0
    load_seconds: float = 0.0
    kept: int = 0  # haystacks whose stores an earlier run loaded (--stores)
    relevance: list[Outcome] = field(default_factory=list)
    default: list[Outcome] = field(default_factory=list)
    cosine: list[Outcome] = field(default_factory=list)  # recall_baselines.cosine_only
    bm25: list[Outcome] = field(default_factory=list)  # recall_baselines.bm25_only
    categories: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


def evaluate(
    data: dict[str, Any],
    limit_haystacks: int | None = None,
    kinds: Sequence[str] | None = None,
    postgres: str | None = None,
    stores: Path | None = None,
) -> Run:
    """``postgres``: a PostgreSQL server's URL; each haystack then gets a fresh database on it.
    ``stores``: a folder keeping the haystacks' loaded SQLite stores from run to run (see kept_store)."""
    started = time.perf_counter()
    run = Run(name=data.get("name", "?"))
    haystacks = data["haystacks"][:limit_haystacks] if limit_haystacks else data["haystacks"]
    for haystack in haystacks:
        memories = haystack["memories"]
        queries = [q for q in haystack["queries"] if not kinds or q["kind"] in kinds]
        earliest = min((parse_time(m["created_at"]) for m in memories), default=datetime.now(UTC))
        clock = ManualClock(earliest)
        with haystack_store(memories, clock, postgres, stores, haystack["id"]) as (service, loaded):
            # Default weights first: their access-count dependence stays within their own pass.
            run.default += [ask(service, clock, q, loaded.ids, loaded.newest, DEFAULT_WEIGHTS) for q in queries]
            run.relevance += [ask(service, clock, q, loaded.ids, loaded.newest, RELEVANCE_ONLY) for q in queries]
            cosine = cosine_only(service, list(loaded.ids.values()), LIMIT)
            if cosine is not None:
                run.cosine += [baseline(service, cosine, q, loaded.ids) for q in queries]
            words = bm25_only(service, clock.now, LIMIT)
            run.bm25 += [baseline(service, words, q, loaded.ids) for q in queries]
        run.haystacks += 1
        run.memories += len(memories)
        run.duplicates += loaded.duplicates
        run.load_seconds += loaded.seconds
        run.kept += loaded.kept
        run.categories += loaded.categories
    run.seconds = time.perf_counter() - started
    return run


# -- reporting -------------------------------------------------------------------------------
def describe(weights: ranking.Weights) -> str:
    return ", ".join(f"{f.name}={getattr(weights, f.name):g}" for f in fields(weights))


def _rounded(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def metrics_json(m: Metrics) -> dict[str, Any]:
    return {k: _rounded(v) for k, v in asdict(m).items()}


def ranking_json(outcomes: Sequence[Outcome], weights: str, category: CategoryReport) -> dict[str, Any]:
    return {
        **metrics_json(metrics(outcomes)),
        "category_accuracy": _rounded(category.accuracy),
        "by_kind": {kind: metrics_json(m) for kind, m in by_kind(outcomes).items()},
        "latency_ms": {k: round(v, 3) for k, v in percentiles([o.latency_ms for o in outcomes]).items()},
        "weights": weights,
    }


def report_json(run: Run) -> dict[str, Any]:
    category = category_report(run.categories)
    return {
        "dataset": run.name,
        **ranking_json(run.relevance, f"relevance only ({describe(RELEVANCE_ONLY)})", category),
        "memories": run.memories,
        "haystacks": run.haystacks,
        "duplicates": run.duplicates,
        "load_memories_per_s": round(run.memories / run.load_seconds, 1) if run.load_seconds else None,
        "stores_kept": run.kept,
        "category_labelled": category.labelled,
        "category_confusion": category.confusion,
        "category_map": {k: v for k, v in CATEGORY_MAP.items() if k != v},
        "negative_threshold": NEGATIVE_THRESHOLD,
        "reliability": [
            {"low": b.low, "high": b.high, "hits": b.hits, "share_right": _rounded(b.share_right)}
            for b in curve(run.relevance)
        ],
        "seconds": round(run.seconds, 2),
        "default_weights": ranking_json(run.default, f"profile default ({describe(DEFAULT_WEIGHTS)})", category),
        "cosine_only": ranking_json(run.cosine, "cosine only, same model, no rules", category) if run.cosine else None,
        "bm25_only": ranking_json(run.bm25, "BM25 only", category),
    }


def _cell(value: float | None) -> str:
    return "    -" if value is None else f"{value:.3f}"


def metrics_table(title: str, outcomes: Sequence[Outcome]) -> list[str]:
    columns = ("R@1", "R@5", "R@10", "MRR", "nDCG10")
    header = f"{'':<14} {'queries':>7} " + " ".join(f"{c:>6}" for c in columns) + f" {'neg.rej':>7} {'newest':>6}"
    lines = [title, header, "-" * len(header)]
    rows = [("overall", metrics(outcomes)), *by_kind(outcomes).items()]
    for name, m in rows:
        lines.append(
            f"{name:<14} {m.queries:>7} {_cell(m.recall_at_1):>6} {_cell(m.recall_at_5):>6} "
            f"{_cell(m.recall_at_10):>6} {_cell(m.mrr):>6} {_cell(m.ndcg_at_10):>6} {_cell(m.negatives_rejected):>7} "
            f"{_cell(m.newest_first):>6}"
        )
    latency = percentiles([o.latency_ms for o in outcomes])
    if latency["p95"] > 0:  # the baselines are not timed
        lines.append(f"recall latency: p50 {latency['p50']:.2f} ms, p95 {latency['p95']:.2f} ms")
    return lines


def report_table(run: Run) -> str:
    category = category_report(run.categories)
    rate = run.memories / run.load_seconds if run.load_seconds else 0.0
    lines = [
        f"{run.name}: {run.haystacks} haystacks, {run.memories} memories ({run.duplicates} exact duplicates), "
        f"{len(run.relevance)} queries; limit {LIMIT}; negatives rejected below {NEGATIVE_THRESHOLD}",
        f"load: {rate:.0f} memories/s{f' ({run.kept} stores loaded by an earlier run)' if run.kept else ''};"
        f" whole run {run.seconds:.1f} s",
        "",
        *metrics_table(f"Relevance only ({describe(RELEVANCE_ONLY)}) - headline", run.relevance),
        "",
        *reliability_table(run.relevance),
        "",
        *metrics_table(
            f"Default weights ({describe(DEFAULT_WEIGHTS)}); queries not independent (access counts)", run.default
        ),
        "",
        *([*metrics_table("Cosine only (same model, no rules)", run.cosine), ""] if run.cosine else []),
        *metrics_table("BM25 only (the store's word search)", run.bm25),
        "",
    ]
    if category.labelled:
        assert category.accuracy is not None
        lines.append(f"Category accuracy: {category.accuracy:.3f} ({category.correct}/{category.labelled})")
        lines.append("  map: " + ", ".join(f"{k}->{v}" for k, v in CATEGORY_MAP.items() if k != v))
        for label, counts in category.confusion.items():
            expected = CATEGORY_MAP[label]
            detail = ", ".join(f"{c}{'*' if c == expected else ''} {n}" for c, n in counts.items())
            lines.append(f"  {label:<13} -> {detail}")
        lines.append("  (* = counted as correct)")
    else:
        lines.append("Category accuracy: - (no memory carries a category label)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help='an eval file (README.md, "Evaluation data")')
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--limit-haystacks", type=int, default=None, metavar="N", help="only the first N haystacks")
    parser.add_argument("--kinds", default=None, help="comma-separated query kinds to ask (default: all)")
    parser.add_argument(
        "--extra-queries", type=Path, default=None, metavar="FILE",
        help='more queries for one haystack of the data: {"haystack": id, "queries": [...]}',
    )  # fmt: skip
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite", help="where the stores are")
    parser.add_argument(
        "--database-url", default=None, help="postgres: a server (default: MNEMO_TEST_POSTGRES_URL, or embedded)"
    )
    parser.add_argument(
        "--stores", type=Path, default=None, metavar="DIR",
        help="keep the loaded SQLite stores in DIR and reuse them when run again on the same memories",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.stores and args.backend != "sqlite":
        parser.error("--stores keeps SQLite stores: it cannot be used with --backend postgres")
    data = json.loads(args.data.read_text(encoding="utf-8"))
    if args.extra_queries:
        extra = json.loads(args.extra_queries.read_text(encoding="utf-8"))
        (haystack,) = [h for h in data["haystacks"] if h["id"] == extra["haystack"]]
        haystack["queries"] += extra["queries"]
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] if args.kinds else None
    with ExitStack() as stack:
        server = None
        if args.backend == "postgres":
            from postgres_database import postgres_server

            server = stack.enter_context(postgres_server(args.database_url))
        run = evaluate(data, args.limit_haystacks, kinds, server, args.stores)
    print(json.dumps(report_json(run)) if args.json else report_table(run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
