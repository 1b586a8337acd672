# ruff: noqa: E501  (the session descriptions are data: one call a line reads best)
"""The replay corpus of ``benchmarks/hooks.py``: Claude Code sessions as the hook calls Claude Code makes.

    python benchmarks/hook_sessions.py [--out benchmarks/data/hook_sessions]

Writes one JSONL file per session (``{"event": "user-prompt-submit", "payload": {...}}`` a line,
in the order Claude Code calls its hooks) and ``labels.json`` beside them, deterministically, from
the compact session descriptions below: four fictional projects (a Flask API, a React dashboard,
a Rust CLI, a data pipeline) worked on over nine days by one developer. Every key, token and
password in here is made up.

Per session the labels hold the facts worth keeping (short phrases a kept memory should contain),
for each prompt that depends on earlier sessions the facts it needs, the planted secrets (exact
strings; none may be written anywhere under MNEMO_HOME) and the split. Validation sessions are for
measuring only: nobody tunes capture's rules on them. Building checks that every fact occurs in its
session, every need names a fact of an earlier session of the same project, and every secret
occurs in its session's calls.

Each turn is a UserPromptSubmit, the PostToolUse (or PostToolUseFailure) calls of the tools the
agent then ran, and a Stop; a session opens with SessionStart and usually ends with SessionEnd.
Every tool call is recorded, Read, Grep and Glob included; ``hooks.py`` sends only those that
mnemo's installed matchers let through, as Claude Code would.
"""

from __future__ import annotations

import argparse
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOME = "/home/dana"
CODE = f"{HOME}/code"
PROJECTS = {
    "ledger-api": "Flask API (Python, PostgreSQL)",
    "pulse-dashboard": "React dashboard (TypeScript, Vite, jest)",
    "tidyfs": "Rust CLI (clap, cargo)",
    "tide-pipeline": "data pipeline (dbt, Airflow, Snowflake)",
}
OUT = Path(__file__).parent / "data" / "hook_sessions"


# -- tool calls ----------------------------------------------------------------------------
@dataclass
class Tool:
    name: str
    input: dict[str, Any]
    response: Any = None
    error: str | None = None  # a failed call: PostToolUseFailure with this error


def read(path: str, content: str) -> Tool:
    lines = content.count("\n") + 1
    file = {"filePath": path, "content": content, "numLines": lines, "startLine": 1, "totalLines": lines}
    return Tool("Read", {"file_path": path}, {"type": "text", "file": file})


def edit(path: str, old: str, new: str, original: str = "") -> Tool:
    original = original or f"...\n{old}\n..."
    hunk = {"oldStart": 1, "oldLines": old.count("\n") + 1, "newStart": 1, "newLines": new.count("\n") + 1,
            "lines": [f"-{x}" for x in old.splitlines()] + [f"+{x}" for x in new.splitlines()]}  # fmt: skip
    response = {"filePath": path, "oldString": old, "newString": new, "originalFile": original,
                "structuredPatch": [hunk], "userModified": False, "replaceAll": False}  # fmt: skip
    return Tool("Edit", {"file_path": path, "old_string": old, "new_string": new}, response)


def multi_edit(path: str, *pairs: tuple[str, str]) -> Tool:
    edits = [{"old_string": old, "new_string": new} for old, new in pairs]
    return Tool("MultiEdit", {"file_path": path, "edits": edits}, {"filePath": path, "edits": edits})


def write(path: str, content: str) -> Tool:
    response = {"type": "create", "filePath": path, "content": content, "structuredPatch": []}
    return Tool("Write", {"file_path": path, "content": content}, response)


def bash(command: str, stdout: str = "", stderr: str = "", description: str = "") -> Tool:
    tool_input = {"command": command, "description": description or command.split()[0]}
    return Tool("Bash", tool_input, {"stdout": stdout, "stderr": stderr, "interrupted": False, "isImage": False})


def fail(command: str, output: str, code: int = 1) -> Tool:
    return Tool("Bash", {"command": command, "description": command.split()[0]}, error=f"Exit code {code}\n{output}")


def grep(pattern: str, *files: str) -> Tool:
    response = {"mode": "files_with_matches", "filenames": list(files), "numFiles": len(files)}
    return Tool("Grep", {"pattern": pattern, "output_mode": "files_with_matches"}, response)


def glob(pattern: str, *files: str) -> Tool:
    response = {"filenames": list(files), "durationMs": 11, "numFiles": len(files), "truncated": False}
    return Tool("Glob", {"pattern": pattern}, response)


def todo(*items: str) -> Tool:
    todos = [{"content": t, "status": "pending", "activeForm": t} for t in items]
    return Tool("TodoWrite", {"todos": todos}, {"oldTodos": [], "newTodos": todos})


@dataclass
class Turn:
    prompt: str
    tools: list[Tool] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)  # facts of earlier sessions this prompt needs


@dataclass
class Session:
    project: str
    day: int
    split: str  # train | validation
    title: str
    turns: list[Turn | str]  # "pre-compact" between turns: a compaction (PreCompact, SessionStart compact)
    facts: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    source: str = "startup"
    cwd: str = ""  # below the project's root
    end: str | None = "prompt_input_exit"  # SessionEnd's reason; None: the terminal was closed


# fmt: off
# -- realistic bulk: files and logs --------------------------------------------------------
def py_module(doc: str, names: list[str], imports: str = "from __future__ import annotations\n") -> str:
    parts = [f'"""{doc}"""\n', imports]
    for i, name in enumerate(names):
        parts.append(
            f"\n\ndef {name}(session, account_id: int, *, limit: int = {20 + i}) -> list[dict]:\n"
            f'    """{name.replace("_", " ").capitalize()}."""\n'
            f"    rows = session.execute(\n"
            f'        select(Entry).where(Entry.account_id == account_id).order_by(Entry.id).limit(limit)\n'
            f"    ).scalars()\n"
            f"    out = []\n"
            f"    for row in rows:\n"
            f"        if row.deleted_at is not None:\n"
            f"            continue\n"
            f'        out.append({{"id": row.id, "amount": row.amount, "kind": "{name.split("_")[0]}"}})\n'
            f"    return out\n"
        )
    return "".join(parts)


def pytest_log(module: str, count: int, failed: dict[int, str] | None = None, seconds: float = 3.2) -> str:
    failed = failed or {}
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.12.3, pytest-8.2.1, pluggy-1.5.0",
             "rootdir: /app", "configfile: pyproject.toml", "plugins: cov-5.0.0, flask-1.3.0",
             f"collected {count} items", ""]  # fmt: skip
    for i in range(count):
        verdict = "FAILED" if i in failed else "PASSED"
        lines.append(f"tests/{module}::test_case_{i:03d}_{['create', 'list', 'update', 'delete'][i % 4]} {verdict}")
    if failed:
        lines += ["", "=================================== FAILURES ==================================="]
        for i, message in failed.items():
            lines += [f"____________________________ test_case_{i:03d} ____________________________", "",
                      "    def test_case():", ">       assert response.status_code == 200", f"E       {message}", ""]  # fmt: skip
        lines.append(f"FAILED tests/{module} - {next(iter(failed.values()))}")
        lines.append("!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!!")
        lines.append(f"========================= 1 failed, {min(failed)} passed in {seconds:.2f}s =========================")
    else:
        lines.append(f"============================== {count} passed in {seconds:.2f}s ==============================")
    return "\n".join(lines)


def jest_log(suites: list[str], tests_each: int = 6) -> str:
    lines = []
    for suite in suites:
        lines.append(f"PASS src/components/{suite}/{suite}.test.tsx")
        for i in range(tests_each):
            lines.append(f"  ✓ {suite} renders case {i} ({3 + i * 7 % 40} ms)")
    total = len(suites) * tests_each
    lines += ["", f"Test Suites: {len(suites)} passed, {len(suites)} total",
              f"Tests:       {total} passed, {total} total", "Snapshots:   0 total", "Time:        7.912 s",
              "Ran all test suites."]  # fmt: skip
    return "\n".join(lines)


def cargo_test_log(count: int) -> str:
    lines = ["   Compiling tidyfs v0.4.0 (/work)", "    Finished `test` profile [unoptimized + debuginfo] in 14.21s",
             "     Running unittests src/lib.rs (target/debug/deps/tidyfs-3f1c2a9b8d7e6f50)", "",
             f"running {count} tests"]  # fmt: skip
    modules = ["scan", "clean", "stats", "rules", "trash", "walk"]
    for i in range(count):
        lines.append(f"test {modules[i % 6]}::tests::case_{i:02d} ... ok")
    lines += ["", f"test result: ok. {count} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.41s",
              "", "   Doc-tests tidyfs", "", "running 3 tests", "test src/lib.rs - rules::Rule (line 12) ... ok",
              "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.02s"]  # fmt: skip
    return "\n".join(lines)


def dbt_log(models: list[str], verb: str = "run") -> str:
    lines = ["14:02:11  Running with dbt=1.8.2", "14:02:12  Registered adapter: snowflake=1.8.3",
             "14:02:13  Found 84 models, 212 data tests, 31 sources, 902 macros", "", "14:02:14  Concurrency: 8 threads (target='dev')", ""]  # fmt: skip
    for i, model in enumerate(models, 1):
        lines.append(f"14:02:{15 + i:02d}  {i} of {len(models)} START sql view model dbt_dana.{model} ........ [RUN]")
        lines.append(f"14:02:{16 + i:02d}  {i} of {len(models)} OK created sql view model dbt_dana.{model} ... [SUCCESS 1 in 1.2{i}s]")
    lines += ["", f"14:02:40  Finished running {len(models)} view models in 0 hours 0 minutes and 26.11 seconds (26.11s).",
              "", "14:02:40  Completed successfully", "", f"14:02:40  Done. PASS={len(models)} WARN=0 ERROR=0 SKIP=0 TOTAL={len(models)}"]  # fmt: skip
    if verb != "run":
        lines[0] = f"14:02:11  Running with dbt=1.8.2 ({verb})"
    return "\n".join(lines)


