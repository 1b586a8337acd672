"""Closing a SQLite store while another thread still searches it: no crash, a clean error.

Closing a connection under a statement running on another thread crashed the interpreter (a
search's word thread, after the query's embedding had failed, and the store closed by the test).
Each scenario runs in its own process, so that a crash shows as a negative return code instead of
taking the test run down; the process prints what the searching thread got, as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mnemo.errors import StorageError
from mnemo.model import Memory, new_id
from mnemo.query import Filters
from mnemo.storage.sqlite import SQLiteStorage

# Shared by the scenarios: a store of real memories, and a search that records its outcome.
SETUP = """
import json, random, sys, threading, time
from datetime import UTC, datetime
from pathlib import Path

import mnemo.storage.sqlite as sqlite_module
from mnemo.model import Memory, new_id
from mnemo.query import Filters, TextMatch
from mnemo.storage.sqlite import SQLiteStorage

now = datetime.now(UTC)
folder = Path(sys.argv[1])


def outcome_of(search):
    try:
        return {"hits": len(search())}
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
"""

# The search waits inside SQLite, in the store's case-folding SQL function (a case-insensitive
# "contains" filter calls it on every candidate row), while the main thread closes the store.
HELD_INSIDE_SQLITE = (
    SETUP
    + """
entered, release = threading.Event(), threading.Event()
fold_case = sqlite_module.fold_case


def held_fold(text):
    if threading.current_thread().name == "word-search":
        entered.set()
        release.wait(10)
    return fold_case(text)


sqlite_module.fold_case = held_fold  # registered with each connection as it is made
store = SQLiteStorage(folder, "closing")
store.insert_batch([Memory(new_id(), f"note {i} about the deploy script", now, now, now, store="closing")
                    for i in range(200)])
result = {}
search = lambda: store.search_text(["deploy"], Filters(now=now, contains=TextMatch("DEPLOY")), 10)
thread = threading.Thread(target=lambda: result.update(outcome_of(search)), name="word-search")
thread.start()
assert entered.wait(10), "the search never reached the folding function"
threading.Timer(0.3, release.set).start()  # the function returns while close() waits
started = time.monotonic()
store.close()
result["close_s"] = time.monotonic() - started
thread.join(10)
result["still_running"] = thread.is_alive()
result["after"] = outcome_of(lambda: store.search_text(["deploy"], Filters(now=now), 10))
print(json.dumps(result))
"""
)

# Real searches of a store of 20,000 memories (a few ms each), closed at random moments of them.
RACING = (
    SETUP
    + """
words = [f"w{i}" for i in range(2000)]
pick = random.Random(7)
filler = SQLiteStorage(folder, "racing")
for start in range(0, 20_000, 5_000):
    filler.insert_batch([Memory(new_id(), "common " + " ".join(pick.choices(words, k=30)), now, now, now,
                                store="racing") for _ in range(5_000)])
filler.close()

outcomes = []
for _ in range(int(sys.argv[2])):
    store = SQLiteStorage(folder, "racing")
    started = threading.Event()

    def searches():
        started.set()
        for _ in range(1_000):
            store.search_text(["common", "w1", "w2"], Filters(now=now), 10)
            store.texts_passing(list(range(1, 3_000)), Filters(now=now))
        return []

    thread = threading.Thread(target=lambda: outcomes.append(outcome_of(searches)))
    thread.start()
    started.wait()
    time.sleep(pick.random() * 0.01)
    store.close()
    thread.join(30)
    outcomes.append({"still_running": thread.is_alive()})
print(json.dumps(outcomes))
"""
)


def _run(script: str, *arguments: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", script, *arguments], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"the process ended with {done.returncode}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


def test_closing_a_store_while_a_word_search_runs_inside_sqlite_stops_it_with_a_storage_error(tmp_path: Path):
    result = _run(HELD_INSIDE_SQLITE, str(tmp_path / "store"))
    assert result["still_running"] is False
    assert (result.get("error"), result.get("message")) == ("StorageError", "store 'closing' is closed")
    assert 0.2 < result["close_s"] < 5.0  # close() waited for the statement to stop, not past its bound
    assert result["after"] == {"error": "StorageError", "message": "store 'closing' is closed"}


def test_closing_a_store_at_random_moments_of_searches_never_crashes_and_each_search_ends_cleanly(tmp_path: Path):
    outcomes = _run(RACING, str(tmp_path / "store"), "60")
    ended = [outcome for outcome in outcomes if "still_running" not in outcome]
    assert len(ended) == 60
    assert [outcome for outcome in outcomes if outcome.get("still_running")] == []
    assert {outcome.get("error", "hits") for outcome in ended} <= {"StorageError", "hits"}
    assert {outcome["message"] for outcome in ended if "message" in outcome} <= {"store 'racing' is closed"}


@pytest.mark.parametrize("use", ["search_text", "insert_batch", "check_write_lock"])
def test_a_closed_store_refuses_every_use_with_a_storage_error_and_closing_again_does_nothing(tmp_path: Path, use: str):
    now = datetime.now(UTC)
    store = SQLiteStorage(tmp_path / "store", "closed")
    store.insert_batch([Memory(new_id(), "the deploy script", now, now, now, store="closed")])
    store.close()
    store.close()
    uses = {
        "search_text": lambda: store.search_text(["deploy"], Filters(now=now), 10),
        "insert_batch": lambda: store.insert_batch([Memory(new_id(), "another", now, now, now, store="closed")]),
        "check_write_lock": lambda: store.check_write_lock(1.0),
    }
    with pytest.raises(StorageError, match=r"^store 'closed' is closed$"):
        uses[use]()
