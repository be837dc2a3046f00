"""The import layering of docs/layout.md: every import (at module top or inside a function) goes to
the same layer or a lower one, and no module reaches itself through imports.

Importing ``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` first, so an import counts as an
edge to each package it passes through (except the importer's own packages, already running)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Bottom to top: each layer is one or more folders of ``evaluation/``; plugins/ and dags/ sit on top.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("contract", ("contract", "judges")),
    ("storage", ("storage",)),
    ("calling", ("calling",)),
    ("stages", ("stages",)),
    ("pages", ("pages", "report", "compare", "calibration")),
    ("cli", ("cli", "testing")),
    ("airflow", ()),
]
LEVEL = {folder: level for level, (_, folders) in enumerate(LAYERS) for folder in folders}
NAME = [name for name, _ in LAYERS]
AIRFLOW = len(LAYERS) - 1
#: The package's root modules: its face (light names a DAG file may import) and ``python -m evaluation``.
ROOT_MODULES = {"evaluation": LEVEL["contract"], "evaluation.__main__": LEVEL["cli"]}


def _modules() -> dict[str, Path]:
    """Every module of the project by its import name (plugins import as top-level modules)."""
    found: dict[str, Path] = {}
    for path in sorted((REPO / "evaluation").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for path in sorted((REPO / "plugins").glob("*.py")):
        found[path.stem] = path
    for path in sorted((REPO / "dags").glob("*.py")):
        found[f"dags.{path.stem}"] = path
    return found


MODULES = _modules()


def layer(module: str) -> int:
    """The layer of a module: that of the folder of ``evaluation/`` it lies in."""
    if module.startswith("dags.") or (REPO / "plugins" / f"{module}.py").exists():
        return AIRFLOW
    if module in ROOT_MODULES:
        return ROOT_MODULES[module]
    folder = module.split(".")[1]
    if folder not in LEVEL:
        raise AssertionError(f"{module} lies in no layer's folder: move it into one (docs/layout.md)")
    return LEVEL[folder]


def package(module: str) -> str:
    """The layer folder a module lies in (``evaluation.storage.ingest`` -> ``storage``)."""
    return module.split(".")[1] if module.startswith("evaluation.") else module.split(".")[0]


def _imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """(project module, line) of every import in ``path``, with the packages each passes through."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 2)}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                if target in MODULES and target not in own:
                    yield target, node.lineno


GRAPH: dict[str, dict[str, int]] = {
    module: {target: line for target, line in _imported(module, path)} for module, path in MODULES.items()
}


def test_every_module_has_a_layer() -> None:
    assert {m: layer(m) for m in MODULES}  # raises naming the first module without one
    assert "evaluation.calling.client" in MODULES and "evaluation.pages.html" in MODULES and len(MODULES) > 80


def test_the_folders_are_the_layers() -> None:
    """``evaluation/`` holds its two root modules and the layers' folders, nothing else; every
    folder is a package in exactly one layer."""
    top = sorted(p.name for p in (REPO / "evaluation").iterdir() if p.suffix == ".py")
    folders = sorted(p.name for p in (REPO / "evaluation").iterdir() if (p / "__init__.py").exists())
    assert top == ["__init__.py", "__main__.py"]
    assert folders == sorted(LEVEL)


def test_every_package_says_what_it_offers() -> None:
    """Each layer's package declares ``__all__``: the names the layers above may take from its face."""
    missing = [folder for folder in LEVEL if "__all__" not in (REPO / "evaluation" / folder / "__init__.py").read_text()]
    assert missing == []


def test_private_modules_stay_in_their_package() -> None:
    """A module whose name starts with ``_`` is imported only from inside its own package."""
    leaks = [
        f"{MODULES[m].relative_to(REPO)}:{line} imports {t}"
        for m, targets in GRAPH.items() for t, line in targets.items()
        if t.rpartition(".")[2].startswith("_") and package(t) != package(m)
    ]
    assert leaks == []


def _packages(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The import graph between the layers' folders (an edge per importing folder and imported one)."""
    folded: dict[str, dict[str, int]] = {}
    for module, targets in graph.items():
        if module in ROOT_MODULES or not module.startswith("evaluation."):
            continue
        for target, line in targets.items():
            if target.startswith("evaluation.") and target not in ROOT_MODULES and package(target) != package(module):
                folded.setdefault(package(module), {})[package(target)] = line
    return folded


def test_no_package_cycle() -> None:
    assert _cycles(_packages(GRAPH)) == []


def test_no_import_goes_up_a_layer() -> None:
    upward = [
        f"{MODULES[m].relative_to(REPO)}:{line} imports {t} ({NAME[layer(t)]} above {NAME[layer(m)]})"
        for m, targets in GRAPH.items() for t, line in targets.items() if layer(t) > layer(m)
    ]
    assert upward == []


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_the_walk_sees_function_level_imports_and_cycles() -> None:
    """The checks can fail: an import inside a function is an edge, and a loop is found."""
    source = "def f():\n    from evaluation.cli.main import main\n"
    probe = Path(REPO / "evaluation" / "contract" / "config.py")
    edges = dict(_imported("evaluation.contract.config", probe))
    assert "evaluation.cli.main" not in edges
    tree = ast.parse(source)
    inner = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert inner and inner[0].module == "evaluation.cli.main" and layer("evaluation.cli.main") > layer("evaluation.contract.config")
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert GRAPH["evaluation.cli.day"]["evaluation.report"] and GRAPH["evaluation.stages.check"]["evaluation.contract"]
    assert _cycles(_packages({"evaluation.a.x": {"evaluation.b.y": 1}, "evaluation.b.y": {"evaluation.a.z": 2}})) \
        == [["a", "b"]]


def _function_level_imports(source: str) -> list[int]:
    """The line of every import statement inside a function of ``source``."""
    found: list[int] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child.lineno)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(ast.parse(source), False)
    return found


def _unexplained(source: str) -> list[int]:
    """Function-level imports with no comment on their line or the line above (a run of adjacent
    imports shares the comment of its first)."""
    lines = source.splitlines()
    inside = set(_function_level_imports(source))
    explained: set[int] = set()
    for line in sorted(inside):
        above = lines[line - 2].strip() if line > 1 else ""
        if "#" in lines[line - 1] or above.startswith("#") or (line - 1 in explained):
            explained.add(line)
    return sorted(inside - explained)


def test_every_import_inside_a_function_says_why() -> None:
    """Imports live at module top; one left inside a function (a heavy module on one path) carries a
    few words why, on its line or the line above."""
    bare = [
        f"{path.relative_to(REPO)}:{line}"
        for folder in ("evaluation", "plugins", "dags") for path in sorted((REPO / folder).rglob("*.py"))
        for line in _unexplained(path.read_text())
    ]
    assert bare == []


def test_the_unexplained_import_check_can_fail() -> None:
    source = ("import os\n\n\ndef f():\n    # polars: heavy, only here\n    import polars\n    import numpy\n\n"
              "    import pandas\n\n\ndef g():\n    from json import dumps  # light really\n")
    assert _function_level_imports(source) == [6, 7, 9, 13]
    assert _unexplained(source) == [9]


def test_no_module_is_over_700_lines() -> None:
    """One concern a module: a module grown past 700 lines is split along its own sections."""
    long = {str(path.relative_to(REPO)): n for folder in ("evaluation", "plugins", "dags", "scripts", "bench")
            for path in sorted((REPO / folder).rglob("*.py")) if (n := len(path.read_text().splitlines())) > 700}
    assert long == {}
