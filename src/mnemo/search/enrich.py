"""What mnemo works out about a memory the caller did not say: category, tags, importance.

Category detection, cheap enough to run on every store:

- cue rules: regular expressions over the memory's words, each voting with a weight for one
  kind of statement ("wants to" for a goal, an opening imperative for an instruction, "allergic"
  for a restriction, a calendar date with a past-tense verb for an event, ...);
- when the memory has a vector of the model, a read-out (``mnemo.search.category_readout``) fitted to
  hand-written examples takes the vector, the words and the rules' scores and gives each kind a
  log-probability: it decides, and how far it trusts the rules it learned from the examples.

The kinds are spec 004's categories plus memento's ``restriction`` (spec 001), which is filed
under ``RESTRICTION_FILED_AS``. Without a model the best rule score wins. Text that is not a
sentence and has no cue ("zxq", a bare name or number) is ``custom``; any other sentence no cue
claims leans to ``fact``.

Measured on the 400 labelled memories of the agent-memory dev set (benchmarks/recall_quality.py):
rules alone 0.868, with all-MiniLM-L6-v2 and the read-out 0.887. The rules were written with that
set in view, so it flatters them; on our validation set the rules with a vote of the vectors
placed 0.561, the read-out 0.625.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from mnemo.embed import Embedder, Vectors
from mnemo.model import Category
from mnemo.search.category_readout import CategoryReadout
from mnemo.search.words import STOPWORDS, words

log = logging.getLogger(__name__)

# A restriction (an allergy, a diet, a budget cap, a ban) limits what the agent may suggest or do;
# spec 004 has no such category, and the nearest is instruction: a rule to respect when acting.
RESTRICTION = "restriction"
RESTRICTION_FILED_AS = Category.INSTRUCTION

KINDS: tuple[str, ...] = (
    Category.FACT.value,
    Category.PREFERENCE.value,
    Category.INSTRUCTION.value,
    RESTRICTION,
    Category.CONTEXT.value,
    Category.RELATIONSHIP.value,
    Category.SKILL.value,
    Category.GOAL.value,
    Category.EVENT.value,
)

STATEMENT_WEIGHT = 0.3  # a plain sentence that no cue claims states a fact
RULE_CHARS = 1_000  # the rules read a memory's opening (about 150 words): its kind shows there, and it keeps them fast


def filed_as(kind: str) -> Category:
    return RESTRICTION_FILED_AS if kind == RESTRICTION else Category(kind)


# -- cue rules ---------------------------------------------------------------------------------
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_DAY_DATE = (
    rf"(?:\b\d{{1,2}}(?:st|nd|rd|th)?(?:\s*-\s*\d{{1,2}})?\s+{_MONTH}\b|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b)"
)
_ISO_DATE = r"\b\d{4}-\d{2}-\d{2}\b"
_PERSON = r"(?:the user's|user's|my|his|her|their|our|your|\w+'s)"
_KIN = (
    r"(?:wife|husband|spouse|partner|fianc[eé]e?|girlfriend|boyfriend|mother|father|mum|mom|dad|"
    r"parents?|son|daughter|kids?|children|child|sister|brother|siblings?|cousin|aunt|uncle|niece|"
    r"nephew|grand(?:mother|father|ma|pa|son|daughter|parents?|children|kids?)|in-laws?|"
    r"(?:mother|father|sister|brother|son|daughter)-in-law|step(?:mother|father|son|daughter|sister|brother)|"
    r"godmother|godfather|godson|goddaughter|godchild|godparents?|best friend|closest friend|friend|buddy|"
    r"boss|manager|colleague|co-?worker|teammate|mentor|mentee|direct report|neighbou?r|"
    r"roommate|flatmate|landlord|ex-(?:wife|husband|partner)|ex)"
)
_IMPERATIVE = (
    r"(?:remind|keep|block|write|give|copy|cc|put|format|draft|summari[sz]e|send|use|make sure|"
    r"ensure|check|ask|route|feed|call|book|schedule|include|add|tell|let|note|flag|post|bake|"
    r"choose|pick|start|stop|reply|respond|answer|greet|address|translate|back up|print|list|"
    r"mention|forward|notify|set|turn|order|remember|avoid|prioriti[sz]e|sort|group|label|"
    r"double-check|confirm|cancel|reschedule|suggest|recommend|offer|show|explain|mark|log|"
    r"file|save|store|update|review|run|open|close|lock|charge|pay|renew|replace|water|walk|"
    r"bring|pack|prepare|buy|follow|attach|sign|limit|escalate|page|freeze|hold|move|"
    r"refer|direct|contact|text|email|message|treat|serve|speak|talk|respect|do)"
)
_PAST = (
    r"(?:had|went|visited|finished|joined|rejoined|started|moved|gave|got|won|lost|passed|graduated|"
    r"married|celebrated|hosted|attended|flew|drove|spent|stayed|left|arrived|broke|slipped|shipped|"
    r"opened|launched|came|received|met|held|found|fixed|released|installed|upgraded|deleted|removed|"
    r"completed|quit|resigned|retired|adopted|bought|sold|signed|ran|raced|competed|played|saw|"
    r"watched|took|made|returned|travel+ed|landed|crashed|failed|fell|hurt|injured|cut|planted|"
    r"built|painted|switched|migrated|delivered|presented|spoke|announced|hired|fired|"
    r"promoted|welcomed|gathered|pulled|dropped|missed|happened|occurred|went live|closed|"
    r"ended|began|organi[sz]ed|threw|baked|cooked|cleaned|renovated|repaired|interviewed|"
    r"applied|enrolled|registered|booked|cancel+ed|postponed|rescheduled|agreed|decided|chose)"
)

_RULES: tuple[tuple[str, str, float], ...] = (
    # -- instruction: an order to the agent
    (rf"^(?:please\s+)?(?:always\s+|never\s+|don't\s+|do not\s+)?{_IMPERATIVE}\b", "instruction", 3.0),
    (r"^(?:always|never|don't|do not|please)\b", "instruction", 3.0),
    (
        rf"^(?:when|whenever|if|after|before|while|once|now that|for|in|during|on|at|until|unless|"
        rf"every|each)\b[^.;:]{{1,90}},\s*(?:please\s+)?(?:always\s+|never\s+|don't\s+|do not\s+)?{_IMPERATIVE}\b",
        "instruction",
        3.0,
    ),
    (r"\b(?:make sure|be sure to|remember to|don't forget|do not forget|remind)\b", "instruction", 1.5),
    (r"\b(?:every|each)\s+\w+\s+(?:note|email|message|reply|report|summary)\b", "instruction", 1.0),
    # -- restriction: what someone cannot have or do, limits, bans
    (r"\b(?:allerg\w*|anaphyla\w*|epipen\w*|intoleran\w*|coeliac|celiac)\b", RESTRICTION, 3.0),
    (r"\b(?:vegan|vegetarian|pescatarian|kosher|halal|gluten-free|dairy-free|nut-free|sugar-free|"
     r"low-(?:sodium|salt|sugar|fat|carb)|diabetic|diabetes)\b", RESTRICTION, 2.0),
    (r"\b(?:diet|medication|prescription)\b", RESTRICTION, 1.0),
    (r"\b(?:can't|cannot|can not|mustn't|must not|may not|isn't allowed to|aren't allowed to|not allowed to)\s+\w+",
     RESTRICTION, 2.5),
    (r"\b(?:doesn't|does not|don't|do not|never|won't)\s+(?:eat|drink|take)\b", RESTRICTION, 2.0),
    (r"\b(?:must|has to|have to|needs to|need to|should)\s+(?:stay|keep|remain|be kept|avoid|never|"
     r"only|not|eat|limit|follow)\b", RESTRICTION, 2.0),
    (r"\b(?:must|mustn't|has to|have to|should|shouldn't)\b", RESTRICTION, 1.0),
    (r"\b(?:capped|cap(?:s)? (?:at|on)|a cap|budget|at most|no more than|not more than|maximum|"
     r"max\.?|limit(?:ed)? to|under \$|up to \$|only (?:\w+ ){0,3}may|may only|is allowed|are allowed|cap)\b",
     RESTRICTION, 2.0),
    (r"\b\w+-free\b", RESTRICTION, 2.0),
    (r"\b(?:approvals?|sign-off|signoff|permission|eczema|asthma|epilepsy|migraines?|ulcer|kidney disease|"
     r"heart condition)\b", RESTRICTION, 1.5),
    (r"^no\s+\w+", RESTRICTION, 2.5),
    (r"\b(?:avoids?|avoiding|stays? away from|is off limits|not permitted|forbidden|banned)\b", RESTRICTION, 1.0),
    (r"\b(?:no|never)\s+(?:caffeine|coffee|alcohol|sugar|meat|dairy|gluten|nuts|pork|fish|sweets|snacks|"
     r"deploys?|releases?|screens?)\b", RESTRICTION, 2.0),
    # -- goal: an aim, a plan, something wanted in the future
    (r"\b(?:wants?|wanted|hopes?|hoping|plans?|planned|planning|aims?|aiming|intends?|intending|"
     r"wish(?:es)?|dreams? of|would like|'d like|would love|is determined|is keen|is eager|"
     r"is hoping|is planning|is aiming|is trying|is working|is preparing|is training|is studying|"
     r"is looking|is pushing|is saving|are saving|are planning|is applying|is considering|"
     r"is thinking|are thinking|might|may)\s+to\b", "goal", 2.5),
    (r"\b(?:wants?|would like|'d like|expects?)\s+(?:\w+\s+){1,4}to\s+(?!be\b)\w+", "goal", 2.0),
    (r"\b(?:goals?|aim|target(?:ed|s)?|objective|ambition|resolution|milestone|okr)\b", "goal", 2.0),
    (r"\b(?:saving (?:up )?for|saving to|working towards?|training for|preparing for|applying (?:to|for)|"
     r"trying to|pushing to|pushing for|thinking about|considering|dreams? of|hopes? for|"
     r"on track to|in order to|so (?:that )?(?:she|he|they|we) can)\b", "goal", 1.5),
    (rf"\bby (?:the end of|end of|mid-?|early |late |next |this |{_MONTH}\b|q[1-4]\b|\d{{4}}\b|"
     r"spring|summer|autumn|fall|winter|the time)", "goal", 1.5),
    (r"\b(?:is|are) planning (?:a|an|the|their|his|her)\b", "goal", 2.0),
    (r"\bwants? (?:\w+ ){1,5}(?:under|below|above|at least|less than|more than|fewer than)\b", "goal", 2.0),
    (r"\b(?:might|may want to|would like to)\b", "goal", 1.5),
    (r"\bwill\b|\bgoing to\b|\bsomeday\b|\bsome day\b|\bone day\b|\bin the future\b", "goal", 0.7),
    # -- preference: likes, dislikes, tastes, habits of choice
    (r"\b(?:prefers?|preferred|preference|preferably|likes|liked|loves|loved|enjoys|enjoyed|"
     r"favou?rites?|dislikes?|disliked|hates|hated|adores?|detests?)\b", "preference", 2.5),
    (r"\b(?:i|we|they|you|users?|kids|children|both|all|really|also|would|'d|doesn't|don't|does not|"
     r"do not|didn't|did not|never|not)\s+(?:really\s+)?"
     r"(?:like|love|enjoy|hate|prefer)\b", "preference", 2.0),
    (r"\b(?:would rather|'d rather|rather than|fan of|can't stand|cannot stand|obsessed with|"
     r"keen on|fond of|crazy about|a sucker for|not a fan|treat|usual order|usually orders|"
     r"go-to|goes for|opts for|refuses|won't (?:eat|drink|wear)|makes? (?:him|her|them) happy|"
     r"instead of|happy with|distract\w*|annoy\w*)\b", "preference", 1.0),
    (r"\b(?:wants?|would like|'d like)\s+(?!to\b)", "preference", 1.5),
    (r"\b(?:usual|usually|normally|typically)\b", "preference", 1.0),
    (r"\b(?:mornings?|evenings?|nights?|weekends?|days?) (?:are|is) for\b", "preference", 2.0),
    (r"\b(?:usually|always|only|never) (?:drinks|eats|orders|wears|listens|reads|watches|takes|has|picks|"
     r"chooses|uses|goes|buys)\b", "preference", 1.5),
    (r"\b(?:listens? to|reads? a lot|collects?|takes? (?:his|her|their) (?:coffee|tea)|"
     r"drinks?|plays? (?:music|playlists?))\b", "preference", 1.0),
    # -- relationship: who someone is to someone else
    (rf"\b(?:is|are|was|as)\s+{_PERSON}\s+(?:\w+\s+){{0,2}}{_KIN}\b", "relationship", 3.0),
    (rf"\b{_PERSON}\s+(?:\w+\s+){{0,1}}{_KIN}s?\b", "relationship", 1.5),
    (rf"\b{_KIN}\b", "relationship", 0.5),
    (r"\b(?:are|were)\s+(?:\w+\s+){0,2}(?:siblings|cousins|twins|married|engaged|friends|neighbou?rs|"
     r"colleagues|partners|classmates|roommates|flatmates|related|a couple|together)\b", "relationship", 2.5),
    (r"\b(?:reports? to|mentors|mentoring|mentored|married to|engaged to|dating|divorced|separated from|"
     r"babysits?|dog-sits?|pet-sits?|looks after|takes care of|cares for|godmother|godfather|"
     r"classmates?|roommates?|friends? with|friends since|get(?:s)? on well|gets along|pairs? (?:\w+ ){0,2}with|"
     r"works? closely with|shares? (?:an? )?(?:office|desk|flat|apartment|house|custody)|"
     r"related to|in-laws?|godchild)\b", "relationship", 2.0),
    # -- skill: what someone can do, knows, and how well
    (r"\b(?:speaks|fluent(?:ly)?|native (?:\w+ )?speaker|bilingual|expert|expertise|skilled|skil+ful|"
     r"proficient|proficiency|experienced|experience|"
     r"certified|certification|certificate|licen[cs]e|qualified|black belt|talented|gifted|competent)\b", "skill", 2.5),
    (r"\b(?:good at|great at|bad at|better at|best at|strong (?:in|at)|strongest|weak (?:in|at)|"
     r"struggles with|knows|knowledge of|inside out|comfortable (?:with|using|in)|fast at|faster than|"
     r"beginner|intermediate|advanced|level|grade \d|can read|can write|can speak|can swim|"
     r"can ride|can cook|can code|can play|can drive|can fix|can float|can count|understands|"
     r"learning|learned|learnt|self-taught|trained as|is new to|new to|takes (?:\w+ ){0,2}(?:lessons|classes))\b",
     "skill", 1.5),
    (r"\b(?:can|could)\s+(?:now\s+|already\s+)?(?!not\b|have\b|be\b|take\b|join\b|eat\b|drink\b)\w+", "skill", 0.7),
    (r"\bplays? (?:the )?(?:piano|guitar|violin|cello|drums|bass|flute|saxophone|trumpet|chess|tennis)\b",
     "skill", 1.0),
    (r"\b(?:is|are) (?:the|a|an) (?:\w+ )?(?:better|best|strong|stronger|strongest|good|great|excellent|"
     r"talented|skilled|gifted|fast|quick|natural|keen|accomplished|capable|confident|competent|weak|poor|"
     r"beginner)\s+\w+(?:er|or|ist|ian)\b", "skill", 2.0),
    (r"\b(?:better|best|excellent|strong|solid|ahead in|behind in)\b", "skill", 0.7),
    # -- event: something that happened (or is set to happen) at a time
    (_DAY_DATE, "event", 1.5),
    (_ISO_DATE, "event", 1.5),
    (rf"\b{_PAST}\b", "event", 1.5),
    (r"\b(?:was|were)\s+(?!born\b)(?:\w+ly\s+)?\w+(?:ed|en|t)\b", "event", 1.0),
    (r"\b(?:yesterday|last (?:night|week|weekend|month|year|spring|summer|autumn|fall|winter|"
     rf"{_WEEKDAY})|\w+ (?:days?|weeks?|months?|years?) ago|this morning|earlier today|"
     r"the other day|just now|recently)\b", "event", 1.5),
    (rf"\bon (?:{_WEEKDAY}|the \d{{1,2}}(?:st|nd|rd|th))\b(?! (?:to|and|mornings|evenings|nights|afternoons))",
     "event", 0.7),
    (rf"\bin {_MONTH} \d{{4}}\b|\bin (?:19|20)\d\d\b", "event", 0.7),
    (r"\b(?:is set for|is scheduled for|takes place|took place|is due on|goes live|"
     r"went live|party|wedding|funeral|trip|holiday|offsite|conference|concert|outage|"
     r"incident|surgery|accident|check-?up|appointment)\b", "event", 0.7),
    (r"^(?:found|shipped|fixed|hosted|had|met|went|finished|started|moved|visited|attended|booked)\b", "event", 2.0),
    # -- context: the current, temporary situation
    (r"\b(?:currently|right now|at the moment|for now|for the time being|these days|lately|"
     r"at present|temporarily|in the middle of|this (?:week|month|semester|term|quarter|sprint|summer|"
     r"winter|spring|autumn|fall)|for the (?:summer|winter|rest of)|overloaded|stretched|swamped|"
     r"busy with|on leave|on sabbatical|recovering|rehab\w*|heals?|healing|being (?:\w+ed|rebuilt|built)|"
     r"at risk|is back|are back|back on|off (?:school|work|sick)|staying (?:home|with)|blocked|"
     r"in progress|ongoing|working on|today|tonight|halfway|half-way|nearly done|almost done|"
     r"is down|is up|sits (?:around|at)|hovers)\b",
     "context", 2.0),
    (r"\b(?:until|till|through|throughout|as of|while)\b", "context", 1.0),
    (r"\bsince\b", "context", 0.5),
    (r"\b(?:is|are|am)\s+(?:\w+ly\s+)?\w+ing\b", "context", 1.0),
    (r"\d%|\bper ?cent\b", "context", 1.0),
    (rf"\bfrom\s+(?:\d{{1,2}}\s+)?(?:{_MONTH}|{_WEEKDAY})\w*\s+(?:\d{{1,2}}\s+)?(?:to|until|till)\b", "context", 1.0),
    (r"\b(?:now|has been|have been|is being|are being)\b", "context", 0.7),
    # -- fact: stable descriptions, identities, attributes
    (r"\b(?:birthday is|born on|born in|was born|anniversary is|lives in|lives with|based in|"
     r"works as|works at|works for|live in|is from|comes from|grew up|address is|years old|\w+-year-old|"
     r"blood type|drives a|owns a|titles? is|job is|is called|is named|stands for|runs on|"
     r"is built (?:with|on|in)|is written in|uses)\b", "fact", 2.0),
    (r"\b(?:is|are)\s+(?:a|an|the|in|at)\b", "fact", 1.0),
    (r"\b(?:is|are|was|has|have|had)\b", "fact", 0.5),
    (r"\b(?:meets|runs|starts|happens|last|lasts|takes place) (?:every|each|on|at|daily|weekly|monthly)\b"
     r"|\bevery (?:day|week|month|other)\b|\bdaily\b|\bweekly\b|\bmonthly\b", "fact", 0.7),
)  # fmt: skip


# What the rules are, for the name of the read-out's kept fit: a change to them makes a new fit.
RULES_RECIPE = repr((_RULES, STATEMENT_WEIGHT, RULE_CHARS))


@cache
def _compiled_rules() -> tuple[tuple[re.Pattern[str], str, float], ...]:
    """Compiled on first use: some 20 ms that a starting server need not spend before its handshake."""
    return tuple((re.compile(pattern), kind, weight) for pattern, kind, weight in _RULES)


def _clean(text: str) -> str:
    """Lower case (the patterns are), straight apostrophes, plain hyphens, single spaces."""
    return " ".join(text[:RULE_CHARS].replace("\u2019", "'").replace("\u2013", "-").lower().split())


def rule_scores(text: str) -> dict[str, float]:
    """Each kind's cue weight in the text; a pattern counts once however often it matches."""
    clean = _clean(text)
    scores = dict.fromkeys(KINDS, 0.0)
    for pattern, kind, weight in _compiled_rules():
        if pattern.search(clean):
            scores[kind] += weight
    if _is_statement(clean):
        scores[Category.FACT.value] += STATEMENT_WEIGHT
    return scores


