"""Loading from and exporting to real pydot and graphviz objects; round trips keep the model."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import graphviz
import pydot
import pytest

from freshness_magic.engine.model import Graph
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.errors import ParseError, PipelineSourceError
from freshness_magic.interop import graph_from_object, to_graphviz, to_pydot
from freshness_magic.session import open_run
from tests.processes import fresh_python

TRICKY = r"""digraph "tricky graph" {
  graph [goal="Ship \"it\" now", model_stylesheet="* { llm_model: m; } .fast { llm_model: f; }"]
  node [timeout="900s"]
  start [shape=Mdiamond]
  work  [prompt="line one\nline two, a \\ backslash, for $goal", "human.default_choice"="Y",
         label="<b>not html</b>", class="fast"]
  subgraph cluster_x { label="Group A"; inner [prompt="in the group"] }
  done  [shape=Msquare, label="node"]
  start -> work [label="go \"now\"", condition="outcome=success && context.a!=b", weight=3]
  work -> inner -> done
}
"""


def model(graph: Graph) -> tuple[Any, ...]:
    """Everything that must survive a round trip (not source positions)."""
    return (
        graph.name,
        dict(graph.attrs),
        [(n.id, dict(n.attrs), n.classes, n.handler_type) for n in graph.nodes.values()],
        [(e.source, e.target, dict(e.attrs)) for e in graph.edges],
    )


def test_load_a_pydot_graph_built_in_python(tmp_path: Path) -> None:
    dot = pydot.Dot("built", graph_type="digraph")
    dot.add_node(pydot.Node("start", shape="Mdiamond"))
    dot.add_node(pydot.Node("echo", shape="parallelogram", tool_command='"echo from pydot"'))
    dot.add_node(pydot.Node("done", shape="Msquare"))
    dot.add_edge(pydot.Edge("start", "echo"))
    dot.add_edge(pydot.Edge("echo", "done"))
    graph = load_pipeline(dot)
    assert graph.name == "built"
    assert graph.nodes["echo"].tool_command == "echo from pydot"
    result = open_run(dot, workdir=tmp_path).run()
    assert result.status == "completed"
    assert result.completed_nodes == ["start", "echo", "done"]


def test_load_a_graphviz_digraph_and_source(tmp_path: Path) -> None:
    built = graphviz.Digraph("gv")
    built.node("start", shape="Mdiamond")
    built.node("say", shape="parallelogram", tool_command="echo from graphviz")
    built.node("done", shape="Msquare")
    built.edge("start", "say")
    built.edge("say", "done", label="then")
    for obj in (built, graphviz.Source(built.source)):
        graph = graph_from_object(obj)
        assert list(graph.nodes) == ["start", "say", "done"]
        assert graph.edges[1].label == "then"
    result = open_run(built, workdir=tmp_path).run()
    assert result.status == "completed"


def test_anything_else_is_a_clear_error_not_a_type_error(tmp_path: Path) -> None:
    for wrong in (42, ["digraph {}"], {"nodes": []}, b"digraph g {}"):
        with pytest.raises(PipelineSourceError, match=r"give DOT text, a pydot\.Dot"):
            load_pipeline(wrong)
        with pytest.raises(PipelineSourceError):
            open_run(wrong, workdir=tmp_path)


def test_an_undirected_graphviz_graph_is_a_parse_error_naming_the_object() -> None:
    with pytest.raises(ParseError) as caught:
        load_pipeline(graphviz.Graph("g", body=["\ta -- b\n"]))
    assert caught.value.location.startswith("<graphviz.Graph>:1:")


def test_round_trip_through_pydot() -> None:
    graph = load_pipeline(TRICKY)
    dot = to_pydot(graph)
    assert isinstance(dot, pydot.Dot)
    assert {n.get_name() for n in dot.get_nodes()} >= {"start", "work", "done"}
    assert model(load_pipeline(dot)) == model(graph)
    assert model(load_pipeline(dot.to_string())) == model(graph)


def test_round_trip_through_graphviz() -> None:
    graph = load_pipeline(TRICKY)
    digraph = to_graphviz(graph)
    assert isinstance(digraph, graphviz.Digraph)
    back = load_pipeline(digraph)
    assert model(back) == model(graph)
    assert [n.explicit for n in back.nodes.values()] == [n.explicit for n in graph.nodes.values()]


def test_exports_are_valid_for_the_graphviz_program() -> None:
    graph = load_pipeline(TRICKY)
    for text in (to_pydot(graph).to_string(), to_graphviz(graph).source):
        proc = subprocess.run(
            ["dot", "-Tsvg"], input=text, capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 0, proc.stderr
        assert "<svg" in proc.stdout


def test_the_engine_does_not_import_pydot_or_graphviz() -> None:
    code = (
        "import sys\n"
        "from freshness_magic.engine.pipeline import load_pipeline\n"
        "from freshness_magic.session import open_run\n"
        "load_pipeline('digraph g { start [shape=Mdiamond]; done [shape=Msquare]; "
        "start -> done }')\n"
        "print(sorted(m for m in ('pydot', 'graphviz', 'freshness_magic.interop') "
        "if m in sys.modules))\n"
    )
    assert fresh_python(code) == "[]"


@pytest.mark.parametrize("export", ["pydot", "graphviz"])
def test_an_export_is_the_pipeline_as_written_so_edits_to_it_take_effect(export: str) -> None:
    """It held what the load derived: the stylesheet's model pinned on every node and ``$goal``
    expanded, so editing the exported stylesheet or goal changed nothing; clusters lost their
    names (and so their boxes)."""
    graph = load_pipeline(TRICKY)
    text = to_pydot(graph).to_string() if export == "pydot" else to_graphviz(graph).source
    assert "$goal" in text and "subgraph cluster_x" in text
    edited = load_pipeline(text.replace("llm_model: f;", "llm_model: g;"))
    work = edited.nodes["work"]
    assert work.attrs["llm_model"] == "g"  # from the edited stylesheet
    named = [(s.name, s.label) for s in edited.subgraphs if s.name]
    assert named == [("cluster_x", "Group A")]  # (to_graphviz adds unnamed scopes for defaults)


def test_a_graph_changed_in_code_is_exported_as_it_is_now() -> None:
    graph = load_pipeline(TRICKY)
    graph.nodes["work"].attrs["llm_model"] = "pinned"
    back = load_pipeline(to_pydot(graph))
    assert back.nodes["work"].attrs["llm_model"] == "pinned"


def test_a_quoted_subgraph_name_is_exported_quoted() -> None:
    graph = load_pipeline(
        'digraph g { start [shape=Mdiamond]; subgraph "cluster a b" { label="Team A"; '
        'w [prompt="p"] } done [shape=Msquare]; start -> w -> done }'
    )
    assert [s.name for s in graph.subgraphs] == ["cluster a b"]  # as the graph's name: unquoted
    for back in (load_pipeline(to_graphviz(graph)), load_pipeline(to_pydot(graph))):
        named = [(s.name, s.label) for s in back.subgraphs if s.name]
        assert named == [("cluster a b", "Team A")]
