"""The engine knows nothing of freshness or evidence: no engine module imports them,
importing every engine module loads none of them, and no engine code names their attributes,
their typed readers (those live in ``freshness/attrs.py`` and ``evidence/attrs.py``) or their
event types (``freshness/events.py``, ``evidence/events.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import freshness_magic.engine
from tests.processes import fresh_python

ENGINE = Path(freshness_magic.engine.__file__).parent
MODULES = sorted(ENGINE.rglob("*.py"))
OUTSIDE = (
    "freshness_magic.freshness",
    "freshness_magic.evidence",
    "freshness_magic.notebook",
    "freshness_magic.hub",
    "IPython",
)
ATTRIBUTES = frozenset({"source_files", "freshness", "evidence", "expects_no_changes", "commit"})
"""Attribute keys that only freshness and evidence read."""
READERS = frozenset(
    {
        "freshness_mode",
        "node_inputs",
        "prompt_input_entry",
        "evidence_mode",
        "commit_enabled",
        "requires_work_evidence",
        "is_work_type",
        "FRESHNESS_MODES",
        "EVIDENCE_MODES",
        "NON_WORK_HANDLER_TYPES",
    }
)
"""The typed readers that moved out of ``engine/model.py``."""
EVENT_NAMES = frozenset(
    {
        "FreshnessEvent",
        "EvidenceEvent",
        "STALE_INPUT",
        "INPUT_DRIFT",
        "BASELINE_ACCEPTED",
        "EVIDENCE_RECORDED",
    }
)
"""The freshness and evidence event vocabularies and their members (moved out of ``EventType``)."""
EVENT_VALUES = frozenset({"stale_input", "input_drift", "baseline_accepted", "evidence_recorded"})
"""What those events store in ``events.jsonl``."""


def imported_modules(tree: ast.AST) -> list[str]:
    """Every module an ``import`` names, at any depth (function bodies, TYPE_CHECKING blocks)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def knowledge(tree: ast.AST) -> list[str]:
    """Names and string values that encode freshness or evidence attributes or event types.

    A string that is a whole statement is documentation and is not counted; any other string
    equal to an attribute key or a stored event type is (``attrs.get("source_files")``,
    ``emit("stale_input")``), and so is any identifier that is an attribute key, a moved reader
    or an event vocabulary or member (``node.freshness``, ``def evidence_mode``,
    ``EventType.STALE_INPUT``).
    """
    docs = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    names = ATTRIBUTES | READERS | EVENT_NAMES
    strings = ATTRIBUTES | EVENT_VALUES
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docs and node.value in strings:
                found.append(f"{node.lineno}: string {node.value!r}")
        elif isinstance(node, ast.Name) and node.id in names:
            found.append(f"{node.lineno}: name {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in names:
            found.append(f"{node.lineno}: attribute .{node.attr}")
        elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names:
            found.append(f"{node.lineno}: definition {node.name}")
        elif isinstance(node, ast.arg) and node.arg in names:
            found.append(f"{node.lineno}: argument {node.arg}")
        elif isinstance(node, ast.keyword) and node.arg in names:
            found.append(f"{node.lineno}: keyword {node.arg}")
    return found


def parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_checks_find_what_they_look_for() -> None:
    sample = ast.parse(
        '"""A docstring may say source_files."""\n'
        "from freshness_magic.evidence.attrs import evidence_mode\n"
        "def f(node):\n"
        "    from freshness_magic import freshness\n"
        '    return node.attrs.get("source_files"), node.freshness, evidence_mode\n'
        "class EventType:\n"
        '    STALE_INPUT = "stale_input"\n'
        "def g(bus):\n"
        '    bus.emit(EventType.EVIDENCE_RECORDED), bus.emit("input_drift")\n'
    )
    assert imported_modules(sample) == [
        "freshness_magic.evidence.attrs",
        "freshness_magic.evidence.attrs.evidence_mode",
        "freshness_magic",
        "freshness_magic.freshness",
    ]
    assert sorted(knowledge(sample)) == [
        "5: attribute .freshness",
        "5: name evidence_mode",
        "5: string 'source_files'",
        "7: name STALE_INPUT",
        "7: string 'stale_input'",
        "9: attribute .EVIDENCE_RECORDED",
        "9: string 'input_drift'",
    ]


def test_no_engine_module_imports_freshness_evidence_notebook_or_hub() -> None:
    assert len(MODULES) > 30
    below = tuple(f"{name}." for name in OUTSIDE)
    found = {
        str(path.relative_to(ENGINE)): [
            m for m in imported_modules(parse(path)) if m in OUTSIDE or m.startswith(below)
        ]
        for path in MODULES
    }
    assert {path: hits for path, hits in found.items() if hits} == {}


def test_no_engine_module_names_freshness_or_evidence_attributes_or_events() -> None:
    found = {str(path.relative_to(ENGINE)): knowledge(parse(path)) for path in MODULES}
    assert {path: hits for path, hits in found.items() if hits} == {}


def test_importing_every_engine_module_loads_none_of_them() -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        "import freshness_magic.engine as engine\n"
        "found = pkgutil.walk_packages(engine.__path__, 'freshness_magic.engine.')\n"
        "names = [m.name for m in found]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        f"outside = sorted(m for m in sys.modules if m.startswith({OUTSIDE!r}))\n"
        "print(len(names), outside)\n"
    )
    count, outside = fresh_python(code).split(" ", 1)
    assert int(count) > 30
    assert outside == "[]"
