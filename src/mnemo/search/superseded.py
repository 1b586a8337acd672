"""Among the first results, a newer memory about the same thing comes before the one it updates.

Agents rarely edit a fact when it changes: they store the new state ("Liam moved to Denver")
beside the old one ("Liam lives in Boston"). A question about the current state is then often
worded closer to the older memory, which was written first and plainly, so the answer an agent
reads first is out of date: on agent-memory's dev set the newest fact came first for 5 of its 25
current-state questions (6 of 25 on our validation set).

So among the EXAMINED most relevant candidates, a candidate that probably updates an older one
(the same subject, created later, close in meaning: a cosine of the two memories of at least
SAME_TOPIC, or NOW_TOPIC when the question says it asks about now) takes that one's relevance and
is placed just above it, and names it (``Candidate.updates``) so that recall's ranking gives it the
older one's importance and use when higher (engine.recall.inherited): at the default weights those
priors kept the stale fact first. Only the order of those first candidates changes, never which
memories they are, so recall at EXAMINED and beyond is unchanged. A question that asks about the
past, by naming a stretch of time ("last summer") or by its grammar ("Where did she live?"), is
left alone (see search/searcher.py): LoCoMo's questions about earlier conversations lost a fifth of their
first answers to later turns on the same topic without that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from mnemo.embed import Vectors
from mnemo.lazy import numpy as np
from mnemo.query import RankFields

if TYPE_CHECKING:
    from mnemo.search.candidate import Candidate

# From this cosine two memories of one user and subject are taken to be about the same thing. On
# agent-memory's dev set 2% of the pairs of memories sharing a user and a subject are this close,
# among them 20 of the 31 (newer, older) pairs of its current-state questions.
SAME_TOPIC = 0.6
# A question that says it asks about now ("Where is my dad living these days?") takes any newer
# memory of the same subject among the first results as an update from this looser cosine: "Declan
# moved into a care home" updates "Declan lives alone in Galway" though the two share little. The
# present-time adverbs below are a closed class of English, not cue phrases of one data set.
# Measured (recall_quality.py, newest fact first, by relevance): agent-memory dev 0.64 to 0.76,
# prose dev 0.57 to 0.64 (R@1 -0.003 and 0; 0.45 gave 0.72 and 0.64, 0 the same as 0.3); never
# tuned on, prose validation 0.42 to 0.58 and terse validation 0.51 to 0.59 (R@1 +0.005 and
# +0.002); LoCoMo R@1 -0.001. The same cosine for every question cost dev R@1 0.442 to 0.353.
NOW_TOPIC = 0.3
# ... as long as the newer memory is itself somewhat relevant to the question: a third of the older
# one's relevance. Without it "Declan likes crosswords", the newest note on Declan, took the
# relevance of "Declan lives alone in Galway" for "Where is Declan living these days?". The
# care-home answers above have a third to a half of the older fact's relevance (0.5 lost the gain).
OWN_SHARE = 0.3
ABOVE = 1e-4  # how far above the memory it updates an update is placed
EXAMINED = 5  # the candidates reordered: the first results an agent reads

# The auxiliaries of the past tense: a closed class of English words, not a list of cue phrases.
_PAST_TENSE = re.compile(r"\b(?:did|was|were|had|used)\b", re.IGNORECASE)


_NOW = re.compile(
    r"\b(?:now|nowadays|currently|current|these days|at the moment|at present|any ?more|still|latest|today)\b",
    re.IGNORECASE,
)


def asks_about_the_past(question: str) -> bool:
    return _PAST_TENSE.search(question) is not None


def asks_about_now(question: str) -> bool:
    return _NOW.search(question) is not None


# Who wrote a note does not matter to what it updates (two parents keep notes on their daughter),
# except for subjects that name the writer: two users' "User" are two people. Letting another
# user's note be the update raised agent-memory dev's newest-first from 0.56 to 0.64 (validation
# set unchanged at 0.51, MRR +0.001; LoCoMo unchanged).
SELF_SUBJECTS = frozenset(("user", "the user", "me", "i", "myself"))


def same_subject(one: RankFields, other: RankFields) -> bool:
    """Whether two memories are about one subject: the same subject, and the same writer when it is the writer."""
    if one.subject_key != other.subject_key:
        return False
    return one.subject_key not in SELF_SUBJECTS or one.user_id == other.user_id


def newest_first(
    candidates: Sequence[Candidate],
    fields: Mapping[int, RankFields],
    vectors: Mapping[int, Vectors],
    about_now: bool = False,
) -> list[Candidate]:
    """The candidates, each update raised just above the most relevant older memory it updates.

    Only candidates with fields and a vector are compared: the caller passes those of the
    EXAMINED most relevant. ``about_now``: the question says it asks about now (see NOW_TOPIC).
    """
    known = [c for c in candidates if c.key in fields and c.key in vectors and fields[c.key].subject_key]
    if len(known) < 2:
        return list(candidates)
    known.sort(key=lambda c: fields[c.key].created_at)  # oldest first, so a chain of updates carries through
    matrix = np.stack([vectors[c.key] for c in known])
    similar = matrix @ matrix.T
    relevance = [c.relevance for c in known]
    raised: dict[int, tuple[float, int]] = {}  # by key: the relevance taken and the key it was taken from
    for newer, candidate in enumerate(known):
        about = fields[candidate.key]
        updated = [
            (relevance[older], known[older].key)
            for older in range(newer)
            if fields[known[older].key].created_at < about.created_at
            and same_subject(fields[known[older].key], about)
            and (
                similar[newer, older] >= SAME_TOPIC
                or (
                    about_now
                    and similar[newer, older] >= NOW_TOPIC
                    and candidate.relevance >= OWN_SHARE * relevance[older]
                )
            )
        ]
        if updated:
            best, older_key = max(updated)
            relevance[newer] = max(relevance[newer], min(1.0, best + ABOVE))
            raised[candidate.key] = (relevance[newer], older_key)
    return [
        replace(c, relevance=raised[c.key][0], updates=raised[c.key][1]) if c.key in raised else c for c in candidates
    ]
