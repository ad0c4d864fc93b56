"""``freshness_magic.session`` from a plain script, as a script-writer's trial used it: what the
CLI and the notebook do around a run (validation with every rule, warnings shown, accepting
changed inputs, the run directory checks) is reachable without their internals."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from freshness_magic import engine, session
from freshness_magic.engine import AutoApproveInterviewer, RunState, default_registry
from tests.processes import cli

BLOCKED = """digraph p {
  start [shape=Mdiamond]
  done [shape=Msquare]
  lint [shape=parallelogram, tool_command="cat src/a.txt >> seen.txt",
        source_files="src/a.txt", freshness="block"]
  start -> lint -> done
}
"""


def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.txt").write_text("one\n")
    return tmp_path


def test_open_run_issues_each_warning_once_and_refuses_errors_before_any_folder(
    tmp_path: Path,
) -> None:
    """A node type with no handler ran the simulated model and said nothing."""
    text = (
        'digraph g { start [shape=Mdiamond] greet [type="greeter"] done [shape=Msquare] '
        "start -> greet -> done }"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session.open_run(text, workdir=tmp_path).close()
    shown = [str(w.message) for w in caught if w.category is session.PipelineWarning]
    assert len(shown) == 1 and "type_known" in shown[0] and "greeter" in shown[0]
    assert caught[0].filename == __file__  # from the script's line, not from inside

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session.open_run(text, workdir=tmp_path, warn=False).close()
    assert not caught

    bad = BLOCKED.replace('"block"', '"blok"')
    with pytest.raises(engine.ValidationError, match="blok"):
        session.open_run(bad, workdir=tmp_path / "w")
    assert not (tmp_path / "w").exists()


def test_validate_reports_what_the_cli_reports(tmp_path: Path) -> None:
    text = BLOCKED.replace('source_files="src/a.txt"', 'source_files="src/none.txt"')
    (tmp_path / "p.dot").write_text(text)
    rules = {d.rule for d in session.validate(text, workdir=tmp_path)}
    assert "source_files_exist" in rules
    assert "source_files_exist" not in {d.rule for d in engine.validate(engine.load_pipeline(text))}
    listed = json.loads(cli("validate", "p.dot", "--json", cwd=tmp_path).stdout)
    assert [d["rule"] for d in listed] == [
        d.rule for d in session.validate(tmp_path / "p.dot", workdir=tmp_path)
    ]


def test_a_blocked_node_goes_on_after_accept_changes(tmp_path: Path) -> None:
    workdir = project(tmp_path)
    with session.open_run(BLOCKED, workdir=workdir) as run:
        run.start()  # baselines now
        (workdir / "src/a.txt").write_text("two\n")
        assert session.freshness_report(run).stale_nodes == ["lint"]
        assert run.run().state is RunState.FAILED
        assert session.accept_changes(run, "lint") == {"lint": ["src/a.txt"]}
        assert session.freshness_report(run).all_fresh
        run.retry("lint")
        assert run.run().state is RunState.COMPLETED
    assert (workdir / "seen.txt").read_text() == "two\n"


def test_a_registry_with_an_interviewer_is_refused_not_ignored(tmp_path: Path) -> None:
    """The gate waited: the interviewer given with a registry was dropped without a word."""
    with pytest.raises(engine.RunError, match=r"interviewer= would be ignored.*default_registry"):
        session.open_run(
            BLOCKED,
            workdir=tmp_path,
            registry=default_registry(),
            interviewer=AutoApproveInterviewer(),
        )


def test_resume_run_names_a_file_and_lists_the_runs_of_a_workdir(tmp_path: Path) -> None:
    workdir = project(tmp_path)
    with session.open_run(BLOCKED, workdir=workdir) as run:
        run.run()
    with pytest.raises(engine.CheckpointError, match=r"holds runs, not one run: .*\(completed\)"):
        session.resume_run(workdir)
    with pytest.raises(engine.CheckpointError, match="is a file, not a run directory"):
        session.resume_run(workdir / "src/a.txt")


def test_the_engine_exports_the_errors_a_script_catches() -> None:
    from freshness_magic.engine.runlock import RunBusyError
    from freshness_magic.errors import FreshnessMagicError, ParseError

    assert engine.ParseError is ParseError and engine.RunBusyError is RunBusyError
    assert all(
        issubclass(getattr(engine, name), FreshnessMagicError)
        for name in engine.__all__
        if name.endswith("Error")
    )
    with pytest.raises(engine.ParseError, match=r"^<string>:1:15: '->' must be followed by"):
        engine.load_pipeline("digraph g { a -> }")
