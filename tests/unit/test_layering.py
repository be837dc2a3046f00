"""The import layering of docs/layout.md: every import (at module top or inside a function) goes to
the same layer or a lower one, and no module reaches itself through imports.

Importing ``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` first, so an import counts as an
edge to each package it passes through (except the importer's own packages, already running)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Bottom to top; a module's layer is that of the longest name listed that it is or lies under.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("contract", ("evaluation", "evaluation.contract", "evaluation.errors", "evaluation.adapters", "evaluation.schemas", "evaluation.versions",
                  "evaluation.options", "evaluation.judges", "evaluation.calibration", "evaluation.calibration.spec",
                  "evaluation.multiplicity", "evaluation.normalise", "evaluation.redact", "evaluation.reject_summary",
                  "evaluation.synthetic", "evaluation.review", "evaluation.review.spec", "evaluation.review.estimate",
                  "evaluation.review.queue")),
    ("storage", ("evaluation.storage", "evaluation.ingest", "evaluation.otel", "evaluation.validation", "evaluation.ledger",
                 "evaluation.sql", "evaluation.retention", "evaluation.summary", "evaluation.review.labels")),
    ("client", ("evaluation._compat", "evaluation.client", "evaluation.cost", "evaluation.outcome", "evaluation.ratelimit", "evaluation.fleetrate",
                "evaluation.offline", "evaluation.batch")),
    ("stages", ("evaluation.stages", "evaluation.wait", "evaluation.review.job", "evaluation.review.labelstudio")),
    ("pages", ("evaluation.charts", "evaluation.html", "evaluation.report", "evaluation.compare",
               "evaluation.calibration.cascade", "evaluation.calibration.compute", "evaluation.calibration.daily", "evaluation.calibration.golden",
               "evaluation.calibration.metrics", "evaluation.calibration.render", "evaluation.calibration.run",
               "evaluation.day", "evaluation.review.calibrate")),
    ("cli", ("evaluation.cli", "evaluation.cli_support", "evaluation.calibration.cli", "evaluation.sample_logs",
             "evaluation.sample_formats",
             "evaluation.__main__", "evaluation.testing", "evaluation.review.cli")),
    ("airflow", ("plugins", "dags")),
]
LEVEL = {prefix: level for level, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes}
NAME = [name for name, _ in LAYERS]


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
    if module.startswith("dags.") or (REPO / "plugins" / f"{module}.py").exists():
        return LEVEL["plugins"]
    name = module
    while name and (name != "evaluation" or module == "evaluation"):  # the root package is one module
        if name in LEVEL:
            return LEVEL[name]
        name = name.rpartition(".")[0]
    raise AssertionError(f"{module} is in no layer: add it to LAYERS (and docs/layout.md)")


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
    assert "evaluation.client" in MODULES and "evaluation.html" in MODULES and len(MODULES) > 80


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
    source = "def f():\n    from evaluation.cli import main\n"
    probe = Path(REPO / "evaluation" / "contract.py")
    edges = dict(_imported("evaluation.contract", probe))
    assert "evaluation.cli" not in edges
    tree = ast.parse(source)
    inner = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert inner and inner[0].module == "evaluation.cli" and layer("evaluation.cli") > layer("evaluation.contract")
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert GRAPH["evaluation.day"]["evaluation.report"] and GRAPH["evaluation.stages.check"]["evaluation.calibration"]


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
