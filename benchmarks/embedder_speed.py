"""Speed of the local embedder, fp32 and int8 side by side; prints a table.

    python benchmarks/embedder_speed.py
    python benchmarks/embedder_speed.py --sentences 1000 --threads 2 --json
    python benchmarks/embedder_speed.py --model all-mpnet-base-v2

Each variant runs in a fresh process, so that its load time is a cold one and its memory is its
own: load (import onnxruntime and tokenizers, open the session), one-sentence latency (p50 and
p95 of embed_query on a ~15-word sentence, and the CPU time it takes over all threads),
throughput of embed_documents on N ~20-word sentences (and CPU ms per sentence), and the process's
resident memory at the end. Needs `mnemo setup` first.
Not a test: numbers, not assertions; on a busy machine they wander.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

VARIANTS = ("fp32", "int8")
QUERY = "What did Emma say about moving the quarterly planning meeting to the downtown office?"
WORDS = (
    "the a user prefers coffee tea meeting project deadline billing service deploy review code team office "
    "emma liam noah priya chen lisbon kyoto toronto database migration pipeline friday monday weekly budget "
    "allergic peanuts cello chess running docker python tests release notes customer invoice refund call"
)


def sentences(count: int, words: int = 20, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    vocabulary = WORDS.split()
    return [" ".join(rng.choices(vocabulary, k=words)).capitalize() + "." for _ in range(count)]


def rss_mb() -> float:
    """Resident memory now (Linux /proc), else the peak that getrusage reports."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def measure(variant: str, model: str, model_dir: Path | None, count: int, threads: int | None) -> dict[str, Any]:
    """Runs in the worker process: everything is timed from a cold import."""
    started = time.perf_counter()
    from mnemo.embed.local import LocalEmbedder

    embedder = LocalEmbedder(model_dir, model=model, variant=variant, threads=threads)  # type: ignore[arg-type]
    embedder.load()
    load_s = time.perf_counter() - started

    for _ in range(10):
        embedder.embed_query(QUERY)
    latencies = []
    cpu = time.process_time()
    for _ in range(300):
        t = time.perf_counter()
        embedder.embed_query(QUERY)
        latencies.append(time.perf_counter() - t)
    query_cpu_ms = (time.process_time() - cpu) / 300 * 1000
    latencies.sort()

    batch = sentences(count)
    t, cpu = time.perf_counter(), time.process_time()
    embedder.embed_documents(batch)
    throughput = count / (time.perf_counter() - t)
    text_cpu_ms = (time.process_time() - cpu) / count * 1000
    return {
        "variant": variant,
        "name": embedder.name,
        "load_s": load_s,
        "query_p50_ms": statistics.median(latencies) * 1000,
        "query_p95_ms": latencies[int(len(latencies) * 0.95)] * 1000,
        "query_cpu_ms": query_cpu_ms,
        "text_cpu_ms": text_cpu_ms,
        "sentences": count,
        "throughput_per_s": throughput,
        "rss_mb": rss_mb(),
    }


def run_worker(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", variant, "--model", args.model, "--sentences", str(args.sentences)]
    if args.model_dir:
        command += ["--model-dir", str(args.model_dir)]
    if args.threads:
        command += ["--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        f"{'model':32} {'load s':>7} {'query p50 ms':>13} {'p95 ms':>7} {'CPU ms':>7} {'texts/s':>8} "
        f"{'CPU ms/text':>11} {'RSS MB':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['name']:32} {r['load_s']:7.2f} {r['query_p50_ms']:13.2f} {r['query_p95_ms']:7.2f} "
            f"{r['query_cpu_ms']:7.2f} {r['throughput_per_s']:8.0f} {r['text_cpu_ms']:11.2f} {r['rss_mb']:7.0f}"
        )
    print(f"(throughput: {rows[0]['sentences']} sentences of 20 words; query: {len(QUERY.split())} words)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=None, help="Model folder (default: as mnemo finds it).")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="all-MiniLM-L6-v2 or all-mpnet-base-v2.")
    parser.add_argument("--sentences", type=int, default=1000, help="Texts in the throughput run.")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="The model's threads (default: mnemo's): MiniLM's runs side by side, MPNet's split across them.",
    )
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(measure(args.worker, args.model, args.model_dir, args.sentences, args.threads)))
        return
    rows = [run_worker(variant, args) for variant in VARIANTS]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
