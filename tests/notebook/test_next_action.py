"""The text says what to do next: the status line counts stale and outdated nodes, a waiting
gate names the changed nodes upstream of it, ``why`` ends with the lines that answer a gate or
with what ``accept`` would do, and a replaced pipeline's status line says it was replaced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from tests.notebook.conftest import REVIEW_DOT, load_review

DEFAULTED = REVIEW_DOT.replace('label="Ship it?"', 'label="Ship it?", human.default_choice="Y"')


def line(shell: InteractiveShell, text: str) -> Any:
    return shell.run_line_magic("pipeline", text)


def _waiting_with_lint_changed(shell: InteractiveShell, workdir: Path) -> Any:
    """The review pipeline waiting at approve after lint's input changed since it ran."""
    pipeline = load_review(shell, workdir, DEFAULTED)
    line(shell, "run")
    (workdir / "src" / "login.py").write_text("def login():\n    return False\n")
    return pipeline


def test_the_status_line_counts_stale_and_outdated_nodes(
    shell: InteractiveShell, workdir: Path
) -> None:
    pipeline = _waiting_with_lint_changed(shell, workdir)
    status = line(shell, "status").text.splitlines()
    assert status[0] == (
        "pipeline review: waiting · waiting at approve · 3/5 nodes run · 1 stale, 1 outdated"
    )
    assert pipeline.view.status_line() == status[0]  # the line the widget's header shows
    assert status[-1] == (
        "note: upstream of approve: lint stale, 1 outdated (inputs changed; %pipeline why lint)"
    )
    line(shell, "accept")
    status = line(shell, "status").text.splitlines()
    assert status[0] == "pipeline review: waiting · waiting at approve · 3/5 nodes run"
    assert not any(row.startswith("note:") for row in status)


def test_why_a_waiting_gate_ends_with_the_lines_that_answer_it(
    shell: InteractiveShell, workdir: Path
) -> None:
    _waiting_with_lint_changed(shell, workdir)
    said = line(shell, "why approve").text.splitlines()
    assert said[0] == "approve: waiting"
    assert said[-4:] == [
        "  note: upstream of approve: lint stale, 1 outdated (inputs changed; %pipeline why lint)",
        "  answer with one of (without --choice: the default, [Y] Yes):",
        "    [Y] Yes -> done:        %pipeline resume approve --choice Y",
        "    [N] No, redo -> draft:  %pipeline resume approve --choice N",
    ]


def test_why_a_node_stale_since_it_ran_says_what_accept_does(
    shell: InteractiveShell, workdir: Path
) -> None:
    _waiting_with_lint_changed(shell, workdir)
    said = line(shell, "why lint").text.splitlines()
    assert said[0] == "lint: stale(run)"
    assert said[-4:] == [
        "  next: take its current inputs as its new baseline without running it again (it is no "
        "longer stale, nor the 1 node after it shown outdated); without that, freshness=block "
        "holds it back if the run reaches it again, until accepted or the files are restored:",
        "      %pipeline accept lint",
        "  or: run it again on the current files, and go on from it (gate 'approve' is asked "
        "again when the run gets back to it):",
        "      %pipeline accept lint, then %pipeline retry lint",
    ]
    said = line(shell, "why draft").text.splitlines()
    assert said[0] == "draft: outdated"
    assert said[-2:] == [
        "  next: clear this mark without running anything again:",
        "      %pipeline accept lint",
    ]


TWO_INPUTS_DOT = """digraph two {
  start  [shape=Mdiamond]
  prep   [shape=parallelogram, tool_command="true", source_files="src/**/*.py", freshness="warn"]
  spec   [prompt="Read the spec", source_files="docs/spec.md", freshness="warn"]
  report [prompt="Report on {tool.output} and {last_response}"]
  done   [shape=Msquare]
  start -> prep -> spec -> report -> done
}
"""


