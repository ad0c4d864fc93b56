"""Stale and outdated marks come from what each execution read, never from the graph's shape.

Each test runs a real pipeline (tools, the simulated backend, the freshness extension, real
files) and asserts the exact sets of stale and outdated nodes.
"""

from __future__ import annotations

from pathlib import Path

from freshness_magic.engine.marks import Mark, MarkKind
from freshness_magic.engine.run import Run
from freshness_magic.freshness.extension import run_marks
from freshness_magic.session import open_run
from tests.pipelines import rework_loop

DOCS = """digraph docs {
  start      [shape=Mdiamond]
  draft      [shape=parallelogram, tool_command="cat core.py", source_files="core.py",
              freshness="warn"]
  fan        [shape=component]
  cli_docs   [shape=parallelogram, tool_command="cat docs/cli.md", source_files="docs/cli.md",
              freshness="warn"]
  api_docs   [shape=parallelogram, tool_command="cat docs/api.md", source_files="docs/api.md",
              freshness="warn"]
  changelog  [prompt="Review the changelog"]
  docs_join  [shape=tripleoctagon]
  summary    [prompt="Summarise {parallel.fan_in.best_id}"]
  docs_gate  [shape=hexagon, label="Docs ok?"]
  docs_fix   [prompt="Fix the docs: {human.gate.label}"]
  kind       [shape=parallelogram, tool_command="echo minor"]
  done       [shape=Msquare]
  start -> draft -> fan
  fan -> cli_docs -> docs_join
  fan -> api_docs -> docs_join
  fan -> changelog -> docs_join
  docs_join -> summary -> docs_gate
  docs_gate -> docs_fix [label="[F] Fix"]
  docs_gate -> kind [label="[A] Approve"]
  docs_fix -> fan
  kind -> done
}
"""


