"""Reuse: an execution equal to an earlier successful one (definition, declared input files,
read values) is taken from it, not run; what changed runs again, and only that.

Real runs through ``open_run`` (freshness and evidence on), real tool commands in a tmp work
directory, a counting Python backend for codergen nodes, the local fake OpenAI server for a
real backend, and a killed process for a crash in the middle of a reused step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from freshness_magic import schemas
from freshness_magic.engine.context import Context
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import ReusedFrom, StageStatus
from freshness_magic.engine.run import Run
from freshness_magic.evidence.record import read_evidence_log
from freshness_magic.session import open_run, resume_run
from tests.backends.fakeservers import serve
from tests.processes import cli_process

REPO = Path(__file__).resolve().parents[2]

PIPELINE = """digraph notes {
  graph [goal="Write the notes"]
  start  [shape=Mdiamond]
  stamp  [shape=parallelogram, tool_command="echo ran >> stamp.calls; date +%s%N"]
  gather [shape=parallelogram, source_files="src/topic.txt",
          tool_command="echo ran >> gather.calls; cat src/topic.txt"]
  draft  [prompt="Draft notes on {tool.output}"]
  polish [prompt="Polish the notes for $goal"]
  done   [shape=Msquare]
  start -> stamp -> gather -> draft -> polish -> done
}
"""


class Counting:
    """A codergen backend that counts its calls per node (a plain callable backend)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, node: Node, prompt: str, context: Context) -> str:
        self.calls.append(node.id)
        return f"notes by {node.id}: {prompt}"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "topic.txt").write_text("freshness\n")
    (tmp_path / "notes.dot").write_text(PIPELINE)
    return tmp_path


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def finish(pipeline: Path | str, work: Path, backend: Any, **kwargs: Any) -> Run:
    run = open_run(pipeline, workdir=work, backend=backend, warn=False, **kwargs)
    with run:
        result = run.run()
    assert result.state.value == "completed", result.failure_reason
    return run


def reused(run: Run) -> dict[str, ReusedFrom]:
    return {n: o.reused_from for n, o in run.node_outcomes.items() if o.reused_from is not None}


def test_a_second_run_with_nothing_changed_executes_nothing_reusable(work: Path) -> None:
    backend = Counting()
    first = finish(work / "notes.dot", work, backend, reuse=True)
    assert backend.calls == ["draft", "polish"]
    assert (lines(work / "gather.calls"), lines(work / "stamp.calls")) == (1, 1)
    assert reused(first) == {}

    second = finish(work / "notes.dot", work, backend, reuse=True)
    assert backend.calls == ["draft", "polish"]  # no codergen call
    assert lines(work / "gather.calls") == 1  # the tool with declared inputs did not run
    assert lines(work / "stamp.calls") == 2  # a tool without declared inputs always runs
    steps = {n: i + 1 for i, n in enumerate(first.completed_nodes)}
    assert reused(second) == {
        n: ReusedFrom(first.run_id, steps[n]) for n in ("gather", "draft", "polish")
    }
    # Its outcome, context and outputs are the earlier execution's, in this run's folder.
    assert second.result().context["tool.output"].strip() == "freshness"
    response = second.run_dir / "nodes" / "draft" / "response.md"
    assert response.read_text() == (first.run_dir / "nodes" / "draft" / "response.md").read_text()
    stdout = Path(second.result().context["tool.stdout_file"])
    assert stdout.parent == second.run_dir / "nodes" / "gather" and stdout.read_text().strip() == (
        "freshness"
    )
    # The evidence record says so, with the run and step it reused.
    records = {r.node_id: r for r in read_evidence_log(second.run_dir)}
    engine = records["draft"].outcome["engine"]
    assert engine["reused_from"] == {"run_id": first.run_id, "step": steps["draft"]}
    assert "reused (from run" in records["draft"].summary
    assert "reused_from" not in records["stamp"].outcome["engine"]


