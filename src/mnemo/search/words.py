"""Splitting text into words, shared by search (query terms) and enrichment (tags)."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")

STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do",
    "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having",
    "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it",
    "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on",
    "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so",
    "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these",
    "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
    "yourself", "yourselves", "s", "t", "don", "didn", "doesn", "isn", "wasn", "aren", "let", "lets", "get", "got",
    "also", "like", "user", "users", "us"
))  # fmt: skip


def words(text: str) -> list[str]:
    """Lower-case words of the text, in order (hyphenated and apostrophe words kept whole)."""
    return [w.lower() for w in _WORD.findall(text)]


def search_terms(text: str) -> list[str]:
    """Distinct content words of a query, in order; all its words if it has only stop words."""
    every = list(dict.fromkeys(part for w in words(text) for part in re.split(r"['\u2019-]", w) if part))
    content = [w for w in every if w not in STOPWORDS]
    return content or every
