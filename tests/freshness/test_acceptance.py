"""One test per rule of input freshness: which files a node names, the baseline taken at run
start and resume, the check before a node executes, and the stale files it leaves in the context."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from freshness_magic.engine.context import Context
from freshness_magic.engine.events import Event, EventKind, EventType
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.run import Run
from freshness_magic.events import session_event_kinds
from freshness_magic.freshness.baseline import Baseline
from freshness_magic.freshness.events import FreshnessEvent
from freshness_magic.freshness.extension import FreshnessExtension, extension_of
from freshness_magic.freshness.filestore import FileStore
from freshness_magic.freshness.hashing import hash_file
from freshness_magic.session import PipelineWarning, open_run, resume_run

from .conftest import write


class Recorder:
    """A custom handler that records which nodes ran and can change files or the context."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.ran: list[str] = []
        self.edits: dict[str, tuple[str, str]] = {}
        self.updates: dict[str, dict[str, Any]] = {}

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        self.ran.append(node.id)
        if node.id in self.edits:
            rel, text = self.edits[node.id]
            write(self.workdir, rel, text)
        return Outcome(StageStatus.SUCCESS, context_updates=dict(self.updates.get(node.id, {})))


def make_run(workdir: Path, body: str, **kw: Any) -> tuple[Run, Recorder]:
    """A run of ``digraph { start; <body>; done }`` where type=rec nodes use the Recorder."""
    recorder = Recorder(workdir)
    registry = default_registry()
    registry.register("rec", recorder)
    dot = (
        "digraph t {\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n"
        '  node [type="rec"]\n' + body + "\n}\n"
    )
    run = open_run(dot, workdir=workdir, registry=registry, sleep=lambda _s: None, **kw)
    return run, recorder


def events(run: Run, kind: EventKind | None = None) -> list[Event]:
    """The run's events read back from ``events.jsonl`` (with the session's vocabularies)."""
    found = session_event_kinds().read(run.run_dir / "events.jsonl")
    return [e for e in found if kind is None or e.type is kind]


def tracker_of(run: Run) -> Any:
    tracker = extension_of(run).tracker
    assert tracker is not None
    return tracker


# Which files a node names -----------------------------------------------------------------


def test_source_files_is_a_comma_separated_list(tmp_path: Path) -> None:
    write(tmp_path, "src/models/user.ts")
    write(tmp_path, "src/models/team.ts")
    write(tmp_path, "docs/spec.md")
    run, _ = make_run(
        tmp_path,
        'a [source_files="src/models/*.ts, docs/spec.md"]\n start -> a -> done',
    )
    run.start()
    baseline = tracker_of(run).baselines["a"]
    assert baseline.entries == ("src/models/*.ts", "docs/spec.md")
    assert sorted(baseline.files) == ["docs/spec.md", "src/models/team.ts", "src/models/user.ts"]


def test_no_source_files_means_no_checking(tmp_path: Path) -> None:
    write(tmp_path, "docs/spec.md")
    with pytest.warns(PipelineWarning, match="`a` has freshness='block' but no source_files"):
        run, rec = make_run(
            tmp_path,
            'a [freshness="block"]\n b [source_files="docs/spec.md"]\n start -> a -> b -> done',
        )
    run.start()
    assert set(tracker_of(run).baselines) == {"b"}
    result = run.run()
    assert result.status == "completed" and rec.ran == ["a", "b"]
    assert not events(run, FreshnessEvent.STALE_INPUT)


def test_globs_resolve_against_the_working_directory(tmp_path: Path, monkeypatch: Any) -> None:
    work = tmp_path / "work"
    write(work, "src/deep/er/x.py")
    write(work, "src/y.py")
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, "src/decoy.py")
    monkeypatch.chdir(elsewhere)
    run, _ = make_run(work, 'a [source_files="src/**/*.py"]\n start -> a -> done')
    run.start()
    assert sorted(tracker_of(run).baselines["a"].files) == ["src/deep/er/x.py", "src/y.py"]


# The baseline at run start and resume -----------------------------------------------------


