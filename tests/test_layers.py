"""The layers of docs/ARCHITECTURE.md hold: each package imports only the layers below it (every
import counts, also one inside a function; only ``if TYPE_CHECKING:`` blocks do not), and no
modules import each other in a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import freshness_magic

PACKAGE = Path(freshness_magic.__file__).parent
BASE = {"errors", "ids", "faults", "atomicio", "pathsafety", "schemas", "vcs"}
"""What every layer may use: errors, ids, write sites, safe files and paths, schemas, git."""
MAY_IMPORT: dict[str, set[str]] = {
    "pathsafety": {"errors", "ids"},
    "faults": set(),
    "atomicio": {"errors", "faults", "pathsafety"},
    "engine": BASE - {"vcs"},
    "freshness": BASE | {"engine"},
    "evidence": BASE | {"engine", "freshness"},
    "hub": BASE | {"engine", "freshness"},
    "backends": BASE | {"engine"},
    "cluster": BASE | {"engine", "backends"},
    "interop": BASE | {"engine"},
    "pathlint": BASE | {"engine"},
    "views": BASE | {"engine", "freshness", "evidence", "hub", "backends", "cluster", "interop"},
    "live": BASE
    | {"engine", "freshness", "evidence", "hub", "backends", "cluster", "interop", "views"}
    | {"session", "lint", "holders"},
}
"""Each package below the surfaces and what it may import besides itself. ``lint.py`` and
``session.py`` compose the packages; ``live/`` drives a loaded pipeline's run through them, with
no IPython; ``notebook/``, ``commands/`` and ``cli.py`` are surfaces."""


def module_files() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(("freshness_magic", *parts))] = path
    return found


MODULES = module_files()


def is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def imports_of(module: str) -> set[str]:
    """The package's modules ``module`` imports (the innermost that exists for each name)."""
    path = MODULES[module]
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    named: set[str] = set()

    def visit(node: ast.AST) -> None:
        if is_type_checking(node):
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child)
            return
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                inner = f"{source}.{alias.name}"
                named.add(inner if inner in MODULES else source)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    found = set()
    for name in named:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module and not module.startswith(name + "."):
            found.add(name)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def layer(module: str) -> str:
    """The first name below the package (``engine`` for ``freshness_magic.engine.model``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_a_lower_package_imports_only_the_layers_below_it(package: str) -> None:
    allowed = MAY_IMPORT[package] | {package}
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if layer(module) == package
        for target in targets
        if layer(target) and layer(target) not in allowed
    )
    assert wrong == []


def test_the_model_imports_nothing_above_it() -> None:
    """The bottom model knows no adapter (pydot, graphviz and networkx export import it)."""
    assert GRAPH["freshness_magic.engine.model"] <= {"freshness_magic.ids"}


def test_the_notebook_does_not_import_the_command_line() -> None:
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if layer(module) == "notebook"
        for target in targets
        if layer(target) in ("commands", "cli")
    )
    assert wrong == []


def cycles() -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(GRAPH[module]):
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(GRAPH):
        if module not in index:
            connect(module)
    return groups


def test_no_modules_import_each_other_in_a_cycle() -> None:
    assert cycles() == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above would pass on a finder that finds nothing: it finds a planted cycle."""
    GRAPH["freshness_magic.ids"] = {"freshness_magic.errors"}
    GRAPH["freshness_magic.errors"] = GRAPH["freshness_magic.errors"] | {"freshness_magic.ids"}
    try:
        assert ["freshness_magic.errors", "freshness_magic.ids"] in cycles()
    finally:
        GRAPH["freshness_magic.ids"] = imports_of("freshness_magic.ids")
        GRAPH["freshness_magic.errors"] = imports_of("freshness_magic.errors")
