"""Pipelines across re-loads, kernel restarts and ``%reload_ext`` in a real InteractiveShell;
loading from variables and expanded paths; run options; the live input watcher."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.errors import RunError
from freshness_magic.notebook.magics import PipelineMagics
from freshness_magic.notebook.pipeline import Pipeline
from freshness_magic.views.render import NodeState, StaleKind
from freshness_magic.views.state import BannerKind
from freshness_magic.views.text import TextResult
from tests.notebook.conftest import REVIEW_DOT, load_review
from tests.pipelines import SLOW_TOOL, one_step
from tests.processes import group_alive
from tests.waiting import wait_until


def line(shell: InteractiveShell, text: str) -> TextResult:
    result = shell.run_line_magic("pipeline", text)
    assert isinstance(result, TextResult), result
    return result


def plain(obj: Any) -> str:
    text = obj._repr_mimebundle_()["text/plain"]
    assert isinstance(text, str)
    return text


def test_reload_offers_the_unfinished_run_and_resume_reopens_it(
    shell: InteractiveShell, workdir: Path
):
    first = load_review(shell, workdir)
    line(shell, "run")
    run_id = first.current_run.run_id
    del shell.user_ns["review"]  # what a kernel restart leaves: nothing in memory
    again = load_review(shell, workdir)
    assert again.view.resume_offer is not None
    assert again.view.resume_offer.where == "approve" and again.view.resume_offer.state == "waiting"
    assert plain(again).splitlines()[-1] == (
        f"an unfinished run of review ({run_id}) waits at approve: "
        "%pipeline resume reopens it, %pipeline reset starts a new one"
    )
    with pytest.raises(UsageError, match="no gate waits in this kernel's run; an unfinished"):
        shell.run_line_magic("pipeline", "resume draft --choice Y")  # it waits elsewhere
    out = line(shell, "resume approve --choice Y").text.splitlines()  # reopens it, answers
    assert out[0] == f"resumed run {run_id}" and out[1].startswith("step: approve -> success")
    assert out[-1] == "run: 2 step(s); completed"
    assert again.view.resume_offer is None and again.current_run.run_id == run_id
    del shell.user_ns["review"]
    assert load_review(shell, workdir).view.resume_offer is None  # finished runs are not offered


def test_choice_alone_after_a_restart_answers_the_gate_the_run_on_disk_waits_at(
    shell: InteractiveShell, workdir: Path
):
    """A JupyterLab trial: the view said the run waits at the gate, and `resume --choice Y`
    answered "no gate of review waits", as the README says it reopens the run first."""
    first = load_review(shell, workdir)
    line(shell, "run")
    run_id = first.current_run.run_id
    del shell.user_ns["review"]  # a kernel restart
    load_review(shell, workdir)
    out = line(shell, "resume --choice Y").text.splitlines()
    assert out[0] == f"resumed run {run_id}" and out[1].startswith("step: approve -> success")
    assert out[-1] == "run: 2 step(s); completed"


def test_a_run_that_failed_at_a_node_is_offered_after_a_restart_and_retried(
    shell: InteractiveShell, workdir: Path
):
    """The command line resumes a failed run with --retry; the notebook offered only waiting
    and paused runs, so after a kernel restart a failed run could only be started anew."""
    failing = REVIEW_DOT.replace('tool_command="true"', 'tool_command="test -f fixed"')
    first = load_review(shell, workdir, failing)
    assert line(shell, "run").text.splitlines()[-1].startswith("run: 2 step(s); failed: ")
    run_id = first.current_run.run_id
    del shell.user_ns["review"]  # a kernel restart
    with pytest.raises(UsageError, match="after a kernel restart, run that cell again"):
        shell.run_line_magic("pipeline", "status")
    again = load_review(shell, workdir, failing)
    assert again.view.resume_offer is not None and again.view.resume_offer.state == "failed"
    assert plain(again).splitlines()[-1] == (
        f"the last run of review ({run_id}) failed at lint: %pipeline resume reopens it to "
        "retry, %pipeline reset starts a new one"
    )
    with pytest.raises(UsageError, match="nothing to retry in this kernel yet; the last run of"):
        shell.run_line_magic("pipeline", "retry lint")  # not a new run: it did not start
    said = line(shell, "resume").text.splitlines()
    assert said[0] == f"resumed run {run_id}" and said[-1] == "%pipeline retry runs it again"
    assert said[-2].startswith("failed: node 'lint' failed")
    assert again.current_run.run_id == run_id and again.view.resume_offer is None
    (workdir / "fixed").write_text("")
    retried = line(shell, "retry").text
    assert retried.startswith("step: lint -> success") and retried.endswith("waiting")
    assert again.current_run.run_id == run_id


def test_resume_after_the_pipeline_was_fixed_names_the_old_run_and_both_ways_on(
    shell: InteractiveShell, workdir: Path
):
    """A user fixes a failing pipeline and reloads it: the failed run keeps its own text, so it
    is not offered, and 'nothing to resume' alone hid that it is there."""
    failing = REVIEW_DOT.replace('tool_command="true"', 'tool_command="test -f fixed"')
    first = load_review(shell, workdir, failing)
    line(shell, "run")
    old = first.current_run.run_dir
    del shell.user_ns["review"]
    load_review(shell, workdir)  # the fixed text
    said = line(shell, "resume").text
    assert said == (
        f"nothing to resume with this text of review: its unfinished run {old.name} was started "
        "from another text, and a run goes on only with the text it started with. %pipeline "
        f"step starts a new run with this one; %pipeline load {old / 'pipeline.dot'} --workdir "
        f"{workdir} then %pipeline resume reopens the old one; %pipeline keep carries it over "
        "to this text (unchanged nodes keep their results)"
    )
    pasted = said.split("%pipeline ")[-3].removesuffix(" then ")
    shell.run_line_magic("pipeline", pasted)  # as advised
    said = line(shell, "resume").text.splitlines()
    assert said[0] == f"resumed run {old.name}" and said[-1] == "%pipeline retry runs it again"


def test_a_resume_says_what_changed_while_the_run_was_stopped(
    shell: InteractiveShell, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_review(shell, workdir)
    line(shell, "run")  # lint and draft ran; waits at approve
    del shell.user_ns["review"]
    (workdir / "docs" / "spec.md").write_text("# Spec\nLogin must work, twice.\n")
    load_review(shell, workdir)
    said = line(shell, "resume").text.splitlines()
    assert said[1] == (
        "  draft: inputs changed since it ran: docs/spec.md; its results may be outdated"
    )
    assert said[2].startswith("pipeline review: waiting")
    del shell.user_ns["review"]
    capsys.readouterr()
    shell.run_cell_magic("pipeline", f"review --workdir {workdir} --resume", REVIEW_DOT)
    printed = capsys.readouterr().out.splitlines()
    assert printed[:1] == said[1:2]


def test_a_run_of_a_cell_is_offered_from_a_file_without_the_final_newline(
    shell: InteractiveShell, workdir: Path
):
    """IPython hands a cell's body with a final newline; a file may end without one. The run
    started from the cell belongs to the file's pipeline all the same, and resumes from it."""
    body = REVIEW_DOT.rstrip("\n")
    first = load_review(shell, workdir, body + "\n")
    line(shell, "run")
    run_id = first.current_run.run_id
    del shell.user_ns["review"]
    path = workdir / "review.dot"
    path.write_text(body)
    again = shell.run_line_magic("pipeline", f"load {path} --workdir {workdir}")
    assert again.view.resume_offer is not None and again.view.resume_offer.run_dir.name == run_id
    assert line(shell, "resume").text.startswith(f"resumed run {run_id}\npipeline review: waiting")
    path.write_text(REVIEW_DOT.replace("Ship the login fix", "Ship the logout fix"))
    del shell.user_ns["review"]
    edited = shell.run_line_magic("pipeline", f"load {path} --workdir {workdir}").view.resume_offer
    assert edited is not None and edited.edited  # offered to carry over, not to resume as is