def build_log(chunks: list[tuple[str, str]]) -> str:
    lines = ["> pulse-dashboard@2.3.0 build", "> tsc -b && vite build", "", "vite v5.2.11 building for production...",
             "transforming...", "✓ 1412 modules transformed.", "rendering chunks...", "computing gzip size..."]  # fmt: skip
    for name, size in chunks:
        lines.append(f"dist/assets/{name:<40} {size:>10} │ gzip: {size}")
    lines.append("✓ built in 18.42s")
    return "\n".join(lines)


# Made-up secrets, named once: each session lists those it plants.
LEDGER_DB_PASSWORD = "s3cr3tLedger42"
LEDGER_SECRET_KEY = "f7Hq2LpX9vRt4NwZ8bKc3MdY6sJe1UaG"
STRIPE_LIVE = "sk_live_51NzQpLKd8RvT2xYbW4hJ7mC9eF3gA6sUq0"
STRIPE_WEBHOOK = "whsec_Vb83kQzT1mXr9LpN4sWc7YdH2fJg6KaE"
REGISTRY_PASSWORD = "Gh0stDeploy-2291"
SENTRY_TOKEN = "sntrys_eyJpYXQiOjE3MTU4NzY1NDMsInVybCI6Imh0dHBzOi8vc2VudHJ5LmlvIn0_Qm9rXk2vP8sLr3TnWj5YcA1dZ7"
MAPBOX_TOKEN = "pk.eyJ1IjoiZGFuYS1wdWxzZSIsImEiOiJjbHh5ejEyMzQ1Njc4OWFiY2RlZiJ9.Zm9vYmFyYmF6cXV4MTIzNDU2"
GOOGLE_KEY = "AIzaSyB3xK9mQ2vLp7RtW4nZc8hJ1dF6gY0sUaE"
OPENAI_KEY = "sk-proj-Q7mZ2xWv9LpT4nRb8KcY3hJd6FgS1aUe0iOq5NwE"
CHROMATIC_TOKEN = "chpt_a81d0c5e9f3b4a2c"
GITHUB_TOKEN = "ghp_R4nD0mT0k3nF0rT1dyfsB0tXq9ZvLw2Ks7Mp"
CRATES_TOKEN = "cioXq3vR9mTt2LwY8pHsK4nB7dFgJ6aZ1cE5"
PRIVATE_KEY_LINE = "MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQC7kX2mQ9pLvT4r"
SNOWFLAKE_PASSPHRASE = "Mar1ne-Layer-77"
AIRFLOW_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhaXJmbG93LWJhY2tmaWxsIiwiZXhwIjoxNzI1MDAwMDAwfQ"
    ".2kR8vTq9LmX4nWp7ZcY1sJd3HfB6gA0eUoKr5NtQiM8"
)
SLACK_TOKEN = "xoxb-5823017746-7301948265113-Hq8ZrT2mLx9VnC4kWp7YbJ3s"
AWS_KEY_ID = "AKIAQ7RZ3XKM4NVBT2LP"
AWS_SECRET = "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"
STAGING_PASSWORD = "Tanager-Rainfall-27"

PRIVATE_KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    f"{PRIVATE_KEY_LINE}\n"
    "Zq8Ls3Nd7Wc1Yv5Hb9Jm2Xp6Rt0Kf4Ga8Ue3Qi7Oy1Tw5Ez9Ic2Mb6Vn0Lh4Dj8Sg\n"
    "Pa3Xr7Bm1Ck5Fw9Hy2Jt6Nq0Lv4Zd8Gs3Ue7Ri1Oo5Tx9Eb2Ia6Mc0Vk4Lp8Dh3Sj\n"
    "-----END PRIVATE KEY-----"
)

LEDGER_ENV = f"""FLASK_APP=ledger.app:create_app
FLASK_ENV=development
SECRET_KEY={LEDGER_SECRET_KEY}
DATABASE_URL=postgresql://ledger:{LEDGER_DB_PASSWORD}@localhost:5433/ledger
STRIPE_SECRET_KEY={STRIPE_LIVE}
STRIPE_WEBHOOK_SECRET={STRIPE_WEBHOOK}
SENTRY_DSN=https://4b1d6c0e9f2a@o452211.ingest.sentry.io/5520113
LOG_LEVEL=debug"""

DASHBOARD_ENV = f"""VITE_API_URL=http://localhost:8000
VITE_MAPBOX_TOKEN={MAPBOX_TOKEN}
VITE_GOOGLE_MAPS_KEY={GOOGLE_KEY}
OPENAI_API_KEY={OPENAI_KEY}
VITE_FEATURE_FLAGS=revenue_v2,dark_mode"""

PIPELINE_ENV = f"""AIRFLOW_HOME=/opt/airflow
SNOWFLAKE_ACCOUNT=tide-xy12345
SNOWFLAKE_USER=DBT_DANA
SLACK_BOT_TOKEN={SLACK_TOKEN}
AWS_ACCESS_KEY_ID={AWS_KEY_ID}
AWS_SECRET_ACCESS_KEY={AWS_SECRET}
AWS_DEFAULT_REGION=eu-west-1"""

INVOICES_PY = py_module(
    "Invoice routes: list, totals, export.",
    ["list_invoices", "invoice_totals", "export_invoices", "void_invoice", "refund_invoice", "invoice_lines"],
    "from flask import Blueprint, jsonify, request\nfrom sqlalchemy import select\n\nfrom ledger.models import Entry\n",
)
REVENUE_CHART = """import { LineChart, Line, XAxis, YAxis, Tooltip, ResponsiveContainer } from 'recharts';
import { useApi } from '../../hooks/useApi';
import type { RevenuePoint } from '../../api/types';

export interface RevenueChartProps {
  accountId: string;
  range: '7d' | '30d' | '90d';
}

export function RevenueChart({ accountId, range }: RevenueChartProps) {
  const { data, loading, error } = useApi<RevenuePoint[]>(`/accounts/${accountId}/revenue?range=${range}`);
  if (error) return <div role="alert">Could not load revenue</div>;
  const points = data ?? [];
  return (
    <ResponsiveContainer width="100%" height={240}>
      <LineChart data={points}>
        <XAxis dataKey="day" />
        <YAxis tickFormatter={(v: number) => `$${(v / 100).toFixed(0)}`} />
        <Tooltip />
        <Line type="monotone" dataKey="cents" stroke="#4f46e5" dot={false} />
      </LineChart>
    </ResponsiveContainer>
  );
}
"""
CLI_RS = """use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Keep a folder tidy: find clutter, move it to the trash, report what is where.
#[derive(Debug, Parser)]
#[command(name = "tidy", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Print what would happen without touching anything
    #[arg(long, global = true)]
    pub verbose: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Remove files matching the rules
    Clean {
        #[arg(default_value = ".")]
        path: PathBuf,
        #[arg(long)]
        older_than: Option<String>,
    },
    /// Scan a folder and print the largest items
    Scan {
        #[arg(default_value = ".")]
        path: PathBuf,
        #[arg(long, default_value_t = 20)]
        top: usize,
    },
}
""" + "\n".join(f"// rule {i}: {kind} files older than {i * 3} days" for i, kind in enumerate(["log", "tmp", "bak"] * 20))
DAG_PY = '''"""Daily events: load raw events, then run the dbt models that depend on them."""

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

from tide.alerts import notify_failure

default_args = {"owner": "data", "retries": 2, "retry_delay": timedelta(minutes=5), "on_failure_callback": notify_failure}

with DAG("daily_events", start_date=datetime(2024, 1, 1), schedule="0 3 * * *", catchup=False, default_args=default_args) as dag:
    load = BashOperator(task_id="load_raw_events", bash_command="python -m tide.load events --date {{ ds }}")
    stage = BashOperator(task_id="dbt_stage", bash_command="dbt run --select stg_events --target prod")
    marts = BashOperator(task_id="dbt_marts", bash_command="dbt run --select fct_events+ --target prod")
    test = BashOperator(task_id="dbt_test", bash_command="dbt test --select fct_events+ --target prod")
    load >> stage >> marts >> test
''' + "\n".join(f"# {d}: backfilled by hand, see ops log #{400 + d}" for d in range(1, 40))

L, D, R, T = "ledger-api", "pulse-dashboard", "tidyfs", "tide-pipeline"
DB_URL = f"postgresql://ledger:{LEDGER_DB_PASSWORD}@localhost:5433/ledger_test"
REFUSED = (
    'sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) connection to server at "localhost" (127.0.0.1), '
    "port {port} failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?"
)

