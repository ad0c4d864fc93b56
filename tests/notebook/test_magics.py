"""The magics with a real InteractiveShell: every subcommand, usage errors, completion, unload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.errors import RunError
from freshness_magic.notebook.arguments import help_without_body
from freshness_magic.notebook.magics import PipelineMagics
from freshness_magic.notebook.pipeline import Pipeline
from freshness_magic.views.state import NodeState
from freshness_magic.views.text import TextResult
from tests.notebook.conftest import REVIEW_DOT, load_review
from tests.pipelines import one_step


def line(shell: InteractiveShell, text: str) -> TextResult:
    result = shell.run_line_magic("pipeline", text)
    assert isinstance(result, TextResult), result
    return result


def plain(obj: object) -> str:
    bundle = obj._repr_mimebundle_()  # type: ignore[attr-defined]
    text = bundle["text/plain"]
    assert isinstance(text, str)
    return text


def test_cell_magic_loads_binds_and_shows_state_table(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    assert isinstance(pipeline, Pipeline)
    assert shell.user_ns["review"] is pipeline
    text = plain(pipeline)
    assert text.splitlines()[0] == "pipeline review: ready · next: start · 0/5 nodes run"
    assert [row.split()[0] for row in text.splitlines()[2:]] == [
        "start", "lint", "draft", "approve", "done",
    ]  # fmt: skip
    assert [row.split()[1] for row in text.splitlines()[2:]] == ["next"] + ["pending"] * 4
    # terminal IPython: no widget, the static graph as HTML
    assert set(pipeline._repr_mimebundle_()) == {"text/plain", "text/html"}
    assert pipeline.widget is pipeline.widget
    bundle = pipeline._repr_mimebundle_()
    assert bundle["text/plain"] == text
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_cell_body_is_not_variable_expanded(shell: InteractiveShell, workdir: Path):
    shell.user_ns["goal"] = "EXPANDED"
    pipeline = load_review(shell, workdir)
    assert pipeline.graph.nodes["draft"].prompt == (
        "Summarise the change for Ship the login fix: {tool.output}"
    )
    assert "EXPANDED" not in pipeline.graph.source


def test_parse_error_is_usage_error_with_line_and_caret(shell: InteractiveShell, workdir: Path):
    bad = "digraph g {\n  start [shape=Mdiamond]\n  start -- done\n}\n"
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("pipeline", f"broken --workdir {workdir}", bad)
    message = str(info.value)
    assert message.startswith("%%pipeline broken cell:4:9: undirected edge")  # magic line is 1
    assert "start -- done" in message
    assert message.rstrip().endswith("^")
    assert "broken" not in shell.user_ns


def test_every_line_number_of_a_cell_parse_error_counts_from_the_magic_line(
    shell: InteractiveShell, workdir: Path, tmp_path: Path
):
    """A DOT error names a second place in its message (`found 'done' at line N`): in a cell it
    counts from the `%%pipeline` line as the location does; from a file both count from 1."""
    body = (
        "digraph tiny {\n  start [shape=Mdiamond]\n"
        '  a [shape=parallelogram, tool_command="echo hi"\n'
        "  done [shape=Msquare]\n  start -> a -> done\n}\n"
    )
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("pipeline", f"tiny --workdir {workdir}", body)
    first = str(info.value).splitlines()[0]
    # `%%pipeline` is line 1, the `[` line 4, `done` line 5
    assert first == (
        "%%pipeline tiny cell:4:5: unbalanced brackets: this '[' is never closed "
        "(found 'done' at line 5, column 3); add the missing ']'"
    )
    (tmp_path / "tiny.dot").write_text(body)
    with pytest.raises(UsageError) as from_file:
        shell.run_line_magic("pipeline", f"load {tmp_path / 'tiny.dot'} --workdir {workdir}")
    assert (
        str(from_file.value)
        .splitlines()[0]
        .endswith(
            "tiny.dot:3:5: unbalanced brackets: this '[' is never closed "
            "(found 'done' at line 4, column 3); add the missing ']'"
        )
    )


def test_a_cell_warning_names_lines_counted_from_the_magic_line(
    shell: InteractiveShell, workdir: Path, capsys: pytest.CaptureFixture[str]
):
    """A warning that names lines in its text (`appears only in edges (line N)`) counts them
    as its location does."""
    body = (
        'digraph t {\n  start [shape=Mdiamond]\n  review [prompt="look"]\n'
        "  done [shape=Msquare]\n  start -> review\n  review -> done\n  reveiw -> done\n}\n"
    )
    shell.run_cell_magic("pipeline", f"t --workdir {workdir}", body)
    warning = next(line for line in capsys.readouterr().err.splitlines() if "node_id_typo" in line)
    assert warning.startswith("%%pipeline t cell:8:")  # body line 7 is cell line 8
    assert "appears only in edges (line 8)" in warning


def test_validation_error_in_a_cell_counts_lines_from_the_magic_line(
    shell: InteractiveShell, workdir: Path
):
    dot = (
        "digraph v {\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n"
        '  start -> done [condition="outcome=="]\n}\n'
    )
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("pipeline", f"v --workdir {workdir}", dot)
    assert "  %%pipeline v cell:5:" in str(info.value)  # body line 4 is cell line 5
    assert "condition_syntax" in str(info.value)


def test_validation_error_is_usage_error(shell: InteractiveShell, workdir: Path):
    with pytest.raises(UsageError, match="start"):
        shell.run_cell_magic("pipeline", f"nostart --workdir {workdir}", "digraph g { a -> b }")


def test_cell_usage_errors(shell: InteractiveShell, workdir: Path):
    with pytest.raises(UsageError, match="identifier"):
        shell.run_cell_magic("pipeline", f"not-a-name --workdir {workdir}", REVIEW_DOT)
    with pytest.raises(UsageError, match="NAME"):
        shell.run_cell_magic("pipeline", "", REVIEW_DOT)
    with pytest.raises(UsageError, match="unrecognized"):
        shell.run_cell_magic("pipeline", "review --bogus", REVIEW_DOT)


def test_no_pipeline_loaded_is_usage_error(shell: InteractiveShell):
    with pytest.raises(UsageError, match="no pipeline loaded"):
        shell.run_line_magic("pipeline", "step")


def test_step_run_resume_status_flow(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    out = line(shell, "step").text
    assert out == "step: start -> success; next: lint"  # one line, no table
    out = line(shell, "run --to approve").text
    assert out.splitlines() == [
        "step: lint -> success; next: draft",
        "step: draft -> success; next: approve",
        "run: 2 step(s); paused",
    ]
    assert "approve  next" in line(shell, "status").text
    out = line(shell, "run").text
    assert "waiting at approve: Ship it?" in out
    assert "[Y] Yes  [N] No, redo" in out
    assert out.splitlines()[-1] == "run: 1 step(s); waiting"
    out = line(shell, "step").text
    assert out.startswith("waiting at approve")
    out = line(shell, "resume approve --choice Y").text
    assert out.splitlines() == [
        "step: approve -> success; next: done",  # the answered gate, as run's progress says
        "step: done -> success",
        "run: 2 step(s); completed",
    ]
    status = line(shell, "status").text
    assert status.splitlines()[0] == "pipeline review: completed · 5/5 nodes run"
    assert "done     succeeded" in status
    again = line(shell, "run").text
    assert again.startswith("run completed; nothing to do")


def test_run_to_a_node_behind_the_run_says_the_stop_was_not_reached(
    shell: InteractiveShell, workdir: Path
):
    """A trial: ``run --to lint`` after the run had passed lint ran on to the end and said only
    ``completed``, as if it had stopped where asked (the command line said so already)."""
    load_review(shell, workdir)
    line(shell, "run")
    line(shell, "resume approve --choice Y --to done")
    out = line(shell, "run --to lint").text
    assert out.splitlines() == [
        "step: done -> success",
        "run: 1 step(s); completed",
        "note: the run completed without reaching 'lint' (--to)",
    ]


def test_run_max_steps_and_reset(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    out = line(shell, "run --max-steps 2").text
    assert out.splitlines()[-1] == "run: 2 step(s); paused"
    first_dir = pipeline.current_run.run_dir
    out = line(shell, "reset").text
    assert out.splitlines() == [
        f"reset: the next action starts a new run; {first_dir.name} stays on disk and "
        "%pipeline resume goes back to it",
        "pipeline review: ready · next: start · 0/5 nodes run",
    ]
    assert pipeline.view.outcomes() == {}
    assert line(shell, "reset").text.startswith("reset: a new run starts at the beginning")
    assert pipeline.current_run.run_dir != first_dir


def test_resume_errors(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    with pytest.raises(UsageError, match="gate 'approve' is not waiting: the run is ready"):
        shell.run_line_magic("pipeline", "resume approve --choice Y")
    line(shell, "run")
    with pytest.raises(UsageError, match="not a choice"):
        shell.run_line_magic("pipeline", "resume approve --choice Q")
    with pytest.raises(UsageError, match="no default choice"):
        shell.run_line_magic("pipeline", "resume approve")
    with pytest.raises(UsageError, match="no node 'nope'"):
        shell.run_line_magic("pipeline", "resume nope --choice Y")
    out = line(shell, "resume approve --choice N").text
    assert "waiting at approve" in out
    assert "step: draft -> success; next: approve" in out


def test_resume_of_a_gate_without_a_choice_gives_the_lines_that_answer_it(
    shell: InteractiveShell, workdir: Path
):
    pipeline = load_review(shell, workdir)
    line(shell, "run")
    with pytest.raises(UsageError) as refused:
        shell.run_line_magic("pipeline", 'resume approve --comment "looks good"')
    said = str(refused.value).splitlines()
    assert said == [
        "gate 'approve' has no default choice (human.default_choice); answer with one of:",
        "  [Y] Yes -> done:        %pipeline resume approve --choice Y --comment 'looks good'",
        "  [N] No, redo -> draft:  %pipeline resume approve --choice N --comment 'looks good'",
    ]
    assert pipeline.view.pending_gate() is not None  # still waiting
    pasted = said[1].split(":", 1)[1].strip()
    assert pasted.startswith("%pipeline ")
    out = line(shell, pasted.removeprefix("%pipeline ")).text
    assert out.splitlines()[-1] == "run: 2 step(s); completed"
    assert pipeline.current_run.context["human.gate.comment"] == "looks good"


def test_line_usage_errors(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    cases = {
        "frobnicate": "invalid choice",
        "why": "NODE",
        "why nope": "no node 'nope'",
        "run --to nope": "no node 'nope'",
        "run --max-steps 0": "at least 1",
        "run --max-steps x": "invalid int",
        "step --name other": "no pipeline named 'other'",
        'cond "unterminated': "cannot split the line: the \" before 'unterminated' is never",
        "cond x=1 --from 'a": "the ' before 'a' is never closed",
        "cond x=1 --from nope": "no node 'nope'",
        "evidence nope": "no node 'nope'",
        "accept nope": "no node 'nope'",
        "show other": "no pipeline named 'other'",
        'load p.dot --workdir ""': "--workdir: is empty",
    }
    for text, expected in cases.items():
        with pytest.raises(UsageError, match=expected):
            shell.run_line_magic("pipeline", text)


def test_a_misspelt_node_name_suggests_the_likely_node(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    cases = {
        "why lnit": "%pipeline why: no node 'lnit' (did you mean 'lint'?)",
        "run --to aprove": "%pipeline run --to: no node 'aprove' (did you mean 'approve'?)",
        "cond x=1 --from drfat": "%pipeline cond --from: no node 'drfat' (did you mean 'draft'?)",
        "why zzz": "%pipeline why: no node 'zzz' in review; nodes: start, lint, draft, approve, "
        "done",
    }
    for text, expected in cases.items():
        with pytest.raises(UsageError) as refused:
            shell.run_line_magic("pipeline", text)
        assert str(refused.value) == expected
    with pytest.raises(UsageError) as refused:
        shell.run_cell_magic("node", "dnoe", "pass\n")
    assert str(refused.value) == "%%node: no node 'dnoe' (did you mean 'done'?)"
    with pytest.raises(RunError, match=r"^no node 'lnit' \(did you mean 'lint'\?\)$"):
        pipeline.view.details("lnit")  # what the widget's details and the Python calls say


def test_help_is_returned_as_text(shell: InteractiveShell):
    out = line(shell, "--help").text
    assert out.startswith("usage: %pipeline")
    for sub in ("step", "run", "resume", "accept", "why", "cond", "status", "evidence"):
        assert sub in out
    assert "--to NODE" in line(shell, "run --help").text
    assert "--choice" in line(shell, "resume --help").text
    assert "usage: %%node" in shell.run_cell_magic("node", "--help", "pass\n").text
    doc = PipelineMagics.pipeline.__doc__ or ""
    assert "usage: %%pipeline" in doc and "usage: %pipeline" in doc


@pytest.mark.parametrize(
    ("cell", "usage"),
    [
        ("%%pipeline --help", "usage: %%pipeline [-h]"),
        ("%%pipeline review -h\n", "usage: %%pipeline [-h]"),
        ("%%pipeline --he", "usage: %%pipeline [-h]"),
        ("%%node --help", "usage: %%node [-h]"),
        ("%%node draft --name review -h", "usage: %%node [-h]"),
    ],
)
def test_cell_magic_help_alone_in_a_cell_is_shown(
    shell: InteractiveShell, cell: str, usage: str, capsys: pytest.CaptureFixture[str]
):
    """``%%pipeline --help`` with no body shows the help, as ``%pipeline --help`` does (IPython
    refuses a cell magic with an empty body before the magic sees its line)."""
    result = shell.run_cell(cell)
    assert result.error_before_exec is None and result.error_in_exec is None
    assert isinstance(result.result, TextResult) and result.result.text.startswith(usage)
    assert "body is empty" not in capsys.readouterr().err


def test_a_cell_magic_without_body_or_help_is_still_refused(shell: InteractiveShell):
    result = shell.run_cell("%%pipeline review")
    assert isinstance(result.error_in_exec, UsageError)
    assert "cell body is empty" in str(result.error_in_exec)


def test_why_cond_evidence(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    out = line(shell, "why draft").text
    assert out.splitlines()[0] == "draft: pending"
    assert "inputs: docs/spec.md (freshness=warn)" in out
    line(shell, "run")
    out = line(shell, "why approve").text
    assert out.splitlines()[0] == "approve: waiting"
    assert "Ship it?" in out
    out = line(shell, 'cond "outcome=success && context.graph.goal" --from draft').text
    assert out.splitlines()[:2] == ["in the context after draft ran (step 3)", "result: true"]
    assert "edge from draft: -> approve" in out
    out = line(shell, "cond outcome==success").text
    assert out.startswith("syntax error at column")
    assert out.splitlines()[-1].strip() == "^"
    out = line(shell, "evidence").text
    assert [row.split()[0] for row in out.splitlines()[1:]] == [
        "start", "lint", "draft", "approve",
    ]  # fmt: skip
    out = line(shell, "evidence lint").text
    assert len(out.splitlines()) == 2 and "tool node 'lint'" in out
    assert line(shell, "evidence done").text == "no evidence records for done yet"


def test_evidence_names_three_stale_files_and_counts_the_rest(
    shell: InteractiveShell, workdir: Path
):
    """A record's stale files in ``%pipeline evidence`` stay short (every file listed made one
    190 KB line for a 10,000-file change)."""
    load_review(shell, workdir, REVIEW_DOT.replace('freshness="block"', 'freshness="warn"'))
    line(shell, "step")
    for i in range(5):
        (workdir / "src" / f"added{i}.py").write_text(f"x = {i}\n")
    line(shell, "run --to approve")
    out = line(shell, "evidence lint").text
    stale = "src/added0.py, src/added1.py, src/added2.py (+2 more)"
    assert out.splitlines()[1].endswith(f"  [stale: {stale}]")


def test_evidence_names_a_damaged_node_evidence_file_and_leaves_it(
    shell: InteractiveShell, workdir: Path
):
    """A node evidence file that is not JSON is said under the table (which file, what is
    wrong, what to do), for the run and for the node; the file stays as the node wrote it."""
    dot = REVIEW_DOT.replace(
        'tool_command="true"', "tool_command=\"printf '{oops' > .orchestrator/evidence/lint.json\""
    )
    load_review(shell, workdir, dot)
    line(shell, "run --to approve")
    damaged = workdir / ".orchestrator" / "evidence" / "lint.json"
    warning = (
        f"warning: evidence file {damaged} of node 'lint' is damaged: not valid JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1)). It is "
        "not counted as the node's evidence and is left as it is: write it again as a JSON "
        'object with version 1, nodeId "lint", timestamp (ISO 8601) and summary, or delete it '
        "(the run's record of each step is in its evidence.jsonl)"
    )
    for command in ("evidence", "evidence lint"):
        out = line(shell, command).text.splitlines()
        assert out[-1] == warning and sum(w.startswith("warning:") for w in out) == 1
    assert not line(shell, "evidence draft").text.count("warning:")
    assert damaged.read_text() == "{oops"


def test_a_big_change_is_named_briefly_in_why_and_the_details_panel(
    shell: InteractiveShell, workdir: Path
):
    """150 changed inputs: the tooltip and ``why`` name 10 and count the rest; the details
    panel lists 100 and says where the rest are (each view listed all of them)."""
    pipeline = load_review(shell, workdir)
    line(shell, "run --to approve")
    for i in range(150):
        (workdir / "src" / f"gen{i:03d}.py").write_text(f"x = {i}\n")
    shell.run_cell("edited = True")  # the post_execute hook re-checks
    why = pipeline.view.views()["lint"].why
    first = ", ".join(f"src/gen{i:03d}.py (added)" for i in range(10))
    assert why == f"inputs changed since it ran: {first} (+140 more)"
    listed = pipeline.view.details("lint")["stale_files"]
    assert len(listed) == 101 and listed[99] == "src/gen099.py (added)"
    where = f"all of them: freshness-magic check {pipeline.current_run.run_dir}"
    assert listed[100] == f"… and 50 more ({where})"


def test_a_block_with_retries_says_its_changed_inputs_once(shell: InteractiveShell, workdir: Path):
    """Each retry of a blocked node checks its inputs again; the step says the news once."""
    dot = REVIEW_DOT.replace('freshness="block"', 'freshness="block", max_retries=2')
    load_review(shell, workdir, dot)
    line(shell, "step")
    (workdir / "src" / "login.py").write_text("def login():\n    return False\n")
    out = line(shell, "step").text.splitlines()
    said = [row for row in out if "inputs changed since" in row]
    assert said == [
        "  lint: inputs changed since its baseline: src/login.py; held back (freshness=block): "
        "accept the change or restore the files"
    ], out
    assert out[-1].startswith("run failed: lint did not run, blocked by changed inputs")


def test_a_node_held_back_by_block_says_so_and_how_to_go_on_in_the_notebook(
    shell: InteractiveShell, workdir: Path
):
    """The step, the status, the view's banner and ``why`` name the block and the magic that
    lifts it (they gave the engine's generic "no edge condition matched" and the Python and
    command-line names); accepting and retrying then runs the node."""
    pipeline = load_review(shell, workdir)
    line(shell, "step")
    (workdir / "src" / "login.py").write_text("def login():\n    return False\n")
    out = line(shell, "step").text
    said = (
        "lint did not run, blocked by changed inputs (freshness=block): src/login.py. Accept "
        "the change (%pipeline accept lint, or the view's Accept changes) and retry, or restore "
        "the files and retry"
    )
    assert out.splitlines()[-1] == f"run failed: {said}", out
    assert line(shell, "step").text == (
        "run failed at lint; nothing to do: %pipeline retry goes on from there, %pipeline reset "
        "starts a new run"
    )
    assert "no edge condition matched" not in out
    banner = pipeline.view.banner()
    assert banner is not None and banner.text == said and banner.node == "lint"
    assert f"failed: {said}" in line(shell, "status").text
    why = line(shell, "why lint").text.splitlines()
    assert (
        "  notes: freshness=block: inputs changed since the baseline snapshot; accept them as "
        "its new baseline or restore the files"
    ) in why
    assert why[-2:] == [
        "  next: run it on its changed inputs, and go on from it:",
        "      %pipeline accept lint, then %pipeline retry lint",
    ]
    assert not any("RUN" in w or "resume" in w for w in why), why
    line(shell, "accept lint")
    assert line(shell, "retry").text.startswith("step: lint -> success")


def test_cond_line_is_not_variable_expanded(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    shell.user_ns["x"] = "EXPANDED"
    out = line(shell, 'cond "context.{x}=1"').text
    assert "EXPANDED" not in out
    assert out.startswith("syntax error")


def test_load_list_show_and_name_selection(shell: InteractiveShell, workdir: Path, tmp_path: Path):
    load_review(shell, workdir)
    dot = tmp_path / "other.dot"
    dot.write_text(
        'digraph other { start [shape=Mdiamond]; work [prompt="hi"]; done [shape=Msquare]; '
        "start -> work -> done }\n"
    )
    other = shell.run_line_magic("pipeline", f"load {dot} --workdir {workdir}")
    assert isinstance(other, Pipeline) and other.name == "other"
    assert shell.user_ns["other"] is other
    listing = line(shell, "list").text.splitlines()
    assert listing[0].split() == ["variable", "graph", "nodes", "state", "workdir"]
    assert listing[1].split() == ["review", "review", "5", "ready", str(workdir)]
    assert listing[2].split()[:3] == ["*", "other", "other"]
    assert line(shell, "step").text.startswith("step: start")
    assert line(shell, "step --name review").text.startswith("step: start")
    assert shell.run_line_magic("pipeline", "show review") is shell.user_ns["review"]
    with pytest.raises(UsageError) as missing:  # the same words as the CLI's
        shell.run_line_magic("pipeline", f"load {tmp_path / 'missing.dot'}")
    assert str(missing.value).startswith(f"%pipeline load: {tmp_path / 'missing.dot'}: no such")
    renamed = shell.run_line_magic("pipeline", f"load {dot} --name third --workdir {workdir}")
    assert shell.user_ns["third"] is renamed


def test_hub_status_without_a_running_hub(shell: InteractiveShell, workdir: Path):
    assert shell.run_line_magic("pipeline", "hub status").text.startswith("no hub running")
    with pytest.raises(UsageError, match="usage: %pipeline hub"):
        shell.run_line_magic("pipeline", "hub")


def test_hub_handler_is_created_once_and_replaceable(
    shell: InteractiveShell, magics: PipelineMagics, workdir: Path
):
    assert line(shell, f"hub status --workdir {workdir}").text == f"no hub running for {workdir}"
    created = magics.hub_handler
    assert type(created).__name__ == "NotebookHub"
    line(shell, f"hub status --workdir {workdir}")
    assert magics.hub_handler is created
    seen: list[list[str]] = []
    magics.hub_handler = lambda _m, argv: seen.append(list(argv)) or TextResult("custom")
    assert line(shell, "hub query src/a.py --x").text == "custom"
    assert seen == [["query", "src/a.py", "--x"]]


NODE_DOT = one_step('label="Work"', name="cells")


def test_node_cell_success_writes_context(shell: InteractiveShell, workdir: Path):
    pipeline = shell.run_cell_magic("pipeline", f"cells --workdir {workdir}", NODE_DOT)
    out = shell.run_cell_magic("node", "work", "context['work.answer'] = 6 * 7\n")
    assert out.text == "cells.work: handled by this cell"
    result = line(shell, "run").text
    assert "step: work -> success; next: done" in result
    assert "work   succeeded  %%node work cell ran" in line(shell, "status").text
    assert pipeline.current_run.context["work.answer"] == 42
    assert "context" not in shell.user_ns and "outcome" not in shell.user_ns


def test_node_cell_fail_outcome(shell: InteractiveShell, workdir: Path):
    pipeline = shell.run_cell_magic("pipeline", f"cells --workdir {workdir}", NODE_DOT)
    shell.run_cell_magic("node", "work", "outcome = 'fail'\n")
    out = line(shell, "run").text
    assert pipeline.view.state_name == "failed"
    assert line(shell, "status").text.splitlines()[-1].startswith("failed: node 'work' failed")
    assert "step: work -> fail (%%node work set outcome=fail)" in out
    assert "work   failed     %%node work set outcome=fail" in line(shell, "status").text
    assert pipeline.view.outcomes()["work"].failure_reason == "%%node work set outcome=fail"


def test_node_cell_exception_is_fail_with_its_line_and_the_traceback_in_the_output(
    shell: InteractiveShell, workdir: Path
):
    """The step line and the summary say the user's exception and the cell's line, not the
    handler's internal traceback; the traceback is kept with what the cell printed."""
    pipeline = shell.run_cell_magic("pipeline", f"cells --workdir {workdir}", NODE_DOT)
    cell = "x = 1\ndef check():\n    raise ValueError('boom at work')\n\ncheck()\n"
    shell.run_cell_magic("node", "work", cell)
    out = line(shell, "run").text.splitlines()
    reason = "ValueError: boom at work (cell line 3)"
    assert f"step: work -> fail ({reason})" in out
    assert out[-1].startswith(f"run: 2 step(s); failed: node 'work' failed ({reason})")
    outcome = pipeline.view.outcomes()["work"]
    assert outcome.status.value == "fail" and outcome.failure_reason == reason
    assert "cells.py" not in line(shell, "status").text
    output = pipeline.view.details("work")["output"]
    assert output.startswith('Traceback (most recent call last):\n  File "<%%node work>"')
    assert "    raise ValueError('boom at work')\n" in output
    assert output.endswith("ValueError: boom at work\n") and "cells.py" not in output
    records = [
        json.loads(x)
        for x in (pipeline.current_run.run_dir / "evidence.jsonl").read_text().splitlines()
    ]
    work = [r for r in records if r["nodeId"] == "work"]
    assert reason in json.dumps(work)