def test_run_start_hashes_every_file_of_every_node(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "A")
    write(tmp_path, "b/c.txt", "C")
    run, _ = make_run(
        tmp_path,
        'a [source_files="a.txt"]\n b [source_files="b/*.txt,a.txt"]\n'
        " c\n start -> a -> b -> c -> done",
    )
    run.start()
    baselines = tracker_of(run).baselines
    assert set(baselines) == {"a", "b"}
    for node_id, rels in (("a", ["a.txt"]), ("b", ["a.txt", "b/c.txt"])):
        for rel in rels:
            assert baselines[node_id].files[rel].digest == hash_file(tmp_path / rel).digest
    checkpoint = json.loads((run.run_dir / "checkpoint.json").read_text())
    saved = checkpoint["extensions"]["freshness"]["tracker"]["baselines"]["b"]
    kept = Baseline.from_dict(saved, store=FileStore(run.run_dir)).files
    assert kept["b/c.txt"].digest == hash_file(tmp_path / "b/c.txt").digest


def test_resume_recaptures_nodes_not_yet_executed(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "a1")
    write(tmp_path, "b.txt", "b1")
    run, _ = make_run(
        tmp_path,
        'a [source_files="a.txt"]\n b [source_files="b.txt", freshness="block"]\n'
        " start -> a -> b -> done",
    )
    run.run(to="b")
    write(tmp_path, "a.txt", "a2")
    write(tmp_path, "b.txt", "b2")
    registry = default_registry()
    rec = Recorder(tmp_path)
    registry.register("rec", rec)
    resumed = resume_run(run.run_dir, registry=registry, sleep=lambda _s: None)
    tracker = tracker_of(resumed)
    assert tracker.baselines["b"].files["b.txt"].digest == hash_file(tmp_path / "b.txt").digest
    assert tracker.baselines["a"].files["a.txt"].digest != hash_file(tmp_path / "a.txt").digest
    assert resumed.run().status == "completed" and rec.ran == ["b"]


def test_glob_without_matches_records_an_empty_set(tmp_path: Path) -> None:
    run, rec = make_run(
        tmp_path,
        'a [source_files="nothing/**/*.c", freshness="block"]\n start -> a -> done',
    )
    run.start()
    assert tracker_of(run).baselines["a"].files == {}
    assert run.run().status == "completed" and rec.ran == ["a"]


# The check before a node executes ---------------------------------------------------------


def test_files_are_rehashed_before_the_node_executes(tmp_path: Path) -> None:
    write(tmp_path, "in.txt", "v1")
    run, rec = make_run(
        tmp_path,
        'edit\n a [source_files="in.txt", freshness="warn"]\n start -> edit -> a -> done',
    )
    rec.edits["edit"] = ("in.txt", "v2")
    run.run()
    (stale,) = events(run, FreshnessEvent.STALE_INPUT)
    assert stale.node_id == "a" and stale.data["files"] == ["in.txt"]
    detail = stale.data["details"][0]
    assert detail["new_hash"] == hash_file(tmp_path / "in.txt").digest[:12]
    assert detail["old_hash"] != detail["new_hash"]


def test_all_match_execution_proceeds(tmp_path: Path) -> None:
    write(tmp_path, "in.txt", "v1")
    run, rec = make_run(
        tmp_path, 'a [source_files="in.txt", freshness="block"]\n start -> a -> done'
    )
    assert run.run().status == "completed"
    assert rec.ran == ["a"] and not events(run, FreshnessEvent.STALE_INPUT)


def test_warn_emits_stale_input_and_proceeds(tmp_path: Path) -> None:
    write(tmp_path, "in.txt", "v1")
    run, rec = make_run(
        tmp_path,
        'edit\n a [source_files="in.txt", freshness="warn"]\n start -> edit -> a -> done',
    )
    rec.edits["edit"] = ("in.txt", "v2")
    assert run.run().status == "completed"
    assert rec.ran == ["edit", "a"]
    (stale,) = events(run, FreshnessEvent.STALE_INPUT)
    assert stale.data["mode"] == "warn"


def test_block_returns_retry(tmp_path: Path) -> None:
    write(tmp_path, "in.txt", "v1")
    run, rec = make_run(
        tmp_path,
        'edit\n a [source_files="in.txt", freshness="block", max_retries=2]\n'
        " start -> edit -> a -> done",
    )
    rec.edits["edit"] = ("in.txt", "v2")
    ext = extension_of(run)
    run.run(to="a")
    outcome = ext.before_execute(run, run.graph.nodes["a"], 1)
    assert outcome is not None
    assert outcome.status is StageStatus.RETRY
    assert outcome.failure_reason == "stale input: in.txt"
    run.run()
    assert "a" not in rec.ran
    retries = events(run, EventType.STAGE_RETRYING)
    assert [e.data["failure_reason"] for e in retries] == ["stale input: in.txt"] * 2
    assert "stale input: in.txt" in run.node_outcomes["a"].failure_reason
    assert run.node_outcomes["a"].status is StageStatus.FAIL


