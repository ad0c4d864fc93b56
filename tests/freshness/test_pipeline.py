"""End-to-end: tool nodes editing inputs, warn routing, drift across processes, check CLI."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from freshness_magic.engine.events import Event, EventType
from freshness_magic.events import session_event_kinds
from freshness_magic.freshness.events import FreshnessEvent
from freshness_magic.session import open_run
from tests.forkserver import ForkServer
from tests.gitrepo import git
from tests.waiting import wait_until

from .conftest import write

REPO_ROOT = Path(__file__).resolve().parents[2]


ENV = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def drivers() -> Iterator[ForkServer]:
    """Where the command's processes come from (each a process of its own)."""
    with ForkServer() as server:
        yield server


@pytest.fixture(scope="module")
def cli(drivers: ForkServer) -> Cli:
    """``cli(*args, cwd=...)``: ``python -m freshness_magic ARGS`` in a new process, with only
    ``PATH`` in its environment."""

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return drivers.run(["-m", *args], module="freshness_magic", cwd=cwd, env=ENV)

    return run


def events_of(run_dir: Path) -> list[Event]:
    """The run's events read back from ``events.jsonl`` (with the session's vocabularies)."""
    return list(session_event_kinds().read(run_dir / "events.jsonl"))


def only_run_dir(workdir: Path) -> Path:
    (run_dir,) = (workdir / ".freshness" / "runs").iterdir()
    return run_dir


BLOCK_PIPELINE = """
digraph p {
  start   [shape=Mdiamond]
  edit    [shape=parallelogram, tool_command="printf 'v2' > docs/spec.md"]
  guarded [shape=parallelogram, tool_command="printf ran > ran.txt",
           source_files="docs/*.md", freshness="block"]
  recover [shape=parallelogram, tool_command="printf recovered > recovered.txt"]
  done    [shape=Msquare]
  start -> edit -> guarded
  guarded -> done    [condition="outcome=success"]
  guarded -> recover [condition="outcome=fail"]
  recover -> done
}
"""


def test_tool_editing_a_later_block_node_takes_its_failure_routing(tmp_path: Path) -> None:
    write(tmp_path, "docs/spec.md", "v1")
    run = open_run(BLOCK_PIPELINE, workdir=tmp_path)
    result = run.run()
    assert result.status == "completed"
    assert not (tmp_path / "ran.txt").exists()
    assert (tmp_path / "recovered.txt").exists()
    outcome = run.node_outcomes["guarded"]
    assert "stale input: docs/spec.md" in outcome.failure_reason
    log = events_of(run.run_dir)
    kinds = [(e.type, e.node_id) for e in log]
    assert (FreshnessEvent.STALE_INPUT, "guarded") in kinds
    failed = next(e for e in log if e.type is EventType.STAGE_FAILED and e.node_id == "guarded")
    assert "stale input: docs/spec.md" in failed.data["failure_reason"]
    routed = next(e for e in log if e.type is EventType.EDGE_SELECTED and e.node_id == "guarded")
    assert routed.data["target"] == "recover"


WARN_PIPELINE = """
digraph p {
  start  [shape=Mdiamond]
  edit   [shape=parallelogram, tool_command="printf 'v2' >> notes.md"]
  draft  [shape=parallelogram, tool_command="printf drafted > drafted.txt",
          source_files="notes.md", freshness="warn"]
  review [shape=parallelogram, tool_command="printf reviewed > reviewed.txt"]
  done   [shape=Msquare]
  start -> edit -> draft
  draft -> review [condition="context.freshness.draft.stale_files"]
  draft -> done
  review -> done
}
"""


def test_warn_emits_stale_input_and_routes_on_the_context_key(tmp_path: Path) -> None:
    write(tmp_path, "notes.md", "v1")
    run = open_run(WARN_PIPELINE, workdir=tmp_path)
    assert run.run().status == "completed"
    assert (tmp_path / "drafted.txt").exists() and (tmp_path / "reviewed.txt").exists()
    log = events_of(run.run_dir)
    stale = [e for e in log if e.type is FreshnessEvent.STALE_INPUT]
    assert [(e.node_id, e.data["files"]) for e in stale] == [("draft", ["notes.md"])]
    routed = next(e for e in log if e.type is EventType.EDGE_SELECTED and e.node_id == "draft")
    assert routed.data["target"] == "review"
    assert run.context["freshness.draft.stale_files"] == ["notes.md"]