# -- the sessions, in the order they happened ------------------------------------------------
SESSIONS: list[Session] = [
    # ---------------------------------------------------------------- day 1
    Session(L, 1, "train", "invoice totals 500, test setup, branch rule", facts=["pytest with -x", "tests/conftest.py", "5433", "never commit to main directly", "against develop"], secrets=[LEDGER_DB_PASSWORD], turns=[
        Turn("I'm picking up the ledger API again after a few weeks. We use pytest with -x and the fixtures in tests/conftest.py, so don't create new fixture files. Can you look at why GET /invoices/totals returns a 500?", [
            read(f"{CODE}/{L}/ledger/routes/invoices.py", INVOICES_PY),
            grep("def invoice_totals", f"{CODE}/{L}/ledger/routes/invoices.py"),
            fail("pytest -x tests/test_invoices.py", pytest_log("test_invoices.py", 0) + "\n" + REFUSED.format(port=5432)),
        ]),
        Turn("the dev database runs in docker on port 5433, not 5432. Always point DATABASE_URL at 5433 before running the tests.", [
            fail(f"DATABASE_URL={DB_URL} pytest -x tests/test_invoices.py", pytest_log("test_invoices.py", 14, {6: "assert 500 == 200"})),
            read(f"{CODE}/{L}/ledger/services/totals.py", py_module("Totals of invoices.", ["sum_lines", "sum_taxes", "sum_discounts"])),
            edit(f"{CODE}/{L}/ledger/services/totals.py", "total = sum(line.amount for line in lines)", "total = sum((line.amount for line in lines), start=0)"),
            bash(f"DATABASE_URL={DB_URL} pytest -x tests/test_invoices.py", pytest_log("test_invoices.py", 14)),
        ]),
        Turn("nice. commit it on a branch please — never commit to main directly here, and open the PR against develop.", [
            bash("git checkout -b fix/invoice-totals-empty", "", "Switched to a new branch 'fix/invoice-totals-empty'"),
            bash('git commit -am "fix: totals of an invoice without lines"', "[fix/invoice-totals-empty 3a9c1e2] fix: totals of an invoice without lines\n 1 file changed, 1 insertion(+), 1 deletion(-)"),
            bash("git push -u origin fix/invoice-totals-empty", "", "To github.com:dana/ledger-api.git\n * [new branch]      fix/invoice-totals-empty -> fix/invoice-totals-empty"),
            bash('gh pr create --base develop --fill', "https://github.com/dana/ledger-api/pull/212"),
        ]),
        Turn("thanks"),
    ]),
    Session(L, 1, "train", "rate limiting, pip-tools", facts=["pip-compile", "never edit requirements.txt by hand"], secrets=[LEDGER_SECRET_KEY, LEDGER_DB_PASSWORD, STRIPE_LIVE, STRIPE_WEBHOOK], turns=[
        Turn("Add rate limiting to /auth/login: 5 attempts per minute per IP.", [
            read(f"{CODE}/{L}/ledger/app.py", "from flask import Flask\n\nfrom ledger.config import Config\n\n\ndef create_app(config=Config):\n    app = Flask(__name__)\n    app.config.from_object(config)\n    register_blueprints(app)\n    return app\n"),
            read(f"{CODE}/{L}/.env", LEDGER_ENV),
            glob("ledger/routes/*.py", *(f"{CODE}/{L}/ledger/routes/{n}.py" for n in ["auth", "invoices", "accounts", "webhooks", "health"])),
            edit(f"{CODE}/{L}/ledger/app.py", "    register_blueprints(app)", "    limiter.init_app(app)\n    register_blueprints(app)"),
            edit(f"{CODE}/{L}/ledger/routes/auth.py", '@bp.post("/login")', '@bp.post("/login")\n@limiter.limit("5 per minute")'),
        ]),
        Turn("We manage dependencies with pip-tools. Add flask-limiter to requirements.in and run pip-compile; never edit requirements.txt by hand.", [
            edit(f"{CODE}/{L}/requirements.in", "flask-sqlalchemy", "flask-sqlalchemy\nflask-limiter"),
            bash("pip-compile requirements.in", "#\n# This file is autogenerated by pip-compile with Python 3.12\n#\n" + "\n".join(f"{p}==1.{i}.0\n    # via -r requirements.in" for i, p in enumerate(["alembic", "flask", "flask-limiter", "flask-sqlalchemy", "limits", "psycopg2-binary", "sqlalchemy", "stripe", "structlog", "werkzeug"] * 4))),
        ]),
        Turn("ok"),
        Turn("run the tests", [
            bash(f"DATABASE_URL={DB_URL} pytest -x", pytest_log("test_auth.py", 61, seconds=9.8)),
        ], needs=["pytest with -x", "5433"]),
    ]),
    Session(D, 1, "train", "RevenueChart test, runInBand", facts=["never yarn", "React Testing Library", "npm test -- --runInBand", "one folder per component", "pascalcase"], turns=[
        Turn("Let's add a test for the RevenueChart component. We use npm in this repo, never yarn — the lockfile is package-lock.json. And we're using jest with React Testing Library, no enzyme.", [
            read(f"{CODE}/{D}/src/components/RevenueChart.tsx", REVENUE_CHART),
            write(f"{CODE}/{D}/src/components/RevenueChart.test.tsx", "import { render, screen } from '@testing-library/react';\nimport { RevenueChart } from './RevenueChart';\n\ntest('shows an alert when the API fails', async () => {\n  render(<RevenueChart accountId=\"a1\" range=\"7d\" />);\n  expect(await screen.findByRole('alert')).toBeInTheDocument();\n});\n"),
            fail("npm test", "> pulse-dashboard@2.3.0 test\n> jest\n\n" + "\n".join(f"PASS src/utils/format{i}.test.ts" for i in range(9)) + "\nFAIL src/components/RevenueChart.test.tsx\n  ● Test suite failed to run\n\n    Jest worker encountered 4 child process exceptions, exceeding retry limit\n\n      at ChildProcessWorker.initialize (node_modules/jest-worker/build/workers/ChildProcessWorker.js:181:21)\n\nTest Suites: 1 failed, 9 passed, 10 total"),
            bash("npm test -- --runInBand", jest_log(["RevenueChart", "KpiCard", "AccountTable", "DateRangePicker"])),
        ]),
        Turn("keep going"),
        Turn("Components go in src/components with one folder per component and an index.ts that re-exports it. Always PascalCase for the component files.", [
            bash("mkdir -p src/components/RevenueChart && git mv src/components/RevenueChart.tsx src/components/RevenueChart.test.tsx src/components/RevenueChart/"),
            write(f"{CODE}/{D}/src/components/RevenueChart/index.ts", "export { RevenueChart } from './RevenueChart';\nexport type { RevenueChartProps } from './RevenueChart';\n"),
            bash("npm test -- --runInBand src/components/RevenueChart", jest_log(["RevenueChart"])),
        ]),
    ]),
    Session(R, 1, "train", "dry-run flag, features", facts=["clap with the derive API", "cargo test --all-features", "thiserror", "never unwrap"], turns=[
        Turn("Let's add a --dry-run flag to `tidy clean`. We use clap with the derive API here, not the builder.", [
            read(f"{CODE}/{R}/src/cli.rs", CLI_RS),
            edit(f"{CODE}/{R}/src/cli.rs", "        #[arg(long)]\n        older_than: Option<String>,", "        #[arg(long)]\n        older_than: Option<String>,\n        /// Print what would be removed, remove nothing\n        #[arg(long)]\n        dry_run: bool,", CLI_RS),
            edit(f"{CODE}/{R}/src/commands/clean.rs", "    trash::delete(&path)?;", "    if dry_run {\n        println!(\"would remove {}\", path.display());\n    } else {\n        trash::delete(&path)?;\n    }"),
            fail("cargo test", "   Compiling tidyfs v0.4.0 (/home/dana/code/tidyfs)\nerror[E0432]: unresolved import `crate::fs::trash`\n  --> src/commands/clean.rs:4:5\n   |\n4  | use crate::fs::trash;\n   |     ^^^^^^^^^^^^^^^^ no `trash` in `fs`\n   |\nnote: found an item that was configured out\n  --> src/fs/mod.rs:3:9\n   = note: the item is gated behind the `trash` feature\n\nerror: could not compile `tidyfs` (lib test) due to 1 previous error"),
            bash("cargo test --all-features", cargo_test_log(38)),
        ]),
        Turn("Errors: anyhow in the binary, thiserror in the library crate. Never unwrap() in library code, return a proper error.", [
            grep(r"\.unwrap\(\)", f"{CODE}/{R}/src/rules.rs", f"{CODE}/{R}/src/scan.rs"),
            multi_edit(f"{CODE}/{R}/src/rules.rs", ("let re = Regex::new(&pattern).unwrap();", "let re = Regex::new(&pattern).map_err(|e| RuleError::Pattern(pattern.clone(), e))?;")),
            bash("cargo test --all-features", cargo_test_log(38)),
        ]),
    ]),
    Session(T, 1, "train", "dbt vs airflow, dev target", cwd="dags", facts=["dbt for all transforms", "sql in dag files", "--target dev", "timestamps in utc"], turns=[
        Turn("Quick context: we're using dbt for all transforms and Airflow only orchestrates. Never put SQL in DAG files. Can you check why stg_events fails locally?", [
            read(f"{CODE}/{T}/dags/daily_events.py", DAG_PY),
            fail("dbt run --select stg_events", "14:10:02  Running with dbt=1.8.2\n14:10:03  Found 84 models, 212 data tests, 31 sources\n14:10:05  1 of 1 START sql view model analytics.stg_events ..... [RUN]\n14:10:06  1 of 1 ERROR creating sql view model analytics.stg_events [ERROR in 0.81s]\n\n14:10:06  Database Error in model stg_events (models/staging/stg_events.sql)\n  002003 (02000): SQL compilation error:\n  Object 'RAW.EVENTS' does not exist or not authorized.\n14:10:06  Done. PASS=0 WARN=0 ERROR=1 SKIP=0 TOTAL=1"),
            bash("dbt run --select stg_events --target dev", dbt_log(["stg_events"])),
        ]),
        Turn("ok"),
        Turn("Always store timestamps in UTC; convert to the customer's timezone only in the marts.", [
            grep("convert_timezone", f"{CODE}/{T}/models/staging/stg_events.sql"),
            edit(f"{CODE}/{T}/models/staging/stg_events.sql", "convert_timezone('Europe/Paris', occurred_at) as occurred_at", "occurred_at::timestamp_ntz as occurred_at_utc"),
        ]),
        Turn("thanks, that's it for today"),
    ]),
    # ---------------------------------------------------------------- day 2
    Session(L, 2, "validation", "alembic heads", facts=["rebase migrations onto the latest head"], secrets=[LEDGER_DB_PASSWORD], turns=[
        Turn("CI is red on the migrations job, can you check?", [
            bash("gh run view 8812 --log-failed", "\n".join(f"migrations\tRun alembic upgrade head\t2024-05-0{d}T10:{i:02d}:11Z INFO  [alembic.runtime.migration] Context impl PostgresqlImpl." for d in range(1, 3) for i in range(30)) + "\nmigrations\tRun alembic upgrade head\tFAILED: Multiple head revisions are present for given argument 'head'; please specify a specific target revision, '<branchname>@head' to narrow to a specific head, or 'heads' for all heads"),
        ]),
        Turn("how do we usually handle two alembic heads here?"),
        Turn("Merge them with alembic merge. From now on, always rebase migrations onto the latest head before opening a PR.", [
            bash("alembic heads", "3f2a91c0d4e1 (head)\n9c1d5e7b2a08 (head)"),
            bash('alembic merge -m "merge heads" 3f2a91c0d4e1 9c1d5e7b2a08', "  Generating /home/dana/code/ledger-api/migrations/versions/b7e4c2d19a3f_merge_heads.py ...  done"),
            bash(f"DATABASE_URL={DB_URL} pytest -x tests/test_migrations.py", pytest_log("test_migrations.py", 9)),
        ], needs=["5433", "pytest with -x"]),
        Turn("push it to a branch and open the PR", [
            bash("git checkout -b chore/merge-alembic-heads && git commit -am 'chore: merge alembic heads' && git push -u origin chore/merge-alembic-heads"),
            bash("gh pr create --base develop --fill", "https://github.com/dana/ledger-api/pull/215"),
        ], needs=["never commit to main directly", "against develop"]),
    ]),
    Session(D, 2, "validation", "TopAccounts test", facts=[], turns=[
        Turn("the TopAccounts table needs a test too", [
            read(f"{CODE}/{D}/src/components/TopAccounts/TopAccounts.tsx", REVENUE_CHART.replace("RevenueChart", "TopAccounts")),
            write(f"{CODE}/{D}/src/components/TopAccounts/TopAccounts.test.tsx", "import { render, screen } from '@testing-library/react';\nimport { TopAccounts } from './TopAccounts';\n\ntest('lists the top accounts', async () => {\n  render(<TopAccounts />);\n  expect(await screen.findAllByRole('row')).toHaveLength(11);\n});\n"),
            bash("npm test -- --runInBand src/components/TopAccounts", jest_log(["TopAccounts"])),
        ], needs=["npm test -- --runInBand", "React Testing Library"]),
        Turn("is it in the right place per our conventions?", needs=["one folder per component"]),
        Turn("thx"),
    ]),
    Session(R, 2, "validation", "stats subcommand, clippy", facts=["-D warnings"], turns=[
        Turn("add a `tidy stats` subcommand that prints the number of files per extension", [
            write(f"{CODE}/{R}/src/commands/stats.rs", "use std::collections::BTreeMap;\nuse std::path::Path;\n\nuse crate::walk::walk;\nuse crate::Error;\n\npub fn stats(root: &Path) -> Result<BTreeMap<String, usize>, Error> {\n    let mut counts = BTreeMap::new();\n    for entry in walk(root)? {\n        let ext = entry.path().extension().map(|e| e.to_string_lossy().into_owned()).unwrap_or_default();\n        *counts.entry(ext).or_insert(0) += 1;\n    }\n    Ok(counts)\n}\n"),
            edit(f"{CODE}/{R}/src/cli.rs", "    /// Scan a folder and print the largest items", "    /// Count files per extension\n    Stats {\n        #[arg(default_value = \".\")]\n        path: PathBuf,\n    },\n    /// Scan a folder and print the largest items", CLI_RS),
            bash("cargo test --all-features", cargo_test_log(41)),
        ], needs=["clap with the derive API", "thiserror", "cargo test --all-features"]),
        Turn("run clippy too", [
            fail("cargo clippy --all-targets --all-features -- -D warnings", "    Checking tidyfs v0.4.0 (/home/dana/code/tidyfs)\nerror: used `unwrap()` on a `Result` value\n  --> src/commands/stats.rs:14:21\n   |\n14 |     let n = counts.get(&ext).unwrap();\n   |             ^^^^^^^^^^^^^^^^^^^^^^^^^\n   = help: if this value is an `Err`, it will panic\n   = note: `-D clippy::unwrap-used` implied by `-D warnings`\n\nerror: could not compile `tidyfs` (lib) due to 1 previous error"),
            edit(f"{CODE}/{R}/src/commands/stats.rs", "let n = counts.get(&ext).unwrap();", "let n = counts.get(&ext).copied().unwrap_or(0);"),
            bash("cargo clippy --all-targets --all-features -- -D warnings", "    Checking tidyfs v0.4.0 (/home/dana/code/tidyfs)\n    Finished `dev` profile [unoptimized + debuginfo] target(s) in 3.87s"),
        ]),
        Turn("We always run clippy with -D warnings before pushing, CI does the same."),
    ]),
    Session(T, 2, "train", "snowflake key-pair auth", facts=["transformer role"], secrets=[PRIVATE_KEY_LINE, SNOWFLAKE_PASSPHRASE], turns=[
        Turn("set up key-pair auth for Snowflake in profiles.yml, the key is ~/.ssh/snowflake_rsa_key.p8", [
            bash("cat ~/.ssh/snowflake_rsa_key.p8", PRIVATE_KEY),
            read(f"{HOME}/.dbt/profiles.yml", f"tide:\n  target: dev\n  outputs:\n    dev:\n      type: snowflake\n      account: tide-xy12345\n      user: DBT_DANA\n      role: TRANSFORMER\n      authenticator: snowflake_jwt\n      private_key_path: ~/.ssh/snowflake_rsa_key.p8\n      private_key_passphrase: \"{SNOWFLAKE_PASSPHRASE}\"\n      database: ANALYTICS_DEV\n      warehouse: TRANSFORMING\n      schema: dbt_dana\n      threads: 8\n"),
            fail("dbt debug", "14:20:01  Running with dbt=1.8.2\n14:20:01  dbt version: 1.8.2\n14:20:02  Connection:\n14:20:02    account: tide-xy12345\n14:20:02    user: DBT_DANA\n14:20:02    role: TRANSFORMER\n14:20:03  Connection test: [ERROR]\n\n14:20:03  1 check failed:\n14:20:03  dbt was unable to connect to the specified database.\nThe database returned the following error:\n\n  >Database Error\n  250001: Could not connect to Snowflake backend after 0 attempt(s). Aborting\n  390144 (08004): JWT token is invalid."),
            edit(f"{HOME}/.dbt/profiles.yml", "      user: DBT_DANA", "      user: DBT_DANA_SVC"),
            bash("dbt debug", "14:21:40  Connection test: [OK connection ok]\n\n14:21:40  All checks passed!"),
        ]),
        Turn("We use the TRANSFORMER role for dbt, never ACCOUNTADMIN — not even for a quick fix.", [
            grep("ACCOUNTADMIN", f"{CODE}/{T}/dags/refresh_grants.py"),
            edit(f"{CODE}/{T}/dags/refresh_grants.py", 'role="ACCOUNTADMIN"', 'role="TRANSFORMER"'),
        ]),
    ], end="logout"),
    # ---------------------------------------------------------------- day 3
    Session(L, 3, "train", "stripe webhooks", facts=["construct_event"], secrets=[STRIPE_WEBHOOK, STRIPE_LIVE, LEDGER_SECRET_KEY, LEDGER_DB_PASSWORD], turns=[
        Turn("Stripe webhooks fail signature verification in staging. The webhook secret is in .env as STRIPE_WEBHOOK_SECRET.", [
            read(f"{CODE}/{L}/.env", LEDGER_ENV),
            read(f"{CODE}/{L}/ledger/routes/webhooks.py", py_module("Stripe webhooks.", ["handle_event", "handle_invoice_paid", "handle_charge_refunded"], "import json\n\nimport stripe\nfrom flask import Blueprint, request\n")),
        ]),
        Turn("We decided to verify webhooks with stripe.Webhook.construct_event and to reject anything older than 5 minutes.", [
            edit(f"{CODE}/{L}/ledger/routes/webhooks.py", "    event = json.loads(request.data)", "    event = stripe.Webhook.construct_event(\n        request.data, request.headers.get(\"Stripe-Signature\"), current_app.config[\"STRIPE_WEBHOOK_SECRET\"], tolerance=300\n    )"),
            fail(f"DATABASE_URL={DB_URL} pytest -x tests/test_webhooks.py", pytest_log("test_webhooks.py", 7, {2: "KeyError: 'HTTP_STRIPE_SIGNATURE'"})),
            edit(f"{CODE}/{L}/tests/conftest.py", "def stripe_event(", "def signed_stripe_event("),
            bash(f"DATABASE_URL={DB_URL} pytest -x tests/test_webhooks.py", pytest_log("test_webhooks.py", 7)),
        ]),
        Turn("add a test for the 5-minute tolerance and run the webhook tests", [
            edit(f"{CODE}/{L}/tests/test_webhooks.py", "def test_valid_signature(", "def test_an_old_event_is_rejected(client, signed_stripe_event):\n    ...\n\n\ndef test_valid_signature("),
            bash(f"DATABASE_URL={DB_URL} pytest -x tests/test_webhooks.py", pytest_log("test_webhooks.py", 8)),
        ], needs=["pytest with -x", "tests/conftest.py"]),
        Turn("continue"),
        Turn("lgtm, thanks"),
    ]),
    Session(D, 3, "train", "blank map, useApi, env keys", facts=["useapi hook", ".env.local"], secrets=[MAPBOX_TOKEN, GOOGLE_KEY, OPENAI_KEY], turns=[
        Turn("Read the .env and tell me why the map is blank on localhost", [
            read(f"{CODE}/{D}/.env", DASHBOARD_ENV),
            bash("npm run dev -- --port 5174", "\n  VITE v5.2.11  ready in 612 ms\n\n  ➜  Local:   http://localhost:5174/\n  ➜  Network: use --host to expose\n"),
            grep(r"fetch\(", f"{CODE}/{D}/src/components/AccountMap/AccountMap.tsx", f"{CODE}/{D}/src/components/KpiCard/KpiCard.tsx"),
            read(f"{CODE}/{D}/src/components/AccountMap/AccountMap.tsx", "import mapboxgl from 'mapbox-gl';\n\nexport function AccountMap() {\n  const [points, setPoints] = useState([]);\n  useEffect(() => {\n    fetch('/api/accounts/locations').then((r) => r.json()).then(setPoints);\n  }, []);\n  mapboxgl.accessToken = import.meta.env.MAPBOX_TOKEN;\n  return <div ref={container} className=\"h-96\" />;\n}\n"),
        ]),
        Turn("Don't fetch in components directly; always go through the useApi hook in src/hooks/useApi.ts. Fix AccountMap and KpiCard.", [
            edit(f"{CODE}/{D}/src/components/AccountMap/AccountMap.tsx", "  const [points, setPoints] = useState([]);\n  useEffect(() => {\n    fetch('/api/accounts/locations').then((r) => r.json()).then(setPoints);\n  }, []);\n  mapboxgl.accessToken = import.meta.env.MAPBOX_TOKEN;", "  const { data: points } = useApi<Location[]>('/accounts/locations');\n  mapboxgl.accessToken = import.meta.env.VITE_MAPBOX_TOKEN;"),
            edit(f"{CODE}/{D}/src/components/KpiCard/KpiCard.tsx", "fetch(`/api/kpis/${kpi}`)", "useApi<Kpi>(`/kpis/${kpi}`)"),
        ]),
        Turn(f"also the google key {GOOGLE_KEY} should never be committed in source, move it to .env.local which is gitignored.", [
            bash("grep -rn AIza src/ || true", f"src/config/maps.ts:3:export const GOOGLE_MAPS_KEY = '{GOOGLE_KEY}';"),
            edit(f"{CODE}/{D}/src/config/maps.ts", f"export const GOOGLE_MAPS_KEY = '{GOOGLE_KEY}';", "export const GOOGLE_MAPS_KEY = import.meta.env.VITE_GOOGLE_MAPS_KEY;"),
            write(f"{CODE}/{D}/.env.local", f"VITE_GOOGLE_MAPS_KEY={GOOGLE_KEY}\n"),
        ]),
    ]),
    Session(T, 3, "validation", "stg_refunds", facts=[], turns=[
        Turn("add a new staging model for the refunds source", [
            read(f"{CODE}/{T}/models/staging/sources.yml", "version: 2\n\nsources:\n  - name: raw\n    database: RAW\n    tables:\n" + "\n".join(f"      - name: {t}\n        loaded_at_field: _loaded_at" for t in ["events", "orders", "customers", "refunds", "payments", "sessions"])),
            write(f"{CODE}/{T}/models/staging/stg_refunds.sql", "select\n    id as refund_id,\n    order_id,\n    amount_cents,\n    reason,\n    created_at::timestamp_ntz as created_at_utc\nfrom {{ source('raw', 'refunds') }}\n"),
            fail("dbt run --select stg_refunds", "14:30:05  1 of 1 ERROR creating sql view model analytics.stg_refunds [ERROR in 0.77s]\n14:30:05  Database Error in model stg_refunds (models/staging/stg_refunds.sql)\n  002003 (02000): SQL compilation error:\n  Object 'RAW.REFUNDS' does not exist or not authorized."),
            bash("dbt run --select stg_refunds --target dev", dbt_log(["stg_refunds"])),
        ], needs=["dbt for all transforms", "timestamps in utc", "--target dev"]),
        Turn("run the tests for it", [bash("dbt test --select stg_refunds --target dev", dbt_log(["not_null_stg_refunds_refund_id", "unique_stg_refunds_refund_id"], "test"))], needs=["--target dev"]),
        Turn("which role should the prod job use for it?", needs=["transformer role"]),
    ]),
    # ---------------------------------------------------------------- day 4
    Session(L, 4, "train", "structlog, money in cents", facts=["prefer structlog", "ruff check --fix", "integer cents"], turns=[
        Turn("Prefer structlog over stdlib logging in new modules; the old modules can stay as they are.", [
            read(f"{CODE}/{L}/ledger/logging.py", "import logging\nimport sys\n\n\ndef configure(level: str) -> None:\n    logging.basicConfig(stream=sys.stdout, level=level.upper())\n"),
            write(f"{CODE}/{L}/ledger/logging.py", "import structlog\n\n\ndef configure(level: str) -> None:\n    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level))\n"),
        ]),
        Turn("what does the request id middleware do?", [read(f"{CODE}/{L}/ledger/middleware.py", "import uuid\n\nfrom flask import g, request\n\n\ndef request_id() -> None:\n    g.request_id = request.headers.get('X-Request-Id') or uuid.uuid4().hex\n")]),
        Turn("ok add the request id to every structlog line. Should we use contextvars or flask.g for this, not sure", [
            edit(f"{CODE}/{L}/ledger/middleware.py", "    g.request_id = request.headers.get('X-Request-Id') or uuid.uuid4().hex", "    g.request_id = request.headers.get('X-Request-Id') or uuid.uuid4().hex\n    structlog.contextvars.bind_contextvars(request_id=g.request_id)"),
            fail("ruff check ledger", "ledger/logging.py:1:8: F401 [*] `logging` imported but unused\nledger/middleware.py:3:1: I001 [*] Import block is un-sorted or un-formatted\nFound 2 errors.\n[*] 2 fixable with the `--fix` option."),
            bash("ruff check --fix ledger", "Found 2 errors (2 fixed, 0 remaining)."),
        ]),
        Turn("Here's the helper from the old billing repo if it helps:\n```python\ndef to_cents(amount):\n    # never pass floats here, callers must round first\n    return int(amount * 100)\n```\nAlso remember: the API returns money as integer cents, never as floats."),
        Turn("👍"),
    ]),
    Session(D, 4, "validation", "loading skeleton", facts=["conventional commits"], turns=[
        Turn("add a loading skeleton to RevenueChart while the data loads", [
            read(f"{CODE}/{D}/src/hooks/useApi.ts", "import { useEffect, useState } from 'react';\n\nexport function useApi<T>(path: string) {\n  const [data, setData] = useState<T>();\n  const [loading, setLoading] = useState(true);\n  const [error, setError] = useState<Error>();\n  useEffect(() => {\n    client.get<T>(path).then(setData, setError).finally(() => setLoading(false));\n  }, [path]);\n  return { data, loading, error };\n}\n"),
            edit(f"{CODE}/{D}/src/components/RevenueChart/RevenueChart.tsx", "  if (error) return <div role=\"alert\">Could not load revenue</div>;", "  if (error) return <div role=\"alert\">Could not load revenue</div>;\n  if (loading) return <Skeleton height={240} />;", REVENUE_CHART),
            fail("npm run typecheck", "> pulse-dashboard@2.3.0 typecheck\n> tsc --noEmit\n\nsrc/components/RevenueChart/RevenueChart.tsx(14,27): error TS2322: Type 'number | undefined' is not assignable to type 'number'."),
            edit(f"{CODE}/{D}/src/components/RevenueChart/RevenueChart.tsx", "<Skeleton height={240} />", "<Skeleton height={240} width=\"100%\" />"),
            bash("npm run typecheck", "> pulse-dashboard@2.3.0 typecheck\n> tsc --noEmit\n"),
        ], needs=["useapi hook"]),
        Turn("ok run the tests. don't worry about the lint warnings for now", [bash("npm test -- --runInBand", jest_log(["RevenueChart", "KpiCard", "AccountTable", "DateRangePicker", "TopAccounts"]))], needs=["npm test -- --runInBand"]),
        Turn("great, commit it. We do conventional commits in this repo (feat:, fix:, chore:).", [
            bash('git commit -am "feat: loading skeleton for the revenue chart"', "[feat/revenue-skeleton 51be0a7] feat: loading skeleton for the revenue chart\n 1 file changed, 2 insertions(+)"),
        ]),
    ]),
    Session(R, 4, "train", "release auth, cargo-release", facts=["git@github.com:dana/tidyfs.git", "cargo-release", "1.74"], secrets=[GITHUB_TOKEN], turns=[
        Turn("the release push failed, can you look", [
            bash("git remote -v", f"origin\thttps://x-access-token:{GITHUB_TOKEN}@github.com/dana/tidyfs.git (fetch)\norigin\thttps://x-access-token:{GITHUB_TOKEN}@github.com/dana/tidyfs.git (push)"),
            fail("git push origin v0.4.1", f"remote: Invalid username or password.\nfatal: Authentication failed for 'https://x-access-token:{GITHUB_TOKEN}@github.com/dana/tidyfs.git/'", 128),
            bash("git remote set-url origin git@github.com:dana/tidyfs.git"),
            bash("git push origin v0.4.1", "", "To github.com:dana/tidyfs.git\n * [new tag]         v0.4.1 -> v0.4.1"),
        ]),
        Turn("We release with cargo-release, never by pushing tags by hand. MSRV is 1.74, keep it in Cargo.toml's rust-version.", [
            read(f"{CODE}/{R}/Cargo.toml", "[package]\nname = \"tidyfs\"\nversion = \"0.4.1\"\nedition = \"2021\"\nrust-version = \"1.70\"\n\n[features]\ndefault = []\ntrash = [\"dep:trash\"]\n\n[dependencies]\nanyhow = \"1\"\nclap = { version = \"4.5\", features = [\"derive\"] }\nthiserror = \"1\"\ntrash = { version = \"3\", optional = true }\n"),
            edit(f"{CODE}/{R}/Cargo.toml", 'rust-version = "1.70"', 'rust-version = "1.74"'),
        ]),
    ], end=None),
    Session(T, 4, "train", "airflow 401, full refresh", facts=["full refresh of fct_events", "weekly chunks"], secrets=[AIRFLOW_JWT], turns=[
        Turn(f"The Airflow API returns 401 from the backfill script. This is what I ran by hand:\ncurl -H 'Authorization: Bearer {AIRFLOW_JWT}' https://airflow.tide.internal/api/v1/dags\nand that works, so it's the script.", [
            read(f"{CODE}/{T}/scripts/backfill.py", py_module("Backfill a DAG through Airflow's REST API.", ["dag_runs", "trigger_run", "wait_for_run"], "import os\n\nimport requests\n")),
            fail("python scripts/backfill.py --dag daily_events --start 2024-05-01", "Traceback (most recent call last):\n  File \"/home/dana/code/tide-pipeline/scripts/backfill.py\", line 48, in <module>\n    main()\n  File \"/home/dana/code/tide-pipeline/scripts/backfill.py\", line 22, in trigger_run\n    response.raise_for_status()\nrequests.exceptions.HTTPError: 401 Client Error: UNAUTHORIZED for url: https://airflow.tide.internal/api/v1/dags/daily_events/dagRuns"),
            edit(f"{CODE}/{T}/scripts/backfill.py", 'headers = {"Authorization": os.environ["AIRFLOW_TOKEN"]}', 'headers = {"Authorization": f"Bearer {os.environ[\'AIRFLOW_TOKEN\']}"}'),
            bash("python scripts/backfill.py --dag daily_events --start 2024-05-01 --end 2024-05-07", "triggered daily_events for 2024-05-01..2024-05-07 (7 runs)\nrun 2024-05-01: success\nrun 2024-05-02: success"),
        ]),
        Turn("Never run a full refresh of fct_events in prod; it takes 6 hours and blocks the warehouse. Backfills go through scripts/backfill.py in weekly chunks."),
    ]),
    # ---------------------------------------------------------------- day 5
    Session(L, 5, "validation", "balance endpoint", facts=["balance.py"], secrets=[LEDGER_DB_PASSWORD], turns=[
        Turn("New endpoint: GET /accounts/<id>/balance?at=YYYY-MM-DD, the balance at the end of that day. Follow the usual conventions for money and logging.", [
            read(f"{CODE}/{L}/ledger/models.py", py_module("Models.", ["account_entries", "account_balance", "entry_lines"])),
            write(f"{CODE}/{L}/ledger/routes/balance.py", "import structlog\nfrom flask import Blueprint, jsonify, request\n\nlog = structlog.get_logger()\nbp = Blueprint('balance', __name__)\n\n\n@bp.get('/accounts/<int:account_id>/balance')\ndef balance(account_id: int):\n    at = request.args.get('at')\n    cents = account_balance_cents(account_id, at)\n    log.info('balance', account_id=account_id, at=at)\n    return jsonify({'account_id': account_id, 'at': at, 'balance_cents': cents})\n"),
            edit(f"{CODE}/{L}/ledger/app.py", "    register_blueprints(app)", "    register_blueprints(app)\n    app.register_blueprint(balance.bp)"),
        ], needs=["integer cents", "prefer structlog"]),
        Turn("run the whole suite", [bash(f"DATABASE_URL={DB_URL} pytest -x", pytest_log("test_balance.py", 74, seconds=11.4))], needs=["pytest with -x", "5433"]),
        Turn("commit and push, as always never to main directly", [
            bash("git checkout -b feat/account-balance && git commit -am 'feat: balance at a date' && git push -u origin feat/account-balance"),
            bash("gh pr create --base develop --fill", "https://github.com/dana/ledger-api/pull/219"),
        ], needs=["never commit to main directly", "against develop"]),
    ]),
    Session(D, 5, "train", "recharts, bundle size", facts=["recharts", "under 500 kb"], turns=[
        Turn("The charts should use Recharts — we decided against Chart.js because of its bundle size."),
        Turn("why is the bundle 2.3 MB?", [
            bash("npm run build", build_log([("index-4f2a1c.js", "2,318.42 kB"), ("admin-9b1e.js", "12.10 kB"), ("index-77ad.css", "41.85 kB")])),
            bash("npx vite-bundle-visualizer --open false", "\n".join(f"{m:<40} {s:>8} kB" for m, s in [("node_modules/chart.js", 412), ("node_modules/mapbox-gl", 780), ("node_modules/recharts", 310), ("node_modules/lodash", 72), ("src/admin", 402), ("node_modules/date-fns", 88)] * 3)),
        ]),
        Turn("Lazy load the admin routes with React.lazy, and make sure the main chunk stays under 500 kB.", [
            edit(f"{CODE}/{D}/src/routes.tsx", "import { AdminRoutes } from './admin/AdminRoutes';", "const AdminRoutes = lazy(() => import('./admin/AdminRoutes'));"),
            bash("npm uninstall chart.js react-chartjs-2", "removed 3 packages, and audited 1204 packages in 4s"),
            bash("npm run build", build_log([("index-8e1b2d.js", "468.90 kB"), ("admin-3c0f.js", "402.77 kB"), ("mapbox-5d1e.js", "780.02 kB"), ("index-77ad.css", "41.85 kB")])),
        ]),
    ]),
    Session(R, 5, "validation", "stats --json", facts=[], turns=[
        Turn("add a --json output option to tidy stats and test it", [
            edit(f"{CODE}/{R}/src/cli.rs", "    Stats {\n        #[arg(default_value = \".\")]\n        path: PathBuf,\n    },", "    Stats {\n        #[arg(default_value = \".\")]\n        path: PathBuf,\n        /// Print JSON instead of a table\n        #[arg(long)]\n        json: bool,\n    },"),
            fail("cargo test", "error[E0432]: unresolved import `crate::fs::trash`\n  --> src/commands/clean.rs:4:5\nnote: the item is gated behind the `trash` feature\nerror: could not compile `tidyfs` (lib test) due to 1 previous error"),
            bash("cargo test --all-features", cargo_test_log(43)),
        ], needs=["cargo test --all-features", "clap with the derive API"]),
        Turn("clippy", [bash("cargo clippy --all-targets --all-features -- -D warnings", "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 2.91s")], needs=["-D warnings"]),
        Turn("ok tag a release", [bash("cargo release patch --execute --no-confirm", "   Upgrading tidyfs from 0.4.1 to 0.4.2\n   Publishing tidyfs\n    Pushing Pushing v0.4.2, main to origin")], needs=["cargo-release"]),
    ]),
    Session(T, 5, "train", "slack alerts", facts=["invited to #data-alerts"], secrets=[SLACK_TOKEN, AWS_KEY_ID, AWS_SECRET], turns=[
        Turn("Slack alerts from the failure callback aren't arriving", [
            read(f"{CODE}/{T}/.env", PIPELINE_ENV),
            read(f"{CODE}/{T}/tide/alerts.py", py_module("Slack alerts for failed tasks.", ["notify_failure", "format_message"], "import os\n\nfrom slack_sdk import WebClient\n")),
            fail(f'curl -sf -X POST -H "Authorization: Bearer {SLACK_TOKEN}" -d channel=C07DATAALRT -d text=test https://slack.com/api/chat.postMessage', "curl: (22) The requested URL returned error: 403", 22),
            bash(f'curl -sf -X POST -H "Authorization: Bearer {SLACK_TOKEN}" -d channel=C07DATAALRT -d text=test https://slack.com/api/chat.postMessage?invite=1', '{"ok":true,"channel":"C07DATAALRT","ts":"1716200000.000100"}'),
        ]),
        Turn("The bot must be invited to #data-alerts first — remember that whenever we add a channel."),
        Turn("ty"),
    ]),
    # ---------------------------------------------------------------- day 6
    Session(L, 6, "train", "staging deploy", facts=["make deploy-staging", "ci secrets"], secrets=[REGISTRY_PASSWORD, SENTRY_TOKEN, STAGING_PASSWORD], turns=[
        Turn(f"The deploy to staging failed, here's the output:\n```\nStep 7/9 : RUN pip install -r requirements.txt\n ---> Using cache\nSuccessfully built 8d1e2f3a4b5c\nError: authentication failed for https://deploy:{REGISTRY_PASSWORD}@registry.ledger.internal/v2/\n```\nWe deploy with `make deploy-staging`, never with flyctl directly.", [
            fail("make deploy-staging", "docker push registry.ledger.internal/ledger-api:staging\nThe push refers to repository [registry.ledger.internal/ledger-api]\ndenied: requested access to the resource is denied\nmake: *** [Makefile:41: deploy-staging] Error 1", 2),
            bash(f"docker login registry.ledger.internal -u deploy -p {REGISTRY_PASSWORD}", "WARNING! Using --password via the CLI is insecure. Use --password-stdin.\nLogin Succeeded"),
            bash("make deploy-staging", "docker push registry.ledger.internal/ledger-api:staging\nstaging: deployed ledger-api:staging (sha256:1c9e...)\nhealth check: ok"),
        ]),
        Turn(f"thanks. fyi the sentry token for the release step is {SENTRY_TOKEN} — keep it in the CI secrets, never in the repo.", [
            bash("gh secret set SENTRY_AUTH_TOKEN --body \"$SENTRY_AUTH_TOKEN\"", "✓ Set Actions secret SENTRY_AUTH_TOKEN for dana/ledger-api"),
        ]),
        Turn(f"remember the staging admin login is ops / {STAGING_PASSWORD} if you need to check the UI"),
    ]),
    Session(D, 6, "train", "storybook, chromatic, compaction", facts=["@storybook/react-vite", "--no-open", "--exit-zero-on-changes"], secrets=[CHROMATIC_TOKEN], turns=[
        Turn("Storybook is broken after the upgrade", [
            fail("npm run storybook", "> pulse-dashboard@2.3.0 storybook\n> storybook dev -p 6006\n\n@storybook/cli v8.1.5\n\nWARN Storybook failed to load the following preset: @storybook/react-vite/preset.\nError: Cannot find module '@storybook/react-vite/preset'\nRequire stack:\n- /home/dana/code/pulse-dashboard/node_modules/@storybook/core-common/dist/index.js"),
            bash("npm install -D @storybook/react-vite@8.1.5", "added 14 packages, changed 3 packages, and audited 1218 packages in 9s"),
            bash("npm run storybook -- --no-open", "╭──────────────────────────────────────────╮\n│   Storybook 8.1.5 for react-vite started │\n│   Local:            http://localhost:6006/ │\n╰──────────────────────────────────────────╯"),
        ]),
        Turn("Storybook runs on port 6006, and we always start it with --no-open in the devcontainer."),
        Turn("write stories for KpiCard and AccountTable", [
            write(f"{CODE}/{D}/src/components/KpiCard/KpiCard.stories.tsx", "import type { Meta, StoryObj } from '@storybook/react';\nimport { KpiCard } from './KpiCard';\n\nconst meta: Meta<typeof KpiCard> = { component: KpiCard };\nexport default meta;\nexport const Revenue: StoryObj<typeof KpiCard> = { args: { kpi: 'revenue' } };\n"),
            write(f"{CODE}/{D}/src/components/AccountTable/AccountTable.stories.tsx", "import type { Meta, StoryObj } from '@storybook/react';\nimport { AccountTable } from './AccountTable';\n\nconst meta: Meta<typeof AccountTable> = { component: AccountTable };\nexport default meta;\nexport const Default: StoryObj<typeof AccountTable> = {};\n"),
            bash("npm test -- --runInBand", jest_log(["RevenueChart", "KpiCard", "AccountTable", "DateRangePicker", "TopAccounts"], 9)),
        ]),
        "pre-compact",
        Turn("continue"),
        Turn(f"the CI token for chromatic is {CHROMATIC_TOKEN} and the job keeps failing", [
            fail(f"npx chromatic --project-token={CHROMATIC_TOKEN}", "Chromatic CLI v11.3.0\n✔ Authenticated with Chromatic\n✔ Started build 231\n✖ Found 4 visual changes: Review the changes at https://www.chromatic.com/build?appId=65f0&number=231\nBuild 231 has 4 changes; exiting with code 1"),
            bash(f"npx chromatic --project-token={CHROMATIC_TOKEN} --exit-zero-on-changes", "✔ Started build 232\n✔ Build 232 passed! 4 changes accepted as baselines"),
            edit(f"{CODE}/{D}/.github/workflows/chromatic.yml", "          projectToken: ${{ secrets.CHROMATIC_PROJECT_TOKEN }}", "          projectToken: ${{ secrets.CHROMATIC_PROJECT_TOKEN }}\n          exitZeroOnChanges: true"),
        ]),
    ]),
    Session(R, 6, "train", "windows paths", facts=["dunce"], turns=[
        Turn("Windows CI fails on path separators in the tests.", [
            bash("gh run view 771 --log-failed", "\n".join(f"test-windows\tcargo test\t---- scan::tests::case_{i:02d} stdout ----\nthread 'scan::tests::case_{i:02d}' panicked at src/scan.rs:{120 + i}:9:\nassertion `left == right` failed\n  left: \"a\\\\b\\\\c.log\"\n right: \"a/b/c.log\"" for i in range(12))),
        ]),
        Turn("Prefer Path::join over string formatting for paths, and use the dunce crate to canonicalize so Windows doesn't give us \\\\?\\ paths.", [
            bash("cargo add dunce", "    Updating crates.io index\n      Adding dunce v1.0.4 to dependencies"),
            edit(f"{CODE}/{R}/src/scan.rs", "let root = std::fs::canonicalize(root)?;", "let root = dunce::canonicalize(root)?;"),
            edit(f"{CODE}/{R}/src/scan.rs", 'format!("{}/{}", dir, name)', "dir.join(name)"),
            bash("cargo test --all-features", cargo_test_log(43)),
        ]),
        Turn("great"),
    ]),
    Session(T, 6, "validation", "march backfill", facts=[], turns=[
        Turn("backfill fct_events for March", [
            bash("python scripts/backfill.py --dag daily_events --start 2024-03-01 --end 2024-03-07", "triggered daily_events for 2024-03-01..2024-03-07 (7 runs)\n" + "\n".join(f"run 2024-03-0{d}: success" for d in range(1, 8))),
            bash("python scripts/backfill.py --dag daily_events --start 2024-03-08 --end 2024-03-14", "triggered daily_events for 2024-03-08..2024-03-14 (7 runs)"),
        ], needs=["full refresh of fct_events", "weekly chunks"]),
        Turn("alerts for the new refunds dag should go to #data-alerts too", [
            edit(f"{CODE}/{T}/dags/refunds.py", 'default_args = {"owner": "data"}', 'default_args = {"owner": "data", "on_failure_callback": notify_failure}'),
        ], needs=["invited to #data-alerts"]),
        Turn("ok thanks"),
    ]),
    # ---------------------------------------------------------------- day 7
    Session(D, 7, "validation", "Sparkline component", facts=[], turns=[
        Turn("Set up a new Sparkline component for the KPI cards, with a test and a story.", [
            write(f"{CODE}/{D}/src/components/Sparkline/Sparkline.tsx", "import { LineChart, Line } from 'recharts';\n\nexport function Sparkline({ points }: { points: number[] }) {\n  return (\n    <LineChart width={120} height={32} data={points.map((v, i) => ({ i, v }))}>\n      <Line dataKey=\"v\" dot={false} stroke=\"#4f46e5\" />\n    </LineChart>\n  );\n}\n"),
            write(f"{CODE}/{D}/src/components/Sparkline/index.ts", "export { Sparkline } from './Sparkline';\n"),
            write(f"{CODE}/{D}/src/components/Sparkline/Sparkline.test.tsx", "import { render } from '@testing-library/react';\nimport { Sparkline } from './Sparkline';\n\ntest('renders', () => {\n  render(<Sparkline points={[1, 2, 3]} />);\n});\n"),
            bash("npm test -- --runInBand src/components/Sparkline", jest_log(["Sparkline"], 2)),
        ], needs=["one folder per component", "recharts", "npm test -- --runInBand"]),
        Turn("now check the bundle size", [bash("npm run build", build_log([("index-1a2b3c.js", "471.12 kB"), ("admin-3c0f.js", "402.77 kB")]))], needs=["under 500 kb"]),
        Turn("start storybook so I can look at it", [bash("npm run storybook -- --no-open", "Storybook 8.1.5 for react-vite started\nLocal: http://localhost:6006/")], needs=["--no-open"]),
    ]),
    Session(R, 7, "train", "criterion baseline", facts=["--save-baseline main"], turns=[
        Turn("how fast is the scan on a big tree now?", [
            bash("cargo bench --bench scan", "\n".join(f"scan/{n}k_files          time:   [{n * 1.9:.2f} ms {n * 2.0:.2f} ms {n * 2.1:.2f} ms]\nFound {n % 7} outliers among 100 measurements ({n % 7}.00%)" for n in (1, 10, 50, 100, 250, 500))),
        ]),
        Turn("We benchmark with criterion and keep a baseline named main: run `cargo bench -- --save-baseline main` on the main branch only."),
    ], end=None),
    Session(T, 7, "train", "dbt docs, sqlfluff", facts=["sqlfluff lint models/"], turns=[
        Turn("the dbt docs site is stale", [bash("dbt docs generate --target dev", dbt_log([f"model_{i}" for i in range(40)], "docs generate"))]),
        Turn("We use sqlfluff with the dbt templater for linting; run `sqlfluff lint models/` before every PR.", [
            fail("sqlfluff lint models/", "\n".join(f"== [models/staging/stg_{t}.sql] FAIL\nL:  {i + 3} | P:  5 | LT01 | Expected only single space before 'as' keyword.\nL:  {i + 7} | P:  1 | CP02 | Unquoted identifiers must be consistently lower case." for i, t in enumerate(["events", "orders", "refunds", "customers"])) + "\nAll Finished!"),
            bash("sqlfluff fix models/staging/ --force", "==== finding fixable violations ====\n== [models/staging/stg_events.sql] FAIL\n==== fixing violations ====\n8 fixable linting violations found\nAre you sure you wish to attempt to fix these? [Y/n] ...\nAttempting fixes...\nAll Finished!"),
            bash("sqlfluff lint models/", "All Finished!"),
        ]),
        Turn("thank you!"),
    ]),
    # ---------------------------------------------------------------- day 8
    Session(L, 8, "validation", "pagination, back to balance", source="resume", facts=["cursor pagination"], secrets=[LEDGER_DB_PASSWORD], turns=[
        Turn("where were we with the balance endpoint?", needs=["balance.py"]),
        Turn("Add pagination to /invoices. Use cursor pagination, not offset — we agreed on that for every list endpoint.", [
            edit(f"{CODE}/{L}/ledger/routes/invoices.py", "def list_invoices(session, account_id: int, *, limit: int = 20)", "def list_invoices(session, account_id: int, *, limit: int = 20, after: int | None = None)", INVOICES_PY),
            fail(f"DATABASE_URL={DB_URL} pytest -x tests/test_invoices.py", pytest_log("test_invoices.py", 0) + "\n" + REFUSED.format(port=5433)),
            bash("docker compose up -d db", "", "[+] Running 1/1\n ✔ Container ledger-api-db-1  Started"),
            bash(f"DATABASE_URL={DB_URL} pytest -x tests/test_invoices.py", pytest_log("test_invoices.py", 16)),
        ], needs=["5433", "pytest with -x"]),
        Turn("perfect"),
    ]),
    Session(D, 8, "train", "error boundary", facts=[], turns=[
        Turn("what's our rule for fetching data in components?", needs=["useapi hook"]),
        Turn("fine. Add an ErrorBoundary around the dashboard grid. And again, never yarn here, I saw a yarn.lock appear.", [
            write(f"{CODE}/{D}/src/components/ErrorBoundary/ErrorBoundary.tsx", "import { Component, type ReactNode } from 'react';\n\nexport class ErrorBoundary extends Component<{ children: ReactNode }, { failed: boolean }> {\n  state = { failed: false };\n  static getDerivedStateFromError() {\n    return { failed: true };\n  }\n  render() {\n    return this.state.failed ? <div role=\"alert\">Something went wrong</div> : this.props.children;\n  }\n}\n"),
            bash("rm yarn.lock && npm install", "up to date, audited 1218 packages in 3s"),
            bash("npm test -- --runInBand", jest_log(["RevenueChart", "KpiCard", "AccountTable", "ErrorBoundary"])),
        ], needs=["never yarn", "one folder per component"]),
        Turn("thanks!"),
    ]),
    Session(T, 8, "validation", "daily revenue mart", cwd="models", facts=[], turns=[
        Turn("I'm adding a marts model for daily revenue per customer, in the customer's local time.", [
            write(f"{CODE}/{T}/models/marts/fct_daily_revenue.sql", "select\n    c.customer_id,\n    convert_timezone('UTC', c.timezone, o.created_at_utc)::date as local_day,\n    sum(o.amount_cents) as revenue_cents\nfrom {{ ref('stg_orders') }} o\njoin {{ ref('dim_customers') }} c using (customer_id)\ngroup by 1, 2\n"),
            bash("dbt build --select fct_daily_revenue --target dev", dbt_log(["fct_daily_revenue"], "build")),
        ], needs=["timestamps in utc", "dbt for all transforms", "--target dev"]),
        Turn("lint it before I open the PR", [bash("sqlfluff lint models/marts/fct_daily_revenue.sql", "All Finished!")], needs=["sqlfluff lint models/"]),
        Turn("and the prod schedule runs as which role again?", needs=["transformer role"]),
    ]),
    # ---------------------------------------------------------------- day 9
    Session(R, 9, "validation", "slower scan, parallel walker", facts=["credentials.toml"], secrets=[CRATES_TOKEN], turns=[
        Turn("the scan got slower after my last change, compare against the baseline", [
            bash("cargo bench --bench scan -- --baseline main", "\n".join(f"scan/{n}k_files          time:   [{n * 2.4:.2f} ms {n * 2.5:.2f} ms {n * 2.6:.2f} ms]\n                        change: [+21.3% +24.9% +28.1%] (p = 0.00 < 0.05)\n                        Performance has regressed." for n in (1, 10, 50, 100))),
        ], needs=["--save-baseline main"]),
        Turn("Make the walker use the ignore crate's parallel walker instead of walkdir.", [
            edit(f"{CODE}/{R}/src/walk.rs", "use walkdir::WalkDir;", "use ignore::WalkBuilder;"),
            bash("cargo test --all-features", cargo_test_log(43)),
        ]),
        Turn(f"btw I found CARGO_REGISTRY_TOKEN={CRATES_TOKEN} in the old .env; I've revoked it. Never keep the registry token in .env, it belongs in ~/.cargo/credentials.toml."),
        Turn("run the checks we always run before pushing", [
            bash("cargo clippy --all-targets --all-features -- -D warnings", "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 4.02s"),
            bash("cargo test --all-features", cargo_test_log(43)),
        ], needs=["-D warnings", "cargo test --all-features"]),
    ]),
    Session(D, 9, "train", "dark mode toggle", facts=[], turns=[
        Turn("add a dark mode toggle in the header, behind the dark_mode feature flag", [
            read(f"{CODE}/{D}/src/components/Header/Header.tsx", "export function Header() {\n  return (\n    <header className=\"flex items-center justify-between p-4\">\n      <Logo />\n      <UserMenu />\n    </header>\n  );\n}\n"),
            edit(f"{CODE}/{D}/src/components/Header/Header.tsx", "      <UserMenu />", "      {flags.dark_mode && <ThemeToggle />}\n      <UserMenu />"),
            bash("npm test -- --runInBand src/components/Header", jest_log(["Header"], 3)),
        ], needs=["npm test -- --runInBand"]),
        Turn("looks good"),
    ]),
    Session(L, 9, "train", "export CSV", facts=[], secrets=[LEDGER_DB_PASSWORD], turns=[
        Turn("Add CSV export to /invoices, same pagination as the list.", [
            edit(f"{CODE}/{L}/ledger/routes/invoices.py", "def export_invoices(session, account_id: int, *, limit: int = 22)", "def export_invoices(session, account_id: int, *, limit: int = 22, after: int | None = None)", INVOICES_PY),
            bash(f"DATABASE_URL={DB_URL} pytest -x tests/test_invoices.py", pytest_log("test_invoices.py", 18)),
        ], needs=["cursor pagination", "5433"]),
        Turn("ok"),
        Turn("open the PR", [bash("gh pr create --base develop --fill", "https://github.com/dana/ledger-api/pull/224")], needs=["against develop"]),
    ]),
]

