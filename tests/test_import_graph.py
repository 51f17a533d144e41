"""No circle between convhub's packages: the import graph of its subpackages and top modules has no cycle.

A package is one of ``convhub``'s subpackages (``engine``, ``publish``, ``builders``...) or top modules
(``schema``, ``cards``...); package A depends on package B when a module of A imports one of B, at the top of a
file or inside a function (a lazy import dodges a circle at run time, not in the design). Imports under
``if TYPE_CHECKING:`` are left out: they are annotations, never run. The graph is read from the source with
``ast``, nothing is imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import convhub

PACKAGE = Path(convhub.__file__).parent

#: Circles between packages, each the set of packages it goes through: none. A new one fails the test at once.
#: (The registry finds the sources by name, as a plugin folder: ``convhub.builders`` imports convhub, never the
#: other way; ``convhub.builder``, what a source extends, sits above the engine and the views.)
KNOWN_CIRCLES: set[frozenset[str]] = set()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every import statement of a module, with those under ``if TYPE_CHECKING:`` left out."""
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        pending.extend(ast.iter_child_nodes(node))


def _imported_modules(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names one import statement of ``module`` reads (a relative import resolved)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    if base == "convhub":  # from convhub import schema, registry
        return [f"convhub.{alias.name}" for alias in node.names]
    return [base]


def _package_of(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if parts[0] == "convhub" and len(parts) > 1 else None


def package_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Package → the other packages its modules import (``convhub/builders`` followed: it links to ``builders/``)."""
    graph: dict[str, set[str]] = defaultdict(set)
    files = [path for path in root.rglob("*.py")] + list((root / "builders").resolve().rglob("*.py"))
    for path in set(files):
        builders_root = (root / "builders").resolve()
        if path.is_relative_to(builders_root):
            relative = Path("builders") / path.relative_to(builders_root)
        else:
            relative = path.relative_to(root)
        is_package = relative.name == "__init__.py"
        parts = ["convhub", *relative.with_suffix("").parts]
        module = ".".join(parts[:-1] if is_package else parts)
        own = _package_of(module)
        if own is None:
            continue
        graph[own]  # a package that imports no other one is still a node
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for dotted in _imported_modules(node, module, is_package):
                other = _package_of(dotted)
                if other is not None and other != own:
                    graph[own].add(other)
    return dict(graph)


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one package: each a circle (or several sharing packages)."""
    reach = {}
    for start in graph:
        seen, pending = set(), [start]
        while pending:
            for other in graph.get(pending.pop(), ()):
                if other not in seen:
                    seen.add(other)
                    pending.append(other)
        reach[start] = seen
    found = set()
    for package in graph:
        component = frozenset(
            {package} | {other for other in reach[package] if package in reach.get(other, ())}
        )
        if len(component) > 1:
            found.add(component)
    return found


def test_the_graph_sees_imports_of_every_kind():
    graph = package_graph()
    assert {"engine", "schema", "storage", "cli", "builders"} <= set(graph)
    assert "engine" in graph["builders"]  # from convhub.engine... in a source's folder
    assert "schema" in graph["engine"]  # from convhub import schema
    assert "publish" in graph["cli"]  # a command's module imported where the CLI runs it


def test_circles_find_a_cycle_and_only_its_packages():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == {frozenset({"a", "b", "c"})}
    assert circles({"a": {"b"}, "b": set()}) == set()


def test_no_circle_between_packages_but_the_known_ones():
    found = circles(package_graph())
    assert found == KNOWN_CIRCLES, (
        f"circles between packages: {sorted(sorted(circle) for circle in found)} "
        f"(known: {sorted(sorted(circle) for circle in KNOWN_CIRCLES)})"
    )