PAUSE_PIPELINE = """
digraph p {
  start [shape=Mdiamond]
  first [shape=parallelogram, tool_command="true", source_files="src/*.py"]
  gate  [shape=hexagon, label="Go on?"]
  later [shape=parallelogram, tool_command="printf ran > ran.txt",
         source_files="docs/spec.md", freshness="warn"]
  done  [shape=Msquare]
  start -> first -> gate
  gate -> later [label="[Y] Yes"]
  later -> done
}
"""


def test_change_between_run_to_and_resume_in_a_new_process_is_input_drift(
    repo: Path, cli: Cli
) -> None:
    (repo / "pipe.dot").write_text(PAUSE_PIPELINE)
    git(repo, "add", "pipe.dot")
    git(repo, "commit", "-q", "-m", "pipeline")
    first = cli("run", "pipe.dot", "--to", "later", "--answer", "gate=Y", cwd=repo)
    assert first.returncode == 3, first.stderr
    run_dir = only_run_dir(repo)
    write(repo, "docs/spec.md", "# changed during the pause\n")
    write(repo, "src/a.py", "a = 2\n")
    assert cli("check", str(run_dir), cwd=repo).returncode == 1
    second = cli("resume", str(run_dir), cwd=repo)
    assert second.returncode == 0, second.stderr + second.stdout
    log = events_of(run_dir)
    drift_at = next(i for i, e in enumerate(log) if e.type is FreshnessEvent.INPUT_DRIFT)
    resumed_at = next(i for i, e in enumerate(log) if e.type is EventType.PIPELINE_RESUMED)
    later_at = (
        next(
            i
            for i, e in enumerate(log)
            if e.type is EventType.STAGE_STARTED and e.node_id == "later"
        )
        if any(e.type is EventType.STAGE_STARTED for e in log)
        else len(log)
    )
    assert resumed_at < drift_at < later_at
    drift = log[drift_at].data
    assert drift["nodes"] == {"first": ["src/a.py"], "later": ["docs/spec.md"]}
    assert drift["since"] == {"first": "run", "later": "baseline"}
    details = {d["path"]: d for d in drift["details"]["later"]}
    assert details["docs/spec.md"]["git_change"] == "uncommitted"
    # The baseline of `later` (not executed before the pause) was re-captured after the drift
    # report, so its warn check saw no change and nothing was stale when it ran.
    assert not [e for e in log if e.type is FreshnessEvent.STALE_INPUT]
    assert (repo / "ran.txt").exists()
    # The resume says so before it goes on: its block/warn check will not report it again.
    drift_lines = [line.split() for line in second.stdout.splitlines() if "drift" in line]
    assert [words[:2] for words in drift_lines] == [["drift", "first"], ["drift", "later"]]
    said = second.stdout
    assert "inputs changed since it ran: src/a.py; its results may be outdated" in said
    assert (
        "inputs changed since its baseline: docs/spec.md; it has not run yet and will use them"
        in (said)
    )
    assert said.index("drift") < said.index("later ") < said.rindex("ok")


ACCEPT_PIPELINE = """
digraph p {
  start   [shape=Mdiamond]
  edit    [shape=parallelogram, tool_command="printf 'v2' > docs/spec.md"]
  guarded [shape=parallelogram, tool_command="printf ran > ran.txt",
           source_files="docs/spec.md", freshness="block"]
  ask     [shape=hexagon, label="Inputs changed: retry?"]
  done    [shape=Msquare]
  start -> edit -> guarded
  guarded -> done [condition="outcome=success"]
  guarded -> ask  [condition="outcome=fail"]
  ask -> guarded  [label="[R] Retry"]
  ask -> done     [label="[S] Skip"]
}
"""


