"""Whether two similar sentences can state the same fact, judged on the words that tell facts apart.

A small embedding model barely sees the one word that makes a new fact: "Liam's report is due
before August" and "... before July", "stand-up on Monday with Liam" and "... on Friday with
Dmitri", "Emma eats meat" and "Emma does not eat meat" all score a cosine above 0.95. So the
near-duplicate check trusts the cosine only when this module finds nothing that tells the two
apart: the same names, numbers, units, dates and time words, negations, quantity and modal words,
owners (pronouns, kin and roles), tense, no antonym swapped in, and the same order of the things
that a relation points from and to ("tea over coffee", "Liam reports to Dmitri").

It errs towards "different": a rewrite it cannot match is kept as a second memory (a nuisance that
consolidation can merge later), while a distinct fact taken for a rewrite would be lost.
``benchmarks/near_duplicates.py`` measures both sides per kind of difference.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

# Each of these needs an apostrophe, and none writes one: a text without one skips them all.
_APOSTROPHE_FORMS = (
    (r"\bcan['\u2019]t\b", "can not"),
    (r"\bwon['\u2019]t\b", "will not"),
    (r"\bshan['\u2019]t\b", "shall not"),
    (r"n['\u2019]t\b", " not"),
    (r"['\u2019]re\b", " are"),
    (r"['\u2019]m\b", " am"),
    (r"['\u2019]ll\b", " will"),
    (r"['\u2019]ve\b", " have"),
    (r"['\u2019]d\b", " would"),
    (r"\b(it|that|there|here|what|who|he|she)['\u2019]s\b", r"\1 is"),
    (r"['\u2019]s?\b", ""),  # possessive: "Liam's" is about Liam
)
_PLAIN_FORMS = (
    (r"\bcannot\b", "can not"),
    (r"\bwould like\b", "want"),
    # Remarks about the conversation, not the fact: "(as mentioned before)".
    (r"\bas (?:i |we |you )?(?:mentioned|said|noted|discussed|stated)(?: (?:before|earlier|previously|above))?", ""),
)
# A word, or a number with its separators ("1,000", "3.11", "10:30", "2024-05-01"), or a symbol
# that carries meaning.
_TOKEN = re.compile(r"\d+(?:[.,:/-]\d+)*|[^\W\d_]+(?:[.\-][^\W\d_]+)*|[$€£¥%#+]")

NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13", "fourteen": "14",
    "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18", "nineteen": "19", "twenty": "20",
    "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
    "hundred": "100", "thousand": "1000", "million": "1000000", "billion": "1000000000", "dozen": "12",
    "first": "#1", "second": "#2", "third": "#3", "fourth": "#4", "fifth": "#5", "sixth": "#6", "seventh": "#7",
    "eighth": "#8", "ninth": "#9", "tenth": "#10", "1st": "#1", "2nd": "#2", "3rd": "#3", "4th": "#4",
}  # fmt: skip
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")

WEEKDAYS = frozenset(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
MONTHS = frozenset((
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
))  # fmt: skip
# Month names that are also common lower-case words count as months only when capitalised.
_AMBIGUOUS_MONTHS = frozenset(("may", "march", "august", "jan", "mar", "jun", "sep", "oct", "nov", "dec"))
TIME_WORDS = frozenset((
    "today", "tomorrow", "yesterday", "tonight", "morning", "afternoon", "evening", "night", "noon", "midnight",
    "am", "pm", "weekend", "weekday", "weekdays", "weekends", "spring", "summer", "autumn", "fall", "winter",
    "before", "after", "until", "till", "since", "ago", "earlier", "later", "next", "last", "previous", "past",
    "early", "late", "soon", "recently", "now", "currently", "formerly", "previously", "anymore", "still",
    "daily", "weekly", "monthly", "yearly", "annually", "hourly", "nightly", "quarterly", "biweekly",
    "q1", "q2", "q3", "q4", "eod", "eow", "asap", "deadline", "overnight",
))  # fmt: skip
UNITS = frozenset((
    "%", "$", "€", "£", "¥", "percent", "usd", "eur", "gbp", "dollar", "euro", "pound", "cent",
    "kg", "g", "mg", "lb", "oz", "ton", "km", "m", "cm", "mm", "mi", "mile", "ft", "foot", "feet", "inch",
    "meter", "metre", "kilometer", "kilometre", "gram", "kilogram", "liter", "litre", "ml", "l", "gallon",
    "hour", "hr", "h", "minute", "min", "second", "sec", "s", "ms", "day", "week", "month", "year", "yr",
    "b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "byte", "core", "cpu", "gpu", "rpm", "kph", "mph",
    "calorie", "kcal", "step", "rep", "set", "page", "x", "k",
))  # fmt: skip
NEGATIONS = frozenset(("not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "nowhere"))
QUANTITY_WORDS = frozenset((
    "all", "every", "each", "some", "any", "most", "many", "much", "few", "several", "both", "either",
    "only", "more", "less", "fewer", "least", "half", "whole", "entire", "always", "usually", "often",
    "sometimes", "occasionally", "rarely", "seldom", "frequently", "twice", "once", "again", "multiple",
    "single", "double", "triple", "lots", "plenty", "enough", "extra", "everything", "everyone", "nothing",
    "someone", "anyone", "everybody", "somebody", "anything", "something", "couple", "various", "exactly",
    "approximately", "roughly", "almost", "nearly", "over", "under", "least", "max", "min",
    "maximum", "minimum", "per", "other",
))  # fmt: skip
MODAL_WORDS = frozenset((
    "might", "may", "maybe", "perhaps", "probably", "possibly", "likely", "unlikely", "definitely", "certainly",
    "must", "should", "ought", "could", "can", "supposedly", "allegedly", "hopefully", "planned", "plans",
    "plan", "want", "wants", "wanted", "tried", "try", "tries",
))  # fmt: skip
OWNER_WORDS = frozenset((
    "i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "you", "your", "yours", "he", "him", "his",
    "she", "her", "hers", "they", "them", "their", "theirs", "user", "assistant", "wife", "husband", "partner",
    "spouse", "son", "daughter", "mother", "mom", "mum", "father", "dad", "brother", "sister", "sibling", "boss",
    "manager", "colleague", "coworker", "friend", "girlfriend", "boyfriend", "kid", "kids", "child", "children",
    "baby", "grandma", "grandmother", "grandpa", "grandfather", "aunt", "uncle", "cousin", "niece", "nephew",
    "client", "customer", "intern", "lead", "cto", "ceo", "owner", "landlord", "neighbour", "neighbor",
    "roommate", "teacher", "doctor", "dentist", "parent", "parents", "family", "fiance", "fiancee",
))  # fmt: skip
# Words that start a note without naming anything: "Note: ..." is no name.
FILLER = frozenset((
    "note", "notes", "reminder", "fyi", "btw", "update", "important", "remember", "also", "please", "ps", "nb",
    "info", "fact", "heads", "ok", "okay", "so", "well", "just", "yes", "actually", "basically", "apparently",
))  # fmt: skip
STOP = frozenset((
    "a", "an", "the", "and", "or", "but", "if", "of", "in", "on", "at", "to", "for", "with", "by", "from", "as",
    "is", "are", "am", "was", "were", "be", "been", "being", "do", "does", "did", "has", "have", "had", "it",
    "its", "this", "that", "these", "those", "there", "here", "which", "who", "whom", "what", "when", "where",
    "how", "why", "will", "would", "shall", "into", "onto", "than", "then", "so", "very", "really", "too",
))  # fmt: skip
# Pairs of words that state opposite facts in the same sentence frame.
ANTONYMS: tuple[tuple[str, str], ...] = tuple(
    re.findall(
        r"(\w+)/(\w+)",
        "love/hate like/hate allow/forbid allow/ban allow/block accept/reject approve/reject approve/deny "
        "start/stop start/end start/finish begin/end begin/finish open/close on/off up/down increase/decrease "
        "raise/lower rise/fall gain/lose win/lose buy/sell add/remove include/exclude min/max minimum/maximum "
        "high/low higher/lower highest/lowest above/below more/less most/least best/worst better/worse "
        "first/last old/new older/newer oldest/newest left/right true/false yes/no pass/fail success/failure "
        "succeed/fail public/private required/optional mandatory/optional easy/hard easy/difficult "
        "cheap/expensive fast/slow big/small large/small long/short hot/cold warm/cool early/late "
        "earlier/later same/different in/out inside/outside input/output import/export push/pull read/write "
        "send/receive upload/download join/leave arrive/leave online/offline light/dark front/back top/bottom "
        "north/south east/west male/female man/woman men/women boy/girl day/night agree/disagree "
        "remember/forget keep/drop keep/delete always/never all/none everything/nothing everyone/nobody "
        "present/absent strict/lenient sweet/savory sweet/sour before/after over/under more/fewer "
        "enable/disable enabled/disabled include/omit ahead/behind senior/junior primary/secondary "
        "healthy/sick alive/dead married/single full/empty hard/soft wet/dry loud/quiet rich/poor "
        "with/without like/dislike love/dislike prefer/avoid",
    )
)
_NEGATING_PREFIXES = ("un", "dis", "in", "im", "il", "ir", "non", "non-", "mis", "anti")
# Words a relation points across: in "tea over coffee" and "Liam reports to Dmitri" the order of
# the words on either side is the fact.
PIVOTS = frozenset(("over", "than", "instead", "rather", "vs", "versus", "to", "from", "into", "before", "after"))
_PAST_AUXILIARIES = frozenset(("was", "were", "had", "did", "used"))
_PRESENT_AUXILIARIES = frozenset(("is", "are", "am", "has", "have", "does", "do", "will", "shall", "going"))


@dataclass(frozen=True, slots=True)
class Word:
    key: str  # case-folded, normalised: "three" and "3" share the key "3"
    kind: str | None  # what kind of fact-bearing word it is, None for a plain word
    shown: str  # as written


@dataclass(frozen=True, slots=True)
class _Analysed:
    words: tuple[Word, ...]
    keys: Counter[str]  # how often each word's key occurs


class _RecentTexts:
    """The analyses of the texts compared lately, kept up to a number of characters in all.

    A new memory is compared with up to NEAR_DUPLICATE_POOL close ones, which are often the same
    from one memory to the next (an import of similar notes). Bounded by characters, not entries:
    a content may be 50,000 characters, and a thousand such analyses would hold gigabytes. A text
    longer than ``longest`` is analysed each time, so that a few long ones do not evict the rest.
    """

    def __init__(self, characters: int, longest: int) -> None:
        self.characters, self.longest = characters, longest
        self._held: OrderedDict[str, _Analysed] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()  # the server's worker threads store at the same time

    def get(self, text: str) -> _Analysed:
        with self._lock:
            if (found := self._held.get(text)) is not None:
                self._held.move_to_end(text)
                return found
        words = words_of(text)
        analysed = _Analysed(words, Counter(w.key for w in words))
        if len(text) <= self.longest:
            with self._lock:
                if text not in self._held:
                    self._held[text] = analysed
                    self._size += len(text)
                while self._size > self.characters:
                    self._size -= len(self._held.popitem(last=False)[0])
        return analysed

    def __len__(self) -> int:
        return len(self._held)

    def size(self) -> int:
        """The characters of the texts held."""
        return self._size


# An analysis takes ~30 bytes a character of prose, ~60 at worst (one-letter words): ≤ 30 MB.
_recent = _RecentTexts(characters=500_000, longest=4_000)


def words_of(text: str) -> tuple[Word, ...]:
    """The words of a sentence, each with the kind of difference it would make to a fact."""
    text = unicodedata.normalize("NFKC", text)
    forms = _APOSTROPHE_FORMS + _PLAIN_FORMS if "'" in text or "\u2019" in text else _PLAIN_FORMS
    for pattern, replacement in forms:
        text = re.sub(pattern, replacement, text, flags=re.IGNORECASE)
    return tuple(_classified(part) for match in _TOKEN.finditer(text) for part in _split_digits(match.group()))


def _split_digits(token: str) -> list[str]:
    """'5kg' is 5 and kg, 'v2.3' is v and 2.3: written together or apart they mean the same."""
    if token[0].isdigit():
        if _ORDINAL.match(token.lower()):
            return [token]
        return [part for part in re.split(r"(\d+(?:[.,:/-]\d+)*)", token) if part]
    return [token]


def _classified(shown: str) -> Word:
    return _classified_short(shown) if len(shown) <= _CACHED_UP_TO else _classify(shown)


# Words recur from text to text (a near-duplicate check analyses up to 11 texts a memory); the
# cache holds short ones only, so that it stays within a few megabytes whatever is stored.
_CACHED_UP_TO = 24


@lru_cache(maxsize=20_000)
def _classified_short(shown: str) -> Word:
    return _classify(shown)


def _classify(shown: str) -> Word:
    key = shown.casefold()
    if key[0].isdigit():
        if ordinal := _ORDINAL.match(key):
            return Word(f"#{int(ordinal.group(1))}", "number", shown)
        return Word(_plain_number(key), "number", shown)
    if key in NEGATIONS:  # "does not eat" and "never eats" say the same; only how many negations counts
        return Word("not", "negation", shown)
    if key in NUMBER_WORDS:
        return Word(NUMBER_WORDS[key], "number", shown)
    if (
        key in WEEKDAYS
        or key.removesuffix("s") in WEEKDAYS
        or (key in MONTHS and (key not in _AMBIGUOUS_MONTHS or shown[0].isupper()))
    ):
        return Word(key, "date", shown)
    return Word(_unit_key(key), _kind(key, shown), shown)


def _plain_number(key: str) -> str:
    """'1,000' and '1000' are one number; '3.10' and '3.1' are not (versions)."""
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", key)


# Words of one slot that say the same: "every Monday" is "each Monday", "wants" is "want".
SAME = {
    "each": "every", "mum": "mom", "mother": "mom", "dad": "father", "kids": "children", "kid": "child",
    "till": "until", "metre": "meter", "kilometre": "km", "kilometer": "km", "litre": "liter", "wants": "want",
    "plans": "plan", "tries": "try", "neighbour": "neighbor", "coworker": "colleague", "spouse": "partner",
    "grandmother": "grandma", "grandfather": "grandpa", "hr": "hour", "min": "minute", "sec": "second",
}  # fmt: skip


def _unit_key(key: str) -> str:
    key = SAME.get(key, key)
    return key[:-1] if len(key) > 2 and key.endswith("s") and key[:-1] in UNITS else key


def _kind(key: str, shown: str) -> str | None:
    if key in TIME_WORDS or key.removesuffix("s") in TIME_WORDS:  # "mornings", "weekends"
        return "time"
    if _unit_key(key) in UNITS:
        return "unit"
    if key in OWNER_WORDS:
        return "owner"
    if key in QUANTITY_WORDS:
        return "quantity"
    if key in MODAL_WORDS:
        return "modal"
    if key in STOP or key in FILLER:
        return None
    if _looks_like_name(shown):
        return "name"
    return None


def _looks_like_name(shown: str) -> bool:
    """Capitalised (Liam, Berlin), an acronym (AWS), or mixed case (iOS, PostgreSQL).

    A capitalised word that opens a sentence counts too: "Dmitri prefers tea" names Dmitri, and a
    sentence that opens with another ordinary word is merely kept as a second memory.
    """
    return any(c.isupper() for c in shown)


def _more_often(these: Counter[str], those: Counter[str]) -> set[str]:
    """The words more frequent in ``these`` than in ``those`` (what ``these - those`` keeps, as a set)."""
    return {key for key, count in these.items() if count > those.get(key, 0)}


def difference(a: str, b: str) -> str | None:
    """The kind of word that makes ``a`` and ``b`` different facts, or None when nothing does.

    None means only that no fact-bearing word differs; whether they say the same is then the
    embedding's call.
    """
    analysed_left, analysed_right = _recent.get(a), _recent.get(b)
    left, right = analysed_left.words, analysed_right.words
    only_left = _more_often(analysed_left.keys, analysed_right.keys)
    only_right = _more_often(analysed_right.keys, analysed_left.keys)
    for side, only in ((left, only_left), (right, only_right)):
        for word in side:
            if word.key in only and word.kind is not None:
                return word.kind
    plain_left = {w.key for w in left if w.key in only_left}
    plain_right = {w.key for w in right if w.key in only_right}
    return _opposed(plain_left, plain_right) or _tense(plain_left, plain_right) or _order(left, right)


def _stems(word: str) -> set[str]:
    """Crude stems of an English word form, enough to see 'likes', 'liked' and 'like' as one verb."""
    stems = {word}
    for suffix, replacement in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ing", "e"), ("es", ""), ("ed", ""),
                                ("ed", "e"), ("s", ""), ("d", "")):  # fmt: skip
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            stems.add(word[: len(word) - len(suffix)] + replacement)
    return stems


def _opposed(left: set[str], right: set[str]) -> str | None:
    """An antonym, or the same word with a negating prefix, on the other side: likes / dislikes."""
    left_stems = {s for w in left for s in _stems(w)}
    right_stems = {s for w in right for s in _stems(w)}
    for one, other in ANTONYMS:
        if (one in left_stems and other in right_stems) or (other in left_stems and one in right_stems):
            return "antonym"
    for stems, others in ((left_stems, right_stems), (right_stems, left_stems)):
        for stem in stems:
            if any(stem.startswith(p) and stem[len(p) :] in others for p in _NEGATING_PREFIXES):
                return "antonym"
    return None


def _tense(left: set[str], right: set[str]) -> str | None:
    """'lived' against 'lives', or 'was' against 'is': the same verb, another time."""
    if (left & _PAST_AUXILIARIES and right & _PRESENT_AUXILIARIES) or (
        right & _PAST_AUXILIARIES and left & _PRESENT_AUXILIARIES
    ):
        return "tense"
    for past, other in ((left, right), (right, left)):
        for word in past:
            if word.endswith("ed") and any(_stems(word) & _stems(o) for o in other if not o.endswith("ed")):
                return "tense"
    return None


def _order(left: Sequence[Word], right: Sequence[Word]) -> str | None:
    """The same names or owners in another order, or words moved across a relation's pivot."""
    # "Liam owes Dmitri" against "Dmitri owes Liam": the people swapped places in the same frame of
    # words. When the frame's words moved too ("On the Atlas team, Liam reports to ..."), a phrase
    # was moved, not a relation reversed.
    entities = ("name", "owner")
    left_entities = [w.key for w in left if w.kind in entities]
    right_entities = [w.key for w in right if w.kind in entities]
    swapped = sorted(left_entities) == sorted(right_entities) and left_entities != right_entities
    if swapped and _frame(left) == _frame(right):
        return "order"
    right_sides = _pivot_sides(right)
    for pivot, before, after in _pivot_sides(left):
        for pivot_r, before_r, after_r in right_sides:
            # "cold brew over tea" against "tea over cold brew": words crossed the pivot both ways.
            if pivot == pivot_r and (before - after) & (after_r - before_r) and (after - before) & (before_r - after_r):
                return "order"
    return None


def _frame(sentence: Sequence[Word]) -> list[str]:
    return [w.key for w in sentence if w.kind not in ("name", "owner") and w.key not in STOP]


def _pivot_sides(sentence: Sequence[Word]) -> list[tuple[str, set[str], set[str]]]:
    """For each pivot word, the content words before it and after it."""
    content = [
        (i, w.key)
        for i, w in enumerate(sentence)
        if w.key not in STOP and w.key not in PIVOTS and w.kind != "unit" and w.key not in ("am", "pm")
        # "from 3 pm to 5 pm" relates 3 and 5
    ]
    return [
        (word.key, {key for j, key in content if j < i}, {key for j, key in content if j > i})
        for i, word in enumerate(sentence)
        if word.key in PIVOTS
    ]
