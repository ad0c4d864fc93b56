"""The validator of a session: the engine's rules plus the rules of the attributes that freshness,
evidence, the hub, the cluster layer and the model backends read, registered through
:meth:`Validator.register_rule`.

The engine validates only its own attributes. This module composes the others' rules for
validation outside a run (``freshness-magic validate``, loading a pipeline in the notebook); a run
gets the same rules from its extensions' ``lint_rules`` (:func:`freshness_magic.session.
default_extensions`), in the same order, so both report the same diagnostics. It stays light (no
run, no handlers), so ``validate`` starts quickly.

Every rule declares the node attributes its package reads, so ``node_attr_known`` (an engine rule
that sees the whole registry) knows them all without a list of its own.

With a ``workdir`` (where the run will work: ``freshness-magic validate`` passes the current
folder, the default of ``run --workdir``), the freshness rules also check that each literal
``source_files`` path exists there (``source_files_exist``), and the evidence rules that a node
with ``commit=true`` works in a git work tree (``commit_repo``); without one they cannot.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from freshness_magic.backends.lint import backend_rules
from freshness_magic.cluster.lint import executor_rules
from freshness_magic.engine.validation import LintRule, Validator
from freshness_magic.evidence.lint import evidence_rules
from freshness_magic.freshness.lint import freshness_rules
from freshness_magic.hub.lint import hub_rules
from freshness_magic.pathlint import path_rules

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["attribute_rules", "session_validator"]


def attribute_rules(
    workdir: str | Path | None = None, allow_outside: object = False
) -> list[LintRule]:
    """The freshness, evidence and hub attributes' rules, in the order a session run registers
    them, then the ``executor`` and ``llm_provider`` attributes' (``allow_outside``: the run's
    ``freshness_allow_outside``, which makes an outside ``source_files`` entry a warning)."""
    return [
        *freshness_rules(workdir, allow_outside),
        *(path_rules(workdir) if workdir is not None else []),
        *evidence_rules(workdir),
        *hub_rules(),
        *executor_rules(),
        *backend_rules(),
    ]


def session_validator(
    known_types: Iterable[str] | None = None,
    workdir: str | Path | None = None,
    allow_outside: object = False,
) -> Validator:
    """A Validator with the engine's rules (``known_types`` feeds ``type_known``) and then
    :func:`attribute_rules` (``workdir``: see the module docstring)."""
    validator = Validator(known_types=known_types)
    for rule in attribute_rules(workdir, allow_outside):
        validator.register_rule(rule)
    return validator
