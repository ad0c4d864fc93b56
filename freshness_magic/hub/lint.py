"""The hub's node attribute, ``hub_context``: a boolean (``attr_type``), which also declares it
to ``node_attr_known``. Registered by the session validator (:mod:`freshness_magic.lint`) and by
:meth:`HubContextExtension.lint_rules` for a run."""

from __future__ import annotations

from freshness_magic.engine.validation import BOOL, LintRule, attr_type_rule


def hub_rules() -> list[LintRule]:
    """The hub attribute's rule, to register with a Validator."""
    return [attr_type_rule(node_typed={"hub_context": BOOL})]