def test_resume_accept_unblocks_a_blocked_node(tmp_path: Path, cli: Cli) -> None:
    write(tmp_path, "docs/spec.md", "v1")
    (tmp_path / "p.dot").write_text(ACCEPT_PIPELINE)
    assert cli("run", "p.dot", cwd=tmp_path).returncode == 3  # blocked, routed to the gate
    run_dir = only_run_dir(tmp_path)
    checked = cli("check", str(run_dir), "--json", cwd=tmp_path)
    assert checked.returncode == 1
    report = json.loads(checked.stdout)
    assert report["stale_nodes"] == ["guarded"]
    assert report["nodes"]["guarded"]["since_baseline"]["stale_files"] == ["docs/spec.md"]
    # Resuming without accepting keeps the block (a pause never silently unblocks). The files it
    # was held back for were said before the pause: they are no drift, the block says it again.
    again = cli("resume", str(run_dir), "--answer", "ask=R", cwd=tmp_path)
    assert again.returncode == 3
    assert not (tmp_path / "ran.txt").exists()
    assert not [line for line in again.stdout.splitlines() if line.split()[:1] == ["drift"]]
    assert "held back (freshness=block)" in again.stdout
    done = cli("resume", str(run_dir), "--accept", "guarded", "--answer", "ask=R", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    said = done.stdout.splitlines()
    assert said[0].split() == ["accept", "guarded", "new", "baseline:", "docs/spec.md"]
    assert not [line for line in said if "holds it back" in line]
    assert (tmp_path / "ran.txt").read_text() == "ran"
    accepted = [e for e in events_of(run_dir) if e.type is FreshnessEvent.BASELINE_ACCEPTED]
    assert [e.data["nodes"] for e in accepted] == [{"guarded": ["docs/spec.md"]}]
    assert cli("check", str(run_dir), cwd=tmp_path).returncode == 0


def test_check_cli_exit_codes(tmp_path: Path, cli: Cli) -> None:
    write(tmp_path, "docs/spec.md", "v1")
    (tmp_path / "p.dot").write_text(PAUSE_PIPELINE.replace("src/*.py", "docs/*.md"))
    assert cli("run", "p.dot", cwd=tmp_path).returncode == 3  # waits at the gate
    run_dir = only_run_dir(tmp_path)
    ok = cli("check", str(run_dir), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "all fresh" in ok.stdout
    write(tmp_path, "docs/spec.md", "v2")
    stale = cli("check", str(run_dir), cwd=tmp_path)
    assert stale.returncode == 1 and "docs/spec.md" in stale.stdout
    missing = cli("check", str(tmp_path / "nope"), cwd=tmp_path)
    assert missing.returncode == 2 and "not a run directory" in missing.stderr


def test_check_names_an_input_path_that_is_missing(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "p.dot").write_text(PAUSE_PIPELINE.replace("src/*.py", "src/typo.py"))
    assert cli("run", "p.dot", cwd=tmp_path).returncode == 3
    run_dir = only_run_dir(tmp_path)
    checked = cli("check", str(run_dir), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines()[:2] == [
        "first: fresh (since baseline) [not checked: freshness=ignore]",
        "  missing        src/typo.py (also at the snapshot: nothing to compare)",
    ]
    report = json.loads(cli("check", str(run_dir), "--json", cwd=tmp_path).stdout)
    (listed,) = report["nodes"]["first"]["since_baseline"]["files"]
    assert (listed["path"], listed["label"]) == ("src/typo.py", "fresh")
    assert listed["note"] == "missing, as at the snapshot"


WIDE_PIPELINE = """
digraph p {
  start [shape=Mdiamond]
  a [shape=parallelogram, tool_command="printf a > out/a.txt", source_files="data/**",
     freshness="warn"]
  b [shape=parallelogram, tool_command="printf b >> data/f000.txt", source_files="data/**"]
  c [shape=parallelogram, tool_command="printf c > out/c.txt", source_files="data/**"]
  done [shape=Msquare]
  start -> a -> b -> c -> done
}
"""


def test_a_step_records_what_changed_not_every_tracked_file(tmp_path: Path, cli: Cli) -> None:
    """Three nodes tracking 600 files: the files are written once, in the first record."""
    for i in range(600):
        write(tmp_path, f"data/f{i:03d}.txt", f"file {i}\n")
    (tmp_path / "out").mkdir()
    run = open_run(WIDE_PIPELINE, workdir=tmp_path)
    assert run.run().status == "completed"
    lines = (run.run_dir / "journal.jsonl").read_bytes().splitlines()
    sizes = sorted(len(line) for line in lines)
    assert sizes[-1] > 600 * 60  # the record with the baselines lists every file once
    assert sizes[-2] < 600 * 10, sizes  # each other record: a few files, not 600
    checkpoint = (run.run_dir / "checkpoint.json").read_bytes()
    assert checkpoint.count(b'"data/f001.txt"') == 1
    report = cli("check", str(run.run_dir), cwd=tmp_path)
    assert report.returncode == 1, report.stderr  # 1: stale
    assert "stale_changed  data/f000.txt" in report.stdout  # b changed it after a ran
    assert report.stdout.rstrip().endswith("stale: a")  # b and c ran on the changed file


CHAIN = "\n".join(
    f'  n{i} [shape=parallelogram, source_files="data/**", '
    f'tool_command="sleep 0.05; printf x >> data/f{i:03d}.txt"]'
    for i in range(6)
)
CRASH_PIPELINE = f"""
digraph p {{
  start [shape=Mdiamond]
{CHAIN}
  done [shape=Msquare]
  start -> n0 -> n1 -> n2 -> n3 -> n4 -> n5 -> done
}}
"""


def _stale_by_node(cli: Cli, run_dir: Path, cwd: Path) -> dict[str, tuple[list[str], list[str]]]:
    done = cli("check", "--json", str(run_dir), cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    nodes = json.loads(done.stdout)["nodes"]
    return {
        node_id: (
            entry["since_baseline"]["stale_files"],
            (entry.get("since_run") or {}).get("stale_files", []),
        )
        for node_id, entry in nodes.items()
    }


def _tree(root: Path) -> Path:
    for i in range(300):
        write(root, f"data/f{i:03d}.txt", f"file {i}\n")
    (root / "p.dot").write_text(CRASH_PIPELINE)
    return root


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, cli: Cli) -> dict[str, object]:
    """What `check` says after an uninterrupted run of the crash pipeline (the same for every
    seed: the pipeline is deterministic)."""
    reference = _tree(tmp_path_factory.mktemp("reference"))
    assert cli("run", "p.dot", cwd=reference).returncode == 0
    expected = _stale_by_node(cli, only_run_dir(reference), reference)
    assert expected["n0"][1] == [f"data/f{i:03d}.txt" for i in range(1, 6)]
    return dict(expected)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_run_killed_at_a_random_instant_resumes_to_the_same_freshness(
    tmp_path: Path, seed: int, cli: Cli, drivers: ForkServer, uninterrupted: dict[str, object]
) -> None:
    """SIGKILL `run` after a random number of steps (the freshness state is in the journal as
    deltas of one whole baseline), `resume` in a new process: `check` says what an
    uninterrupted run's `check` says."""
    work = _tree(tmp_path / "work")
    rng = random.Random(seed)
    steps = rng.randint(1, 5)
    driver = drivers.start(["-m", "run", "p.dot"], module="freshness_magic", cwd=work, env=ENV)
    try:

        def journal_lines() -> int:
            runs = work / ".freshness" / "runs"
            found = list(runs.glob("*/journal.jsonl")) if runs.is_dir() else []
            return len(found[0].read_bytes().splitlines()) if found else 0

        wait_until(lambda: journal_lines() > steps or driver.poll() is not None, "steps done")
        time.sleep(rng.uniform(0, 0.05))
        driver.kill()
    finally:
        driver.wait(timeout=30)
    assert driver.returncode == -signal.SIGKILL  # killed mid-run, not finished
    run_dir = only_run_dir(work)
    resumed = cli("resume", str(run_dir), cwd=work)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _stale_by_node(cli, run_dir, work) == uninterrupted