# fmt: on


# -- building --------------------------------------------------------------------------------
def normal(text: str) -> str:
    return " ".join(text.lower().split())


def session_id(index: int, session: Session) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"mnemo-bench/{index}/{session.project}/{session.title}"))


def calls(index: int, session: Session) -> list[dict[str, Any]]:
    """The hook calls of one session, as Claude Code makes them."""
    root = f"{CODE}/{session.project}"
    sid = session_id(index, session)
    base = {"session_id": sid, "transcript_path": f"{HOME}/.claude/projects/{root.replace('/', '-')}/{sid}.jsonl",
            "cwd": f"{root}/{session.cwd}" if session.cwd else root}  # fmt: skip
    out: list[dict[str, Any]] = []

    def call(event: str, claude_event: str, **fields: Any) -> None:
        payload = base | {"permission_mode": "default", "hook_event_name": claude_event} | fields
        if event == "session-start":
            payload.pop("permission_mode")
        out.append({"event": event, "payload": payload})

    call("session-start", "SessionStart", source=session.source)
    for n, turn in enumerate(session.turns):
        if turn == "pre-compact":
            call("pre-compact", "PreCompact", trigger="auto", custom_instructions="")
            call("session-start", "SessionStart", source="compact")
            continue
        assert isinstance(turn, Turn)
        call("user-prompt-submit", "UserPromptSubmit", prompt=turn.prompt)
        for t, tool in enumerate(turn.tools):
            use_id = f"toolu_{uuid.uuid5(uuid.NAMESPACE_URL, f'{sid}/{n}/{t}').hex[:24]}"
            if tool.error is None:
                call("post-tool-use", "PostToolUse", tool_name=tool.name, tool_input=tool.input,
                     tool_response=tool.response, tool_use_id=use_id)  # fmt: skip
            else:
                call("post-tool-use-failure", "PostToolUseFailure", tool_name=tool.name, tool_input=tool.input,
                     tool_use_id=use_id, error=tool.error, is_interrupt=False)  # fmt: skip
        call("stop", "Stop", stop_hook_active=False)
    if session.end is not None:
        call("session-end", "SessionEnd", reason=session.end)
    return out


