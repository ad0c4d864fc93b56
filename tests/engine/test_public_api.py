"""``freshness_magic.engine`` and ``freshness_magic.session`` are what scripts import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import freshness_magic.engine as engine
import freshness_magic.session as session


def test_every_public_name_resolves() -> None:
    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    for name in session.__all__:
        assert callable(getattr(session, name)), name


def test_a_script_runs_a_pipeline_through_the_public_api_only(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        from freshness_magic.engine import (
            QueueInterviewer, RunState, StageStatus, default_registry, load_pipeline, validate,
        )
        from freshness_magic.session import open_run

        graph = load_pipeline('''digraph p {
          start [shape=Mdiamond]
          draft [prompt="Draft $goal"]
          ok [shape=hexagon, label="Ship?"]
          done [shape=Msquare]
          start -> draft -> ok
          ok -> done [label="[Y] Yes"]
          ok -> draft [label="[N] No"]
        }''')
        assert not [d for d in validate(graph) if d.severity.value == "error"]
        run = open_run(graph, workdir=".", interviewer=QueueInterviewer(["Y"]))
        result = run.run()
        assert result.state is RunState.COMPLETED, result.summary()
        assert result.node_outcomes["draft"].status is StageStatus.SUCCESS
        print(result.summary())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed"
