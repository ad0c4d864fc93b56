"""``freshness_magic.Pipeline``: the magics' actions from plain Python, with no IPython shell.

In-process tests drive a real run in a temporary work directory with the same actions as the
``%pipeline`` magics (step, run, run_to, resume, retry, accept, why, cond, status, evidence,
stop); one end-to-end test runs a script with ``python script.py`` and checks that nothing
of IPython is imported until the widget is asked for. The object ``%%pipeline`` binds is an
instance of the same class.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from IPython.core.error import UsageError

import freshness_magic
from freshness_magic.errors import FreshnessMagicError, RunError, ValidationError

REVIEW = """digraph review {
  graph [goal="Ship the login fix"]
  start   [shape=Mdiamond]
  check   [shape=parallelogram, tool_command="test -f ok.txt"]
  draft   [prompt="Summarise the change for $goal", source_files="docs/spec.md", freshness="warn"]
  approve [shape=hexagon, label="Ship it?"]
  done    [shape=Msquare]
  start -> check -> draft -> approve
  approve -> done  [label="[Y] Yes"]
  approve -> draft [label="[N] No, redo"]
}
"""


@pytest.fixture(autouse=True)
def _no_shell() -> None:
    """As in a script: no IPython shell in the process (a test before may have left one, and a
    pipeline made where a shell runs says the magics)."""
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()


def _workdir(root: Path) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "spec.md").write_text("the spec\n")
    return root


def test_the_actions_of_the_magics_from_python(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path / "work")
    pipeline = freshness_magic.Pipeline(REVIEW, workdir=workdir, name="review")
    assert pipeline.name == "review" and pipeline.view.state_name == "ready"
    assert pipeline.step().text.startswith("step: start -> success")
    failed = pipeline.run()
    assert "check" in failed.text and pipeline.view.state_name == "failed"
    assert pipeline.why("check").text.splitlines()[0] == "check: failed"
    (workdir / "ok.txt").write_text("ok\n")
    retried = pipeline.retry()
    assert retried.text.splitlines()[-1] == "run: 3 step(s); waiting"
    assert pipeline.view.pending_gate() is not None
    said = pipeline.cond("outcom=success", "draft").text
    assert said.splitlines()[:2] == ["in the context after draft ran (step 4)", "result: false"]
    assert "warning: key `outcom` looks like a typo of `outcome`" in said
    assert "edge from draft: -> approve" in said
    (workdir / "docs" / "spec.md").write_text("the spec, changed\n")
    pipeline.live.refresh_freshness()
    assert pipeline.view.views()["draft"].state.value == "stale"
    assert pipeline.accept("draft").text == "accepted current inputs of draft: docs/spec.md"
    assert pipeline.stop().text == "nothing to stop: no step or run of review is running"
    answered = pipeline.resume("approve", "Y")
    assert answered.text.splitlines()[-1] == "run: 2 step(s); completed"
    status = pipeline.status().text
    assert status.splitlines()[0].startswith("pipeline review: completed")
    records = pipeline.evidence("draft")
    assert "draft" in records.text and len(records.data) == 1
    assert pipeline.run_to().text == "run completed; nothing to do: review.reset() starts a new run"


def test_outside_ipython_the_hints_name_the_objects_methods(tmp_path: Path) -> None:
    """A script has no magics: each line to paste is a call of the pipeline object."""
    workdir = _workdir(tmp_path / "work")
    (workdir / "ok.txt").write_text("ok\n")
    pipeline = freshness_magic.Pipeline(REVIEW, workdir=workdir, name="review")
    waiting = pipeline.run().text
    assert '  answer with: review.resume("approve", choice="<key>"[, comment="TEXT"])' in waiting
    why = pipeline.why("approve").text
    assert '[Y] Yes -> done:        review.resume("approve", choice="Y")' in why
    assert '[N] No, redo -> draft:  review.resume("approve", choice="N")' in why
    assert "%pipeline" not in waiting + why
    (workdir / "docs" / "spec.md").write_text("the spec, changed\n")
    pipeline.live.refresh_freshness()
    said = pipeline.why("draft").text
    assert 'review.accept("draft")' in said and "%pipeline" not in said
    unnamed = freshness_magic.Pipeline(REVIEW, workdir=workdir, name="two words")
    offered = str(_refusal(unnamed.retry))  # the run above waits on disk: it is offered
    assert offered.endswith("pipeline.resume() reopens it, pipeline.reset() starts a new one")


def _refusal(action: object) -> RunError:
    with pytest.raises(RunError) as refused:
        action()  # type: ignore[operator]
    return refused.value


def test_in_ipython_a_pipeline_made_in_python_says_the_magics(tmp_path: Path) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        assert shell is not None
        workdir = _workdir(tmp_path / "work")
        (workdir / "ok.txt").write_text("ok\n")
        pipeline = freshness_magic.Pipeline(REVIEW, workdir=workdir, name="review")
        waiting = pipeline.run().text
        assert "  answer with: %pipeline resume approve --choice <key> [--comment TEXT]" in waiting
        pipeline.close()
    finally:
        InteractiveShell.clear_instance()


def test_errors_outside_ipython_are_the_package_errors_not_usage_errors(tmp_path: Path) -> None:
    pipeline = freshness_magic.Pipeline(REVIEW, workdir=_workdir(tmp_path / "work"))
    assert pipeline.name == "review"  # the graph's name by default
    with pytest.raises(RunError, match=r"no node 'drafts' \(did you mean 'draft'\?\)") as caught:
        pipeline.why("drafts")
    assert not isinstance(caught.value, UsageError)
    with pytest.raises(
        ValidationError, match="pipeline broken did not load: 2 validation errors to fix"
    ):
        freshness_magic.Pipeline("digraph broken { a -> b }", workdir=tmp_path)
    with pytest.raises(FreshnessMagicError, match="no such pipeline file"):
        freshness_magic.Pipeline(tmp_path / "missing.dot", workdir=tmp_path)


def test_a_pipeline_loads_from_a_file_and_offers_its_unfinished_run(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path / "work")
    (workdir / "ok.txt").write_text("ok\n")
    source = workdir / "review.dot"
    source.write_text(REVIEW)
    first = freshness_magic.Pipeline(source, workdir=workdir)
    assert first.run_to("approve").text.splitlines()[-1] == "run: 3 step(s); paused"
    first.close()
    first.current_run.close()
    again = freshness_magic.Pipeline(str(source), workdir=workdir)
    assert again.view.resume_offer is not None
    assert again.resume().text.splitlines()[0].startswith("resumed run ")
    assert again.view.state_name == "waiting"


def test_the_object_a_pipeline_cell_binds_is_a_pipeline(tmp_path: Path) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "freshness_magic")
        workdir = _workdir(tmp_path / "work")
        loaded = shell.run_cell_magic("pipeline", f"review --workdir {workdir}", REVIEW)
        assert isinstance(loaded, freshness_magic.Pipeline)
        assert shell.user_ns["review"] is loaded
        with pytest.raises(UsageError, match=r"no node 'drafts' \(did you mean 'draft'\?\)"):
            shell.run_line_magic("pipeline", "why drafts")
    finally:
        shell.run_line_magic("unload_ext", "freshness_magic")
        InteractiveShell.clear_instance()


SCRIPT = """
import sys
import freshness_magic