def _is_statement(text: str) -> bool:
    """A sentence rather than a code, a name or a list of keywords: three words or more, with a
    small word among them or a full stop at the end."""
    found = words(text)
    return len(found) >= 3 and (text.rstrip().endswith((".", "!")) or any(w in STOPWORDS for w in found))


def _best(scores: Mapping[str, float]) -> tuple[str, float]:
    kind = max(KINDS, key=lambda k: scores[k])  # KINDS' order breaks ties
    return kind, scores[kind]


# -- the detector ------------------------------------------------------------------------------
class CategoryDetector:
    """Detects a memory's category from its words and, when there is one, its vector.

    The read-out is fitted (or read back) on the first ``detect`` with a vector, once, under a
    lock; if the embedder fails then, detection falls back on the rules and tries again next time.
    """

    def __init__(self, embedder: Embedder | None, cache_dirs: Sequence[Path] = ()) -> None:
        self.embedder = embedder
        self.cache_dirs = tuple(cache_dirs)
        self._readout: CategoryReadout | None = None
        self._lock = threading.Lock()

    def load(self) -> bool:
        """Fit or read the read-out now (say, on a server's warm-up thread) rather than on first use;
        False when there is no model or it failed."""
        return self._loaded() is not None

    def _loaded(self) -> CategoryReadout | None:
        if self.embedder is None:
            return None
        if self._readout is None:
            with self._lock:
                if self._readout is None:
                    try:
                        self._readout = CategoryReadout.cached(
                            self.embedder, KINDS, _rule_row, RULES_RECIPE, self.cache_dirs
                        )
                    except Exception:  # the model's failure must not stop a memory being stored
                        return None
        return self._readout

    def scores(self, text: str, vector: Vectors | None = None) -> dict[str, float]:
        """Each kind's score: the read-out's log-probability with a vector of the model, else its rule weight."""
        return self._scores(text, rule_scores(text), vector)

    def _scores(self, text: str, rules: dict[str, float], vector: Vectors | None) -> dict[str, float]:
        readout = None if vector is None else self._loaded()
        if readout is None or vector is None or vector.shape != (readout.dimension,):
            return rules  # no model, a failing one, or a vector of another model: the rules decide
        row = [rules[kind] for kind in KINDS]
        return dict(zip(KINDS, readout.log_probabilities(text, vector, row).tolist(), strict=True))

    def detect(self, text: str, vector: Vectors | None = None) -> Category:
        """The best-scoring kind's category; ``custom`` for text that is not a sentence and has no cue."""
        rules = rule_scores(text)
        if not any(rules.values()):
            return Category.CUSTOM
        return filed_as(_best(self._scores(text, rules, vector))[0])


