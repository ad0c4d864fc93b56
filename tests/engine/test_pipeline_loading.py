"""Loading pipelines: parse + transforms, files, prepare_pipeline (spec §9.1–§9.3)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from freshness_magic.engine.dot_parser import parse_dot
from freshness_magic.engine.model import Graph
from freshness_magic.engine.pipeline import (
    load_pipeline,
    load_pipeline_file,
    prepare_pipeline,
    read_pipeline_text,
)
from freshness_magic.engine.transforms import (
    GoalExpansionTransform,
    StylesheetTransform,
    Transform,
    apply_transforms,
    builtin_transforms,
)
from freshness_magic.engine.validation import Diagnostic, Severity
from freshness_magic.errors import FreshnessMagicError, ParseError, PipelineFileError
from freshness_magic.lint import attribute_rules

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.dot"

TEXT = """digraph t {
  graph [goal="Ship it", model_stylesheet="* { llm_model: m1; } #b { llm_model: m2; }"]
  start [shape=Mdiamond]
  a [prompt="Plan for $goal, then $goal again"]
  b [prompt="no placeholder"]
  done [shape=Msquare]
  start -> a -> b -> done
}
"""


class Tag:
    """A custom transform that records the prompt it saw and tags every node."""

    def __init__(self, tag: str, seen: list[str]) -> None:
        self.tag = tag
        self.seen = seen

    def apply(self, graph: Graph) -> Graph:
        self.seen.append(f"{self.tag}:{graph.nodes['a'].prompt}:{graph.nodes['a'].llm_model}")
        nodes = {
            k: dataclasses.replace(n, attrs={**n.attrs, "tags": n.attrs.get("tags", "") + self.tag})
            for k, n in graph.nodes.items()
        }
        return dataclasses.replace(graph, nodes=nodes)


def test_load_applies_stylesheet_and_goal_expansion() -> None:
    graph = load_pipeline(TEXT, path="t.dot")
    assert graph.path == "t.dot"
    assert graph.nodes["a"].prompt == "Plan for Ship it, then Ship it again"
    assert graph.nodes["b"].prompt == "no placeholder"
    assert graph.nodes["a"].llm_model == "m1"
    assert graph.nodes["b"].llm_model == "m2"


def test_custom_transforms_run_after_builtins_in_order() -> None:
    seen: list[str] = []
    graph = load_pipeline(TEXT, transforms=[Tag("x", seen), Tag("y", seen)])
    assert seen == [
        "x:Plan for Ship it, then Ship it again:m1",
        "y:Plan for Ship it, then Ship it again:m1",
    ]
    assert graph.nodes["b"].attrs["tags"] == "xy"


def test_builtin_order_and_protocol() -> None:
    first, second = builtin_transforms()
    assert isinstance(first, StylesheetTransform)
    assert isinstance(second, GoalExpansionTransform)
    assert isinstance(first, Transform) and isinstance(Tag("t", []), Transform)


def test_transforms_do_not_modify_their_input() -> None:
    parsed = parse_dot(TEXT)
    result = apply_transforms(parsed)
    assert parsed.nodes["a"].prompt.startswith("Plan for $goal")
    assert "llm_model" not in parsed.nodes["a"].attrs
    assert result.nodes["a"].prompt.startswith("Plan for Ship it")


def test_goal_expansion_with_no_goal_empties_the_placeholder() -> None:
    graph = load_pipeline('digraph g { a [prompt="do $goal now"] }')
    assert graph.nodes["a"].prompt == "do  now"


def test_goal_expansion_returns_same_graph_when_nothing_to_do() -> None:
    graph = parse_dot('digraph g { a [prompt="plain"] }')
    assert GoalExpansionTransform().apply(graph) is graph


def test_stylesheet_error_does_not_raise_on_load_and_is_reported() -> None:
    text = TEXT.replace("* { llm_model: m1; }", "* { llm_model m1; }")
    graph = load_pipeline(text)
    assert "llm_model" not in graph.nodes["a"].attrs
    graph, diagnostics = prepare_pipeline(text, path="t.dot")
    (d,) = [d for d in diagnostics if d.rule == "stylesheet_syntax"]
    assert d.severity is Severity.ERROR
    line = text.splitlines()[d.line - 1]
    assert line[d.column - 1 :].startswith("m1;")


def test_parse_errors_propagate_with_position() -> None:
    with pytest.raises(ParseError) as info:
        load_pipeline("digraph g {\n  a -> \n}", path="x.dot")
    assert info.value.path == "x.dot"
    assert info.value.line >= 2


def test_prepare_pipeline_returns_graph_and_diagnostics() -> None:
    graph, diagnostics = prepare_pipeline(TEXT)
    assert list(graph.nodes) == ["start", "a", "b", "done"]
    assert diagnostics == []

    class Always:
        name = "always"

        def apply(self, graph: Graph) -> list[Diagnostic]:
            return [Diagnostic("always", Severity.INFO, "hello")]

    _, diagnostics = prepare_pipeline(TEXT, extra_rules=[Always()])
    assert [d.rule for d in diagnostics] == ["always"]
    typed = TEXT.replace('b [prompt="no placeholder"]', 'b [type="mine", prompt="x"]')
    assert [d.rule for d in prepare_pipeline(typed)[1]] == ["type_known"]
    assert prepare_pipeline(typed, known_types=["mine", "start", "exit", "codergen"])[1] == []


def test_load_pipeline_file(tmp_path: Path) -> None:
    path = tmp_path / "p.dot"
    path.write_text(TEXT, encoding="utf-8")
    graph = load_pipeline_file(path)
    assert graph.path == str(path)
    assert graph.nodes["a"].llm_model == "m1"
    assert graph.source == TEXT


def test_quickstart_example_loads_clean() -> None:
    graph = load_pipeline_file(QUICKSTART)
    assert graph.nodes["draft"].prompt == "Summarise the change for Ship the login fix"
    # The quickstart uses freshness attributes: the session's rules declare them.
    rules = attribute_rules()
    assert (
        prepare_pipeline(QUICKSTART.read_text(), path=str(QUICKSTART), extra_rules=rules)[1] == []
    )


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.dot"
    with pytest.raises(PipelineFileError) as info:
        load_pipeline_file(missing)
    assert str(missing) in str(info.value)
    assert "no such pipeline file" in str(info.value)
    assert isinstance(info.value, FreshnessMagicError)


def test_a_missing_file_names_the_file_likely_meant(tmp_path: Path) -> None:
    (tmp_path / "review.dot").write_text("digraph review {}")
    (tmp_path / "notes.txt").write_text("")
    said = {}
    for name in ("review.dt", "review", "reveiw.dot", "zzz.dot", "notes.dot"):
        with pytest.raises(PipelineFileError) as info:
            load_pipeline_file(tmp_path / name)
        said[name] = str(info.value)
    assert said["review.dt"].endswith(f"did you mean {tmp_path / 'review.dot'}?")
    assert said["review"].endswith(f"did you mean {tmp_path / 'review.dot'}?")
    assert said["reveiw.dot"].endswith(f"did you mean {tmp_path / 'review.dot'}?")
    assert said["zzz.dot"].endswith("no such pipeline file; check the path")
    assert said["notes.dot"].endswith(f"did you mean {tmp_path / 'notes.txt'}?")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(PipelineFileError, match="is a directory"):
        load_pipeline_file(tmp_path)


def test_non_utf8_file(tmp_path: Path) -> None:
    """Where the text stops being UTF-8 (line and column, as parse errors count), and a UTF-16
    file said as such: a byte offset alone sent users counting bytes."""
    path = tmp_path / "latin.dot"
    path.write_bytes('digraph g {\n  a [label="é café"] }'.encode("latin-1"))
    with pytest.raises(PipelineFileError) as info:
        read_pipeline_text(path)
    assert str(info.value) == (
        f"{path}: not UTF-8 text at line 2, column 13 (byte 0xe9); save the pipeline as UTF-8"
    )
    path.write_bytes("digraph g {}".encode("utf-16"))
    with pytest.raises(PipelineFileError, match=r"UTF-16 text \(it starts with a UTF-16 byte"):
        read_pipeline_text(path)


def test_a_prompt_file_that_is_not_utf8_is_a_validation_error(tmp_path: Path) -> None:
    """It passed validate and failed at run time with the codec's own message."""
    from freshness_magic.lint import session_validator

    (tmp_path / "latin.md").write_bytes("Résumé".encode("latin-1"))
    path = tmp_path / "p.dot"
    path.write_text(
        'digraph p { start [shape=Mdiamond]; a [prompt="@latin.md"]; done [shape=Msquare]; '
        "start -> a -> done }"
    )
    found = [d for d in session_validator().validate(load_pipeline_file(path)) if d.node == "a"]
    assert [d.message for d in found] == [
        f"node `a`: prompt file 'latin.md' cannot be read: not UTF-8 text at line 1, column 2 "
        f"(byte 0xe9); save it as UTF-8 ({tmp_path / 'latin.md'})"
    ]


def test_a_graphs_repr_is_one_short_line() -> None:
    """In a notebook or a debugger the default repr printed the whole source and every node."""
    graph = load_pipeline(
        "digraph review { start [shape=Mdiamond] done [shape=Msquare] start -> done }"
    )
    assert repr(graph) == "<Graph 'review': 2 nodes, 1 edge>"