pipeline = freshness_magic.Pipeline("review.dot", workdir=".")
print(pipeline.run_to("approve").text.splitlines()[-1])
print(pipeline.resume("approve", "Y").text.splitlines()[-1])
print(pipeline.status().text.splitlines()[0])
print(pipeline.cond("outcome=success", "approve").text.splitlines()[-1])
print("ipython loaded:", any(m.split(".")[0] == "IPython" for m in sys.modules))
widget = pipeline.widget
print(type(widget).__name__, sorted(widget.graph["nodes"]))
"""


def test_a_plain_script_drives_a_pipeline_to_the_end(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path)
    (workdir / "ok.txt").write_text("ok\n")
    (workdir / "review.dot").write_text(REVIEW)
    (workdir / "script.py").write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run(
        [sys.executable, "script.py"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "run: 3 step(s); paused",
        "run: 2 step(s); completed",
        "pipeline review: completed · 5/5 nodes run",
        "edge from approve: -> done (preferred label '[Y] Yes' matched edge label '[Y] Yes')",
        "ipython loaded: False",
        "PipelineWidget ['approve', 'check', 'done', 'draft', 'start']",
    ]


def test_a_re_check_asked_for_during_another_looks_again_after_it(tmp_path: Path) -> None:
    """The watcher's re-check began before a cell wrote its last file: the re-check at the
    cell's end waits for it and looks again, so the change shows when the cell ends."""
    import threading

    workdir = _workdir(tmp_path / "work")
    (workdir / "ok.txt").write_text("ok\n")
    pipeline = freshness_magic.Pipeline(REVIEW, workdir=workdir, name="review")
    pipeline.run()
    live = pipeline.live
    publish = live.publish
    checked, release = threading.Event(), threading.Event()

    def slow_publish() -> None:
        publish()  # looked before the file below was written
        if threading.current_thread() is not threading.main_thread():
            checked.set()
            release.wait(30)

    live.publish = slow_publish  # type: ignore[method-assign]
    watcher = threading.Thread(target=live.refresh_freshness)
    watcher.start()
    try:
        assert checked.wait(30)
        (workdir / "docs" / "spec.md").write_text("the spec, changed\n")
        threading.Timer(0.2, release.set).start()
        live.refresh_freshness()
        assert pipeline.view.views()["draft"].state.value == "stale"
    finally:
        release.set()
        watcher.join(30)
        pipeline.close()
