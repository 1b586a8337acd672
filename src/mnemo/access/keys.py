"""API keys: who may call a mnemo served over HTTP, and as which user and role.

A key is ``mnemo_<key id>_<secret>``, shown once when it is made. The key ring keeps its id, user,
role and the SHA-256 of the whole key (a 256-bit random secret needs no slow hash: there is
nothing to guess) in ``keys.json`` under ``MNEMO_HOME``, readable by its owner only. Every server
of this home reads the file again when it changes, so a revoked key stops working at once, in
every process.

The file is never emptied: a revoked key stays in it, marked. So "this home has a key ring"
(``set_up``) stays true once a key was made, and a server that has it asks every request for a
key even when all of them are revoked. A damaged file admits nobody and is never overwritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from mnemo import bounds
from mnemo.access.caller import Caller, Role
from mnemo.errors import CorruptedData, InvalidInput, NotFound
from mnemo.model import to_iso

PREFIX = "mnemo_"
KEYS_FILE = "keys.json"

log = logging.getLogger("mnemo.keys")


@dataclass(frozen=True, slots=True)
class ApiKey:
    key_id: str
    user_id: str
    role: Role
    created_at: str
    sha256: str
    revoked_at: str | None = None

    @property
    def caller(self) -> Caller:
        return Caller(self.user_id, self.role)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyRing:
    def __init__(self, home: Path) -> None:
        self.path = home / KEYS_FILE
        self._seen: tuple[int, int] | None = None  # (mtime_ns, size) of the file last read
        self._keys: dict[str, ApiKey] = {}

    def create(self, user_id: str, role: Role = Role.MEMBER) -> tuple[ApiKey, str]:
        """A new key for the user; returns it with the key itself, which is not kept."""
        if not user_id.strip() or not user_id.isprintable():
            raise InvalidInput("user must be a non-blank, printable id", field="user")
        bounds.text("user", user_id, bounds.MAX_ID_CHARS)
        key_id = secrets.token_hex(6)
        key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        made = ApiKey(key_id, user_id, Role(role), to_iso(datetime.now(UTC)), _digest(key))
        with self._editing() as keys:
            keys[key_id] = made
        return made, key

    def revoke(self, key_id: str) -> ApiKey:
        with self._editing() as keys:
            if key_id not in keys:
                raise NotFound(f"no key {key_id!r}", key_id=key_id)
            if keys[key_id].revoked_at is None:
                keys[key_id] = replace(keys[key_id], revoked_at=to_iso(datetime.now(UTC)))
            return keys[key_id]

    def all(self) -> list[ApiKey]:
        """Every key, live and revoked; CorruptedData when the file is damaged."""
        return sorted(self._current().values(), key=lambda k: k.created_at)

    def set_up(self) -> bool:
        """Whether keys were ever made in this home (all may be revoked since), or its file is damaged."""
        return self.path.exists()

    def verify(self, key: str) -> ApiKey | None:
        """The live key this is, or None (unknown, malformed or revoked, or the file is damaged)."""
        if not key.startswith(PREFIX):
            return None
        key_id = key[len(PREFIX) :].partition("_")[0]
        try:
            found = self._current().get(key_id)
        except CorruptedData as damaged:
            log.error("%s; every key is refused until it is mended", damaged.message)
            return None
        if found is None or found.revoked_at is not None:
            return None
        return found if hmac.compare_digest(found.sha256, _digest(key)) else None

    # -- the file ----------------------------------------------------------------------
    def _current(self) -> dict[str, ApiKey]:
        try:
            status = self.path.stat()
        except FileNotFoundError:
            return {}
        if self._seen != (status.st_mtime_ns, status.st_size):
            self._keys = self._read()
            self._seen = (status.st_mtime_ns, status.st_size)
        return self._keys

    def _read(self) -> dict[str, ApiKey]:
        try:
            rows = json.loads(self.path.read_text(encoding="utf-8"))
            return {row["key_id"]: ApiKey(**{**row, "role": Role(row["role"])}) for row in rows}
        except FileNotFoundError:
            return {}
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as error:
            raise CorruptedData(f"the key ring {self.path} is damaged ({type(error).__name__}: {error})",
                                path=str(self.path)) from error  # fmt: skip

    @contextlib.contextmanager
    def _editing(self) -> Iterator[dict[str, ApiKey]]:
        """The keys under an exclusive lock, written back (whole, then renamed into place) on exit."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            keys = self._read()
            yield keys
            partial = self.path.with_suffix(f".{os.getpid()}.tmp")
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump([asdict(k) for k in keys.values()], out, indent=1)
            os.replace(partial, self.path)
