"""Secrets out before anything is written: every text a hook stores passes through ``redact``.

``<private>...</private>`` spans go first (an unclosed one hides the rest of the text), then each
pattern below replaces what it finds with ``[REDACTED:<kind>]``, keeping the text around it. The
order matters: a private key block or a URL is replaced whole before its parts could match a
narrower pattern.
"""

from __future__ import annotations

import math
import re
from collections import Counter

_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("url-password", re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("stripe-key", re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("aws-key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer", re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9._~+/=-]{16,}")),
)
# A credential said in words: "the password is X", "login is ops / X", "my PIN is 4921".
_SAID = re.compile(
    r"(?i)\b(?P<name>(?:password|passcode|passphrase|pin|pwd|pw|login|credentials?) (?:is|was|are) )"
    r"(?P<value>\S+(?: ?/ ?\S+)?)"
)
# NAME=value, NAME: value, "name": "value" (JSON, YAML, .env, shell export), when NAME looks secret.
# Found from the secret word out (a scan for the words, then the name around each and what follows
# it), since one pattern starting at every character cost half a second a megabyte.
_SECRET_WORD = re.compile(
    r"(?i)passw(?:or)?d|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|credential|authorization"
)
_ASSIGNED = re.compile(r"""[\w.-]*["']?\s*[:=]\s*(?P<value>"[^"\n]+"|'[^'\n]+'|[^\s"',;]{4,})""")
# The end of a private key block whose beginning was cut off (a long text keeps only its head and tail).
_KEY_TAIL = re.compile(r"\A[A-Za-z0-9+/=\s]*-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")

_TOKEN = re.compile(r"[A-Za-z0-9_+/=-]{24,}")
MIN_PATH_PART = 16  # a part of a path this long or longer is looked at as a token of its own
HIGH_ENTROPY_BITS = 4.0  # bits per character from which a long mixed token is taken for a secret


def redact(text: str) -> str:
    """``text`` without its private spans and with every secret found replaced by a marker."""
    text = _KEY_TAIL.sub("[REDACTED:private-key]", _PRIVATE.sub("[private]", text))
    for kind, pattern in PATTERNS:
        text = pattern.sub(f"[REDACTED:{kind}]", text)
    text = _hide_assigned_values(_SAID.sub(r"\g<name>[REDACTED:secret]", text))
    return _TOKEN.sub(lambda m: "[REDACTED:token]" if _secret_token(m.group()) else m.group(), text)


def _secret_token(token: str) -> bool:
    """Whether a long token is a secret; an absolute or relative path (``/…``, ``~/…``, ``./…``)
    is one only when one of its parts is, as a long path's many letters have a random's spread."""
    if token[0] in "/~." and "/" in token:
        return any(_looks_random(part) for part in token.split("/") if len(part) >= MIN_PATH_PART)
    return _looks_random(token)


def _hide_assigned_values(text: str) -> str:
    """``text`` with the value of every assignment to a secret-looking name replaced."""
    pieces, done = [], 0
    for word in _SECRET_WORD.finditer(text):
        if word.start() < done:
            continue
        assigned = _ASSIGNED.match(text, word.end())
        if assigned is None:
            continue
        start, end = assigned.span("value")
        quoted = text[start] in "\"'"
        pieces += [text[done : start + quoted], "[REDACTED:secret]"]
        done = end - quoted
    return "".join(pieces) + text[done:] if pieces else text


def _looks_random(token: str) -> bool:
    """A long token mixing letters and digits with the spread of a random string (not a path,
    a word or a hex commit id, which has at most 4 bits a character)."""
    if token.startswith("REDACTED") or not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
        return False
    if re.fullmatch(r"[0-9a-f-]+", token):  # a commit id, a content hash, a uuid: not credentials
        return False
    counts = Counter(token)
    bits = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return bits >= HIGH_ENTROPY_BITS