def test_why_an_outdated_node_with_two_changed_upstream_nodes_accepts_both(
    shell: InteractiveShell, workdir: Path
) -> None:
    """A trial: ``why`` offered ``%pipeline accept prep`` alone; after it the node was still
    outdated, because spec's inputs had changed too."""
    shell.run_cell_magic("pipeline", f"two --workdir {workdir}", TWO_INPUTS_DOT)
    line(shell, "run")
    (workdir / "src" / "login.py").write_text("changed\n")
    (workdir / "docs" / "spec.md").write_text("changed\n")
    said = line(shell, "why report").text.splitlines()
    assert said[:2] == [
        "report: outdated",
        "  `report` read `tool.output` of `prep` (step 2), whose input `src/login.py` changed; "
        "it also rests on `spec`, changed too",
    ]
    assert said[-2:] == [
        "  next: clear this mark without running anything again (accept all 2: each of them "
        "keeps it outdated):",
        "      %pipeline accept prep spec",
    ]
    accept_prep = line(shell, "why prep").text.splitlines()[-4]  # clears report's mark alone
    assert "again (it is no longer stale); if the run" in accept_prep
    shell.run_line_magic("pipeline", said[-1].strip().removeprefix("%pipeline "))
    status = line(shell, "status").text.splitlines()
    assert status[0] == "pipeline two: completed · 5/5 nodes run"
    assert line(shell, "why report").text.splitlines()[0] == "report: succeeded"
    with pytest.raises(UsageError, match="%pipeline accept: no node 'nope'"):
        line(shell, "accept prep nope")


def test_why_a_node_stale_since_its_baseline_says_what_accept_does(
    shell: InteractiveShell, workdir: Path
) -> None:
    load_review(shell, workdir)
    line(shell, "step")  # start ran; lint and draft have their baselines
    (workdir / "src" / "login.py").write_text("changed\n")
    (workdir / "docs" / "spec.md").write_text("changed\n")
    said = line(shell, "why lint").text.splitlines()
    assert said[-2:] == [
        "  next: take its current inputs as its new baseline, so it is no longer stale; without "
        "that, freshness=block holds it back when the run reaches it, until accepted or the "
        "files are restored:",
        "      %pipeline accept lint",
    ]
    said = line(shell, "why draft").text.splitlines()
    assert said[0] == "draft: stale(baseline)"
    assert said[-2].endswith(
        "so it is no longer stale; without that, it runs anyway with a warning (freshness=warn):"
    )
    line(shell, "step")  # lint is held back: its own notes say what to do, nothing is added
    said = line(shell, "why lint").text
    assert said.count("%pipeline accept lint") == 1


def test_a_replaced_pipeline_says_so_in_its_status_line(
    shell: InteractiveShell, workdir: Path
) -> None:
    old = load_review(shell, workdir)
    line(shell, "run")
    new = load_review(shell, workdir, REVIEW_DOT.replace("Ship it?", "Ship the fix?"))
    assert old.view.state_name == "superseded"
    assert old.view.status_line() == (
        "pipeline review: superseded by a newer load; waiting at approve · 3/5 nodes run"
    )
    assert (
        old.view.status_text().splitlines()[-1]
        == "this view was replaced by a newer load of review"
    )
    assert "--choice" not in old.why("approve").text  # its answers would go nowhere
    assert new.view.status_line() == "pipeline review: ready · next: start · 0/5 nodes run"
    fresh = load_review(shell, workdir)
    assert new.view.status_line() == "pipeline review: superseded by a newer load · 0/5 nodes run"
    assert fresh.view.state_name == "waiting"  # the run of this text on disk, drawn as it waits


def test_the_waiting_text_notes_changed_nodes_upstream_of_the_gate(
    shell: InteractiveShell, workdir: Path
) -> None:
    """``resume`` without a choice (and a step that stops at the gate) prints the waiting text
    with the same note ``status`` gives: an answer should not be given on changed inputs
    unawares."""
    _waiting_with_lint_changed(shell, workdir)
    shell.run_cell("edited = True")  # the post_execute hook re-checks, as after any cell
    note = (
        "  note: upstream of approve: lint stale, 1 outdated (inputs changed; %pipeline why lint)"
    )
    said = line(shell, "resume").text.splitlines()
    assert said[0].startswith("waiting at approve: Ship it?") and said[-1] == note
    line(shell, "resume approve --choice N")
    line(shell, "accept")
    (workdir / "docs" / "spec.md").write_text("# Spec\nLogin must fail.\n")
    shell.run_cell("edited = True")
    said = line(shell, "run").text.splitlines()
    assert said[-1] == "run: 0 step(s); waiting", said
    notes = [row for row in said if row.startswith("  note: upstream of approve: ")]
    assert len(notes) == 1 and "draft stale" in notes[0], said


