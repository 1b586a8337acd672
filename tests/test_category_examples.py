"""The category read-out's hand-written examples are data the package ships, not Python.

They live in ``mnemo/search/data/category_examples/*.json``; ``category_readout.example_sets``
reads them once. The read-out's fit (and its kept file's name) depends on them, so every kind
must have examples in every set, and no list of sentences may creep back into the code.
"""

from __future__ import annotations

import ast
import importlib.resources
import json
from pathlib import Path

import mnemo.search
from mnemo.search.category_readout import EXAMPLE_SETS, example_sets
from mnemo.search.enrich import KINDS

SEARCH = Path(mnemo.search.__file__).parent
SENTENCE_LIST = 5  # a literal holding this many strings of three words or more is a list of sentences


def test_the_shipped_example_files_load_once_with_examples_of_every_kind_in_every_set() -> None:
    folder = importlib.resources.files("mnemo.search") / "data" / "category_examples"
    assert sorted(entry.name for entry in folder.iterdir()) == sorted(f"{name}.json" for name in EXAMPLE_SETS)
    sets = example_sets()
    assert example_sets() is sets  # read once
    assert len(sets) == len(EXAMPLE_SETS)
    for name, examples in zip(EXAMPLE_SETS, sets, strict=True):
        document = json.loads((folder / f"{name}.json").read_text("utf-8"))
        assert document["about"], name  # how the set was written stays beside it
        assert set(examples) == set(KINDS), name
        for kind, texts in examples.items():
            assert texts, (name, kind)
            assert all(isinstance(text, str) and text.strip() == text != "" for text in texts), (name, kind)
    assert sum(len(texts) for examples in sets for texts in examples.values()) == 1159


def test_no_list_of_example_sentences_is_left_as_a_python_literal_in_the_search_package() -> None:
    def sentences(node: ast.AST) -> int:
        elements = node.elts if isinstance(node, ast.List | ast.Tuple | ast.Set) else []
        return sum(
            isinstance(e, ast.Constant) and isinstance(e.value, str) and len(e.value.split()) >= 3 for e in elements
        )

    found = [
        f"{path.relative_to(SEARCH)}:{node.lineno}"
        for path in sorted(SEARCH.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if sentences(node) >= SENTENCE_LIST
    ]
    assert found == [], "example sentences belong in search/data/, not in code"
