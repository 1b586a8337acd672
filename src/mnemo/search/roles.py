"""Subjects a question names by what they are: "my brother", "the cat", "the intern".

Agents note a subject's role once ("Liam is the user's younger brother", "Lin (postdoc) starts
Monday", "intern Ben") and then write about it by name ("Liam is engaged to Nadia Haddad"). A
question that names it by its role shares no word and little meaning with those notes, but the note
that ties the role to the name is usually among its first results. That name is then the subject the
question asks about, as if it had been named.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mnemo.search.words import STOPWORDS

_TOKEN = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*|[^\w\s]")
_POSSESSIVE = re.compile(r"['\u2019]s?$")
# How far after "my", "our", "the" a question's words may name a role: "the little boy", "my son's".
ROLE_SPAN = 3
_DETERMINERS = frozenset(("my", "our", "the", "your", "his", "her", "their"))
# Between a name and the role it is given: "Liam is the user's younger brother", "Lin (postdoc)",
# "Rose - mum", "Pepper: grey tabby cat". At most this many other words, and what links them.
BETWEEN_WORDS = 2
_LINKING = frozenset(("(", "-", "\u2013", "\u2014", ":", "=", ","))
_COPULAS = frozenset(("is", "was", "are", "were", "as"))
# "Marco is the user's closest friend on the team": the team is where Marco is, not what he is.
_PREPOSITIONS = frozenset(("on", "in", "at", "of", "for", "with", "by", "to", "from", "into", "about", "after"))
REACH = 8  # tokens from a name to its role at most: "Liam is the user's younger brother"


def _stem(word: str) -> str:
    word = _POSSESSIVE.sub("", word.lower())
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def role_words(query: str) -> set[str]:
    """The words a question may name a role by: those shortly after "my", "our", "the" and the like."""
    tokens = _TOKEN.findall(query)
    found: set[str] = set()
    for i, token in enumerate(tokens):
        if token.lower() not in _DETERMINERS:
            continue
        for word in tokens[i + 1 : i + 1 + ROLE_SPAN]:
            if not word[0].isalnum():
                break
            if _stem(word) not in STOPWORDS:
                found.add(_stem(word))
            if _POSSESSIVE.search(word):  # "my son's favourite topic": the role ends at the 's
                break
    return found


def _is_name(token: str) -> bool:
    return token[0].isupper() and _stem(token) not in STOPWORDS


def _first_name(token: str) -> str:
    """The subject key a run of capitalised words is filed under: its first word ("Ben Osei": "ben")."""
    return _POSSESSIVE.sub("", token).lower()


def _someone_elses(token: str) -> bool:
    """A name's possessive ("Helena's"): what follows is a role of that person's, not the asker's.
    "the user's", "the family's", "the practice's" are the asker's own circle."""
    return _POSSESSIVE.search(token) is not None and _is_name(token)


def _linked(between: Sequence[str]) -> bool:
    """Whether the tokens between a name and a role after it only say that the name has the role."""
    words = [t for t in between if t[0].isalnum()]
    marks = [t for t in between if not t[0].isalnum()]
    # "the family's retired racing greyhound": the owner's possessive is a determiner, not a word of the role
    others = [w for w in words if _stem(w) not in STOPWORDS and not _POSSESSIVE.search(w)]
    if len(others) > BETWEEN_WORDS or len(marks) > 1 or any(m not in _LINKING for m in marks):
        return False
    if any(w.lower() in _PREPOSITIONS for w in words):
        return False
    if not marks and not any(w.lower() in _COPULAS for w in words):
        return False  # "Emma walks the dog", "Liam lives in Boston": not what Emma or Liam is
    return not any(_someone_elses(w) for w in words)  # "Tiago is Helena's son"


def named_by_role(content: str, roles: set[str]) -> dict[str, set[str]]:
    """For each role of ``roles`` that the note ties to a name, the subject keys the name may be."""
    tokens = _TOKEN.findall(content)
    runs: list[tuple[int, int]] = []  # [start, end) of each run of capitalised words
    for i, token in enumerate(tokens):
        if _is_name(token) and _stem(token) not in roles:
            if runs and runs[-1][1] == i:
                runs[-1] = (runs[-1][0], i + 1)
            else:
                runs.append((i, i + 1))
    found: dict[str, set[str]] = {}
    for i, token in enumerate(tokens):
        role = _stem(token)
        if role not in roles or (i and _someone_elses(tokens[i - 1])):
            continue  # "Marco's daughter": a role of someone else's
        names: set[str] = set()
        after = next((r for r in runs if r[0] > i), None)  # "intern Ben"
        if after is not None and after[0] == i + 1:
            names.add(_first_name(tokens[after[0]]))
        before = next((r for r in reversed(runs) if r[1] <= i), None)  # "Ben Osei is a summer intern"
        if before is not None and i - before[1] <= REACH and _linked(tokens[before[1] : i]):
            names.add(_first_name(tokens[before[0]]))
        if names:
            found.setdefault(role, set()).update(names)
    return found
