"""The package's folders are its layers: imports point one way, nothing imports itself back.

Read from the source (every import counts: at the top, inside a function, under TYPE_CHECKING), so
a lazy import cannot hide a dependency. The layers, from the bottom (docs/design.md): the record
and its vocabulary at the package root; embedders; storage; search; identity and access; the
engine (with lifecycle and import/export); settings and the composition root; profiles;
transports; the command line and the clients' hooks. A module imports its own layer or one below.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "mnemo"

# The lowest layer first; a module imports only from its own layer or one listed before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("mnemo", "mnemo.model", "mnemo.errors", "mnemo.clock", "mnemo.bounds", "mnemo.query", "mnemo.lazy"),
    ("mnemo.embed",),
    ("mnemo.storage",),
    ("mnemo.search",),
    ("mnemo.access",),
    ("mnemo.engine", "mnemo.lifecycle", "mnemo.transfer"),
    ("mnemo.config", "mnemo.app"),
    ("mnemo.profiles",),
    ("mnemo.serve",),
    ("mnemo.cli", "mnemo.capture", "mnemo.__main__"),
)
# Modules of a layer that any layer may import, because they import nothing of mnemo: splitting
# text into words is search's, and the record's loose key and the fake embedder split words too.
LEAVES = frozenset({"mnemo.search.words"})

# The package root keeps the record and its vocabulary, settings and the composition root; numpy
# bound lazily (lazy.py) stays beside them, as every layer from embed/ to engine/ takes numpy there.
ROOT_MODULES = frozenset(
    {"__init__", "__main__", "model", "errors", "clock", "bounds", "query", "lazy", "config", "app"}
)
ROOT_OTHER_FILES = frozenset({"py.typed"})


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _known(name: str) -> str:
    """The module (or package) an import names: ``mnemo.a.b`` is ``mnemo.a`` when b is a name in it."""
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "mnemo" or alias.name.startswith("mnemo."):
                    yield _known(alias.name), node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base != "mnemo" and not base.startswith("mnemo."):
                continue
            for alias in node.names:
                yield _known(f"{base}.{alias.name}"), node.lineno


GRAPH = {module: sorted({target for target, _ in _imports(module, path) if target != module})
         for module, path in MODULES.items()}  # fmt: skip


def _layer(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the matching prefix, layer)
    for rank, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > best[0]):
                best = (len(name), rank)
    return None if best is None else best[1]


def test_every_module_has_a_place_in_the_layers():
    assert [module for module in MODULES if _layer(module) is None] == []


def test_each_layer_imports_only_its_own_layer_or_those_below_it():
    upward = [
        f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)}) at line {line}"
        for module, path in MODULES.items()
        for target, line in _imports(module, path)
        if target not in LEAVES and (_layer(target) or 0) > (_layer(module) or 0)
    ]
    assert upward == []


def test_a_leaf_that_any_layer_may_import_imports_nothing_of_mnemo():
    assert {leaf: GRAPH[leaf] for leaf in LEAVES} == {leaf: [] for leaf in LEAVES}


def test_no_module_imports_itself_back_through_others():
    # Tarjan's strongly connected components: any with more than one module is an import circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in GRAPH.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    assert circles == []


def test_the_package_root_holds_only_the_record_its_vocabulary_and_the_composition_root():
    files = {path.name for path in PACKAGE.iterdir() if path.is_file()}
    modules = {name.removesuffix(".py") for name in files if name.endswith(".py")}
    assert sorted(modules - ROOT_MODULES) == []
    assert sorted(files - {f"{name}.py" for name in ROOT_MODULES} - ROOT_OTHER_FILES) == []
