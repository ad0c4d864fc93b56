"""Pipelines as networkx graphs: export with attributes and order, load back, clear refusals."""

from __future__ import annotations

from pathlib import Path

import networkx
import pytest

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.errors import FreshnessMagicError
from freshness_magic.interop import from_networkx, to_networkx
from freshness_magic.session import open_run

BRANCHY = """digraph branchy {
  graph [goal="Check both sides"]
  start  [shape=Mdiamond]
  fan    [shape=component, join_policy="wait_all"]
  left   [shape=parallelogram, tool_command="echo left"]
  right  [shape=parallelogram, tool_command="echo right"]
  join   [shape=tripleoctagon]
  check  [shape=diamond]
  done   [shape=Msquare]
  retry_it [prompt="Fix it for $goal"]
  start -> fan
  fan -> left
  fan -> right
  left -> join
  right -> join
  join -> check
  check -> done     [condition="outcome=success", label="ok", weight=2]
  check -> retry_it [condition="outcome=fail", label="fix"]
  check -> done     [label="anyway"]
  retry_it -> check
}
"""


def test_to_networkx_keeps_nodes_edges_and_their_attributes_in_order() -> None:
    graph = load_pipeline(BRANCHY)
    nx_graph = to_networkx(graph)
    assert isinstance(nx_graph, networkx.MultiDiGraph)
    assert nx_graph.graph == {"name": "branchy", "goal": "Check both sides"}
    assert list(nx_graph.nodes) == list(graph.nodes)
    assert nx_graph.nodes["fan"] == {"shape": "component", "join_policy": "wait_all"}
    assert nx_graph.nodes["retry_it"]["prompt"] == "Fix it for $goal"  # as written
    # the parallel node's branches and the two parallel edges check -> done stay apart
    assert sorted(nx_graph.successors("fan")) == ["left", "right"]
    edges = nx_graph.get_edge_data("check", "done")
    assert edges == {  # keyed by their place in the pipeline's edge order
        6: {"condition": "outcome=success", "label": "ok", "weight": "2"},
        8: {"label": "anyway"},
    }
    assert nx_graph.number_of_edges() == len(graph.edges) == 10
    by_key = sorted(nx_graph.edges(keys=True), key=lambda edge: edge[2])
    assert [(u, v) for u, v, _ in by_key] == [(e.source, e.target) for e in graph.edges]
    # what people analyse pipelines for: the loop through check and retry_it
    assert ["check", "retry_it"] in [sorted(c) for c in networkx.simple_cycles(nx_graph)]


def test_from_networkx_round_trips_a_loaded_pipeline(tmp_path: Path) -> None:
    graph = load_pipeline(BRANCHY)
    back = from_networkx(to_networkx(graph))
    assert back.name == graph.name
    assert dict(back.attrs) == dict(graph.attrs)
    assert [(n.id, dict(n.attrs)) for n in back.nodes.values()] == [
        (n.id, dict(n.attrs)) for n in graph.nodes.values()
    ]
    assert [(e.source, e.target, dict(e.attrs)) for e in back.edges] == [
        (e.source, e.target, dict(e.attrs)) for e in graph.edges
    ]


def test_a_pipeline_built_in_networkx_runs(tmp_path: Path) -> None:
    built = networkx.DiGraph(name="built", goal="say hi")
    built.add_node("start", shape="Mdiamond")
    built.add_node("hello", shape="parallelogram", tool_command="echo hi > hello.txt")
    built.add_node("done", shape="Msquare")
    built.add_edge("start", "hello")
    built.add_edge("hello", "done", weight=1)
    with open_run(from_networkx(built), workdir=tmp_path) as run:
        result = run.run()
    assert result.completed_nodes == ["start", "hello", "done"]
    assert (tmp_path / "hello.txt").read_text() == "hi\n"


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda g: g.add_node("has space"), "node 'has space' cannot be a pipeline node"),
        (lambda g: g.add_node(3), "node 3 cannot be a pipeline node"),
        (lambda g: g.add_node("a", cost=[1, 2]), "node 'a', attribute 'cost'"),
        (lambda g: g.add_edge("a", "b", meta={"x": 1}), "edge a -> b, attribute 'meta'"),
    ],
)
def test_from_networkx_refuses_what_a_pipeline_cannot_hold(build, words: str) -> None:  # type: ignore[no-untyped-def]
    nx_graph = networkx.DiGraph()
    build(nx_graph)
    with pytest.raises(FreshnessMagicError, match=words.replace("(", r"\(")):
        from_networkx(nx_graph)


def test_from_networkx_refuses_an_undirected_graph() -> None:
    with pytest.raises(FreshnessMagicError, match="needs a directed graph"):
        from_networkx(networkx.Graph())