def test_why_a_node_stale_since_it_ran_offers_to_run_it_again_when_no_gate_waits(
    shell: InteractiveShell, workdir: Path
) -> None:
    """A trial: `why` offered only accept; running the node again on the new files (the other
    fix) was never mentioned."""
    load_review(shell, workdir)
    line(shell, "run --to draft")  # lint ran; the run is paused, no gate waits
    (workdir / "src" / "login.py").write_text("changed\n")
    said = line(shell, "why lint").text.splitlines()
    assert said[-2:] == [  # lint is freshness=block: a retry alone would be held back
        "  or: run it again on the current files, and go on from it:",
        "      %pipeline accept lint, then %pipeline retry lint",
    ]
    line(shell, "accept lint")
    assert line(shell, "retry lint").text.splitlines()[0] == "step: lint -> success; next: draft"
    assert line(shell, "why lint").text.splitlines()[0] == "lint: succeeded"
    load_review(shell, workdir)
    line(shell, "run --to approve")  # draft (freshness=warn) ran; paused before the gate
    (workdir / "docs" / "spec.md").write_text("changed\n")
    said = line(shell, "why draft").text.splitlines()
    assert said[-2:] == [
        "  or: run it again on the current files, and go on from it:",
        "      %pipeline retry draft",
    ]


def test_the_gate_panel_carries_the_note_on_changed_inputs_upstream(
    shell: InteractiveShell, workdir: Path
) -> None:
    """A trial approved a gate from the view's panel unaware: only the magic's status said."""
    from freshness_magic.views.wire import gate_value

    pipeline = _waiting_with_lint_changed(shell, workdir)
    line(shell, "status")  # the magic re-checks freshness, as the view's input watcher does
    assert gate_value(pipeline.view.frame())["note"] == (
        "note: upstream of approve: lint stale, 1 outdated (inputs changed; %pipeline why lint)"
    )
    line(shell, "accept lint")
    assert gate_value(pipeline.view.frame())["note"] == ""


def test_the_gate_panel_says_which_time_the_gate_asks(
    shell: InteractiveShell, workdir: Path
) -> None:
    """A trial answered No, the loop came back to the gate at once, and the panel looked the
    same: nothing seemed to have happened."""
    from freshness_magic.views.wire import gate_value

    pipeline = load_review(shell, workdir)
    line(shell, "run")
    assert gate_value(pipeline.view.frame())["visit"] == 1
    line(shell, "resume approve --choice N")  # draft again, then the gate asks again
    assert gate_value(pipeline.view.frame())["visit"] == 2


PAST_THE_GATE = """digraph past {
  start [shape=Mdiamond]
  prep  [shape=parallelogram, tool_command="true"]
  gate  [shape=hexagon, label="Go?"]
  build [shape=parallelogram, tool_command="true", source_files="b.txt", freshness="warn"]
  check [shape=parallelogram, tool_command="test -f ok.flag"]
  done  [shape=Msquare]
  start -> prep -> gate
  gate -> build [label="[Y] Yes"]
  build -> check -> done
}
"""


def test_why_offers_no_retry_for_a_stale_node_past_the_waiting_gate(
    shell: InteractiveShell, workdir: Path
) -> None:
    """A retry at a waiting gate runs only a node before it: `why` must not offer one the
    engine refuses (build ran, the run failed after it, and a retry of prep came back to the
    gate)."""
    (workdir / "b.txt").write_text("one\n")
    shell.run_cell_magic("pipeline", f"past --workdir {workdir}", PAST_THE_GATE)
    line(shell, "run")
    assert (
        line(shell, "resume gate --choice Y")
        .text.splitlines()[-1]
        .startswith("run: 3 step(s); failed")
    )
    line(shell, "retry prep")  # back at the gate, build's result still on record
    (workdir / "b.txt").write_text("two\n")
    said = line(shell, "why build").text.splitlines()
    assert said[0] == "build: stale(run)"
    assert said[-1] == "      %pipeline accept build"
    assert not any("retry" in row for row in said)