def docs_tree(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cli.md").write_text("cli v1\n")
    (tmp_path / "docs" / "api.md").write_text("api v1\n")
    (tmp_path / "core.py").write_text("x = 1\n")
    (tmp_path / "docs.dot").write_text(DOCS)
    return tmp_path / "docs.dot"


def marked(run: Run) -> tuple[set[str], set[str]]:
    marks = run_marks(run)
    return (
        {n for n, m in marks.items() if m.kind is MarkKind.STALE},
        {n for n, m in marks.items() if m.kind is MarkKind.OUTDATED},
    )


def test_a_loop_pass_a_node_caused_never_marks_it(tmp_path: Path) -> None:
    run = open_run(docs_tree(tmp_path), workdir=tmp_path)
    run.run()
    assert run.pending_gate is not None
    run.answer("docs_gate", "F")  # docs_fix -> the fan-out again -> summary -> docs_gate
    run.run()
    assert run.pending_gate is not None
    # docs_fix read the gate's first answer; the gate's second pass came from docs_fix
    (fix,) = [t for t in run.traces if t.node_id == "docs_fix"]
    # (and, its fidelity being compact, which shared values were set: none)
    assert [(r.key, r.value) for r in fix.reads] == [
        ("human.gate.label", "[F] Fix"),
        ("context.*", []),
    ]
    assert marked(run) == (set(), set())
    run.answer("docs_gate", "A")
    run.run()
    assert run.state.value == "completed"
    assert run.completed_nodes.count("docs_gate") == 2
    assert marked(run) == (set(), set())


def test_an_edited_branch_input_marks_that_branch_and_the_readers_of_its_result(
    tmp_path: Path,
) -> None:
    run = open_run(docs_tree(tmp_path), workdir=tmp_path)
    run.run()
    assert run.pending_gate is not None
    (tmp_path / "docs" / "cli.md").write_text("cli v2\n")
    stale, outdated = marked(run)
    assert stale == {"cli_docs"}
    # the fan-in read cli_docs' result, the summary read the fan-in's; the siblings, the
    # parallel node and the nodes before are untouched
    assert outdated == {"docs_join", "summary"}
    join = run_marks(run)["docs_join"]
    step = next(t.step for t in run.traces if t.node_id == "cli_docs")
    assert join.because() == (
        f"`docs_join` read the result of `cli_docs` (step {step}), whose input "
        "`docs/cli.md` changed"
    )
    assert join.roots() == ["cli_docs"]
    summary = run_marks(run)["summary"]
    assert summary.because().startswith("`summary` read `parallel.fan_in.best_id` of `docs_join`")
    assert summary.because().endswith("whose input `docs/cli.md` changed")


def test_an_edit_after_a_loop_marks_only_what_read_it(tmp_path: Path) -> None:
    """After a loop pass, one edit of core.py (read by draft alone) marks draft: the loop does
    not make every node upstream of every other."""
    run = open_run(docs_tree(tmp_path), workdir=tmp_path)
    run.run()
    run.answer("docs_gate", "F")
    run.run()
    (tmp_path / "core.py").write_text("x = 2\n")
    assert marked(run) == ({"draft"}, set())


RETRY = """digraph retry {
  start [shape=Mdiamond]
  a     [shape=parallelogram, tool_command="cat in.txt", source_files="in.txt", freshness="warn"]
  b     [prompt="Use {tool.output}"]
  x     [shape=parallelogram, tool_command="echo unrelated"]
  c     [prompt="Go on from {last_response}"]
  gate  [shape=hexagon, label="Ship?"]
  done  [shape=Msquare]
  start -> a -> b -> x -> c -> gate
  gate -> done [label="[Y] Yes"]
}
"""


def retry_run(tmp_path: Path) -> Run:
    (tmp_path / "in.txt").write_text("one\n")
    run = open_run(RETRY, workdir=tmp_path)
    run.run()
    assert run.pending_gate is not None
    return run


def test_an_upstream_rerun_with_the_same_output_marks_nothing(tmp_path: Path) -> None:
    run = retry_run(tmp_path)
    run.retry("a")
    run.step()  # a again, same file: same tool.output
    assert run.completed_nodes.count("a") == 2
    assert marked(run) == (set(), set())


def test_an_upstream_rerun_with_another_output_marks_its_readers_only(tmp_path: Path) -> None:
    run = retry_run(tmp_path)
    (tmp_path / "in.txt").write_text("two\n")
    assert marked(run) == ({"a"}, {"b", "c"})  # x read nothing of a's
    run.retry("a")
    run.step()
    assert marked(run) == (set(), {"b", "c"})
    b = run_marks(run)["b"]
    assert b.superseded and b.roots() == []
    steps = [t.step for t in run.traces if t.node_id == "a"]
    assert b.because() == (
        f"`b` read `tool.output` of `a` (step {steps[0]}), and `a` ran again "
        f"(step {steps[1]}) and wrote a different value"
    )
    c = run_marks(run)["c"]
    assert c.because().startswith("`c` read `last_response` of `b`")
    run.run()  # b, x, c again: everything read the newest values
    assert marked(run) == (set(), set())


def test_a_retry_of_an_earlier_node_marks_what_read_its_old_result(tmp_path: Path) -> None:
    """A retry asked for by a person is no loop pass: b did not lead to a's new run."""
    handler_dot = RETRY.replace('tool_command="cat in.txt"', 'tool_command="cat in.txt; date +%N"')
    (tmp_path / "in.txt").write_text("one\n")
    run = open_run(handler_dot, workdir=tmp_path)
    run.run()
    run.retry("a")
    run.step()
    assert marked(run) == (set(), {"b", "c"})


GATE_LOOP = rework_loop('prompt="Draft it; last answer: {human.gate.label}"')


def test_a_gate_loop_marks_nothing(tmp_path: Path) -> None:
    run = open_run(GATE_LOOP, workdir=tmp_path)
    run.run()
    run.answer("approve", "N")
    run.run()
    assert run.completed_nodes.count("draft") == 2
    drafts = [t for t in run.traces if t.node_id == "draft"]
    assert [r.key for r in drafts[1].reads] == ["human.gate.label", "context.*"]
    assert marked(run) == (set(), set())
    run.answer("approve", "Y")
    run.run()
    # the first draft read nothing the second answer changed for it; the second read the first
    assert marked(run) == (set(), set())


def test_marks_survive_a_resume(tmp_path: Path) -> None:
    run = open_run(docs_tree(tmp_path), workdir=tmp_path)
    run.run()
    folder = run.run_dir
    run.close()
    (tmp_path / "docs" / "cli.md").write_text("cli v2\n")
    from freshness_magic.session import resume_run

    again = resume_run(folder)
    assert marked(again) == ({"cli_docs"}, {"docs_join", "summary"})
    assert isinstance(run_marks(again)["docs_join"], Mark)
    again.close()


def test_a_gate_s_note_names_only_what_led_to_it(tmp_path: Path) -> None:
    from freshness_magic.engine.marks import led_to

    run = open_run(docs_tree(tmp_path), workdir=tmp_path)
    run.run()
    # docs_fix is upstream of docs_gate in the graph (a loop), but it has not run: not named
    assert led_to(run.traces) == {
        "start", "draft", "fan", "cli_docs", "api_docs", "changelog", "docs_join", "summary"
    }  # fmt: skip
    run.retry("summary")  # a person asked for summary again: what came before is not its cause,
    run.step()  # but what it read still counts
    assert led_to(run.traces) == {"summary", "docs_join", "cli_docs", "api_docs", "changelog"}