def test_start_new_declines_the_offer(shell: InteractiveShell, workdir: Path):
    first = load_review(shell, workdir)
    line(shell, "run")
    old_dir = first.current_run.run_dir
    del shell.user_ns["review"]
    again = load_review(shell, workdir)
    assert again.view.resume_offer is not None
    again.start_new()
    assert again.view.resume_offer is None and again.current_run.run_dir != old_dir
    assert again.view.state_name == "paused" or again.view.state_name == "ready"


LONG_GOAL = "a goal of many words " * 1500

WIDE_DOT = f"""digraph wide {{
  goal="{LONG_GOAL}"
  start [shape=Mdiamond]
  a [shape=parallelogram, tool_command="true", source_files="tree/**", freshness=warn]
  b [shape=parallelogram, tool_command="true", source_files="tree/**", freshness=warn]
  c [shape=parallelogram, tool_command="true", source_files="tree/**", freshness=warn]
  done [shape=Msquare]
  start -> a -> b -> c -> done
}}"""


def test_the_offer_is_the_newest_run_as_its_journal_says(shell: InteractiveShell, workdir: Path):
    """Between snapshots only a run's journal grows (a state of 30 KB, as a long goal makes it,
    is not written again for three small steps): the offer must read the journal, or it skips
    the newest run and offers an older one."""
    for i in range(40):
        folder = workdir / "tree" / f"d{i // 50}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"{i}\n")
    older = shell.run_cell_magic("pipeline", f"wide --workdir {workdir}", WIDE_DOT)
    line(shell, "step")
    older_dir = older.current_run.run_dir
    del shell.user_ns["wide"]
    newer = shell.run_cell_magic("pipeline", f"wide --workdir {workdir}", WIDE_DOT)
    assert newer.view.resume_offer is not None and newer.view.resume_offer.run_dir == older_dir
    newer.start_new()
    for _ in range(3):
        line(shell, "step")
    snapshot = json.loads((newer.current_run.run_dir / "checkpoint.json").read_text())
    assert snapshot["completed_nodes"] == []  # the snapshot lags; the journal has the steps
    newer_run = newer.current_run
    del shell.user_ns["wide"]
    again = shell.run_cell_magic("pipeline", f"wide --workdir {workdir}", WIDE_DOT)
    assert again.view.resume_offer is not None
    assert (again.view.resume_offer.run_dir, again.view.resume_offer.where) == (
        newer_run.run_dir,
        "c",
    )
    assert line(shell, "resume").text.startswith(f"resumed run {newer_run.run_id}")


