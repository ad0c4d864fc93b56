"""``validate`` warns of ``{{ ... }}`` and ``{% ... %}`` (another runner's template dialect) in a
``tool_command`` or a prompt: neither is Attractor syntax, a prompt would show it verbatim and
a tool command hands it to ``/bin/sh`` as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic import cli
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.validation import Diagnostic, Severity
from freshness_magic.lint import session_validator

TEMPLATED = """digraph templated {
  start  [shape=Mdiamond]
  fetch  [shape=parallelogram,
          tool_command="gh pr view {{ pr_number }}{% if repo %} -R {{ repo }}{% endif %}"]
  review [prompt="Review PR {{ pr_number }} for $goal"]
  plain  [prompt="Review {pr_number} for $goal", shape=box]
  check  [shape=parallelogram, tool_command="test -n \\"${FRESHNESS_RUN_DIR}\\" && echo {}"]
  done   [shape=Msquare]
  start -> fetch -> review -> plain -> check -> done
}
"""


def found() -> list[Diagnostic]:
    diagnostics = session_validator().validate(load_pipeline(TEMPLATED, path="t.dot"))
    return [d for d in diagnostics if d.rule == "template_syntax"]


def test_template_syntax_in_a_tool_command_and_a_prompt_is_a_warning_saying_what_to_write() -> None:
    by_node = {d.node: d for d in found()}
    assert sorted(by_node) == ["fetch", "review"]  # Attractor's {key}, $goal and ${VAR} are fine
    fetch, review = by_node["fetch"], by_node["review"]
    assert fetch.severity is Severity.WARNING and review.severity is Severity.WARNING
    assert "tool_command contains template syntax '{{ pr_number }}'" in fetch.message
    assert "goes to /bin/sh as written" in fetch.fix and "$FRESHNESS_RUN_DIR" in fetch.fix
    assert "prompt contains template syntax '{{ pr_number }}'" in review.message
    assert "$goal" in review.fix and "{context_key}" in review.fix
    assert fetch.line == 4 and review.line == 5  # at the attribute


def test_validate_prints_it_and_strict_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.dot"
    path.write_text(TEMPLATED, encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 0
    out = capsys.readouterr()
    assert "warning template_syntax: node `fetch`: tool_command" in out.out + out.err
    assert cli.main(["validate", str(path), "--strict"]) == 1