def test_a_changed_input_reruns_its_node_and_the_readers_of_what_changed(work: Path) -> None:
    backend = Counting()
    finish(work / "notes.dot", work, backend, reuse=True)
    (work / "src" / "topic.txt").write_text("reuse\n")
    third = finish(work / "notes.dot", work, backend, reuse=True)
    assert lines(work / "gather.calls") == 2  # its input changed
    assert backend.calls == ["draft", "polish", "draft"]  # draft read tool.output; polish not
    assert set(reused(third)) == {"polish"}
    # Both versions are in the index: going back to the first input reuses the first run.
    (work / "src" / "topic.txt").write_text("freshness\n")
    fourth = finish(work / "notes.dot", work, backend, reuse=True)
    assert set(reused(fourth)) == {"gather", "draft", "polish"}
    assert backend.calls == ["draft", "polish", "draft"]


def test_without_reuse_everything_runs_and_the_attributes_turn_it_on_and_off(
    work: Path,
) -> None:
    backend = Counting()
    finish(work / "notes.dot", work, backend, reuse=True)
    plain = finish(work / "notes.dot", work, backend)
    assert reused(plain) == {} and backend.calls == ["draft", "polish"] * 2
    text = PIPELINE.replace('goal="Write the notes"', 'goal="Write the notes", reuse="true"')
    text = text.replace('polish [prompt="', 'polish [reuse="false", prompt="')
    (work / "attr.dot").write_text(text.replace("digraph notes", "digraph notes"))
    by_attribute = finish(work / "attr.dot", work, backend)
    assert set(reused(by_attribute)) == {"gather", "draft"}
    assert backend.calls[-1] == "polish"


def test_a_node_that_failed_or_reads_another_value_is_not_reused(work: Path) -> None:
    backend = Counting()
    text = PIPELINE.replace(
        'tool_command="echo ran >> gather.calls; cat src/topic.txt"',
        'tool_command="echo ran >> gather.calls; cat src/topic.txt; test -f ok"',
    )
    (work / "fails.dot").write_text(text)
    run = open_run(work / "fails.dot", workdir=work, backend=backend, warn=False, reuse=True)
    with run:
        assert run.run().state.value == "failed"
    (work / "ok").write_text("")
    finish(work / "fails.dot", work, backend, reuse=True)
    assert lines(work / "gather.calls") == 2  # the failed execution was not taken


def test_a_real_backend_is_not_called_again_when_its_node_is_reused(work: Path) -> None:
    with serve("openai") as server:
        spec = f"openai:notes-model@{server.url}"
        os.environ.setdefault("OPENAI_API_KEY", "sk-test-reuse")
        first = finish(work / "notes.dot", work, spec, reuse=True)
        assert len(server.requests) == 2
        second = finish(work / "notes.dot", work, spec, reuse=True)
        assert len(server.requests) == 2  # neither codergen node called the model again
    assert set(reused(second)) == {"gather", "draft", "polish"}
    assert (second.run_dir / "nodes" / "polish" / "response.md").read_text() == (
        first.run_dir / "nodes" / "polish" / "response.md"
    ).read_text()


def test_a_gate_is_never_reused(work: Path) -> None:
    text = PIPELINE.replace(
        "polish -> done",
        'polish -> ok\n  ok [shape=hexagon, label="Good?"]\n  ok -> done [label="[Y] Yes"]',
    )
    (work / "gate.dot").write_text(text)
    for _ in range(2):
        run = open_run(work / "gate.dot", workdir=work, backend=Counting(), warn=False, reuse=True)
        with run:
            assert run.run().state.value == "waiting"  # the gate asks again
            run.answer("ok", "Y")
            assert run.run().state.value == "completed"
    assert "ok" not in reused(run)


