"""Sentences one fact-bearing word apart, and rewrites of one fact, for the near-duplicate tests.

Each distinct pair scores a cosine at or above mnemo's near-duplicate threshold with the local model
(tests check that), so only the rule that reads the words keeps the second fact.
"""

DISTINCT = [
    (
        "date",
        "Liam wants the quarterly report finished before August.",
        "Liam wants the quarterly report finished before July.",
    ),
    (
        "weekday",
        "Liam has the weekly sync with Sofia every Monday morning.",
        "Liam has the weekly sync with Sofia every Friday morning.",
    ),
    (
        "name",
        "Liam and the user agreed that Atlas billing gets a deploy freeze over the holidays, as Sofia asked.",
        "Liam and the user agreed that Atlas billing gets a deploy freeze over the holidays, as Dmitri asked.",
    ),
    (
        "number",
        "Liam's Atlas service keeps 3 replicas in production.",
        "Liam's Atlas service keeps 5 replicas in production.",
    ),
    (
        "version",
        "Liam's Atlas backend runs on Python 3.11 in production.",
        "Liam's Atlas backend runs on Python 3.12 in production.",
    ),
    (
        "unit",
        "Liam set the Atlas upload limit to 50 MB per file.",
        "Liam set the Atlas upload limit to 50 GB per file.",
    ),
    ("negation", "Liam is ok with being mentioned after hours.", "Liam is not ok with being mentioned after hours."),
    ("quantity", "Liam always works from home on Fridays.", "Liam sometimes works from home on Fridays."),
    ("owner", "Liam's manager approved the Atlas budget.", "Liam's mentor approved the Atlas budget."),
    ("order", "Liam prefers espresso over green tea.", "Liam prefers green tea over espresso."),
    ("tense", "Liam lived in Berlin with a partner.", "Liam lives in Berlin with a partner."),
    ("antonym", "Dark mode is enabled on Liam's dashboard.", "Dark mode is disabled on Liam's dashboard."),
    ("modal", "Liam will move to Lisbon next year.", "Liam might move to Lisbon next year."),
]

REWRITES = [
    (
        "word order",
        "Liam wants the quarterly report finished before August.",
        "Before August, Liam wants the quarterly report finished.",
    ),
    (
        "contraction",
        "Liam is not comfortable presenting to the board.",
        "Liam isn't comfortable presenting to the board.",
    ),
    (
        "note",
        "Liam has the weekly sync with Sofia every Monday morning.",
        "Note: Liam has the weekly sync with Sofia every Monday morning.",
    ),
    (
        "punctuation",
        "Liam's Atlas service keeps 3 replicas, in production.",
        "Liam's Atlas service keeps 3 replicas in production!",
    ),
]
