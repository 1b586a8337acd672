"""Pairs of sentences for the near-duplicate check: distinct facts one slot apart, and light rewrites.

Two sets, written apart: ``DEV`` (full sentences, the style the rules were developed on) and
``VALIDATION`` (terse notes as agents write them, never used to change a rule or a threshold).
A template's ``[a|b]`` is the one slot in which its two facts differ; ``{slot}`` placeholders are
filled from ``FILLS`` so each template yields many pairs. Rewrites are made from the first fact of
each template by the transformations in ``REWRITES``: they say the same thing and should be caught.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

FILLS: dict[str, tuple[str, ...]] = {
    "name": ("Liam", "Emma", "Dmitri", "Priya", "Noah", "Zoe", "Kenji", "Fatima", "Oscar", "Mei"),
    "other": ("Sofia", "Jonas", "Aisha", "Marco", "Hana", "Tom", "Lucia", "Ravi", "Ines", "Yusuf"),
    "city": ("Berlin", "Lisbon", "Osaka", "Toronto", "Nairobi", "Denver", "Madrid", "Hanoi"),
    "project": ("Atlas", "Orion", "Nimbus", "Falcon", "Juniper", "Quartz", "Helix", "Beacon"),
    "food": ("peanuts", "shellfish", "gluten", "dairy", "sesame", "eggs", "soy", "mushrooms"),
    "drink": ("green tea", "espresso", "oat milk lattes", "sparkling water", "rooibos", "cold brew"),
    "tool": ("Postgres", "Redis", "Kafka", "Terraform", "Docker", "Node", "Django", "Kubernetes"),
    "hobby": ("bouldering", "chess", "sourdough baking", "trail running", "pottery", "birdwatching"),
}


@dataclass(frozen=True, slots=True)
class Pair:
    kind: str  # the slot the two differ in, or the rewrite that made the second
    first: str
    second: str
    distinct: bool  # two facts (must never be merged) or one fact in other words (should be caught)


DEV: tuple[tuple[str, str], ...] = (
    ("name", "{name} has a dentist appointment on Tuesday with [Dr. Meyer|Dr. Okafor]."),
    ("name", "[{name}|{other}] is in charge of the {project} release this quarter."),
    ("name", "The {project} on-call rotation is owned by [{name}|{other}] this month."),
    ("name", "{name} flies to [Berlin|Lisbon] for the conference in the spring."),
    ("name", "{name} is allergic to {food}, according to [{other}|Dr. Patel]."),
    ("date", "{name} has the weekly sync with {other} every [Monday|Friday] morning."),
    ("date", "The {project} design review is on [Wednesday|Thursday] afternoon."),
    ("date", "{name} wants the quarterly report finished before [August|July]."),
    ("date", "{name}'s lease in {city} ends in [March|September]."),
    ("date", "The {project} launch moved to [next week|next month]."),
    ("date", "{name} goes to the gym in the [morning|evening] before work."),
    ("date", "{name} started at the company [before|after] the merger."),
    ("number", "{name} runs [5|10] kilometres every Sunday."),
    ("number", "The {project} service keeps [3|5] replicas in production."),
    ("number", "{name}'s daughter turns [7|8] in {city} this summer."),
    ("number", "The {project} budget for the offsite is [12,000|15,000] euros."),
    ("number", "{name} takes [two|three] sugars in coffee."),
    ("number", "{name} sits in room [214|241] on the second floor."),
    ("number", "The {project} standup starts at [9:30|10:30] every weekday."),
    ("version", "The {project} backend runs on Python [3.11|3.12] in production."),
    ("version", "{name} pinned {tool} to version [2.4.1|2.5.0] for the {project} service."),
    ("version", "The mobile app targets iOS [17|18] at minimum."),
    ("unit", "{name} drinks two [litres|glasses] of water a day."),
    ("unit", "The {project} upload limit is 50 [MB|GB] per file."),
    ("unit", "The commute to the {city} office takes 40 [minutes|kilometres]."),
    ("negation", "{name} [eats|does not eat] {food}."),
    ("negation", "{name} [is|is not] comfortable presenting to the board."),
    ("negation", "The {project} deploy [needs|doesn't need] approval from security."),
    ("negation", "{name} [can|cannot] attend meetings on Fridays."),
    ("negation", "{name} has [a|no] driver's license."),
    ("quantity", "{name} [always|sometimes] works from home on Fridays."),
    ("quantity", "[All|Some] of the {project} tests run on every commit."),
    ("quantity", "{name} reads [every|every other] pull request on the {project} repo."),
    ("quantity", "{name} [usually|rarely] drinks coffee after lunch."),
    ("owner", "[{name}'s|{other}'s] brother is allergic to {food}."),
    ("owner", "{name}'s [son|daughter] plays the violin."),
    ("owner", "[My|Her] sister lives in {city} with two cats."),
    ("owner", "{name}'s [manager|mentor] approved the {project} budget."),
    ("order", "{name} prefers [{drink} over tea|tea over {drink}]."),
    ("order", "[{name} reports to {other}|{other} reports to {name}] on the {project} team."),
    ("order", "The {project} migration goes [from {tool} to Oracle|from Oracle to {tool}]."),
    ("order", "[{name} owes {other}|{other} owes {name}] fifty euros for the concert tickets."),
    ("tense", "{name} [lived|lives] in {city} with a partner."),
    ("tense", "{name} [was|is] the tech lead of {project}."),
    ("tense", "{name} [worked|works] on the {project} billing pipeline."),
    ("antonym", "{name} [likes|dislikes] working late on the {project} rollout."),
    ("antonym", "Dark mode is [enabled|disabled] for {name}'s dashboard."),
    ("antonym", "{name} wants the {project} repository to stay [public|private]."),
    ("antonym", "{name} prefers the [window|aisle] seat on long flights."),
    ("thing", "{name} is allergic to [{food}|penicillin]."),
    ("thing", "{name}'s favourite hobby is [{hobby}|knitting]."),
    ("thing", "{name} drinks [{drink}|hot chocolate] every morning."),
    ("thing", "The {project} cache is backed by [{tool}|Memcached]."),
    ("thing", "{name} keeps a [cat|dog] named Pixel."),
    ("modal", "{name} [will|might] move to {city} next year."),
    ("modal", "{name} [should|must] renew the passport before travelling."),
)

VALIDATION: tuple[tuple[str, str], ...] = (
    ("name", "deploy freeze: sign-off from [{name}|{other}] only"),
    ("name", "{project}: PR reviews go to [{name}|{other}]"),
    ("name", "oncall handoff {project} -> [{name}|{other}]"),
    ("date", "1:1 w/ {name} moved to [Thu|Fri]"),
    ("date", "{project} retro every other [Tuesday|Wednesday]"),
    ("date", "{name} OOO until end of [June|October]"),
    ("date", "{name}: gym [mornings|evenings] only"),
    ("number", "{project} prod: [4|6] pods min"),
    ("number", "{name} budget cap $[500|800]/mo for SaaS"),
    ("number", "ticket {project}-[1412|1421] blocks release"),
    ("number", "{name} prefers [2|3] monitors at desk"),
    ("version", "{project} node runtime pinned [18.19|20.11]"),
    ("version", "{tool} upgraded to [v7|v8] on staging"),
    ("unit", "{project} p95 target: 200 [ms|s]"),
    ("unit", "{name} cycles 30 [km|miles] on weekends"),
    ("negation", "{name} [ok|not ok] with being @-mentioned after hours"),
    ("negation", "{project} staging [has|has no] seeded data"),
    ("negation", "{name} [drinks|never drinks] alcohol at team events"),
    ("quantity", "{project}: [all|most] endpoints behind auth"),
    ("quantity", "{name} [often|never] joins the Friday demo"),
    ("owner", "[our|their] number two in the kitchen is {name}"),
    ("owner", "{name}'s [wife|sister] is vegetarian"),
    ("order", "{project} cutover: [{tool} before Redis|Redis before {tool}]"),
    ("order", "[{name} covers for {other}|{other} covers for {name}] during leave"),
    ("tense", "{name} [managed|manages] the {project} vendor contract"),
    ("antonym", "{project} feature flag [on|off] in prod"),
    ("antonym", "{name} [loves|hates] long meetings"),
    ("thing", "{name} allergic to [{food}|latex]"),
    ("thing", "{project} logs shipped to [{tool}|Splunk]"),
    ("thing", "the postdoc's pet is a [hamster|parrot]"),
    ("modal", "{name} [may|will] join {project} in Q3"),
)


def _lower(text: str) -> str:
    return text.lower()


def _punctuation(text: str) -> str:
    """Commas, colons and the full stop dropped or changed: "X: Y." -> "X - Y!"."""
    return text.rstrip(".").replace(",", "").replace(": ", " - ") + "!"


def _prefix(text: str) -> str:
    return "Note: " + text


def _aside(text: str) -> str:
    return text.rstrip(".") + " (as mentioned before)."


_CONTRACT = (("does not", "doesn't"), ("is not", "isn't"), ("do not", "don't"), ("cannot", "can't"),
             ("will not", "won't"), ("has not", "hasn't"), ("are not", "aren't"))  # fmt: skip
_EXPAND = (("doesn't", "does not"), ("isn't", "is not"), ("don't", "do not"), ("can't", "cannot"),
           ("won't", "will not"), ("I'm", "I am"))  # fmt: skip


def _contraction(text: str) -> str:
    for long, short in _CONTRACT + _EXPAND:
        if long in text:
            return text.replace(long, short, 1)
    return text.replace(" is ", "'s ", 1) if " is " in text else text


_FRONTABLE = re.compile(r"^(?P<rest>.+?) (?P<phrase>(?:on|every|at|before|after|this|next) [^,.]+?)\.?$")


def _word_order(text: str) -> str:
    """A trailing time or place phrase put first: "X on Monday." -> "On Monday, X."."""
    match = _FRONTABLE.match(text)
    if not match:
        return text
    phrase, rest = match["phrase"], match["rest"]
    return f"{phrase[0].upper()}{phrase[1:]}, {rest[0].lower() if rest[:2] in ('Th', 'A ') else rest[0]}{rest[1:]}."


_SYNONYMS = (("appointment", "appt"), ("finished", "done"), ("prefers", "likes"), ("in charge of", "leading"),
             ("production", "prod"), ("approved", "signed off on"), ("every", "each"), ("plays", "is playing"),
             ("owned by", "held by"), ("wants", "would like"), ("keeps", "runs"), ("works", "is working"),
             ("starts", "begins"), ("takes", "uses"), ("lives", "resides"), ("drinks", "has"), ("moved", "shifted"),
             ("only", "exclusively"), ("blocks", "is blocking"), ("upgraded", "updated"), ("goes", "is going"),
             ("is allergic to", "has an allergy to"), ("favourite", "favorite"),
             ("comfortable", "at ease"))  # fmt: skip


def _synonym(text: str) -> str:
    for word, other in _SYNONYMS:
        if re.search(rf"\b{re.escape(word)}\b", text):
            return re.sub(rf"\b{re.escape(word)}\b", other, text, count=1)
    return text


REWRITES: dict[str, Callable[[str], str]] = {
    "casing": _lower,
    "punctuation": _punctuation,
    "contraction": _contraction,
    "word order": _word_order,
    "synonym": _synonym,
    "note prefix": _prefix,
    "aside": _aside,
}


def _fill(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m[1]], template)


def _fillings(template: str, count: int, rng: random.Random) -> Iterator[dict[str, str]]:
    slots = sorted(set(re.findall(r"\{(\w+)\}", template)))
    combos = list(itertools.product(*(FILLS[s] for s in slots)))
    rng.shuffle(combos)
    literal = set(re.sub(r"\{\w+\}", " ", template).casefold().replace("[", " ").replace("|", " ").split())
    # "tea over {drink}" filled with "green tea" would make a pair of the same words.
    fitting = [c for c in combos if not any(set(v.casefold().split()) & literal for v in c)]
    for combo in fitting[:count]:
        yield dict(zip(slots, combo, strict=True))


REWRITTEN_PER_TEMPLATE = 5  # fillings of each template whose first fact is rewritten


def pairs(templates: tuple[tuple[str, str], ...], per_template: int = 24, seed: int = 7) -> list[Pair]:
    """Distinct pairs (per_template fillings of each template) and rewrites of each first fact."""
    rng = random.Random(seed)
    out: list[Pair] = []
    for kind, template in templates:
        first_t, second_t = (re.sub(r"\[([^|\]]*)\|([^\]]*)\]", rf"\{i}", template) for i in (1, 2))
        for n, values in enumerate(_fillings(template, per_template, rng)):
            first, second = _fill(first_t, values), _fill(second_t, values)
            out.append(Pair(kind, first, second, distinct=True))
            if n < REWRITTEN_PER_TEMPLATE:
                for name, rewrite in REWRITES.items():
                    if (rewritten := rewrite(first)) != first:
                        out.append(Pair(name, first, rewritten, distinct=False))
    return out