def test_resume_without_an_offer_hints(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    assert line(shell, "resume").text == "nothing to resume: no unfinished run of review on disk"
    line(shell, "run")
    assert line(shell, "resume").text.startswith("waiting at approve: Ship it?")


def driven_from_elsewhere(run_dir: Path) -> bool:
    """Whether another process sees a driver of ``run_dir`` (this one's lock is shared within
    the process, so only another process can tell)."""
    code = (
        "import sys; from pathlib import Path; "
        "from freshness_magic.engine.runlock import live_driver; "
        "print(live_driver(Path(sys.argv[1])) is not None)"
    )
    found = subprocess.run(
        [sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, check=True
    )
    return found.stdout.strip() == "True"


def test_a_replaced_pipeline_refuses_every_action(shell: InteractiveShell, workdir: Path):
    old = load_review(shell, workdir)
    line(shell, "run --to approve")
    old_dir = old.current_run.run_dir
    old_run = old_dir.name
    assert driven_from_elsewhere(old_dir)  # this kernel holds it while it drives
    seen: list[object] = []
    old.live.subscribe(seen.append)
    new = load_review(shell, workdir)
    assert old.view.superseded and not new.view.superseded and seen
    assert not driven_from_elsewhere(old_dir)  # released: the CLI may drive it now
    for action in (old.step, old.run_to, lambda: old.resume("approve", "Y"), old.reset):
        with pytest.raises(UsageError, match=r"^this view was replaced by a newer load of review$"):
            action()
    assert plain(old).splitlines()[-1] == "this view was replaced by a newer load of review"
    assert [row.split()[1] for row in line(shell, "list").text.splitlines()[1:]] == ["review"]
    assert (
        new.view.resume_offer is not None and new.view.resume_offer.where == "approve"
    )  # the old run
    assert line(shell, "step").text.splitlines() == [
        f"note: started a new run; {old_run} stays on disk",
        "step: start -> success; next: lint",
    ]


def test_pipelines_survive_reload_ext(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    line(shell, "step")
    assert pipeline.live.watching
    shell.run_line_magic("reload_ext", "freshness_magic")
    assert line(shell, "list").text.splitlines()[1].split()[:2] == ["*", "review"]
    assert line(shell, "step").text == "step: lint -> success; next: draft"
    assert pipeline.live.watching
    shell.run_line_magic("unload_ext", "freshness_magic")
    assert not pipeline.live.watching  # unloading stops the background work
    shell.run_line_magic("load_ext", "freshness_magic")
    assert pipeline.live.watching


def test_cell_refuses_to_replace_a_variable_that_is_not_a_pipeline(
    shell: InteractiveShell, workdir: Path
):
    shell.user_ns["review"] = [1, 2, 3]
    with pytest.raises(UsageError, match=r"'review' is already a variable \(list\)"):
        load_review(shell, workdir)
    assert shell.user_ns["review"] == [1, 2, 3]
    forced = shell.run_cell_magic("pipeline", f"review --workdir {workdir} --force", REVIEW_DOT)
    assert shell.user_ns["review"] is forced


def test_a_pipeline_name_that_would_hide_a_builtin_or_is_a_keyword_is_refused(
    shell: InteractiveShell, workdir: Path
):
    """``%%pipeline print`` made ``print("hello")`` a TypeError for the rest of the notebook."""
    with pytest.raises(UsageError, match=r"'print' is a Python builtin, which a pipeline"):
        shell.run_cell_magic("pipeline", f"print --workdir {workdir}", REVIEW_DOT)
    assert "print" not in shell.user_ns
    with pytest.raises(UsageError, match=r"pipeline name 'class' is a Python keyword"):
        shell.run_cell_magic("pipeline", f"class --workdir {workdir}", REVIEW_DOT)
    forced = shell.run_cell_magic("pipeline", f"print --workdir {workdir} --force", REVIEW_DOT)
    assert shell.user_ns["print"] is forced
    del shell.user_ns["print"]


def test_load_expands_the_path_and_loads_from_variables(
    shell: InteractiveShell, workdir: Path, tmp_path: Path
):
    folder = tmp_path / "pipes"
    folder.mkdir()
    (folder / "review.dot").write_text(REVIEW_DOT)
    shell.user_ns["pipes"] = str(folder)
    loaded = shell.run_line_magic("pipeline", f"load {{pipes}}/review.dot --workdir {workdir}")
    assert isinstance(loaded, Pipeline) and loaded.graph.path == f"{folder}/review.dot"
    dollar = shell.run_line_magic(
        "pipeline", f"load $pipes/review.dot --name r2 --workdir {workdir}"
    )
    assert dollar.name == "r2"
    shell.user_ns["text"] = REVIEW_DOT
    from_text = shell.run_line_magic("pipeline", f"load --var text --name r3 --workdir {workdir}")
    assert list(from_text.graph.nodes) == ["start", "lint", "draft", "approve", "done"]
    shell.user_ns["graph"] = load_pipeline(REVIEW_DOT)
    from_graph = shell.run_line_magic("pipeline", f"load --var graph --name r4 --workdir {workdir}")
    assert from_graph.graph is shell.user_ns["graph"]
    with pytest.raises(UsageError, match="no variable 'missing'"):
        shell.run_line_magic("pipeline", "load --var missing")
    shell.user_ns["number"] = 3
    with pytest.raises(
        UsageError, match=r"--var number: cannot load a pipeline from a builtins\.int"
    ):
        shell.run_line_magic("pipeline", "load --var number --name r5")


def test_backend_and_executor_options_reach_the_run_opened_next(
    shell: InteractiveShell, magics: PipelineMagics, workdir: Path
):
    shell.run_line_magic("config", 'PipelineMagics.executor = "local"')
    assert magics.executor == "local"
    pipeline = load_review(shell, workdir)
    assert pipeline.live.run_options["executor"] == "local"
    with pytest.raises(UsageError, match="executor 'local-test' is not known"):
        shell.run_line_magic("pipeline", "step --backend simulated --executor local-test")
    assert pipeline.live.run_options == {"executor": "local"}  # a refused spec is not kept
    with pytest.raises(UsageError, match=r"unknown backend 'simulatd' \(did you mean 'simulated'"):
        shell.run_line_magic("pipeline", "step --backend simulatd")
    line(shell, "reset")
    assert pipeline.live.run_options == {"executor": "local"}
    shell.run_line_magic("config", 'PipelineMagics.executor = ""')
    line(shell, "step --backend simulated")
    assert pipeline.live.run_options == {"executor": "local", "backend": "simulated"}
    with pytest.raises(UsageError, match=r"unknown backend 'other'"):  # begun: reopened with it
        shell.run_line_magic("pipeline", "run --backend other")
    assert pipeline.live.run_options == {"executor": "local", "backend": "simulated"}


MODEL_DOT = one_step('prompt="Summarise the change"', node="draft", name="model")
DEAD_BACKEND = f"command:{shlex.quote(sys.executable)} -c 'raise SystemExit(3)'"


def backend_of(pipeline: Pipeline) -> str:
    return str(json.loads((pipeline.current_run.run_dir / "backend.json").read_text())["backend"])


def test_after_a_reset_the_next_step_takes_another_backend_or_executor(
    shell: InteractiveShell, workdir: Path
):
    """A trial: a run with a backend that fails, then reset, then --backend simulated was refused
    with advice to reset (which looped), and the configured backend was ignored."""
    pipeline = shell.run_cell_magic("pipeline", f"model --workdir {workdir}", MODEL_DOT)
    failed = line(shell, f"run --backend {shlex.quote(DEAD_BACKEND)}").text
    assert failed.splitlines()[-1].startswith("run: 2 step(s); failed: ")
    left = line(shell, "reset").text
    assert "stays on disk and %pipeline resume goes back to it" in left  # the failed run
    stepped = line(shell, "step --backend simulated").text.splitlines()
    assert stepped[0].startswith("note: started a new run; ") and stepped[0].endswith(
        " stays on disk"
    )
    assert stepped[1:] == ["step: start -> success; next: draft"]
    assert backend_of(pipeline) == "simulated"
    line(shell, "reset")
    line(shell, "step --executor local")
    assert json.loads((pipeline.current_run.run_dir / "executor.json").read_text()) == {
        "executor": "local"
    }
    assert line(shell, "run").text.splitlines()[-1] == "run: 2 step(s); completed"


def test_runs_that_never_began_leave_no_folder(shell: InteractiveShell, workdir: Path):
    """A trial: every reset (and load) left a folder holding only executor.json."""
    pipeline = shell.run_cell_magic("pipeline", f"model --workdir {workdir}", MODEL_DOT)
    line(shell, "step --backend simulated")
    first = pipeline.current_run.run_dir
    line(shell, "reset")
    line(shell, "reset")
    runs = workdir / ".freshness" / "runs"
    assert [p.name for p in runs.iterdir()] == [first.name]
    line(shell, "step")
    assert sorted(p.name for p in runs.iterdir()) == sorted(
        [first.name, pipeline.current_run.run_dir.name]
    )
    assert backend_of(pipeline) == "simulated"


def test_the_configured_backend_reaches_the_run_a_reset_opened(
    shell: InteractiveShell, workdir: Path
):
    pipeline = shell.run_cell_magic("pipeline", f"model --workdir {workdir}", MODEL_DOT)
    shell.run_cell_magic("node", "done", "pass\n")  # a %%node cell: its own handler registry
    line(shell, f"run --backend {shlex.quote(DEAD_BACKEND)}")
    assert pipeline.view.state_name == "failed"
    line(shell, "reset")
    shell.run_line_magic("config", 'PipelineMagics.backend = "simulated"')
    assert line(shell, "run").text.splitlines()[-1] == "run: 3 step(s); completed"
    assert backend_of(pipeline) == "simulated"


def test_a_run_that_has_begun_goes_on_with_the_backend_an_action_names(
    shell: InteractiveShell, workdir: Path
):
    """It was refused with advice to reset, which lost the run; the CLI's resume --backend
    could do it. The run keeps what ran and remembers the backend it goes on with."""
    pipeline = shell.run_cell_magic("pipeline", f"model --workdir {workdir}", MODEL_DOT)
    line(shell, f"step --backend {shlex.quote(DEAD_BACKEND)}")
    run_dir = pipeline.current_run.run_dir
    assert backend_of(pipeline) == DEAD_BACKEND
    assert line(shell, "step --backend simulated").text.startswith("step: draft -> success")
    assert pipeline.current_run.run_dir == run_dir and pipeline.current_run.completed_nodes == [
        "start",
        "draft",
    ]
    assert backend_of(pipeline) == "simulated"  # a resume from the CLI goes on with it too


def test_an_input_saved_while_idle_turns_its_node_stale(shell: InteractiveShell, workdir: Path):
    pipeline = load_review(shell, workdir)
    line(shell, "run --to approve")
    assert pipeline.live.watching
    updates: list[object] = []
    pipeline.live.subscribe(updates.append)
    (workdir / "src" / "login.py").write_text("def login():\n    return False\n")  # no cell runs
    wait_until(
        lambda: pipeline.view.views()["lint"].state is NodeState.STALE,
        "the watcher marks lint stale",
    )
    assert pipeline.view.views()["lint"].stale is StaleKind.RUN
    assert pipeline.view.views()["draft"].state is NodeState.OUTDATED
    assert pipeline.view.views()["draft"].why == (
        "`draft` read `tool.output` of `lint` (step 2), whose input `src/login.py` changed"
    )
    assert updates
    pipeline.reset()
    assert not pipeline.live.watching  # the run was left; nothing ran since
    line(shell, "step")
    assert pipeline.live.watching  # a new run, watched again
    pipeline.close()
    assert not pipeline.live.watching


def test_why_of_a_gate_waiting_again_names_its_last_visit(shell: InteractiveShell, workdir: Path):
    load_review(shell, workdir)
    line(shell, "run")
    first = line(shell, "why approve").text.splitlines()
    assert first[0] == "approve: waiting" and not any("outcome" in x for x in first)
    line(shell, "resume approve --choice N")  # draft again, then the gate waits again
    again = line(shell, "why approve").text.splitlines()
    assert again[0] == "approve: waiting"
    assert "  outcome of its last visit: success" in again
    line(shell, "resume approve --choice Y")
    assert "  last outcome: success" in line(shell, "why approve").text.splitlines()


def test_a_reset_offers_the_run_it_left_and_resume_goes_back(
    shell: InteractiveShell, workdir: Path
):
    """A stray Reset lost the run's place: it is now offered, as a load offers one on disk."""
    pipeline = load_review(shell, workdir)
    line(shell, "run")
    left = pipeline.current_run.run_dir
    line(shell, "reset")
    banner = pipeline.view.banner()
    assert banner is not None and banner.kind is BannerKind.RESUME and banner.node == "approve"
    assert banner.text == f"an unfinished run of review ({left.name}) waits at approve"
    assert banner.way == "%pipeline resume reopens it, %pipeline reset starts a new one"
    assert banner.full_text == f"{banner.text}: {banner.way}"  # where there are no buttons
    assert pipeline.view.views()["approve"].state is NodeState.PENDING
    back = line(shell, "resume").text.splitlines()
    assert back[0] == f"resumed run {left.name}" and pipeline.current_run.run_dir == left
    assert pipeline.view.pending_gate() is not None
    done = line(shell, "resume approve --choice Y").text.splitlines()
    assert done[-1] == "run: 2 step(s); completed"
    assert line(shell, "reset").text.startswith("reset: a new run starts at the beginning")
    assert pipeline.view.banner() is None  # a completed run is not offered


def test_resume_goes_on_from_where_the_open_run_stopped(shell: InteractiveShell, workdir: Path):
    """A trial: after an interrupt (or run --to), `%pipeline resume` said the unfinished run
    "was started from another text" although it was this very run, and `--choice` without a
    gate was dropped silently."""
    load_review(shell, workdir)
    with pytest.raises(UsageError, match=r"--choice Y answers a waiting gate, and no gate"):
        shell.run_line_magic("pipeline", "resume --choice Y")
    line(shell, "run --to draft")
    went_on = line(shell, "resume").text.splitlines()
    assert went_on[0] == "step: draft -> success; next: approve"
    assert went_on[-1] == "run: 2 step(s); waiting"
    answered = line(shell, "resume --choice Y").text.splitlines()  # the gate that waits
    assert answered[0] == "step: approve -> success; next: done"
    assert line(shell, "resume").text == (
        "nothing to resume: the run of review completed; %pipeline reset starts a new one"
    )
    assert "another text" not in line(shell, "status").text


def test_resume_of_a_failed_run_points_to_retry(shell: InteractiveShell, workdir: Path):
    failing = "digraph boom { start [shape=Mdiamond]; bad [shape=parallelogram, "
    failing += 'tool_command="exit 7"]; done [shape=Msquare]; start -> bad -> done }'
    shell.run_cell_magic("pipeline", f"boom --workdir {workdir}", failing)
    line(shell, "run")
    with pytest.raises(UsageError) as refused:
        shell.run_line_magic("pipeline", "resume")
    assert str(refused.value) == (
        "the run of boom failed at bad: %pipeline retry goes on from there, %pipeline reset "
        "starts a new run"
    )


def test_resume_of_a_paused_run_after_a_restart_goes_on(shell: InteractiveShell, workdir: Path):
    """As the CLI's resume does: the run reopens and goes on to its gate (it only reopened, and
    the user had to guess that `%pipeline run` goes on)."""
    first = load_review(shell, workdir)
    line(shell, "run --to draft")
    run_id = first.current_run.run_id
    del shell.user_ns["review"]
    load_review(shell, workdir)
    lines = line(shell, "resume").text.splitlines()
    assert lines[0] == f"resumed run {run_id}"
    assert "step: draft -> success; next: approve" in lines
    assert lines[-1] == "run: 2 step(s); waiting"


def test_resume_to_a_node_stops_before_it_as_the_command_lines_resume_does(
    shell: InteractiveShell, workdir: Path
):
    """A recovery trial: ``%pipeline resume --to approve`` was refused (unrecognized
    arguments), though ``freshness-magic resume RUN --to approve`` takes it."""
    first = load_review(shell, workdir)
    line(shell, "run --to lint")
    run_id = first.current_run.run_id
    del shell.user_ns["review"]
    again = load_review(shell, workdir)
    lines = line(shell, "resume --to draft").text.splitlines()
    assert lines[0] == f"resumed run {run_id}"
    assert lines[-1] == "run: 1 step(s); paused" and again.current_run.next_node == "draft"
    lines = line(shell, "resume --to approve").text.splitlines()  # the open run goes on
    assert lines[-1] == "run: 1 step(s); paused" and again.current_run.next_node == "approve"
    with pytest.raises(UsageError, match="nowhere"):
        shell.run_line_magic("pipeline", "resume --to nowhere")


def test_the_python_object_answers_status_as_the_magic_does(shell: InteractiveShell, workdir: Path):
    """A trial guessed `review.status()`; it raised AttributeError."""
    pipeline = load_review(shell, workdir)
    line(shell, "run --to draft")
    assert pipeline.status().text == line(shell, "status").text
    assert pipeline.status().text.startswith("pipeline review: paused · next: draft")


def test_a_file_put_where_the_working_directory_goes_after_the_load_is_one_line(
    shell: InteractiveShell, tmp_path: Path
):
    later = tmp_path / "later"  # missing at the load: the first step creates it
    shell.run_cell_magic("pipeline", f"model --workdir {later}", MODEL_DOT)
    later.write_text("precious\n")
    with pytest.raises(UsageError, match=f"^{re.escape(str(later))} is a file, not a folder: "):
        shell.run_line_magic("pipeline", "step")
    assert later.read_text() == "precious\n"


def test_a_tool_a_killed_driver_left_running_is_named_and_a_new_run_stops_it(
    shell: InteractiveShell, workdir: Path
):
    """After a kernel was killed, the offer said only 'paused at work', and Run started a new
    run while the old tool went on to do its work a second time (a JupyterLab trial)."""
    import os
    import signal
    import time

    (workdir / "slow.dot").write_text(SLOW_TOOL)
    driver = subprocess.Popen(
        [sys.executable, "-m", "freshness_magic", "run", "slow.dot"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(
        lambda: (workdir / "pgid.txt").is_file() and (workdir / "pgid.txt").read_text(),
        "the tool starts",
    )
    # the tool may write its file before the driver records its process group: kill after both
    wait_until(
        lambda: any(workdir.glob(".freshness/runs/*/nodes/work/pgid")),
        "the driver records the tool's process group",
    )
    pgid = int((workdir / "pgid.txt").read_text())
    driver.send_signal(signal.SIGKILL)  # as a kernel killed outright
    driver.wait(timeout=30)
    try:
        pipeline = shell.run_cell_magic("pipeline", f"slow --workdir {workdir}", SLOW_TOOL)
        offer = pipeline.view.resume_offer
        assert offer is not None
        assert offer.headline("slow").endswith(
            f"is paused at work; the tool of node 'work' (process group {pgid}) still runs, "
            f"although the process that started it (pid {driver.pid}: the run's driver, or a "
            "cluster worker) is gone; resume stops it first"
        )
        (workdir / "pgid.txt").unlink()
        out = str(shell.run_line_magic("pipeline", "step")).splitlines()
        assert out[1] == (
            f"note: stopped the tool of node 'work' (process group {pgid}) that outlived the "
            f"process that started it (pid {driver.pid})"
        )
        wait_until(lambda: not group_alive(pgid), "the old tool stops")
    finally:
        if group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
    time.sleep(0.2)
    assert not (workdir / "work.log").exists()


def test_a_pipeline_hidden_by_del_is_replaced_too_and_its_view_cannot_act(
    shell: InteractiveShell, workdir: Path
):
    """The human_gates notebook does ``del release`` before loading with ``--resume``: the old
    object lived on in its view, and a click there answered the gate a second time on the run
    the new object had finished (a Notebook 7 trial). A newer load replaces every older object
    of the name, and the engine refuses an older object of one run directory in any case."""
    old = load_review(shell, workdir)
    line(shell, "run --to approve")
    line(shell, "resume approve --choice N")  # back to draft, then waiting at approve again
    line(shell, "run")
    old_view = old.widget
    del shell.user_ns["review"]
    new = shell.run_cell_magic("pipeline", f"review --resume --workdir {workdir}", REVIEW_DOT)
    assert (
        old.view.superseded and old_view.note == "this view was replaced by a newer load of review"
    )
    line(shell, "resume approve --choice Y")
    assert new.view.status_line().startswith("pipeline review: completed")
    run_dir = Path(new.current_run.run_dir)
    journal = (run_dir / "journal.jsonl").read_bytes()
    with pytest.raises(RunError, match="replaced by a newer load of review"):
        old_view.handle({"action": "answer", "node": "approve", "choice": "N", "comment": "x"})
    assert (run_dir / "journal.jsonl").read_bytes() == journal


def test_after_a_restart_the_view_and_status_show_the_offered_run_as_it_waits(
    shell: InteractiveShell, workdir: Path
):
    """Re-loaded after a kernel restart, the view and ``status`` draw the run that waits on disk
    with its real states (what ran, the waiting gate), not a fresh "ready · 0/5 nodes run"; an
    action then reopens that run, and a reset goes back to the start."""
    load_review(shell, workdir)
    line(shell, "run")
    del shell.user_ns["review"]  # a kernel restart
    again = load_review(shell, workdir)
    assert again.live.live_run is None  # nothing opened yet: only drawn from disk
    status = line(shell, "status").text.splitlines()
    assert status[0] == "pipeline review: waiting · waiting at approve · 3/5 nodes run", status
    views = again.view.views()
    assert (
        views["lint"].state is NodeState.SUCCEEDED and views["draft"].state is NodeState.SUCCEEDED
    )
    assert views["approve"].state is NodeState.WAITING and views["done"].state is NodeState.PENDING
    frame = again.view.frame()  # what the widget and the saved notebook draw
    assert (frame.state_name, frame.next_node, frame.nodes_run) == ("waiting", "approve", 3)
    assert frame.gate is None  # the gate's panel comes with Resume, which opens the run
    assert frame.views["approve"].state is NodeState.WAITING
    assert line(shell, "resume approve --choice Y").text.splitlines()[-1].endswith("completed")
    assert again.view.views()["done"].state is NodeState.SUCCEEDED
    del shell.user_ns["review"]
    finished = load_review(shell, workdir)  # a completed run is not offered, nor drawn
    assert line(shell, "status").text.splitlines()[0].startswith("pipeline review: ready")
    assert finished.view.views()["lint"].state is NodeState.PENDING


def test_a_reset_after_a_restart_draws_the_start_again(shell: InteractiveShell, workdir: Path):
    """The offered run drawn after a re-load goes away with a reset: the next action starts a
    new run, and the view says so."""
    load_review(shell, workdir)
    line(shell, "run")
    del shell.user_ns["review"]  # a kernel restart
    again = load_review(shell, workdir)
    assert again.view.views()["approve"].state is NodeState.WAITING
    line(shell, "reset")
    assert line(shell, "status").text.splitlines()[0].startswith("pipeline review: ready")
    assert again.view.views()["lint"].state is NodeState.PENDING


def test_a_run_driven_from_a_cell_says_running_between_its_nodes(
    shell: InteractiveShell, workdir: Path
):
    """Every view update of ``%pipeline run`` says the run is running until it stops (the view
    showed "paused · next: X" between nodes); where it stops it says so: paused, waiting."""
    review = load_review(shell, workdir)
    seen: list[str] = []
    review.live.subscribe(lambda event: seen.append(review.view.status_line()))
    line(shell, "run --to draft")
    assert seen[-1].startswith("pipeline review: paused · next: draft")
    assert any(": running" in said for said in seen[:-1]), seen  # (the first: ready, opening)
    assert not any(": paused" in said for said in seen[:-1]), seen
    seen.clear()
    line(shell, "run")
    assert seen[-1].startswith("pipeline review: waiting"), seen
    assert not any(": paused" in said for said in seen), seen
