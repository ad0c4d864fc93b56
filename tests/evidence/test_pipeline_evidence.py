"""Evidence in real runs: records per step, require validation, commit=true, in git work trees."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from freshness_magic.engine import Run, RunState
from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.evidence.events import EvidenceEvent
from freshness_magic.evidence.extension import EvidenceExtension
from freshness_magic.evidence.record import (
    EVIDENCE_LOG,
    EvidenceRecord,
    evidence_path,
    read_evidence_log,
    write_evidence,
)
from freshness_magic.evidence.snapshot import WorkTreeSnapshot
from freshness_magic.evidence.summary import run_work_summaries, work_summary
from freshness_magic.evidence.validator import EvidenceReadResult, ValidationResult
from freshness_magic.session import open_run, resume_run
from tests.evidence.conftest import no_evidence
from tests.gitrepo import git
from tests.pipelines import one_gate

Action = Callable[[Path], None]


class ActionHandler:
    """A custom work handler: runs the Python action registered for the node id."""

    def __init__(self, actions: dict[str, Action]) -> None:
        self.actions = actions
        self.calls: list[str] = []

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        self.calls.append(node.id)
        action = self.actions.get(node.id)
        if action is not None:
            action(env.workdir)
        return Outcome(status=StageStatus.SUCCESS, notes=f"{node.id} done")


def start_run(
    workdir: Path, dot: str, actions: dict[str, Action] | None = None, **kwargs: object
) -> Run:
    registry = default_registry()
    registry.register("action", ActionHandler(actions or {}))
    return open_run(dot, workdir=workdir, registry=registry, **kwargs)  # type: ignore[arg-type]


def single(attrs: str = "", node_attrs: str = "", graph_attrs: str = "") -> str:
    return f"""digraph single {{
      graph [{graph_attrs}]
      start [shape=Mdiamond]
      implement [type=action, label="Implement", prompt="Fix the login bug" {node_attrs}]
      done [shape=Msquare]
      start -> implement -> done
      {attrs}
    }}"""


def write(name: str, text: str = "content\n") -> Action:
    def act(workdir: Path) -> None:
        (workdir / name).write_text(text)

    return act


def own_record(summary: str, kind: str = "analysis") -> Action:
    def act(workdir: Path) -> None:
        write_evidence(workdir, EvidenceRecord("implement", summary, kind, {"checked": 3}))

    return act


def record_of(workdir: Path, node_id: str) -> EvidenceRecord:
    """The engine's latest record of ``node_id`` (from the run logs, newest run last)."""
    logs = sorted(
        (workdir / ".freshness" / "runs").glob("*/evidence.jsonl"), key=lambda p: p.stat().st_mtime
    )
    records = [r for log in logs for r in read_evidence_log(log.parent) if r.node_id == node_id]
    assert records, f"no record of {node_id} in {logs}"
    return records[-1]


