"""Pipeline validation (spec §7): lint rules that turn a Graph into diagnostics.

:mod:`.core` is the plumbing (diagnostics, rules, the Validator); :mod:`.rules` and
:mod:`.attrs` are the engine's rules. Freshness and evidence contribute their own rules (their
run extensions' ``lint_rules``).
"""

from freshness_magic.engine.validation.core import (
    ERROR,
    INFO,
    WARNING,
    Diagnostic,
    EdgeCheck,
    FunctionRule,
    LintRule,
    NodeCheck,
    Out,
    ScanRule,
    Severity,
    Validator,
    edge_diag,
    graph_diag,
    has_errors,
    node_diag,
    validate,
    validate_or_raise,
)
from freshness_magic.engine.validation.rules import default_rules

__all__ = [
    "ERROR",
    "INFO",
    "WARNING",
    "Diagnostic",
    "EdgeCheck",
    "FunctionRule",
    "LintRule",
    "NodeCheck",
    "Out",
    "ScanRule",
    "Severity",
    "Validator",
    "default_rules",
    "edge_diag",
    "graph_diag",
    "has_errors",
    "node_diag",
    "validate",
    "validate_or_raise",
]
