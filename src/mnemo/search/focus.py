"""What a query asks about a subject: the subjects it names, and the query without their names.

"What is Liam's blood type?" names the subject Liam. A small embedding model scores every memory
about Liam close to that question, because the name weighs as much as the rest of the words, so
recall scores memories against the question without the name ("What is blood type?") and counts
separately whether a memory is about Liam at all. Measured on the dev sets by
benchmarks/fit_relevance.py: R@5 rises on both, and unanswerable questions ("Liam's blood type"
when only the user's is stored) stop looking answered.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from mnemo.model import subject_key
from mnemo.search.words import STOPWORDS

MAX_NAME_WORDS = 3  # subjects are names: "Emma", "Zoe Park", "Atlas billing service"
_TOKEN = re.compile(r"[^\W_]+(?:[-\u2010][^\W_]+)*")
_POSSESSIVE = r"(?:['\u2019]s?)?"


def possible_names(query: str) -> list[str]:
    """Every run of up to MAX_NAME_WORDS words of the query, as subject keys, stop words alone left out."""
    tokens = [subject_key(t) for t in _TOKEN.findall(re.sub(r"['\u2019]s?\b", " ", query))]
    runs = {
        " ".join(tokens[i : i + n])
        for n in range(1, MAX_NAME_WORDS + 1)
        for i in range(len(tokens) - n + 1)
        if not all(t in STOPWORDS for t in tokens[i : i + n])
    }
    return sorted(runs)


def without_names(query: str, names: Collection[str]) -> str:
    """The query with the named subjects (and their possessive 's) taken out; the query if nothing is left."""
    focused = query
    for name in sorted(names, key=len, reverse=True):  # "zoe park" before "zoe"
        words = r"\s+".join(re.escape(part) for part in name.split())
        focused = re.sub(rf"(?<![^\W_]){words}{_POSSESSIVE}(?![^\W_])", " ", focused, flags=re.IGNORECASE)
    focused = re.sub(r"\s+", " ", focused).strip()
    return focused if re.search(r"[^\W_]", focused) else query