def subjects(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%s").splitlines()


def test_changes_are_committed_with_commit_true(repo: Path) -> None:
    run = start_run(
        repo,
        single(graph_attrs="evidence=require, commit=true"),
        {"implement": write("login.py", "fixed = True\n")},
    )
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert subjects(repo) == ["[Pipeline] Implement", "initial"]
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["login.py"]
    facts = record_of(repo, "implement").engine
    assert facts["evidence_method"] == "file_changes"
    assert facts["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert facts["files"]["added"] == ["login.py"]
    assert not any(
        ".orchestrator" in line for line in git(repo, "status", "--porcelain").splitlines()
    )


def test_a_commit_that_takes_a_files_earlier_changes_says_so(
    repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """git commits a file whole: edits the file had before the node ran go into the node's
    commit, and the node's notes (the evidence record's, the log's) say which file and commit."""
    (repo / "notes.md").write_text("base\n")
    git(repo, "add", "notes.md")
    git(repo, "commit", "-q", "-m", "notes")
    (repo / "notes.md").write_text("base\nmy unsaved line\n")

    def append(workdir: Path) -> None:
        (workdir / "notes.md").write_text("base\nmy unsaved line\nnode line\n")
        (workdir / "login.py").write_text("fixed = True\n")

    run = start_run(repo, single(graph_attrs="commit=true"), {"implement": append})
    assert run.run().state is RunState.COMPLETED
    head = git(repo, "rev-parse", "HEAD").strip()
    assert "my unsaved line" in git(repo, "show", "HEAD:notes.md")
    said = (
        f"commit=true: the commit {head[:12]} of node 'implement' holds the whole of notes.md, "
        f"which had uncommitted changes before the node ran (yours, or an earlier node's); "
        f"git show {head[:12]} shows them"
    )
    assert record_of(repo, "implement").engine["notes"].splitlines()[-1] == said
    assert said in caplog.text


def test_a_commit_of_files_clean_before_the_node_says_nothing_more(repo: Path) -> None:
    run = start_run(repo, single(graph_attrs="commit=true"), {"implement": write("login.py")})
    assert run.run().state is RunState.COMPLETED
    assert "commit=true" not in record_of(repo, "implement").engine["notes"]


def test_node_commits_on_its_own(repo: Path) -> None:
    def commit(workdir: Path) -> None:
        (workdir / "edit.txt").write_text("node edit\n")
        git(workdir, "commit", "-q", "-am", "Node's own commit")

    run = start_run(
        repo, single(graph_attrs="evidence=require, commit=true"), {"implement": commit}
    )
    assert run.run().state is RunState.COMPLETED
    assert subjects(repo) == ["Node's own commit", "initial"]
    facts = record_of(repo, "implement").engine
    assert facts["evidence_method"] == "file_changes"
    assert facts["commit"] is None
    assert [c["message"] for c in facts["commits"]] == ["Node's own commit"]
    assert facts["files"]["modified"] == ["edit.txt"]


@pytest.mark.parametrize("ignore_orchestrator", [False, True])
def test_evidence_file_only(repo: Path, ignore_orchestrator: bool) -> None:
    if ignore_orchestrator:
        (repo / ".gitignore").write_text(".orchestrator/\n")
        git(repo, "add", ".gitignore")
        git(repo, "commit", "-q", "-m", "ignore .orchestrator")
    run = start_run(
        repo,
        single(graph_attrs="evidence=require, commit=true"),
        {"implement": own_record("Verified the staging deploy", "validation")},
    )
    assert run.run().state is RunState.COMPLETED
    assert subjects(repo)[0] == "[Pipeline] Implement (evidence only)"
    committed = json.loads(git(repo, "show", "HEAD:.orchestrator/evidence/implement.json"))
    assert committed["summary"] == "Verified the staging deploy"
    record = record_of(repo, "implement")
    assert record.summary == "Verified the staging deploy"
    assert record.type == "validation"
    assert record.outcome["checked"] == 3
    assert record.engine["evidence_method"] == "evidence_file"
    assert record.engine["node_record"] is True
    assert record.engine["commit"] == git(repo, "rev-parse", "HEAD").strip()


def test_expects_no_changes(repo: Path) -> None:
    run = start_run(
        repo,
        single(graph_attrs="evidence=require, commit=true", node_attrs=", expects_no_changes=true"),
    )
    assert run.run().state is RunState.COMPLETED
    assert subjects(repo) == ["initial"]
    facts = record_of(repo, "implement").engine
    assert facts["evidence_method"] == "expects_no_changes"
    assert facts["commit"] is None
    summary = run_work_summaries(run.run_dir, repo)["implement"]
    assert summary.description == "Node declared expects_no_changes"


def test_nothing_fails_with_the_exact_message(repo: Path) -> None:
    run = start_run(repo, single(graph_attrs="evidence=require"))
    result = run.run()
    assert result.state is RunState.FAILED
    outcome = result.node_outcomes["implement"]
    assert outcome.status is StageStatus.FAIL
    assert outcome.failure_reason == no_evidence(repo, "Implement")
    facts = record_of(repo, "implement").engine
    assert facts["status"] == "fail" and facts["evidence_method"] == "none"
    assert facts["failure_reason"] == no_evidence(repo, "Implement")


def test_no_evidence_takes_the_failure_route(repo: Path) -> None:
    dot = """digraph routed {
      graph [evidence=require]
      start [shape=Mdiamond]
      implement [type=action, label="Implement", prompt="Fix the login bug"]
      repair [type=action, expects_no_changes=true]
      done [shape=Msquare]
      start -> implement
      implement -> done [condition="outcome=success"]
      implement -> repair [condition="outcome=fail"]
      repair -> done
    }"""
    run = start_run(repo, dot)
    result = run.run()
    assert result.state is RunState.COMPLETED
    assert result.completed_nodes == ["start", "implement", "repair", "done"]


def test_pre_existing_dirty_files_do_not_count(repo: Path) -> None:
    (repo / "edit.txt").write_text("the user's unsaved work\n")
    (repo / "scratch.txt").write_text("notes\n")
    run = start_run(repo, single(graph_attrs="evidence=require, commit=true"))
    result = run.run()
    assert result.state is RunState.FAILED
    assert result.node_outcomes["implement"].failure_reason == no_evidence(repo, "Implement")
    assert subjects(repo) == ["initial"]


def test_deleting_a_file_counts(repo: Path) -> None:
    def delete(workdir: Path) -> None:
        (workdir / "gone.txt").unlink()

    run = start_run(
        repo, single(graph_attrs="evidence=require, commit=true"), {"implement": delete}
    )
    assert run.run().state is RunState.COMPLETED
    assert git(repo, "show", "--name-status", "--format=", "HEAD").split() == ["D", "gone.txt"]
    assert record_of(repo, "implement").engine["files"]["deleted"] == ["gone.txt"]


def test_require_outside_git_uses_a_content_snapshot(plain_dir: Path) -> None:
    run = start_run(
        plain_dir, single(graph_attrs="evidence=require"), {"implement": write("x.txt")}
    )
    assert run.run().state is RunState.COMPLETED
    assert record_of(plain_dir, "implement").engine["files"]["added"] == ["x.txt"]
    failing = start_run(plain_dir, single(graph_attrs="evidence=require"))
    assert failing.run().node_outcomes["implement"].failure_reason == (
        no_evidence(plain_dir, "Implement")
        + "\n.orchestrator/evidence/implement.json is unchanged since "
        "before the node ran (left by an earlier execution), so it does not count: write it "
        "anew during the step"
    )  # the first run's record is there: option 2 alone would read as if it were missing


def test_record_mode_records_without_judging(repo: Path) -> None:
    run = start_run(repo, single())
    assert run.run().state is RunState.COMPLETED
    facts = record_of(repo, "implement").engine
    assert facts["status"] == "success"
    assert facts["evidence_mode"] == "record"
    assert facts["evidence_method"] is None
    assert facts["handler_type"] == "action"
    assert facts["run_id"] == run.run_id


class RefusingValidator:
    """A fake validator that never sees evidence (injected through open_run)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def has_evidence_file(self, workdir: object, node_id: str) -> bool:
        return False

    def read_evidence(self, workdir: object, node_id: str) -> EvidenceReadResult:
        return EvidenceReadResult(None, [], exists=False)

    def validate(
        self, node: Node, graph: Graph, workdir: object, before: WorkTreeSnapshot | None
    ) -> ValidationResult:
        self.seen.append(node.id)
        return ValidationResult(False, "fake validator: no", {}, "none")


def test_an_injected_validator_is_used(repo: Path) -> None:
    fake = RefusingValidator()
    run = start_run(
        repo,
        single(graph_attrs="evidence=require"),
        {"implement": write("real_change.txt")},
        evidence_validator=fake,
    )
    result = run.run()
    assert fake.seen == ["implement"]
    assert result.node_outcomes["implement"].failure_reason == "fake validator: no"


def test_evidence_recorded_events_and_checkpoint_index(repo: Path) -> None:
    run = start_run(repo, single())
    seen: list[str] = []
    run.events.subscribe(
        lambda e: seen.append(str(e.node_id)) if e.type is EvidenceEvent.EVIDENCE_RECORDED else None
    )
    run.run()
    assert seen == ["start", "implement", "done"]
    checkpoint = json.loads((run.run_dir / "checkpoint.json").read_text())
    index = checkpoint["extensions"]["evidence"]
    assert index["log"] == EVIDENCE_LOG and index["records"] >= 2


def test_mixed_pipeline(repo: Path) -> None:
    dot = """digraph mixed {
      graph [evidence=require, commit=true, goal="Ship it"]
      start [shape=Mdiamond]
      code [type=action, label="Write code"]
      verify [type=action, label="Verify deploy"]
      review [type=action, label="Review", expects_no_changes=true]
      loop [type=action, label="Polish"]
      check [shape=diamond]
      lint [shape=parallelogram, tool_command="true", evidence=record, commit=false]
      done [shape=Msquare]
      start -> code -> verify -> review -> loop -> check
      check -> loop [condition="context.polish_rounds!=2"]
      check -> lint [condition="context.polish_rounds=2"]
      lint -> done
    }"""
    rounds = {"n": 0}

    def polish(workdir: Path) -> None:
        rounds["n"] += 1
        (workdir / "polish.txt").write_text(f"round {rounds['n']}\n")

    def verify(workdir: Path) -> None:
        write_evidence(
            workdir, EvidenceRecord("verify", "Deploy answers 200", "external_effect", {"url": "x"})
        )

    actions: dict[str, Action] = {
        "code": write("app.py", "print('hi')\n"),
        "verify": verify,
        "loop": polish,
    }
    registry = default_registry()
    registry.register("action", ActionHandler(actions))
    run = open_run(dot, workdir=repo, registry=registry)
    run.context.set("polish_rounds", 0)

    def count_rounds(event: object) -> None:
        run.context.set("polish_rounds", rounds["n"])

    run.events.subscribe(count_rounds)
    result = run.run()
    assert result.state is RunState.COMPLETED, result.failure_reason

    log = read_evidence_log(run.run_dir)
    assert [r.node_id for r in log] == [
        "start",
        "code",
        "verify",
        "review",
        "loop",
        "check",
        "loop",
        "check",
        "lint",
        "done",
    ]
    assert [r.engine["evidence_method"] for r in log if r.node_id == "loop"] == [
        "file_changes",
        "file_changes",
    ]
    assert subjects(repo) == [
        "[Pipeline] Polish",
        "[Pipeline] Polish",
        "[Pipeline] Verify deploy (evidence only)",
        "[Pipeline] Write code",
        "initial",
    ]
    # Every node has its file: the one that wrote its own keeps it as written (with the
    # engine's claim beside it), the others show their latest record, bound to this run.
    per_node = {p.name for p in (repo / ".orchestrator" / "evidence").iterdir()}
    assert per_node == {f"{n}.json" for n in {r.node_id for r in log}} | {"verify.engine.json"}
    verify = json.loads((repo / ".orchestrator" / "evidence" / "verify.json").read_text())
    assert "engine" not in verify.get("outcome", {})
    lint = json.loads((repo / ".orchestrator" / "evidence" / "lint.json").read_text())
    assert lint["runId"] == run.run_id
    assert record_of(repo, "loop").timestamp == log[6].timestamp
    assert record_of(repo, "lint").engine["evidence_mode"] == "record"

    summaries = run_work_summaries(run.run_dir, repo)
    code = summaries["code"]
    assert code.files.added == ("app.py",)
    assert [d.message for d in code.commit_details] == ["[Pipeline] Write code"]
    assert code.commit_details[0].author == "Evidence Tester <tester@example.invalid>"
    assert code.commit_details[0].files.added == ("app.py",)
    assert summaries["verify"].description == "Deploy answers 200"
    assert summaries["verify"].method == "evidence_file"
    assert summaries["review"].description == "Node declared expects_no_changes"
    assert summaries["review"].commits == ()
    assert summaries["loop"].files.modified == ("polish.txt",)
    assert "evidence: file_changes" in str(summaries["loop"])


def test_gate_steps_are_recorded(repo: Path) -> None:
    dot = one_gate("Ship?", name="gate")
    run = start_run(repo, dot)
    assert run.run().state is RunState.WAITING
    run.answer("ask", "Y")
    statuses = [(r.node_id, r.engine["status"]) for r in read_evidence_log(run.run_dir)]
    assert statuses[1:3] == [("ask", "waiting"), ("ask", "success")]
    assert record_of(repo, "ask").engine["status"] == "success"
    assert record_of(repo, "ask").engine["node_record"] is False


def test_codergen_prompt_gets_the_work_evidence_section(repo: Path) -> None:
    prompts: dict[str, str] = {}

    def backend(node: Node, prompt: str, context: Context) -> str:
        prompts[node.id] = prompt
        (repo / f"{node.id}.md").write_text(prompt)
        return "done"

    dot = """digraph agent {
      start [shape=Mdiamond]
      careful [prompt="Do the careful thing", evidence=require]
      loose [prompt="Do the loose thing"]
      done [shape=Msquare]
      start -> careful -> loose -> done
    }"""
    run = open_run(dot, workdir=repo, backend=backend)
    assert run.run().state is RunState.COMPLETED
    assert prompts["careful"].startswith("Do the careful thing")
    assert "## Work evidence" in prompts["careful"]
    assert ".orchestrator/evidence/careful.json" in prompts["careful"]
    assert "file_changes, external_effect, analysis, validation" in prompts["careful"]
    assert prompts["loose"] == "Do the loose thing"
    assert "internal.prompt_suffix.careful" not in run.context


def test_extension_is_in_the_default_session(repo: Path) -> None:
    run = start_run(repo, single())
    assert any(isinstance(ext, EvidenceExtension) for ext in run.extensions)


def test_resume_in_a_new_process_keeps_one_log(repo: Path) -> None:
    dot = one_gate("Ship?", name="gate")
    first = start_run(repo, dot)
    first.run()
    resumed = resume_run(first.run_dir)
    resumed.answer("ask", "Y")
    resumed.run()
    assert [r.node_id for r in read_evidence_log(first.run_dir)] == ["start", "ask", "ask", "done"]
    # The gate's file shows the answer, not the wait, also when another process answered it.
    assert record_of(repo, "ask").engine["status"] == "success"
    assert not (repo / ".orchestrator" / "evidence" / "ask.engine.json").exists()
    checkpoint = json.loads((first.run_dir / "checkpoint.json").read_text())
    assert checkpoint["extensions"]["evidence"]["records"] >= 3
    ext = next(e for e in resumed.extensions if isinstance(e, EvidenceExtension))
    assert ext.checkpoint_state()["records"] == 4


def test_work_summary_without_a_repository(plain_dir: Path) -> None:
    record = EvidenceRecord(
        "code",
        "Wrote the code",
        "file_changes",
        {
            "engine": {
                "status": "success",
                "evidence_method": "file_changes",
                "files": {"added": ["b.py", "a.py"], "modified": [], "deleted": ["old.py"]},
                "commits": [{"id": "abc123", "message": "[Pipeline] Write code"}],
                "commit": "abc123",
            }
        },
    )
    summary = work_summary(record, plain_dir)
    assert summary.description == "Wrote the code"
    assert summary.files.added == ("a.py", "b.py") and summary.files.deleted == ("old.py",)
    assert [(d.id, d.message, d.author) for d in summary.commit_details] == [
        ("abc123", "[Pipeline] Write code", "")
    ]
    assert summary.to_dict()["commit"] == "abc123"


class FlakyHandler:
    """First attempt changes a file and asks for a retry; the second succeeds doing nothing."""

    def __init__(self) -> None:
        self.attempts = 0

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        self.attempts += 1
        if self.attempts == 1:
            (env.workdir / "partial.txt").write_text("from attempt 1\n")
            return Outcome(status=StageStatus.RETRY, failure_reason="try again")
        return Outcome(status=StageStatus.SUCCESS)


def test_changes_of_earlier_attempts_of_the_step_count(repo: Path) -> None:
    registry = default_registry()
    flaky = FlakyHandler()
    registry.register("flaky", flaky)
    dot = """digraph flaky {
      graph [evidence=require, commit=true]
      start [shape=Mdiamond]
      implement [type=flaky, label="Implement", max_retries=2]
      done [shape=Msquare]
      start -> implement -> done
    }"""
    run = open_run(dot, workdir=repo, registry=registry, sleep=lambda _s: None)
    assert run.run().state is RunState.COMPLETED
    assert flaky.attempts == 2
    facts = record_of(repo, "implement").engine
    assert facts["attempt"] == 2
    assert facts["files"]["added"] == ["partial.txt"]
    assert subjects(repo)[0] == "[Pipeline] Implement"


HALF_RECORD = '{"version": 1, "nodeId": "implement", "summary": "half"}'


def test_invalid_own_record_is_reported_and_kept(repo: Path) -> None:
    def bad_record(workdir: Path) -> None:
        path = evidence_path(workdir, "implement")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HALF_RECORD)

    run = start_run(repo, single(graph_attrs="evidence=require"), {"implement": bad_record})
    result = run.run()
    assert result.state is RunState.FAILED
    outcome = result.node_outcomes["implement"]
    first, damage = outcome.failure_reason.rsplit("\n", 1)
    assert first == no_evidence(repo, "Implement")
    assert damage.startswith(
        f"evidence file {evidence_path(repo, 'implement')} of node 'implement' is damaged: "
        "field 'timestamp' is missing. "
    )
    assert "field 'timestamp' is missing" in outcome.notes
    assert evidence_path(repo, "implement").read_text() == HALF_RECORD
    facts = record_of(repo, "implement").engine
    assert any("field 'timestamp' is missing" in p for p in facts["evidence_problems"])
    assert (
        facts["invalid_node_record"] == '{"version": 1, "nodeId": "implement", "summary": "half"}'
    )
    assert facts["node_record"] is False


def test_node_timestamp_is_kept_when_merging(repo: Path) -> None:
    def own(workdir: Path) -> None:
        write_evidence(
            workdir,
            EvidenceRecord("implement", "Looked", "analysis", {"k": 1}, "2020-05-06T07:08:09Z"),
        )

    run = start_run(repo, single(graph_attrs="evidence=require"), {"implement": own})
    assert run.run().state is RunState.COMPLETED
    record = record_of(repo, "implement")
    assert record.engine["node_timestamp"] == "2020-05-06T07:08:09Z"
    assert record.timestamp != "2020-05-06T07:08:09Z"


@pytest.mark.parametrize("where", ["repo", "plain"])
def test_a_run_directory_inside_the_work_tree_is_never_evidence(
    repo: Path, plain_dir: Path, where: str
) -> None:
    workdir = repo if where == "repo" else plain_dir
    dot = """digraph tool_only {
      graph [evidence=require]
      start [shape=Mdiamond]
      implement [shape=parallelogram, label="Implement", prompt="Fix the login bug",
                 tool_command="echo output only"]
      done [shape=Msquare]
      start -> implement -> done
    }"""
    run = open_run(dot, workdir=workdir, runs_dir=workdir / "runs")
    result = run.run()
    assert (run.run_dir / "nodes" / "implement").is_dir()
    assert result.node_outcomes["implement"].failure_reason == no_evidence(workdir, "Implement")


def test_stale_inputs_are_in_the_record(repo: Path) -> None:
    (repo / "spec.md").write_text("v1\n")
    dot = """digraph stale {
      start [shape=Mdiamond]
      implement [type=action, source_files="spec.md", freshness=warn]
      done [shape=Msquare]
      start -> implement -> done
    }"""
    run = start_run(repo, dot)
    run.start()
    (repo / "spec.md").write_text("v2, changed after the baseline\n")
    assert run.run().state is RunState.COMPLETED
    assert record_of(repo, "implement").engine["stale_files"] == ["spec.md"]
    assert record_of(repo, "done").engine["stale_files"] == []


def test_a_record_the_log_refuses_stops_the_next_node_and_is_written_on_retry(
    repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Evidence is never lost while the run goes on: the next node fails saying why, and a
    retry (in a new process: the record waits in the checkpoint) writes it first, in order."""

    def block_the_log(workdir: Path) -> None:
        log = run.run_dir / EVIDENCE_LOG
        log.unlink()
        log.mkdir()  # appending to a folder fails as a full disk or a lost permission would

    dot = (
        single()
        .replace("implement -> done", "implement -> review -> done")
        .replace(
            "done [shape=Msquare]", 'done [shape=Msquare]\n      review [type=action, prompt="r"]'
        )
    )
    handler_calls: list[str] = []
    run = start_run(repo, dot, {"implement": block_the_log, "review": handler_calls.append})
    with caplog.at_level("WARNING"):
        result = run.run()
    assert result.state is RunState.FAILED and handler_calls == []
    reason = result.node_outcomes["review"].failure_reason
    assert reason.startswith(
        "evidence: node 'review' does not run while the record of 'implement' is not written "
        f"(cannot append to evidence log {run.run_dir / EVIDENCE_LOG}: "
    )
    assert reason.endswith(
        "make the run folder writable (free disk space, permissions), then retry"
    )
    warning = next(r for r in caplog.records if "was skipped" in r.getMessage())
    assert warning.exc_info is None  # one line: no traceback from deep inside
    assert warning.getMessage().startswith(
        "run extension 'evidence': its record of the step of node 'implement' was skipped: "
        f"cannot append to evidence log {run.run_dir / EVIDENCE_LOG}: "
    )
    run.close()

    (run.run_dir / EVIDENCE_LOG).rmdir()
    again = resume_run(run.run_dir)
    again.retry()
    assert again.run().state is RunState.COMPLETED
    steps = [(r.node_id, r.engine["status"]) for r in read_evidence_log(run.run_dir)]
    assert steps == [
        ("implement", "success"),
        ("review", "fail"),
        ("review", "success"),
        ("done", "success"),
    ]
