"""One derivation of the marks: the engine's, the notebook's view model and the command line's
``status --json`` and ``why`` give the same stale and outdated nodes for the same run."""

from __future__ import annotations

import json
from pathlib import Path

from freshness_magic.engine.events import Event, EventType
from freshness_magic.engine.marks import MarkKind
from freshness_magic.freshness.extension import run_marks
from freshness_magic.session import open_run, resume_run
from freshness_magic.views.marks import freshness_of
from freshness_magic.views.model import RunSnapshot, ViewModel
from freshness_magic.views.state import NodeState
from tests.freshness.test_trace_marks import docs_tree
from tests.processes import cli

EXPECTED = ({"cli_docs"}, {"docs_join", "summary"})


def test_the_view_model_and_the_command_line_give_the_engine_s_marks(tmp_path: Path) -> None:
    run = open_run(docs_tree(tmp_path), workdir=tmp_path)
    run.run()
    run.answer("docs_gate", "F")  # a loop pass first: it must mark nothing by itself
    run.run()
    assert run.pending_gate is not None
    run_dir = run.run_dir
    run.close()
    (tmp_path / "docs" / "cli.md").write_text("cli v2\n")

    live = resume_run(run_dir)
    marks = run_marks(live)
    engine = (
        {n for n, m in marks.items() if m.kind is MarkKind.STALE},
        {n for n, m in marks.items() if m.kind is MarkKind.OUTDATED},
    )
    assert engine == EXPECTED
    model = ViewModel(live.graph)
    model.publish(RunSnapshot.of(live), *freshness_of(live))
    views = model.views()
    notebook = (
        {n for n, v in views.items() if v.state is NodeState.STALE},
        {n for n, v in views.items() if v.state is NodeState.OUTDATED},
    )
    assert notebook == EXPECTED
    chain = views["docs_join"].why
    live.close()

    status = json.loads(cli("status", str(run_dir), "--json", cwd=tmp_path).stdout)
    states = {n: v["state"] for n, v in status["nodes"].items()}
    command_line = (
        {n for n, s in states.items() if s == "stale"},
        {n for n, s in states.items() if s == "outdated"},
    )
    assert command_line == EXPECTED
    assert set(status["outdated_nodes"]) == EXPECTED[1]
    assert status["nodes"]["docs_join"]["why"] == chain
    checked = cli("check", str(run_dir), "--json", cwd=tmp_path)
    assert checked.returncode == 1
    found = json.loads(checked.stdout)
    assert found["stale_nodes"] == ["cli_docs"]
    assert found["outdated"] == {
        "docs_join": chain,
        "summary": status["nodes"]["summary"]["why"],
    }
    text = cli("check", str(run_dir), cwd=tmp_path).stdout
    assert f"outdated: docs_join: {chain}" in text
    said = cli("why", str(run_dir), "docs_join", cwd=tmp_path).stdout.splitlines()
    assert said[:2] == ["docs_join: outdated", f"  {chain}"]
    assert chain.startswith("`docs_join` read the result of `cli_docs` (step ")
    assert chain.endswith("), whose input `docs/cli.md` changed")


def test_the_view_model_s_marks_follow_each_change_of_freshness_and_events_keep_them(
    tmp_path: Path,
) -> None:
    run = open_run(docs_tree(tmp_path), workdir=tmp_path)
    run.run()
    run_dir = run.run_dir
    run.close()
    (tmp_path / "docs" / "cli.md").write_text("cli v2\n")
    live = resume_run(run_dir)
    stale, blocked = freshness_of(live)
    snapshot = RunSnapshot.of(live)
    live.close()

    def outdated(model: ViewModel) -> set[str]:
        return {n for n, v in model.views().items() if v.state is NodeState.OUTDATED}

    model = ViewModel(live.graph)
    model.publish(snapshot, stale, blocked)
    assert outdated(model) == EXPECTED[1]
    # an event folded within a step shows the same traces: the marks stay
    model.fold(Event(EventType.STAGE_STARTED, "run", 1, "", "docs_join"))
    assert outdated(model) == EXPECTED[1] - {"docs_join"}  # it runs now
    model.publish(snapshot, stale, blocked)
    assert outdated(model) == EXPECTED[1]
    # the same traces with the change accepted: nothing is outdated any more, then again
    model.publish(snapshot, {}, frozenset())
    assert outdated(model) == set()
    model.publish(snapshot, stale, blocked)
    assert outdated(model) == EXPECTED[1]
