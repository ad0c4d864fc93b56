"""Which gate choices the view asks a second click for: those that go on to a node that looks
irreversible (a tool node, or one whose id or label names an act such as deploy or delete)."""

from __future__ import annotations

from freshness_magic.engine.dot_parser import parse_dot
from freshness_magic.views.wire import irreversible_reason

GRAPH = parse_dot("""digraph g {
  start   [shape=Mdiamond]
  gate    [shape=hexagon, label="Go?"]
  push    [shape=parallelogram, tool_command="git   push origin main"]
  prod    [label="Deploy to production"]
  rework  [prompt="redo it"]
  shipping_notes [prompt="notes"]
  done    [shape=Msquare]
  start -> gate
  gate -> push [label="[P] Push"]
  gate -> prod [label="[D] Deploy"]
  gate -> rework [label="[R] Rework"]
  gate -> shipping_notes [label="[N] Notes"]
  gate -> done [label="[Y] Yes"]
}""")


def test_a_tool_node_asks_for_a_second_click_naming_its_command() -> None:
    assert irreversible_reason(GRAPH.nodes["push"]) == "runs a command: git push origin main"


def test_a_node_named_for_an_irreversible_act_asks_for_a_second_click() -> None:
    reason = irreversible_reason(GRAPH.nodes["prod"])
    assert reason == "is named for an act that is hard to undo (deploy)"


def test_other_nodes_are_answered_by_one_click() -> None:
    for node in ("rework", "shipping_notes", "done"):  # "shipping" is not the word "ship"
        assert irreversible_reason(GRAPH.nodes[node]) == "", node
    assert irreversible_reason(None) == ""