def test_node_cell_usage_errors(shell: InteractiveShell, workdir: Path):
    shell.run_cell_magic("pipeline", f"cells --workdir {workdir}", NODE_DOT)
    with pytest.raises(UsageError, match="no node 'nope'"):
        shell.run_cell_magic("node", "nope", "pass\n")
    with pytest.raises(UsageError, match="line 1"):
        shell.run_cell_magic("node", "work", "def (:\n")
    with pytest.raises(UsageError, match="no pipeline named 'zzz'"):
        shell.run_cell_magic("node", "work --name zzz", "pass\n")


def test_completion_through_the_shell(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)

    def complete(text: str) -> list[str]:
        with provisionalcompleter():
            found = shell.Completer.completions(text, len(text))
            return [c.text for c in found if c.type != "magic"]

    assert complete("%pipeline st") == ["step", "stop", "status"]
    assert set(complete("%pipeline run --")) >= {"--to", "--max-steps", "--name"}
    assert complete("%pipeline run --to ap") == ["approve"]
    assert complete("%pipeline why d") == ["draft", "done"]
    assert complete("%pipeline step --name re") == ["review"]
    line(shell, "run")
    assert complete("%pipeline resume approve --choice Y") == ["Y"]
    magics = shell.magics_manager.registry["PipelineMagics"]
    assert magics.complete("%pipeline resume approve --choice ", "") == ["Y", "N"]