CRASHING_DRIVER = r"""
import os, signal, sys
from pathlib import Path
from freshness_magic.engine import reuse
from freshness_magic.session import open_run, resume_run

work = Path(sys.argv[1])
mode = sys.argv[2]

def backend(node, prompt, context):
    with (work / "backend.calls").open("a") as handle:
        handle.write(node.id + "\n")
    return "notes by " + node.id

if mode == "crash":
    take = reuse.Reuser.take
    def crashing(self, entry, node, run_dir):
        outcome = take(self, entry, node, run_dir)
        if node.id == "draft":
            os.kill(os.getpid(), signal.SIGKILL)  # after its outputs were copied
        return outcome
    reuse.Reuser.take = crashing
    run = open_run(work / "notes.dot", workdir=work, backend=backend, warn=False, reuse=True)
elif mode == "first":
    run = open_run(work / "notes.dot", workdir=work, backend=backend, warn=False, reuse=True)
else:
    run = resume_run(Path(sys.argv[3]), backend=backend, reuse=True)
with run:
    print(run.run().state.value)
"""


def test_a_crash_during_a_reused_step_resumes_correctly(work: Path) -> None:
    driver = work / "driver.py"
    driver.write_text(CRASHING_DRIVER)

    def drive(mode: str, *run_dir: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(driver), str(work), mode, *map(str, run_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )

    first = drive("first")
    assert first.stdout.strip() == "completed", first.stderr
    [first_run] = (work / ".freshness" / "runs").iterdir()
    crashed = drive("crash")
    assert crashed.returncode == -9, crashed.stderr
    # run ids order by the second they began and then at random: two runs begun in one second
    # may sort either way, so the crashed run is the one that is not the first
    [crashed_run] = [r for r in (work / ".freshness" / "runs").iterdir() if r != first_run]
    resumed = drive("resume", crashed_run)
    assert resumed.stdout.strip() == "completed", resumed.stderr
    assert (work / "backend.calls").read_text().split() == ["draft", "polish"]
    assert lines(work / "gather.calls") == 1
    second = resume_run(crashed_run)
    with second:
        assert set(reused(second)) == {"gather", "draft", "polish"}
        assert second.completed_nodes == ["start", "stamp", "gather", "draft", "polish", "done"]
    records = [r.node_id for r in read_evidence_log(crashed_run)]
    assert records.count("draft") == 1


def test_the_index_and_the_reused_records_match_their_schemas(work: Path) -> None:
    finish(work / "notes.dot", work, Counting(), reuse=True)
    second = finish(work / "notes.dot", work, Counting(), reuse=True)
    registry: Registry[Any] = Registry().with_resources(
        (schemas.BASE_URI + n, Resource.from_contents(schemas.load(n))) for n in schemas.names()
    )

    def check(name: str, document: Any) -> None:
        validator = Draft202012Validator(schemas.load(name), registry=registry)
        assert not [e.message for e in validator.iter_errors(document)], (name, document)

    folder = work / ".freshness" / "reuse"
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files
    for path in files:
        known, schema = schemas.schema_for(
            path.relative_to(folder).as_posix(), schemas.REUSE_DIR_FILES
        )
        assert known, path
        if schema is not None:
            for line in path.read_text().splitlines():
                check(schema, json.loads(line))
    status = json.loads((second.run_dir / "nodes" / "draft" / "status.json").read_text())
    check("node-status.schema.json", status)
    assert status["reused_from"]["step"] >= 1
    for line in (second.run_dir / "evidence.jsonl").read_text().splitlines():
        check("evidence-record.schema.json", json.loads(line))
    for line in (second.run_dir / "events.jsonl").read_text().splitlines():
        check("event.schema.json", json.loads(line))
    assert StageStatus.SUCCESS.value == status["outcome"]


def test_a_key_the_prompt_looked_for_and_did_not_find_is_verified_too(work: Path) -> None:
    """``{graph.audience}`` is read from the context: absent in the first run (the prompt kept
    it as written), set in the second: the node runs again; the same value again: reused."""
    text = PIPELINE.replace("Polish the notes for $goal", "Polish the notes for {graph.audience}")
    (work / "a.dot").write_text(text)
    (work / "b.dot").write_text(
        text.replace('goal="Write the notes"', 'goal="Write the notes", audience="ops"')
    )
    backend = Counting()
    first = finish(work / "a.dot", work, backend, reuse=True)
    polish = next(t for t in first.traces if t.node_id == "polish")
    assert "graph.audience" in polish.absent
    finish(work / "b.dot", work, backend, reuse=True)
    assert backend.calls == ["draft", "polish", "polish"]  # draft reused, polish not
    third = finish(work / "b.dot", work, backend, reuse=True)
    assert backend.calls == ["draft", "polish", "polish"]
    assert set(reused(third)) == {"gather", "draft", "polish"}


def test_the_command_line_reuses_and_says_so_in_run_status_and_why(work: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return cli_process(*args, cwd=work)

    first = cli("run", "notes.dot", "--reuse")
    assert first.returncode == 0, first.stderr
    second = cli("run", "notes.dot", "--reuse")
    assert second.returncode == 0, second.stderr
    run_id = first.stdout.split("run dir ")[-1].strip().rsplit("/", 1)[-1]
    assert "reused  gather" in second.stdout and f"from run {run_id}, step 3" in second.stdout
    assert lines(work / "gather.calls") == 1
    run_dir = second.stdout.split("run dir ")[-1].strip()
    status = cli("status", run_dir)
    assert f"reused (from run {run_id}, step 4)" in status.stdout  # draft
    why = cli("why", run_dir, "draft")
    assert why.stdout.startswith("draft: reused") and f"from run {run_id}, step 4" in why.stdout
    data = json.loads(cli("status", run_dir, "--json").stdout)
    assert data["node_outcomes"]["polish"]["reused_from"] == {"run_id": run_id, "step": 5}
    assert "reused_from" not in data["node_outcomes"]["stamp"]


def test_an_index_that_cannot_be_written_or_read_never_fails_a_run(
    work: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (work / ".freshness").mkdir()
    (work / ".freshness" / "reuse").write_text("not a folder")  # the index is a cache
    backend = Counting()
    finish(work / "notes.dot", work, backend, reuse=True)
    finish(work / "notes.dot", work, backend, reuse=True)
    assert backend.calls == ["draft", "polish"] * 2  # nothing to reuse, everything ran
    assert "not recorded for reuse" in caplog.text or "could not record" in caplog.text


LOOP = """digraph loop {
  start [shape=Mdiamond]
  count [shape=parallelogram, tool_command="echo x >> n.calls; wc -l < n.calls | tr -d ' '"]
  draft [prompt="Draft pass {tool.output}"]
  done  [shape=Msquare]
  start -> count -> draft
  draft -> count [condition="context.tool.output=1"]
  draft -> done  [condition="context.tool.output!=1"]
}
"""


def test_a_loop_writing_a_node_again_keeps_the_first_pass_for_reuse(work: Path) -> None:
    """The store links the engine's own files; a loop's second pass writes the node's
    response again in the same folder, and a later run reusing the first pass still gets the
    first pass's exact bytes (not the second's, not a run of the backend)."""
    (work / "loop.dot").write_text(LOOP)
    backend = Counting()
    first = finish(work / "loop.dot", work, backend, reuse=True)
    assert backend.calls == ["draft", "draft"]
    response = first.run_dir / "nodes" / "draft" / "response.md"
    assert response.read_text() == "notes by draft: Draft pass 2"
    (work / "n.calls").unlink()
    run = open_run(work / "loop.dot", workdir=work, backend=backend, warn=False, reuse=True)
    with run:
        while "draft" not in run.completed_nodes:
            run.step()
        again = run.run_dir / "nodes" / "draft" / "response.md"
        assert again.read_bytes() == b"notes by draft: Draft pass 1"
        assert run.node_outcomes["draft"].reused_from is not None
        assert run.run().state.value == "completed"
    assert backend.calls == ["draft", "draft"]  # both passes reused
    assert again.read_bytes() == b"notes by draft: Draft pass 2"
