"""A SQLite store's schema put back as an older mnemo left it: for the upgrade tests, and for
``benchmarks/upgrade_time.py`` (postgres_server.py has the same for PostgreSQL)."""

from __future__ import annotations

import sqlite3


def undo_m017(db: sqlite3.Connection) -> None:
    """Put a store back as migration m016 left it (m018 undone first): no change numbers, idempotent
    calls not marked applied. In ``db``'s transaction."""
    for statement in [
        "ALTER TABLE idempotent_calls DROP COLUMN applied_to",
        "DROP INDEX memories_changes",
        "ALTER TABLE memories DROP COLUMN change_number",
        "DELETE FROM settings WHERE key IN ('last_change_number', 'change_numbers')",
        "DELETE FROM migrations WHERE name IN ('m017_change_numbers', 'm018_applied_calls')",
        "PRAGMA user_version = 16",
    ]:
        db.execute(statement)