def _rule_row(text: str) -> list[float]:
    """The rules' scores in KINDS' order: the read-out's view of them, for fitting it."""
    scores = rule_scores(text)
    return [scores[kind] for kind in KINDS]


# -- tags and importance -----------------------------------------------------------------------
# Words that say what kind of statement a memory is, not what it is about: poor tags.
_NOT_TAGS = frozenset((
    "user", "users", "wants", "want", "wanted", "likes", "like", "liked", "loves", "love", "loved", "prefers",
    "prefer", "preferred", "enjoys", "enjoy", "hates", "dislikes", "needs", "need", "every", "always", "never",
    "must", "also", "really", "would", "rather", "remind", "please", "make", "sure", "currently", "lives",
))  # fmt: skip


def _tag_word(word: str) -> str:
    """A possessive tags as its owner: "emma's" is "emma"."""
    return word[:-2] if word.endswith(("'s", "\u2019s")) else word


def auto_tags(text: str, given: tuple[str, ...] = (), limit: int = 5) -> list[str]:
    """The most frequent content words (longest first among equals), not already a given tag."""
    taken = {t.casefold() for t in given}
    candidates = (_tag_word(w) for w in words(text))
    counts = Counter(
        w
        for w in candidates
        if len(w) > 2 and w not in STOPWORDS and w not in _NOT_TAGS and not w.isdigit() and w not in taken
    )
    ranked = sorted(counts.items(), key=lambda item: (-item[1], -len(item[0]), item[0]))
    return [word for word, _ in ranked[:limit]]


_IMPORTANT = re.compile(
    r"\b(allerg\w*|intoleran\w*|never|always|must|critical|important|urgent|password|deadline|"
    r"medical|medication|emergency|security|do not|don't)\b",
    re.IGNORECASE,
)


def estimate_importance(text: str, category: Category) -> float:
    """0.5, raised by signs that forgetting would hurt (health, hard rules, deadlines)."""
    base = {
        Category.INSTRUCTION: 0.6,
        Category.PREFERENCE: 0.55,
        Category.GOAL: 0.6,
        Category.RELATIONSHIP: 0.55,
        Category.EVENT: 0.45,
        Category.CONTEXT: 0.4,
    }.get(category, 0.5)
    boost = 0.15 * len(_IMPORTANT.findall(text))
    return round(min(1.0, base + boost), 2)