def test_unset_or_ignore_means_no_check(tmp_path: Path) -> None:
    write(tmp_path, "in.txt", "v1")
    run, rec = make_run(
        tmp_path,
        'edit\n a [source_files="in.txt"]\n b [source_files="in.txt", freshness="ignore"]\n'
        " start -> edit -> a -> b -> done",
    )
    rec.edits["edit"] = ("in.txt", "v2")
    assert run.run().status == "completed"
    assert rec.ran == ["edit", "a", "b"]
    assert not events(run, FreshnessEvent.STALE_INPUT)
    assert not any(k.startswith("freshness.") for k in run.context)
    assert set(tracker_of(run).baselines) == {"a", "b"}  # recorded, never checked


def test_rule_stale_input_retry_consumes_an_attempt_after_the_retry_delay(tmp_path: Path) -> None:
    """The check runs after the backoff sleep: a file restored during the delay lets it run."""
    write(tmp_path, "in.txt", "v1")
    restored: list[float] = []

    def sleep(seconds: float) -> None:
        write(tmp_path, "in.txt", "v1")
        restored.append(seconds)

    recorder = Recorder(tmp_path)
    registry = default_registry()
    registry.register("rec", recorder)
    dot = (
        'digraph t { start [shape=Mdiamond]; done [shape=Msquare]; node [type="rec"]\n'
        ' edit; a [source_files="in.txt", freshness="block", max_retries=1]\n'
        " start -> edit -> a -> done }"
    )
    run = open_run(dot, workdir=tmp_path, registry=registry, sleep=sleep)
    recorder.edits["edit"] = ("in.txt", "v2")
    assert run.run().status == "completed"
    assert len(restored) == 1 and recorder.ran == ["edit", "a"]
    assert run.history[-2].attempts == 2  # node a: blocked attempt, then the real one


# Stale files in the context ---------------------------------------------------------------


def test_stale_files_listed_in_the_context(tmp_path: Path) -> None:
    write(tmp_path, "x.md", "1")
    write(tmp_path, "y.md", "1")
    run, rec = make_run(
        tmp_path,
        'edit\n a [source_files="*.md", freshness="warn"]\n start -> edit -> a -> done',
    )
    rec.edits["edit"] = ("y.md", "2")
    run.run()
    assert run.context["freshness.a.stale_files"] == ["y.md"]


def test_no_stale_files_no_key(tmp_path: Path) -> None:
    write(tmp_path, "x.md", "1")
    run, _ = make_run(tmp_path, 'a [source_files="x.md", freshness="warn"]\n start -> a -> done')
    run.run()
    assert "freshness.a.stale_files" not in run.context


def test_key_is_removed_once_fresh_again(tmp_path: Path) -> None:
    write(tmp_path, "x.md", "1")
    run, rec = make_run(
        tmp_path,
        'edit\n a [source_files="x.md", freshness="warn"]\n start -> edit -> a -> done',
    )
    rec.edits["edit"] = ("x.md", "2")
    run.run(to="a")
    ext = extension_of(run)
    ext.before_execute(run, run.graph.nodes["a"], 1)
    assert run.context["freshness.a.stale_files"] == ["x.md"]
    write(tmp_path, "x.md", "1")
    ext.before_execute(run, run.graph.nodes["a"], 1)
    assert "freshness.a.stale_files" not in run.context


def test_edge_condition_on_stale_files(tmp_path: Path) -> None:
    write(tmp_path, "x.md", "1")
    body = (
        'edit\n a [source_files="x.md", freshness="warn"]\n review\n'
        " start -> edit -> a\n"
        ' a -> review [condition="context.freshness.a.stale_files"]\n'
        " a -> done\n review -> done"
    )
    run, rec = make_run(tmp_path, body)
    rec.edits["edit"] = ("x.md", "2")
    run.run()
    assert rec.ran == ["edit", "a", "review"]
    fresh_dir = tmp_path / "fresh"
    write(fresh_dir, "x.md", "1")
    run2, rec2 = make_run(fresh_dir, body)
    run2.run()
    assert rec2.ran == ["edit", "a"]  # edit rewrote x.md with "2" in tmp_path, not here


