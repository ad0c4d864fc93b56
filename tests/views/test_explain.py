"""The one condition explanation, without IPython: the text the playground, ``%pipeline cond``
and ``Pipeline.cond`` all show."""

from __future__ import annotations

from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.views.explain import explain_on_context

GRAPH = load_pipeline(
    """digraph g {
  start [shape=Mdiamond]
  work  [shape=parallelogram, tool_command="true"]
  done  [shape=Msquare]
  start -> work
  work -> done [condition="outcome=success"]
  work -> work [condition="outcome=fail"]
}
"""
)
RAN = {
    "start": Outcome(StageStatus.SUCCESS),
    "work": Outcome(StageStatus.SUCCESS),
    "done": Outcome(StageStatus.SUCCESS),
}


def test_a_typo_of_outcome_is_warned_with_validates_fix() -> None:
    answer = explain_on_context(GRAPH, {}, RAN, "outcom=success", "work")
    lines = answer.text.splitlines()
    assert lines[0] == "result: false"
    assert any(
        line.startswith("warning: key `outcom` looks like a typo of `outcome`") for line in lines
    )
    assert lines[-1] == "edge from work: -> done (condition `outcome=success` held)"
    assert answer.edge is not None and answer.edge.target == "done"


def test_no_edge_is_named_from_a_node_no_edge_leaves() -> None:
    inferred = explain_on_context(GRAPH, {}, RAN, "outcome=success", infer_node=True)
    assert inferred.from_node == "done" and inferred.edge is None
    assert inferred.text.splitlines()[0] == "result: true"
    assert "edge from" not in inferred.text and "(none)" not in inferred.text


def test_without_a_node_cond_names_no_edge_and_a_syntax_error_has_a_caret() -> None:
    assert "edge from" not in explain_on_context(GRAPH, {}, RAN, "outcome=success").text
    broken = explain_on_context(GRAPH, {}, {}, "outcome == success", "work").text.splitlines()
    assert broken[0].startswith("syntax error at column")
    assert broken[2].strip() == "^"
