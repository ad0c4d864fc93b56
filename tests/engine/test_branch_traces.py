"""A parallel node whose driver was killed after some branches ended keeps those branches'
traces: the resumed run has the traces of an uninterrupted one, the fan-in reads a kept
branch's result from that branch, and a changed input of the kept branch marks exactly the
branch (stale) and the readers of its result (outdated), in the engine and on the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

from freshness_magic.engine.checkpoint import load_checkpoint
from freshness_magic.engine.marks import MarkKind
from freshness_magic.engine.trace import Trace
from freshness_magic.freshness.extension import run_marks
from freshness_magic.session import resume_run
from tests.engine.runkit import trace_shape
from tests.processes import cli, killed_after_quick

THREE = """digraph three {
  start   [shape=Mdiamond]
  fan     [shape=component, max_parallel=1]
  quick   [shape=parallelogram, tool_command="cat docs/quick.md", source_files="docs/quick.md",
           freshness="warn"]
  slow    [shape=parallelogram, source_files="docs/slow.md", freshness="warn",
           tool_command="cat docs/slow.md; echo slow >> slow.txt; test -f go || exec sleep 60"]
  other   [shape=parallelogram, tool_command="cat docs/other.md", source_files="docs/other.md",
           freshness="warn"]
  join    [shape=tripleoctagon]
  summary [prompt="Summarise {parallel.fan_in.best_id}"]
  done    [shape=Msquare]
  start -> fan
  fan -> quick -> join
  fan -> slow -> join
  fan -> other -> join
  join -> summary -> done
}
"""
"""One branch at a time, in declaration order: ``quick`` ends, then ``slow`` waits for ``go``
while the driver is killed (one of three branches ended)."""


def tree(folder: Path) -> Path:
    (folder / "docs").mkdir(parents=True)
    for name in ("quick", "slow", "other"):
        (folder / "docs" / f"{name}.md").write_text(f"{name} v1\n")
    (folder / "p.dot").write_text(THREE)
    return folder


def traces_of(run_dir: Path) -> list[Trace]:
    data, _ = load_checkpoint(run_dir)
    return [Trace.from_dict(t, data["run_id"]) for t in data["traces"]]


def test_a_killed_parallel_node_keeps_its_ended_branch_s_trace_and_marks_follow_it(
    tmp_path: Path,
) -> None:
    reference = tree(tmp_path / "reference")
    (reference / "go").touch()
    assert cli("run", "p.dot", cwd=reference).returncode == 0
    (reference_dir,) = (reference / ".freshness" / "runs").iterdir()
    uninterrupted = traces_of(reference_dir)

    folder = tree(tmp_path / "killed")
    run_dir = killed_after_quick(folder)
    before = load_checkpoint(run_dir)[0]
    assert "quick" in before["completed_nodes"] and "slow" not in before["completed_nodes"]
    (folder / "go").touch()
    resumed = cli("resume", str(run_dir), cwd=folder)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "quick: ended before the node was interrupted, not run again" in resumed.stdout
    assert (folder / "slow.txt").read_text() == "slow\nslow\n"  # killed while it ran: again

    traces = traces_of(run_dir)
    assert trace_shape(traces) == trace_shape(uninterrupted)
    by_node = {t.node_id: t for t in traces}
    quick, fan, join = by_node["quick"], by_node["fan"], by_node["join"]
    assert quick.branch_of == "fan" and quick.within == fan.step
    assert quick.inputs == {"docs/quick.md": uninterrupted[1].inputs["docs/quick.md"]}
    parts = fan.writes["parallel.results"].parts or {}
    assert {r.part: r.writer for r in join.reads} == {
        "quick": quick.step,
        "slow": by_node["slow"].step,
        "other": by_node["other"].step,
    }
    # the fan-in read the kept branch's result as the parallel node wrote it
    written = {k: p.fingerprint for k, p in parts.items()}
    assert {r.part: r.fingerprint for r in join.reads} == written

    (folder / "docs" / "quick.md").write_text("quick v2\n")
    expected = ({"quick"}, {"join", "summary"})
    live = resume_run(run_dir)
    marks = run_marks(live)
    live.close()
    assert (
        {n for n, m in marks.items() if m.kind is MarkKind.STALE},
        {n for n, m in marks.items() if m.kind is MarkKind.OUTDATED},
    ) == expected
    assert marks["join"].roots() == marks["summary"].roots() == ["quick"]

    status = json.loads(cli("status", str(run_dir), "--json", cwd=folder).stdout)
    states = {n: v["state"] for n, v in status["nodes"].items()}
    assert (
        {n for n, s in states.items() if s == "stale"},
        {n for n, s in states.items() if s == "outdated"},
    ) == expected
    assert states["slow"] == states["other"] == "succeeded"  # the siblings are not marked
    chain = status["nodes"]["join"]["why"]
    assert chain == (
        f"`join` read the result of `quick` (step {quick.step}), whose input `docs/quick.md` "
        "changed"
    )
    said = cli("why", str(run_dir), "join", cwd=folder).stdout.splitlines()
    assert said[:2] == ["join: outdated", f"  {chain}"]
    said = cli("why", str(run_dir), "summary", cwd=folder).stdout.splitlines()
    assert said[0] == "summary: outdated" and "`quick`" in said[1], said
