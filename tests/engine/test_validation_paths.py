"""Validation of where a run can go and of what a node says: ``exit_reachable``,
``dead_end_node``, ``node_id_typo``, retry targets in ``reachability``, ``node_attr_known`` and
``tool_command_present``. Real DOT text through the loader and the session's validator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from freshness_magic import cli
from freshness_magic.engine import Run
from freshness_magic.engine.pipeline import load_pipeline, load_pipeline_file
from freshness_magic.engine.validation import Diagnostic, Severity, Validator
from freshness_magic.errors import ValidationError
from freshness_magic.lint import session_validator
from tests.pipelines import rework_loop


def lint(text: str, rule: str | None = None) -> list[Diagnostic]:
    found = session_validator().validate(load_pipeline(text, path="p.dot"))
    return [d for d in found if rule is None or d.rule == rule]


def only(diagnostics: list[Diagnostic]) -> Diagnostic:
    assert len(diagnostics) == 1, [d.format() for d in diagnostics]
    return diagnostics[0]


TYPO = (
    'digraph { start [shape=Mdiamond]; done [shape=Msquare]; work [label="w", prompt="p"]; '
    "start -> work -> dnoe }"
)


# -- 1. a typo in an edge target ---------------------------------------------------------------


def validate_cli(path: Path) -> subprocess.CompletedProcess[str]:
    """``python -m freshness_magic validate PATH`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "freshness_magic", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_typo_in_edge_target_says_did_you_mean() -> None:
    d = only(lint(TYPO, "node_id_typo"))
    assert d.severity is Severity.WARNING
    assert d.node == "dnoe"
    assert (d.line, d.column) == (1, 104)  # where `dnoe` is first written
    assert "appears only in edges" in d.message and "did you mean `done`?" in d.message
    assert "write `done` instead of `dnoe`" in d.fix


def test_typo_pipeline_dead_end_and_unreachable_exit_are_reported() -> None:
    rules = {d.rule: d for d in lint(TYPO)}
    dead = rules["dead_end_node"]
    assert (dead.severity, dead.node) == (Severity.WARNING, "dnoe")
    assert "no outgoing edge and is not an exit node" in dead.message
    assert "`dnoe`" in dead.fix and "`done`" in dead.fix
    exit_error = rules["exit_reachable"]
    assert exit_error.severity is Severity.ERROR
    assert "stops at `dnoe`" in exit_error.message and "never reaches `done`" in exit_error.message
    # the error is where the typo is and names it: its fix is not an edge `dnoe -> done`
    assert (exit_error.node, exit_error.line, exit_error.column) == ("dnoe", 1, 104)
    assert "`dnoe` looks like a typo of `done`" in exit_error.message
    assert exit_error.fix == "write `done` instead of `dnoe` in the edge"
    with pytest.raises(ValidationError, match="exit_reachable"):
        session_validator().validate_or_raise(load_pipeline(TYPO))


def test_an_anonymous_pipeline_s_errors_do_not_name_it_with_empty_quotes() -> None:
    with pytest.raises(ValidationError) as raised:
        session_validator().validate_or_raise(load_pipeline(TYPO))
    assert str(raised.value).startswith("the pipeline has 1 validation error and 4 warnings; ")


def test_cli_validate_prints_the_typo_diagnostics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typo.dot"
    path.write_text(TYPO + "\n", encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"{path}:1:104: error exit_reachable: ") for line in out), out
    typo = [line for line in out if " node_id_typo: " in line]
    assert typo == [
        f"{path}:1:104: warning node_id_typo: node `dnoe` appears only in edges (line 1) and "
        "has no attributes; did you mean `done`? (fix: write `done` instead of `dnoe` in the "
        'edge, or declare `dnoe [prompt="..."]` if it is a new stage)'
    ]


MID_CHAIN = """digraph m {
  start      [shape=Mdiamond]
  perf       [prompt="measure"]
  summary    [prompt="summarise"]
  release_ok [prompt="decide"]
  done       [shape=Msquare]
  start -> perf -> summray -> release_ok -> done
}
"""


def test_a_typo_in_the_middle_of_a_chain_says_did_you_mean_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "mid.dot"
    path.write_text(MID_CHAIN, encoding="utf-8")
    done = validate_cli(path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert (
        f"{path}:7:20: warning node_id_typo: node `summray` appears only in edges (line 7) and "
        "has no attributes; did you mean `summary`? (fix: write `summary` instead of `summray` "
        'in the edges, or declare `summray [prompt="..."]` if it is a new stage)'
    ) in out
    # the unreachable node the chain meant names the typo, and its fix is not to remove it
    assert (
        f"{path}:4:3: warning reachability: node `summary` cannot be reached from the start node "
        "`start` (by an edge or a retry_target); it will never run; `summray` (line 7) looks "
        "like a typo of `summary` (fix: write `summary` instead of `summray` in the edges)"
    ) in out
    # nor is the missing prompt's fix to keep the typo as a stage
    prompt = next(line for line in out if " prompt_on_llm_nodes: " in line)
    assert prompt.startswith(f"{path}:7:20: ")
    assert prompt.endswith(
        '(fix: write `summary` instead of `summray` in the edges, or add prompt="..." to '
        "`summray` if it is a new stage)"
    )


def test_a_typo_of_the_exit_s_unreachable_warning_and_dead_end_advise_correcting_it() -> None:
    found = {d.rule: d for d in lint(TYPO)}
    assert found["reachability"].node == "done"
    assert "`dnoe` (line 1) looks like a typo of `done`" in found["reachability"].message
    assert found["reachability"].fix == "write `done` instead of `dnoe` in the edge"
    assert found["dead_end_node"].fix == "write `done` instead of `dnoe` in the edge"


def test_a_mid_chain_node_that_is_not_near_a_declared_one_is_not_a_typo() -> None:
    text = MID_CHAIN.replace("summray", "measure_twice")
    assert lint(text, "node_id_typo") == []
    d = only(lint(text, "reachability"))
    assert d.fix == "add an edge to `summary` from a reachable node, or remove it"


def test_a_series_of_numbered_nodes_is_not_a_typo() -> None:
    text = """digraph g {
  start [shape=Mdiamond]
  step1 [prompt="one"]
  done  [shape=Msquare]
  start -> step1 -> step2 -> done
}"""
    assert lint(text, "node_id_typo") == []


def test_a_node_wired_both_ways_is_not_a_typo() -> None:
    text = """digraph g {
  start [shape=Mdiamond]
  plan  [prompt="plan"]
  done  [shape=Msquare]
  start -> plan -> plans -> done
}"""
    assert lint(text, "node_id_typo") == []


def test_dead_end_not_reported_for_unreachable_nodes_or_without_an_exit() -> None:
    orphan = """digraph g {
  start [shape=Mdiamond]
  a [prompt="a"]
  lonely [prompt="l"]
  done [shape=Msquare]
  start -> a -> done
}"""
    assert lint(orphan, "dead_end_node") == []
    no_exit = 'digraph g { start [shape=Mdiamond]; a [prompt="a"]; start -> a }'
    assert lint(no_exit, "dead_end_node") == []
    assert [d.rule for d in lint(no_exit) if d.severity is Severity.ERROR] == ["terminal_node"]


def test_dead_end_reported_when_the_exit_is_reachable_elsewhere() -> None:
    text = """digraph g {
  start [shape=Mdiamond]
  check [shape=diamond]
  report [prompt="report"]
  done [shape=Msquare]
  start -> check
  check -> done [condition="outcome=success"]
  check -> report [condition="outcome=fail"]
}"""
    d = only(lint(text, "dead_end_node"))
    assert (d.node, d.line, d.column) == ("report", 4, 3)
    assert lint(text, "exit_reachable") == []


# -- 2. a cycle with no way out ----------------------------------------------------------------

CYCLE = """digraph g {
  start [shape=Mdiamond]
  a [prompt="a"]
  b [prompt="b"]
  done [shape=Msquare]
  start -> a -> b -> a
}"""


def test_cycle_without_a_way_out_is_an_error() -> None:
    d = only(lint(CYCLE, "exit_reachable"))
    assert d.severity is Severity.ERROR
    assert (d.node, d.line, d.column) == ("start", 2, 3)
    assert d.message == (
        "no exit node can be reached from the start node `start`: a run loops among `a`, `b` "
        "and never reaches `done`, so it can never finish"
    )
    assert d.fix == "add an edge to `done` from the last stage (e.g. `b -> done`)"
    with pytest.raises(ValidationError):
        session_validator().validate_or_raise(load_pipeline(CYCLE))


def test_a_retry_target_is_a_way_out() -> None:
    text = CYCLE.replace('b [prompt="b"]', 'b [prompt="b", retry_target=done]')
    assert lint(text, "exit_reachable") == []


POLISH = """digraph p {
  start [shape=Mdiamond]
  work [prompt="w"]
  polish [prompt="p"]
  done [shape=Msquare]
  start -> work -> done
  work -> polish [condition="outcome=fail"]
  polish -> polish
}"""


def test_a_loop_no_edge_leaves_is_a_warning_at_its_first_node(tmp_path: Path) -> None:
    d = only(lint(POLISH, "endless_loop"))
    assert d.severity is Severity.WARNING
    assert (d.node, d.line) == ("polish", 4)
    assert d.message == (
        "no edge leads out of the loop through `polish`: once a run gets to `polish` it goes "
        "round for ever while its steps succeed, and never reaches `done`"
    )
    assert d.fix.startswith('give the loop a way out, e.g. `polish -> done [condition="outcome=')
    path = tmp_path / "polish.dot"
    path.write_text(POLISH, encoding="utf-8")
    assert cli.main(["validate", str(path), "--strict"]) == 1


def test_a_loop_left_only_by_a_retry_target_still_goes_round_on_success() -> None:
    text = CYCLE.replace('b [prompt="b"]', 'b [prompt="b", retry_target=done]')
    d = only(lint(text, "endless_loop"))
    assert d.node == "a"  # start leads into the loop and is not part of it
    assert "the loop through `a`, `b`:" in d.message
    assert "`b -> done" in d.fix


@pytest.mark.parametrize(
    "way_out",
    [
        'polish -> done [condition="outcome=success"]',
        "polish -> stuck",  # a dead end ends the run (dead_end_node reports it)
    ],
)
def test_a_loop_with_an_edge_out_is_not_endless(way_out: str) -> None:
    text = POLISH.replace("polish -> polish", f"polish -> polish\n  {way_out}")
    assert lint(text, "endless_loop") == []


def test_a_rework_loop_through_a_gate_is_not_endless() -> None:
    text = rework_loop(
        'prompt="d"', gate="ok", label="OK?", choices=("[A] Approve", "[R] Rework"), name="r"
    )
    assert lint(text, "endless_loop") == []


# -- 3. retry targets count for reachability -----------------------------------------------------

GATED = """digraph g {
  start [shape=Mdiamond]
  work [prompt="w", goal_gate=true, %s]
  fixup [prompt="fix"]
  done [shape=Msquare]
  start -> work -> done
  fixup -> work
}"""


@pytest.mark.parametrize("attr", ["retry_target=fixup", "fallback_retry_target=fixup"])
def test_node_retry_target_makes_its_target_reachable(attr: str) -> None:
    assert lint(GATED % attr, "reachability") == []


@pytest.mark.parametrize("key", ["retry_target", "fallback_retry_target"])
def test_graph_retry_target_makes_its_target_reachable(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (GATED % 'label="w"').replace("digraph g {", f"digraph g {{\n  {key}=fixup", 1)
    assert lint(text, "reachability") == []
    path = tmp_path / "gated.dot"
    path.write_text(text, encoding="utf-8")
    assert cli.main(["validate", str(path), "--strict"]) == 0, capsys.readouterr().out


def test_a_node_nothing_leads_to_is_still_unreachable() -> None:
    d = only(lint((GATED % "retry_target=done").replace("  fixup -> work\n", ""), "reachability"))
    assert d.node == "fixup"
    assert "cannot be reached from the start node `start`" in d.message


# -- 4. unknown node attributes, tool nodes without a command ---------------------------------

ATTRS = """digraph g {
  start [shape=Mdiamond]
  t [shape=parallelogram, tool_comand="ls", colour=red, color=blue, fillcolor=grey, tooltip=t]
  b [prompt="b", source_file="x.py", freshnes=warn, frobnicate=1, hub_context=true,
     executor=local, commit=true, evidence=record, width=2, URL="http://x"]
  done [shape=Msquare]
  start -> t -> b -> done
}"""


def test_misspelt_node_attributes_get_did_you_mean() -> None:
    found = {d.message.split("`")[3]: d for d in lint(ATTRS, "node_attr_known")}
    assert set(found) == {"tool_comand", "colour", "source_file", "freshnes", "frobnicate"}
    for key, near in (
        ("tool_comand", "tool_command"),
        ("source_file", "source_files"),
        ("freshnes", "freshness"),
    ):
        assert found[key].severity is Severity.WARNING
        assert found[key].fix == f"did you mean `{near}`? rename `{key}` to `{near}`"
    # A near miss of a drawing attribute changes only the picture; an unrelated name is a note.
    assert found["colour"].severity is Severity.INFO
    assert "did you mean `color`?" in found["colour"].fix
    assert found["frobnicate"].severity is Severity.INFO
    assert (
        found["frobnicate"].fix == "check the spelling, or remove `frobnicate` if nothing reads it"
    )
    d = found["tool_comand"]
    assert (d.node, d.line, d.column) == ("t", 3, 27)
    assert d.format("p.dot") == (
        "p.dot:3:27: warning node_attr_known: node `t`: attribute `tool_comand` is not a node "
        "attribute the engine or a registered extension reads; it is kept but ignored "
        "(fix: did you mean `tool_command`? rename `tool_comand` to `tool_command`)"
    )


@pytest.mark.parametrize(
    ("written", "ours"), [("model", "llm_model"), ("provider", "llm_provider")]
)
def test_another_tools_name_for_a_model_setting_gets_the_rename(written: str, ours: str) -> None:
    text = f'digraph g {{ start [shape=Mdiamond]; d [prompt="p", {written}="x"]; done '
    text += "[shape=Msquare]; start -> d -> done }"
    unknown = only(lint(text, "node_attr_known"))
    assert unknown.severity is Severity.WARNING
    assert unknown.fix == f"rename `{written}` to `{ours}` (the Attractor name for it)"


@pytest.mark.parametrize("written", ["retry_policy", "retry_preset"])
def test_a_retry_preset_attribute_points_at_max_retries(written: str) -> None:
    """It was offered the rename to retry_target, whose value must be a node."""
    text = f'digraph g {{ start [shape=Mdiamond]; d [prompt="p", {written}="standard"]; done '
    text += "[shape=Msquare]; start -> d -> done }"
    unknown = only(lint(text, "node_attr_known"))
    assert unknown.severity is Severity.WARNING
    assert unknown.fix.startswith("set max_retries instead")


def test_another_tools_name_for_tool_command_gets_the_rename() -> None:
    """``script=`` (as other pipeline tools write it) on a tool node: the missing-command error
    and the unknown-attribute warning both name the rename."""
    text = """digraph g {
  start [shape=Mdiamond]
  check [shape=parallelogram, script="make test"]
  done [shape=Msquare]
  start -> check -> done
}"""
    missing = only(lint(text, "tool_command_present"))
    assert missing.severity is Severity.ERROR
    assert missing.fix == "rename `script` to `tool_command` (the Attractor name for it)"
    unknown = only(lint(text, "node_attr_known"))
    assert (unknown.severity, unknown.line, unknown.column) == (Severity.WARNING, 3, 31)
    assert unknown.fix == missing.fix
    misspelt = only(lint(text.replace("script=", "tool_comand="), "tool_command_present"))
    assert misspelt.fix == "did you mean `tool_command`? rename `tool_comand` to `tool_command`"
    fixed = lint(text.replace("script=", "tool_command="))
    assert not [d for d in fixed if d.rule in ("tool_command_present", "node_attr_known")]


FORK = """digraph f {
  start [shape=Mdiamond]
  a [prompt="a"]
  b [prompt="b"]
  c [prompt="c"]
  done [shape=Msquare]
  start -> a
  a -> c
  a -> b
  b -> done
  c -> done
}"""


def test_two_unconditional_edges_out_of_a_plain_node_run_only_one(tmp_path: Path) -> None:
    """``a -> b; a -> c`` does not run both: the warning names the one taken (by the engine's
    own choice, §3.3 step 4) and the fan-out that would run both."""
    d = only(lint(FORK, "unconditional_choice"))
    assert (d.severity, d.node, d.line) == (Severity.WARNING, "a", 3)
    assert d.message == (
        "node `a` has 2 unconditional edges; after a success it takes the one to `b` (highest "
        "weight, then target id), so `c` runs from here only when its backend returns an "
        "Outcome naming it (preferred_label or suggested_next_ids; a response's text never does)"
    )
    as_tool = FORK.replace('a [prompt="a"]', 'a [shape=parallelogram, tool_command="true"]')
    tool = only(lint(as_tool, "unconditional_choice"))
    assert tool.message == (
        "node `a` has 2 unconditional edges; after a success it always takes the one to `b` "
        "(highest weight, then target id), so `c` never runs from here"
    )
    assert "shape=component" in d.fix and "tripleoctagon" in d.fix
    weighted = only(lint(FORK.replace("a -> c\n", "a -> c [weight=2]\n"), "unconditional_choice"))
    assert "takes the one to `c`" in weighted.message and "so `b` runs from" in weighted.message
    # What runs the engine's choice: the run takes exactly that edge.
    run = Run(load_pipeline(FORK.replace("a -> c\n", "a -> c [weight=2]\n")), workdir=tmp_path)
    run.run()
    assert "c" in run.node_outcomes and "b" not in run.node_outcomes
    # Not for a node whose edges are choices or branches, nor one condition apart.
    for quiet in (
        FORK.replace('a [prompt="a"]', 'a [shape=hexagon, label="Which?"]'),
        FORK.replace('a [prompt="a"]', "a [shape=component]").replace(
            "b -> done\n  c -> done", "b -> j\n  c -> j\n  j [shape=tripleoctagon]\n  j -> done"
        ),
        FORK.replace("a -> c\n", 'a -> c [condition="outcome=fail"]\n'),
    ):
        assert not lint(quiet, "unconditional_choice")


GRAPH_ATTRS = """digraph g {
  graph [goal="ship", max_failure_redirect=3, max_node_visits=8, splines=ortho, rankdir=LR,
         model_style_sheet="* { llm_model: m; }", executor=local, release="2.0",
         default_max_retrys=2]
  start [shape=Mdiamond]
  a [prompt="a"]
  done [shape=Msquare]
  start -> a
  a -> done [condition="context.graph.release=2.0"]
}"""


def test_unknown_graph_attributes_are_noted_and_near_misses_warned() -> None:
    """A graph attribute nothing reads changes nothing: a near miss of one the engine reads is
    a warning (``max_failure_redirect``); another tool's setting is a note; GraphViz's and one
    a condition reads from the context (``graph.release``) are quiet."""
    found = {d.message.split("`")[1]: d for d in lint(GRAPH_ATTRS, "graph_attr_known")}
    assert set(found) == {
        "max_failure_redirect",
        "max_node_visits",
        "model_style_sheet",
        "default_max_retrys",
    }
    for key, near in (
        ("max_failure_redirect", "max_failure_redirects"),
        ("model_style_sheet", "model_stylesheet"),
        ("default_max_retrys", "default_max_retries"),  # not the alias default_max_retry
    ):
        assert found[key].severity is Severity.WARNING
        assert found[key].fix == f"did you mean `{near}`? rename `{key}` to `{near}`"
    d = found["max_node_visits"]
    assert (d.severity, d.line, d.column) == (Severity.INFO, 2, 47)
    assert d.format("p.dot") == (
        "p.dot:2:47: info graph_attr_known: graph attribute `max_node_visits` is not one the "
        "engine or a registered extension reads; it is kept (in the run's context as "
        "graph.max_node_visits) but changes nothing (fix: check the spelling, or remove "
        "`max_node_visits` if nothing reads it)"
    )
    # The extension that reads `executor` declares it; the engine alone only notes it.
    engine = Validator().validate(load_pipeline(GRAPH_ATTRS))
    assert "executor" in {d.message.split("`")[1] for d in engine if d.rule == "graph_attr_known"}
    assert {"executor", "evidence", "commit"} <= session_validator().graph_attributes()


def test_known_attributes_come_from_the_registered_rules() -> None:
    validator = session_validator()
    known = validator.node_attributes()
    for key in ("tool_command", "source_files", "freshness", "evidence", "commit", "hub_context"):
        assert key in known
    assert {"executor", "expects_no_changes", "manager.actions", "color", "URL"} <= known
    # The engine alone does not know the extensions' attributes: it only notes them.
    engine = Validator().validate(load_pipeline(ATTRS))
    noted = {d.message.split("`")[3] for d in engine if d.rule == "node_attr_known"}
    assert {"hub_context", "executor", "commit", "evidence"} <= noted


def test_an_unknown_attribute_from_a_default_block_is_reported_once() -> None:
    text = """digraph g {
  node [tiemout="5s"]
  start [shape=Mdiamond]
  a [prompt="a"]
  b [prompt="b"]
  done [shape=Msquare]
  start -> a -> b -> done
}"""
    d = only(lint(text, "node_attr_known"))
    assert (d.line, d.column, d.severity) == (2, 9, Severity.WARNING)
    assert "(from a node [...] default)" in d.message
    assert "did you mean `timeout`?" in d.fix


def test_misspelt_edge_attribute_of_the_engine_is_a_warning() -> None:
    text = """digraph g {
  start [shape=Mdiamond]
  done [shape=Msquare]
  start -> done [condtion="outcome=success"]
}"""
    d = only(lint(text, "edge_attr_known"))
    assert d.severity is Severity.WARNING
    assert d.fix == "did you mean `condition`? rename `condtion` to `condition`"


def test_tool_node_without_tool_command_is_an_error() -> None:
    d = only(lint(ATTRS, "tool_command_present"))
    assert (d.severity, d.node, d.line, d.column) == (Severity.ERROR, "t", 3, 6)
    assert "has no tool_command" in d.message
    assert d.fix == "did you mean `tool_command`? rename `tool_comand` to `tool_command`"
    plain = only(lint(ATTRS.replace('tool_comand="ls", ', ""), "tool_command_present"))
    assert plain.fix == 'add tool_command="..." to `t`, or give it another shape'
    fixed = ATTRS.replace("tool_comand=", "tool_command=")
    assert lint(fixed, "tool_command_present") == []
    assert lint(ATTRS.replace("shape=parallelogram, ", ""), "tool_command_present") == []


RETRIED_TOOL = """digraph r {
  start [shape=Mdiamond]
  flaky [shape=parallelogram, tool_command="./check.sh", max_retries=3]
  draft [prompt="p", max_retries=2]
  done  [shape=Msquare]
  start -> flaky -> draft -> done
}
"""


def test_max_retries_on_a_tool_node_notes_that_a_failing_command_is_not_run_again() -> None:
    d = only(lint(RETRIED_TOOL, "retries_on_tool"))
    assert (d.severity, d.node, d.line) == (Severity.INFO, "flaky", 3)
    assert "max_retries=3 does not run a failing command again" in d.message
    assert 'condition="outcome=fail"' in d.fix
    assert lint(RETRIED_TOOL.replace(", max_retries=3", ""), "retries_on_tool") == []


@pytest.mark.parametrize(
    ("where", "change", "goes_to"),
    [
        ("node", ", max_retries=3", ", max_retries=3, retry_target=draft"),
        ("graph", "digraph r {", 'digraph r {\n  graph [fallback_retry_target="draft"]'),
        (
            "edge",
            "  done  [shape=Msquare]\n",
            '  done  [shape=Msquare]\n  flaky -> draft [condition="outcome=fail"]\n',
        ),
    ],
)
def test_retries_on_tool_does_not_advise_a_retry_target_where_failures_already_go(
    tmp_path: Path, where: str, change: str, goes_to: str
) -> None:
    text = RETRIED_TOOL.replace(change, goes_to, 1)
    assert text != RETRIED_TOOL
    path = tmp_path / "retried.dot"
    path.write_text(text, encoding="utf-8")
    done = validate_cli(path)
    (line,) = [line for line in done.stdout.splitlines() if " retries_on_tool: " in line]
    by = {
        "node": "by its retry_target",
        "graph": "by the graph's fallback_retry_target",
        "edge": 'by its edge condition="outcome=fail"',
    }[where]
    assert line.endswith(
        f"(fix: nothing to add: a failure of `flaky` already goes to `draft` {by}; remove "
        "max_retries=3 unless an attempt that returns RETRY should run again)"
    ), line
    assert "give it a retry_target" not in line


def test_a_manager_names_a_child_pipeline_other_than_itself(tmp_path: Path) -> None:
    """Both ran until the manager failed (the second nesting runs until 'File name too long')."""
    body = "start [shape=Mdiamond]; m [shape=house{}]; done [shape=Msquare]; start -> m -> done"
    missing = only(lint(f"digraph p {{ {body.format('')} }}", "child_pipeline"))
    assert missing.severity is Severity.ERROR and (missing.line, missing.column) == (1, 40)
    assert missing.message == (
        "manager node `m` has no stack.child_dotfile, so it would fail when it runs"
    )
    own = tmp_path / "own.dot"
    own.write_text(f"digraph p {{ {body.format(', stack.child_dotfile=own.dot')} }}")
    found = session_validator().validate(load_pipeline_file(own))
    itself = only([d for d in found if d.rule == "child_pipeline"])
    assert itself.message == (
        "manager node `m`'s child pipeline own.dot is this pipeline: it would start itself "
        "without end"
    )
    (tmp_path / "other.dot").write_text(
        "digraph c { start [shape=Mdiamond]; done [shape=Msquare] }"
    )
    own.write_text(f"digraph p {{ {body.format(', stack.child_dotfile=other.dot')} }}")
    assert not [
        d
        for d in session_validator().validate(load_pipeline_file(own))
        if d.rule == "child_pipeline"
    ]


PARALLEL = (
    "digraph x {{ start [shape=Mdiamond]; p [shape=component, {}]; a [prompt=x]; b [prompt=y]; "
    "f [shape=tripleoctagon]; done [shape=Msquare]; start -> p; p -> a; p -> b; a -> f; "
    "b -> f; f -> done }}"
)


@pytest.mark.parametrize(
    ("attrs", "rule", "message"),
    [
        (
            "join_policy=wait_al",
            "parallel_policy",
            "node `p`: join_policy='wait_al' is not one the parallel handler knows, so it would "
            "fail when it runs",
        ),
        (
            "error_policy=explode",
            "parallel_policy",
            "node `p`: error_policy='explode' is not one the parallel handler knows, so it would "
            "fail when it runs",
        ),
        ("max_parallel=0", "attr_type", "node `p`: max_parallel='0' is not a whole number >= 1"),
        ("join_k=abc", "attr_type", "node `p`: join_k='abc' is not a whole number >= 1"),
        (
            "join_quorum=2.5",
            "attr_type",
            "node `p`: join_quorum='2.5' is not a number above 0 and at most 1",
        ),
        (
            "join_policy=k_of_n, join_k=5",
            "parallel_policy",
            "node `p` joins k_of_n with join_k=5 but fans out to 2 branches: the join can never "
            "succeed",
        ),
    ],
)
def test_a_parallel_nodes_policies_and_numbers_are_checked(
    attrs: str, rule: str, message: str
) -> None:
    """Each passed validate, then failed at run time or was silently ignored."""
    found = only(lint(PARALLEL.format(attrs), rule))
    assert found.message.startswith(message)
    assert found.line == 1 and found.column > 40
    assert lint(PARALLEL.format("join_policy=k_of_n, join_k=2, max_parallel=2")) == []


def test_two_choices_of_a_gate_with_one_key_are_reported() -> None:
    text = (
        'digraph x { start [shape=Mdiamond]; g [shape=hexagon, label="?"]; a [prompt=x]; '
        'done [shape=Msquare]; start -> g; g -> done [label="[Y] Yes"]; '
        'g -> a [label="[Y] Yup"]; a -> done }'
    )
    found = only(lint(text, "gate_keys_distinct"))
    assert found.severity is Severity.WARNING and found.edge is not None
    assert found.message == (
        "gate `g`: choices '[Y] Yes' and '[Y] Yup' have the same key; the key answers "
        "'[Y] Yes' only, and '[Y] Yup' is answered by its name or `a`"
    )
    assert lint(text.replace("[Y] Yup", "[U] Yup"), "gate_keys_distinct") == []
    # Keys taken from first letters collide too: the prompt showed [Y] Yes and [Y] Yup, and Y
    # answered Yes (a trial's "Retry" and "Reject" gate).
    derived = only(
        lint(text.replace("[Y] Yes", "Yes").replace("[Y] Yup", "Yup"), "gate_keys_distinct")
    )
    assert derived.message == (
        "gate `g`: choices 'Yes' and 'Yup' both take the key Y (a first letter); the key answers "
        "'Yes' only, and 'Yup' is answered by its name or `a`"
    )
    assert derived.fix == (
        'give each choice of the gate its own key by writing it in the label: label="[K] Yup"'
    )
    assert lint(text.replace("[Y] Yes", "Yes").replace("[Y] Yup", "Up"), "gate_keys_distinct") == []


STYLED = (
    'digraph x {{ graph [model_stylesheet="{}"]; start [shape=Mdiamond]; '
    "a [prompt=x, class=code]; done [shape=Msquare]; start -> a -> done }}"
)


@pytest.mark.parametrize(
    ("sheet", "rule", "message", "fix"),
    [
        (
            "#zz { llm_model: m; }",
            "stylesheet_selector",
            "model_stylesheet: selector `#zz` matches no node, so its rule sets nothing",
            "name a node of the pipeline",
        ),
        (
            "a { llm_model: m; }",
            "stylesheet_selector",
            "model_stylesheet: selector `a` matches no node, so its rule sets nothing",
            "`a` is read as a shape; for the node write `#a`",
        ),
        (
            ".cod { llm_model: m; }",
            "stylesheet_selector",
            "model_stylesheet: selector `.cod` matches no node, so its rule sets nothing",
            "did you mean `.code`?",
        ),
        (
            "* { reasoning_effort: turbo; }",
            "stylesheet_property",
            "model_stylesheet line 1, column 5: reasoning_effort 'turbo' is not one of low, "
            "medium, high",
            "use one of low, medium, high",
        ),
    ],
)
def test_stylesheet_rules_that_set_nothing_or_set_nonsense_are_reported(
    sheet: str, rule: str, message: str, fix: str
) -> None:
    """Each passed validate silently; the rule then did nothing, or sent a value no model reads."""
    found = only(lint(STYLED.format(sheet), rule))
    assert (found.severity, found.message, found.fix) == (Severity.WARNING, message, fix)
    assert lint(STYLED.format("#a { llm_model: m; reasoning_effort: low; }")) == []


def test_a_missing_brace_in_a_stylesheet_is_an_error_not_a_value() -> None:
    """``#a { llm_model: x  box { oops }`` gave node a the model ``x  box { oops``."""
    found = only(lint(STYLED.format("#a { llm_model: x  box { oops }"), "stylesheet_syntax"))
    assert found.severity is Severity.ERROR
    assert "`{` in the value of `llm_model`: is the `}` of this rule missing" in found.message


def test_a_node_reasoning_effort_is_checked_once_where_it_is_written() -> None:
    text = (
        "digraph x { start [shape=Mdiamond]; a [prompt=x, reasoning_effort=turbo]; "
        "b [prompt=y]; done [shape=Msquare]; start -> a -> b -> done }"
    )
    found = only(lint(text, "reasoning_effort_known"))
    assert found.node == "a" and found.message == (
        "node `a`: reasoning_effort='turbo' is not one of low, medium, high"
    )


@pytest.mark.parametrize(
    ("key", "fix"),
    [
        ("context.tool.last_line", "test `context.tool.output`"),
        ("tool.exitcode", "write `context.tool.exit_code`"),
    ],
)
def test_a_condition_on_a_tool_key_no_handler_sets_is_a_warning(key: str, fix: str) -> None:
    """Another implementation's `tool.last_line`: the run ended at the node, 'completed'."""
    text = f"""digraph g {{
  start [shape=Mdiamond]
  t [shape=parallelogram, tool_command="echo pass"]
  done [shape=Msquare]
  start -> t
  t -> done [condition="{key}=pass"]
  t -> done [condition="context.tool.output=pass"]
}}"""
    found = only(lint(text, "condition_values"))
    assert found.message.startswith(f"edge t -> done: `{key}` is never set: a tool node sets ")
    assert found.fix == fix


def test_a_missing_semicolon_in_a_stylesheet_is_an_error_at_the_property_run_into() -> None:
    """``* { llm_model: gpt-4o llm_provider: openai }`` gave every node the model
    ``gpt-4o llm_provider: openai`` and no provider, and validate said nothing."""
    found = only(
        lint(STYLED.format("* { llm_model: gpt-4o llm_provider: openai }"), "stylesheet_syntax")
    )
    assert found.severity is Severity.ERROR
    assert found.message == (
        "model_stylesheet line 1, column 23: `;` missing after the value of `llm_model`: "
        "`llm_provider` runs into it; end each declaration with `;` (quote the value if it "
        "holds the `:`)"
    )
    quoted = STYLED.format("* { llm_model: 'gpt-4o llm_provider: x'; }")
    assert lint(quoted, "stylesheet_syntax") == []


def test_a_class_written_with_spaces_gets_the_comma_separated_hint() -> None:
    """The hint said ``did you mean `.coding fast`?``, itself a stylesheet syntax error."""
    text = STYLED.format(".coding { llm_model: m; }").replace("class=code", 'class="coding fast"')
    found = only(lint(text, "stylesheet_selector"))
    assert found.fix == (
        'node `a` has class="coding fast": classes are separated by commas, write '
        'class="coding,fast"'
    )


def test_an_attribute_written_twice_in_one_list_is_a_warning_at_the_second() -> None:
    """``done [shape=Msquare, shape=box]`` left the pipeline without an exit, and validate did
    not say why; ``tool_command`` written twice ran the second silently."""
    text = (
        "digraph d {\n  start [shape=Mdiamond]\n"
        '  t [shape=parallelogram, tool_command="echo a", tool_command="echo b"]\n'
        "  done [shape=Msquare]\n  start -> t -> done\n}\n"
    )
    found = only(lint(text, "attribute_repeated"))
    assert (found.severity, found.line, found.column) == (Severity.WARNING, 3, 50)
    assert found.message == (
        "`tool_command` is written twice in one attribute list (first at line 3, column 27); "
        "only the last one counts: tool_command='echo b'"
    )
    assert lint(text.replace(', tool_command="echo b"', ""), "attribute_repeated") == []
    sheet = STYLED.format("#a { llm_model: one; llm_model: two; }")
    (again,) = [d for d in lint(sheet, "stylesheet_property")]
    assert again.message == (
        "model_stylesheet line 1, column 22: `llm_model` is set again in the same rule (first "
        "at line 1, column 6); only the last one counts: 'two'"
    )