def build(out: Path) -> dict[str, Any]:
    labels: list[dict[str, Any]] = []
    facts_by_project: dict[str, list[str]] = {p: [] for p in PROJECTS}
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.jsonl"):
        old.unlink()
    for index, session in enumerate(SESSIONS, 1):
        name = f"{index:02d}-{session.project}-day{session.day}.jsonl"
        hook_calls = calls(index, session)
        text = normal(json.dumps(hook_calls, ensure_ascii=False).replace("\\n", " ").replace('\\"', '"'))
        for fact in session.facts:
            assert normal(fact) in text, f"{name}: fact {fact!r} does not occur in the session"
        raw = json.dumps(hook_calls, ensure_ascii=False)
        for secret in session.secrets:
            assert secret in raw, f"{name}: secret {secret!r} does not occur in the session"
        needs = []
        prompt_number = 0
        for line, hook_call in enumerate(hook_calls):
            if hook_call["event"] != "user-prompt-submit":
                continue
            turn = next(t for t in session.turns if isinstance(t, Turn) and t.prompt == hook_call["payload"]["prompt"])
            for need in turn.needs:
                assert need in facts_by_project[session.project], f"{name}: need {need!r} is no earlier fact"
            if turn.needs:
                needs.append({"prompt": prompt_number, "line": line, "facts": turn.needs})
            prompt_number += 1
        facts_by_project[session.project].extend(session.facts)
        (out / name).write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in hook_calls), encoding="utf-8")
        labels.append({"file": name, "session_id": session_id(index, session), "project": session.project,
                       "day": session.day, "split": session.split, "title": session.title, "facts": session.facts,
                       "needs": needs, "secrets": session.secrets})  # fmt: skip
    document = {
        "about": "Labels of the hook replay corpus (benchmarks/hook_sessions.py writes them; benchmarks/hooks.py "
        "scores against them). Sessions are in the order they happened. facts: phrases a kept memory should "
        "contain (case-insensitive, spaces normalised); needs: per prompt (0-based among the session's prompts; "
        "line: of the JSONL) the facts of earlier sessions it needs; secrets: exact strings that must never be "
        "written under MNEMO_HOME. Validation sessions: nobody tunes capture rules on them.",
        "home": HOME,
        "projects": {name: {"root": f"{CODE}/{name}", "kind": kind} for name, kind in PROJECTS.items()},
        "sessions": labels,
    }
    (out / "labels.json").write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    document = build(args.out)
    sessions = document["sessions"]
    for split in ("train", "validation"):
        chosen = [s for s in sessions if s["split"] == split]
        print(f"{split}: {len(chosen)} sessions, {sum(len(s['facts']) for s in chosen)} facts, "
              f"{sum(len(s['needs']) for s in chosen)} prompts with needs, "
              f"{sum(len(s['secrets']) for s in chosen)} secrets planted")  # fmt: skip


if __name__ == "__main__":
    main()