# Beyond: accept, loops, checkpoint --------------------------------------------------------


def test_accept_changes_unblocks_and_is_checkpointed(tmp_path: Path) -> None:
    from freshness_magic.freshness.extension import accept_changes

    write(tmp_path, "in.txt", "v1")
    run, rec = make_run(
        tmp_path,
        'a [source_files="in.txt", freshness="block"]\n start -> a -> done',
    )
    run.start()
    write(tmp_path, "in.txt", "v2")
    assert accept_changes(run, "a") == {"a": ["in.txt"]}
    (accepted,) = events(run, FreshnessEvent.BASELINE_ACCEPTED)
    assert accepted.data["files"] == ["in.txt"]
    checkpoint = json.loads((run.run_dir / "checkpoint.json").read_text())
    saved = checkpoint["extensions"]["freshness"]["tracker"]["baselines"]["a"]
    digest = Baseline.from_dict(saved, store=FileStore(run.run_dir)).files["in.txt"].digest
    assert digest == hash_file(tmp_path / "in.txt").digest
    assert run.run().status == "completed" and rec.ran == ["a"]


def test_handler_requests_accept_through_the_context(tmp_path: Path) -> None:
    write(tmp_path, "in.txt", "v1")
    run, rec = make_run(
        tmp_path,
        'edit\n a [source_files="in.txt", freshness="block"]\n start -> edit -> a -> done',
    )
    rec.edits["edit"] = ("in.txt", "v2")
    rec.updates["edit"] = {"freshness.accept": ["a"]}
    assert run.run().status == "completed"
    assert rec.ran == ["edit", "a"]
    assert events(run, FreshnessEvent.BASELINE_ACCEPTED)[0].data["source"] == "context"
    assert "freshness.accept" not in run.context


def test_blocked_node_stays_blocked_on_every_revisit_until_accepted(tmp_path: Path) -> None:
    write(tmp_path, "in.txt", "v1")
    run, rec = make_run(
        tmp_path,
        'edit\n a [source_files="in.txt", freshness="block"]\n fix\n'
        ' start -> edit -> a\n a -> done [condition="outcome=success"]\n'
        ' a -> fix [condition="outcome=fail"]\n fix -> a',
    )
    rec.edits["edit"] = ("in.txt", "v2")
    for _ in range(6):
        run.step()
    assert rec.ran.count("a") == 0 and rec.ran.count("fix") >= 2
    rec.updates["fix"] = {"freshness.accept": "a"}
    result = run.run(max_steps=10)
    assert result.status == "completed" and rec.ran[-1] == "a"


def test_loop_revisit_compares_with_the_last_completion(tmp_path: Path) -> None:
    write(tmp_path, "in.txt", "v1")
    run, rec = make_run(
        tmp_path,
        'edit\n a [source_files="in.txt", freshness="warn"]\n'
        ' start -> edit -> a\n a -> edit [condition="context.round!=2"]\n a -> done',
    )
    rec.edits["edit"] = ("in.txt", "v2")
    run.context.set("round", "1")
    run.run(to="edit")
    run.step()  # edit (v2)
    run.step()  # a: stale since baseline
    assert len(events(run, FreshnessEvent.STALE_INPUT)) == 1
    run.context.set("round", "2")
    rec.edits["edit"] = ("in.txt", "v2")  # same content again
    run.step()  # edit rewrites identical content
    run.step()  # a: fresh since its last completion
    assert len(events(run, FreshnessEvent.STALE_INPUT)) == 1
    report = extension_of(run).report(run)
    assert report.nodes["a"].since_baseline.stale_files == ["in.txt"]
    assert report.nodes["a"].since_run is not None
    assert report.nodes["a"].since_run.stale_files == []


def test_extension_works_without_the_session(tmp_path: Path) -> None:
    write(tmp_path, "in.txt", "v1")
    dot = (
        "digraph t { start [shape=Mdiamond]; done [shape=Msquare]\n"
        ' a [shape=parallelogram, tool_command="true", source_files="in.txt", freshness="block"]\n'
        " start -> a -> done }"
    )
    from freshness_magic.engine.pipeline import load_pipeline

    run = Run(load_pipeline(dot), workdir=tmp_path, extensions=[FreshnessExtension()])
    assert run.run().status == "completed"
    assert os.path.exists(run.run_dir / "checkpoint.json")