def test_completion_of_node_cells(magics: PipelineMagics, shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    assert magics.complete("%%node l", "l") == ["lint"]
    assert magics.complete("%%node --", "--") == ["--name", "--help"]


def test_config_options(shell: InteractiveShell, magics: PipelineMagics, tmp_path: Path):
    target = tmp_path / "configured"
    shell.run_line_magic("config", f"PipelineMagics.default_workdir = '{target}'")
    shell.run_line_magic("config", "PipelineMagics.auto_refresh = False")
    assert magics.default_workdir == str(target)
    assert magics.auto_refresh is False
    pipeline = shell.run_cell_magic("pipeline", "cells", NODE_DOT)
    assert pipeline.workdir == target.resolve()


def test_unload_removes_magics_hooks_and_completers(shell: InteractiveShell):
    manager = shell.magics_manager
    assert "pipeline" in manager.magics["line"] and "node" in manager.magics["cell"]
    hooks = len(shell.events.callbacks["post_execute"])
    shell.run_line_magic("unload_ext", "freshness_magic")
    assert "pipeline" not in manager.magics["line"]
    assert "pipeline" not in manager.magics["cell"] and "node" not in manager.magics["cell"]
    assert len(shell.events.callbacks["post_execute"]) == hooks - 1
    assert "%pipeline" not in shell.strdispatchers["complete_command"].strs
    assert help_without_body not in shell.input_transformers_cleanup
    with pytest.raises(UsageError):
        shell.run_line_magic("pipeline", "list")
    shell.run_line_magic("load_ext", "freshness_magic")
    assert "pipeline" in manager.magics["line"]
    assert shell.input_transformers_cleanup.count(help_without_body) == 1


def test_post_execute_refreshes_stale_markers_and_accept_clears(
    shell: InteractiveShell, workdir: Path
):
    pipeline = load_review(shell, workdir)
    line(shell, "run --to approve")
    assert "stale" not in line(shell, "status").text
    (workdir / "src" / "login.py").write_text("def login():\n    return False\n")
    (workdir / "src" / "new.py").write_text("x = 1\n")
    shell.run_cell("edited = True")  # any cell: the post_execute hook re-checks
    status = line(shell, "status").text
    assert "lint     stale(run)  inputs changed since it ran: " in status
    assert "src/login.py (modified)" in status and "src/new.py (added)" in status
    assert (
        "draft    outdated    `draft` read `tool.output` of `lint` (step 2), whose inputs" in status
    )
    why = line(shell, "why lint").text
    assert why.splitlines()[0] == "lint: stale(run)"
    views = pipeline.view.views()
    assert views["lint"].stale.value == "run"
    widget = pipeline.widget
    assert widget.states[widget.graph["nodes"].index("lint")] == "T"  # stale since it ran
    out = line(shell, "accept lint").text
    assert out.startswith("accepted current inputs of lint: src/login.py, src/new.py")
    assert "stale" not in line(shell, "status").text


def test_a_node_whose_freshness_is_ignored_is_never_shown_stale_nor_makes_others_outdated(
    shell: InteractiveShell, workdir: Path
):
    """freshness=ignore: the inputs are not checked, so neither the widget, the status table
    nor ``why`` calls the node stale (or the nodes after it outdated) when they change."""
    dot = REVIEW_DOT.replace('freshness="block"', 'freshness="ignore"').replace(
        'source_files="docs/spec.md", freshness="warn"',
        'source_files="docs/spec.md", freshness="ignore"',
    )
    pipeline = load_review(shell, workdir, dot)
    line(shell, "run --to approve")  # lint and draft ran
    (workdir / "src" / "login.py").write_text("changed\n")
    (workdir / "docs" / "spec.md").write_text("changed\n")
    shell.run_cell("edited = True")  # the post_execute hook re-checks
    assert dict(pipeline.view.stale) == {}
    views = pipeline.view.views()
    assert (
        views["lint"].state is NodeState.SUCCEEDED and views["draft"].state is NodeState.SUCCEEDED
    )
    widget = pipeline.widget
    assert not set(widget.states) & {"t", "T", "o"}  # stale (baseline, run), outdated
    status = line(shell, "status").text
    assert "stale" not in status and "outdated" not in status
    why = line(shell, "why lint").text.splitlines()
    assert why[0] == "lint: succeeded"
    assert "  inputs: src/**/*.py (freshness=ignore: not checked, never shown stale)" in why
    assert not any("accept" in w for w in why)


def test_accept_names_the_first_files_and_counts_the_rest(shell: InteractiveShell, workdir: Path):
    """Accepting a big change stays one short line (it listed every file: 190 KB at 15,000)."""
    load_review(shell, workdir)
    line(shell, "run --to approve")
    for i in range(25):
        (workdir / "src" / f"gen{i:02d}.py").write_text(f"x = {i}\n")
    out = line(shell, "accept lint").text
    first = ", ".join(f"src/gen{i:02d}.py" for i in range(10))
    assert out == f"accepted current inputs of lint: {first} (+15 more)"


def test_auto_refresh_off_skips_the_post_execute_check(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    line(shell, "run --to approve")
    shell.run_line_magic("config", "PipelineMagics.auto_refresh = False")
    (workdir / "src" / "login.py").write_text("changed\n")
    shell.run_cell("x = 1")
    assert dict(shell.user_ns["review"].view.stale) == {}
    shell.run_line_magic("config", "PipelineMagics.auto_refresh = True")
    shell.run_cell("x = 2")
    assert set(shell.user_ns["review"].view.stale) == {"lint"}


def test_status_and_why_recheck_inputs_before_answering(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    line(shell, "run --to approve")
    shell.run_line_magic("config", "PipelineMagics.auto_refresh = False")
    (workdir / "src" / "login.py").write_text("changed\n")
    assert "lint     stale(run)" in line(shell, "status").text
    assert "src/login.py (modified)" in line(shell, "why lint").text


def test_why_names_an_input_path_that_is_missing(shell: InteractiveShell, workdir: Path):
    (workdir / "docs" / "spec.md").unlink()
    load_review(shell, workdir)
    line(shell, "run --to approve")
    why = line(shell, "why draft").text.splitlines()
    assert why[0] == "draft: succeeded"
    assert (
        "  missing: docs/spec.md; freshness tracks nothing there, so it counts as unchanged "
        "(fix the path in source_files, or create the file)"
    ) in why
    assert not any("missing" in row for row in line(shell, "why lint").text.splitlines())
    (workdir / "docs" / "spec.md").write_text("# Spec\n")
    why = line(shell, "why draft").text
    assert "docs/spec.md (added)" in why and "missing:" not in why


def test_accept_without_node_clears_nodes_stale_since_they_ran(
    shell: InteractiveShell, workdir: Path
):
    load_review(shell, workdir)
    line(shell, "run --to approve")
    (workdir / "src" / "login.py").write_text("changed\n")
    shell.run_cell("x = 1")
    assert set(shell.user_ns["review"].view.stale) == {"lint"}
    text = line(shell, "accept").text
    assert "src/login.py" in text
    assert dict(shell.user_ns["review"].view.stale) == {}


def test_pending_node_stale_since_baseline(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    line(shell, "step")
    (workdir / "docs" / "spec.md").write_text("# Spec v2\n")
    shell.run_cell("x = 3")
    status = line(shell, "status").text
    assert "draft    stale(baseline)  inputs changed since baseline: docs/spec.md (modified)" in (
        status
    )


def test_a_step_says_when_a_warn_node_ran_with_stale_inputs(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    line(shell, "step")  # start: the baselines are taken
    (workdir / "docs" / "spec.md").write_text("# Spec v2\n")
    assert line(shell, "step").text == "step: lint -> success; next: draft"
    assert line(shell, "step").text.splitlines() == [
        "step: draft -> success; next: approve",
        "  draft: inputs changed since its baseline: docs/spec.md; ran anyway (freshness=warn)",
    ]


def test_resume_from_checkpoint_on_disk(shell: InteractiveShell, workdir: Path):
    with pytest.raises(UsageError, match="no saved run of 'review'"):
        shell.run_cell_magic("pipeline", f"review --workdir {workdir} --resume", REVIEW_DOT)
    first = load_review(shell, workdir)
    line(shell, "run")
    run_dir = first.current_run.run_dir
    restored = shell.run_cell_magic("pipeline", f"review --workdir {workdir} --resume", REVIEW_DOT)
    assert restored is not first and shell.user_ns["review"] is restored
    assert restored.current_run.run_dir == run_dir
    assert restored.view.state_name == "waiting"
    assert plain(restored).splitlines()[0].startswith("pipeline review: waiting · waiting at")
    out = line(shell, "resume approve --choice Yes").text
    assert out.splitlines()[-1] == "run: 2 step(s); completed"


def test_retry_with_nothing_failed_names_the_magic_not_the_python_call(
    shell: InteractiveShell, workdir: Path
):
    load_review(shell, workdir)
    line(shell, "step")
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("pipeline", "retry")
    assert str(info.value) == (
        "nothing to retry: the run is paused, not failed; name the node to run again "
        "(%pipeline retry NODE)"
    )
    assert "lint" in line(shell, "retry lint").text  # as the message says
    line(shell, "run")
    line(shell, "resume approve --choice Y")
    with pytest.raises(UsageError, match="nothing to retry: the run completed; name the node"):
        shell.run_line_magic("pipeline", "retry")


def test_a_file_where_the_state_folder_goes_is_a_usage_error_at_step(
    shell: InteractiveShell, workdir: Path
):
    (workdir / ".freshness").write_text("precious\n")
    load_review(shell, workdir)
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("pipeline", "step")
    message = str(info.value)
    assert message.startswith(f"{workdir / '.freshness'} is a file, not a folder")
    assert "move the file away" in message and "\n" not in message
    assert (workdir / ".freshness").read_text() == "precious\n"


def test_a_file_as_the_workdir_is_refused_when_loading(
    shell: InteractiveShell, magics: PipelineMagics, tmp_path: Path
):
    afile = tmp_path / "notes.txt"
    afile.write_text("precious\n")
    for given in (afile, afile / "sub"):
        with pytest.raises(UsageError, match=f"--workdir {given}: {afile} is a file, not a folder"):
            shell.run_cell_magic("pipeline", f"review --workdir {given}", REVIEW_DOT)
    assert "review" not in shell.user_ns
    shell.run_line_magic("config", f"PipelineMagics.default_workdir = '{afile}'")
    assert magics.default_workdir == ""  # refused when set: the old value stays
    assert afile.read_text() == "precious\n"


def test_a_missing_workdir_is_said_at_load_and_made_by_the_first_step(
    shell: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    target = tmp_path / "new"
    shell.run_cell_magic("pipeline", f"cells --workdir {target}", NODE_DOT)
    assert f"the working directory {target} does not exist yet" in capsys.readouterr().err
    assert not target.exists()
    shell.run_line_magic("pipeline", "step")
    assert target.is_dir()


def test_no_hub_says_the_magic_that_starts_one(shell: InteractiveShell, workdir: Path):
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("pipeline", f"hub query x.py --workdir {workdir}")
    assert str(info.value) == (
        f"no hub running for {workdir}; start it with `%pipeline hub start --workdir {workdir}`"
    )


def test_a_comment_after_a_magic_line_is_ignored_as_a_shell_would(
    shell: InteractiveShell, workdir: Path
):
    """The documentation shows magics with trailing comments; pasted, they work."""
    load_review(shell, workdir)
    stepped = line(shell, "step               # run the next node")
    assert "start" in str(stepped)
    assert "run the next node" not in str(stepped)
    ran = line(shell, 'run --to approve   # "up to" a node, not into it')
    assert "next: approve" in plain(shell.user_ns["review"])
    assert ran is not None
    # a '#' inside a word or inside quotes is text, not a comment
    result = line(shell, 'cond "context.tool.output=#1" --from lint  # nothing')
    assert "context.tool.output=#1" in str(result)
    with pytest.raises(UsageError, match="unrecognized arguments: fix#2"):
        shell.run_line_magic("pipeline", "status fix#2")
