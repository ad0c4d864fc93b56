"""Pipeline validation (spec §7): lint rules that turn a Graph into diagnostics.

:mod:`.core` is the plumbing (diagnostics, rules, the Validator and its rule registry);
:mod:`.rules`, :mod:`.attrs` and :mod:`.flow` are the engine's rules, about the engine's own
attributes only. A package that reads attributes of its own contributes rules for them, and the
layer that composes the packages registers those with a :class:`Validator`
(``Validator.register_rule``, or ``extra_rules``; a run takes its extensions' ``lint_rules``).
:func:`attr_type_rule` builds the ``attr_type`` check for such attributes.
"""

from freshness_magic.engine.validation.attrs import BOOL, COUNT, DURATION, INT, attr_type_rule
from freshness_magic.engine.validation.core import (
    ERROR,
    INFO,
    WARNING,
    AttributeRule,
    AttributeScope,
    Diagnostic,
    EdgeCheck,
    FunctionRule,
    LintRule,
    NodeCheck,
    Out,
    ScanRule,
    Severity,
    edge_diag,
    graph_diag,
    has_errors,
    node_diag,
)
from freshness_magic.engine.validation.rules import default_rules
from freshness_magic.engine.validation.validator import Validator, validate, validate_or_raise

__all__ = [
    "BOOL",
    "COUNT",
    "DURATION",
    "ERROR",
    "INFO",
    "INT",
    "WARNING",
    "AttributeRule",
    "AttributeScope",
    "Diagnostic",
    "EdgeCheck",
    "FunctionRule",
    "LintRule",
    "NodeCheck",
    "Out",
    "ScanRule",
    "Severity",
    "Validator",
    "attr_type_rule",
    "default_rules",
    "edge_diag",
    "graph_diag",
    "has_errors",
    "node_diag",
    "validate",
    "validate_or_raise",
]
