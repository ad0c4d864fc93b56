"""Graph, Node and Edge are dataclasses: construction, ``==``, ``repr``, and a changed copy with
``dataclasses.replace``, which custom transforms return; a graph's repr stays one line."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from freshness_magic.engine import Edge, Graph, Node, load_pipeline
from freshness_magic.engine.model import Position

TEXT = """digraph g {
  start [shape=Mdiamond]
  a [prompt="hi"]
  done [shape=Msquare]
  start -> a -> done
}
"""


def test_nodes_and_edges_compare_by_their_fields_and_are_not_hashable() -> None:
    node = Node("a", {"prompt": "p"}, Position(2, 3))
    assert node == Node("a", {"prompt": "p"}, Position(2, 3))
    assert node != Node("a", {"prompt": "q"}, Position(2, 3))
    assert node != Node("a", {"prompt": "p"}, Position(2, 4))
    assert node != "a"
    assert Edge("a", "b", index=1) == Edge("a", "b", index=1) != Edge("a", "b", index=2)
    with pytest.raises(TypeError):
        hash(node)


def test_defaults_are_fresh_per_object() -> None:
    first, second = Node("a"), Node("b")
    first.attrs["x"] = "1"
    assert second.attrs == {}
    graph, other = Graph("g"), Graph("h")
    graph.nodes["a"] = first
    assert other.nodes == {} and other.edges == [] and other.subgraphs == []


def test_repr_names_the_fields_and_a_graph_stays_one_line() -> None:
    assert repr(Edge("a", "b")) == (
        "Edge(source='a', target='b', attrs={}, position=Position(line=0, column=0), "
        "attr_positions={}, index=0)"
    )
    assert repr(Node("a")).startswith("Node(id='a', attrs={}, position=")
    assert repr(load_pipeline(TEXT, path="g.dot")) == "<Graph 'g': 3 nodes, 2 edges, path='g.dot'>"


def test_replace_copies_with_the_changes_and_leaves_the_original() -> None:
    graph = load_pipeline(TEXT)
    node = graph.nodes["a"]
    changed = dataclasses.replace(node, attrs={**node.attrs, "prompt": "bye"})
    assert changed.prompt == "bye" and node.prompt == "hi"
    assert changed.position == node.position and changed.id == "a"
    copied = dataclasses.replace(
        graph, nodes={**graph.nodes, "a": changed}, edges=list(graph.edges)
    )
    assert copied.nodes["a"].prompt == "bye" and graph.nodes["a"].prompt == "hi"
    assert copied.source == graph.source and copied.outgoing("a") == graph.outgoing("a")
    assert copied != graph and dataclasses.replace(graph) == graph
    with pytest.raises(TypeError, match="labels"):
        dataclasses.replace(node, labels="x")
    with pytest.raises(ValueError, match="_index"):
        dataclasses.replace(graph, _index=None)


def test_the_edge_index_cache_is_not_part_of_equality_and_follows_new_edges() -> None:
    graph, same = load_pipeline(TEXT), load_pipeline(TEXT)
    assert graph.outgoing("start")[0].target == "a"
    assert graph == same
    graph.edges.append(Edge("start", "done", index=2))
    assert [e.target for e in graph.outgoing("start")] == ["a", "done"]


def test_records_copy_and_pickle_whole() -> None:
    graph = load_pipeline(TEXT, path="g.dot")
    for clone in (copy.deepcopy(graph), pickle.loads(pickle.dumps(graph))):
        assert clone == graph and clone is not graph
        assert clone.nodes["a"] is not graph.nodes["a"]
        assert clone.outgoing("a")[0].target == "done"
    with pytest.raises(AttributeError):
        graph.nodes["a"].colour = "red"  # type: ignore[attr-defined]
