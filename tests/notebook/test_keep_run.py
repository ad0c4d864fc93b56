"""Edit the pipeline, keep the run, in a notebook: re-running ``%%pipeline NAME`` with an edited
DOT offers to carry the run over (the banner's Keep the run, ``%pipeline keep``), or does it at
once with ``--keep-run``; a refused edit leaves the run directory as it was. ``--reuse`` on the
stepping magics takes unchanged nodes from earlier executions."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from freshness_magic.views.state import BannerKind
from tests.notebook.conftest import REVIEW_DOT, load_review

EDITED = REVIEW_DOT.replace("Summarise the change for $goal", "Summarise the change briefly")


def waiting(shell: InteractiveShell, workdir: Path) -> Path:
    pipeline = load_review(shell, workdir)
    shell.run_line_magic("pipeline", "run")
    assert pipeline.current_run.state.value == "waiting"
    return Path(pipeline.current_run.run_dir)


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_keep_run_carries_the_live_run_over_to_the_edited_cell(
    shell: InteractiveShell, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = waiting(shell, workdir)
    pipeline = shell.run_cell_magic("pipeline", f"review --workdir {workdir} --keep-run", EDITED)
    said = capsys.readouterr().out
    assert f"kept run {run_dir.name}" in said
    assert "edited: draft (its definition changed: prompt)" in said
    assert Path(pipeline.current_run.run_dir) == run_dir
    assert pipeline.current_run.state.value == "waiting"
    assert set(pipeline.view.outcomes()) >= {"start", "lint", "draft"}
    assert pipeline.current_run.graph.nodes["draft"].prompt.startswith(
        "Summarise the change briefly"
    )
    result = shell.run_line_magic("pipeline", "resume approve --choice Y")
    assert pipeline.current_run.state.value == "completed", result.text


def test_an_edited_reload_offers_the_run_and_the_banner_keeps_it(
    shell: InteractiveShell, workdir: Path
) -> None:
    run_dir = waiting(shell, workdir)
    pipeline = load_review(shell, workdir, EDITED)
    banner = pipeline.view.banner()
    assert banner is not None and banner.kind is BannerKind.KEEP_RUN
    assert "%pipeline keep" in banner.full_text
    result = shell.run_line_magic("pipeline", "keep")
    assert f"kept run {run_dir.name}" in result.text
    assert pipeline.current_run.state.value == "waiting"


def test_a_refused_edit_leaves_the_run_as_it_was(shell: InteractiveShell, workdir: Path) -> None:
    run_dir = waiting(shell, workdir)
    shell.run_line_magic("pipeline", "reset")
    before = tree(run_dir)
    gone = REVIEW_DOT.replace('  approve [shape=hexagon, label="Ship it?"]\n', "").replace(
        "start -> lint -> draft -> approve\n"
        '  approve -> done  [label="[Y] Yes"]\n'
        '  approve -> draft [label="[N] No, redo"]\n',
        'start -> lint -> draft\n  draft -> done [condition="outcome=fail"]\n',
    )
    with pytest.raises(UsageError, match="'approve' is not in the edited pipeline"):
        shell.run_cell_magic("pipeline", f"review --workdir {workdir} --keep-run", gone)
    after = tree(run_dir)
    assert after == before


def test_reuse_on_a_stepping_magic_takes_unchanged_nodes(
    shell: InteractiveShell, workdir: Path
) -> None:
    waiting(shell, workdir)
    shell.run_line_magic("pipeline", "resume approve --choice Y")
    shell.run_line_magic("pipeline", "reset")
    result = shell.run_line_magic("pipeline", "run --reuse")
    pipeline = shell.user_ns["review"]
    assert "draft" in pipeline.view.outcomes()
    assert pipeline.view.outcomes()["draft"].reused_from is not None, result.text
    status = shell.run_line_magic("pipeline", "status")
    assert "reused (from run" in status.text
