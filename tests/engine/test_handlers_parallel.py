"""Parallel fan-out and fan-in through real runs: join policies, isolation, events, ranking."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from freshness_magic.engine.context import Context, partial_key
from freshness_magic.engine.events import Event, EventType
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.handlers.fan_in import FanInHandler
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run
from freshness_magic.errors import ValidationError
from freshness_magic.session import open_run
from tests.pipelines import ONE_ENDS_ONE_WAITS, TWO_BRANCHES
from tests.processes import cli, killed_after_quick
from tests.waiting import wait_until


def run_pipeline(source: str, tmp_path: Path, **kwargs: object) -> tuple[Run, list[Event]]:
    run = open_run(load_pipeline(source), workdir=tmp_path, extensions=[], **kwargs)
    events: list[Event] = []
    run.events.subscribe(events.append)
    run.run()
    return run, events


FAN_OUT = """
digraph p {
  start [shape=Mdiamond]
  fan   [shape=component, join_policy="%s", max_parallel=%d]
  good  [shape=parallelogram, tool_command="echo good > good.txt; echo ok"]
  good2 [prompt="second step of good"]
  bad   [shape=parallelogram, tool_command="echo broken >&2; exit 2"]
  last  [shape=parallelogram, tool_command="touch last.txt"]
  join  [shape=tripleoctagon]
  done  [shape=Msquare]
  start -> fan
  fan -> bad
  fan -> good
  fan -> last
  good -> good2 -> join
  bad -> join
  last -> join
  join -> done
}
"""


def test_wait_all_with_a_failing_branch_is_partial_and_joins(tmp_path: Path) -> None:
    run, events = run_pipeline(FAN_OUT % ("wait_all", 4), tmp_path)
    result = run.result()
    assert result.status == "completed"
    assert [step.node_id for step in run.history] == ["start", "fan", "join", "done"]
    assert sorted(result.completed_nodes) == sorted(
        ["start", "bad", "good", "good2", "last", "fan", "join", "done"]
    )
    assert result.node_outcomes["bad"].status is StageStatus.FAIL
    fan = result.node_outcomes["fan"]
    assert fan.status is StageStatus.PARTIAL_SUCCESS
    assert fan.suggested_next_ids == ["join"]
    ctx = result.context
    assert ctx["parallel.success_count"] == 2
    assert ctx["parallel.fail_count"] == 1
    by_id = {r["id"]: r for r in ctx["parallel.results"]}
    assert [r["id"] for r in ctx["parallel.results"]] == ["bad", "good", "last"]
    assert by_id["bad"]["status"] == "fail"
    assert "exit code 2" in by_id["bad"]["failure_reason"]
    assert "broken" in by_id["bad"]["failure_reason"]
    assert by_id["good"]["completed_nodes"] == ["good", "good2"]
    assert by_id["good"]["fan_in"] == "join"
    assert by_id["good"]["context_updates"]["tool.output"] == "ok"
    assert by_id["good"]["context_updates"]["last_stage"] == "good2"
    # Branch contexts are not merged back into the run.
    assert "tool.output" not in ctx and "last_stage" not in ctx
    assert ctx["parallel.fan_in.best_id"] == "good"
    assert ctx["parallel.fan_in.best_outcome"] == "success"
    assert (tmp_path / "good.txt").exists() and (tmp_path / "last.txt").exists()
    assert (run.run_dir / "nodes" / "good2" / "prompt.md").read_text() == "second step of good"
    kinds = [e.type.value for e in events if e.type.value.startswith("parallel")]
    assert kinds[0] == "parallel_started" and kinds[-1] == "parallel_completed"
    assert kinds.count("parallel_branch_started") == 3
    assert kinds.count("parallel_branch_completed") == 3
    done = next(e for e in events if e.type.value == "parallel_completed")
    assert (done.node_id, done.data["success_count"], done.data["failure_count"]) == ("fan", 2, 1)


def test_first_success_skips_branches_not_started(tmp_path: Path) -> None:
    run, _ = run_pipeline(FAN_OUT % ("first_success", 1), tmp_path)
    result = run.result()
    fan = result.node_outcomes["fan"]
    assert fan.status is StageStatus.SUCCESS
    statuses = {r["id"]: r["status"] for r in result.context["parallel.results"]}
    assert statuses == {"bad": "fail", "good": "success", "last": "skipped"}
    assert not (tmp_path / "last.txt").exists()
    assert result.context["parallel.fail_count"] == 1
    assert result.context["parallel.fan_in.best_id"] == "good"
    assert result.status == "completed"


def test_first_success_with_every_branch_failing_fails_the_node(tmp_path: Path) -> None:
    """Every outgoing edge is a branch (§4.8), so failure routing after the join is the
    parallel node's retry_target."""
    source = """
    digraph p {
      start [shape=Mdiamond]
      fan [shape=component, join_policy=first_success, retry_target=recover]
      a [shape=parallelogram, tool_command="exit 1"]
      b [shape=parallelogram, tool_command="exit 4"]
      join [shape=tripleoctagon]
      recover [prompt="recover"]
      done [shape=Msquare]
      start -> fan
      fan -> a
      fan -> b
      a -> join
      b -> join
      recover -> done
      join -> done
    }
    """
    run, _ = run_pipeline(source, tmp_path)
    result = run.result()
    fan = result.node_outcomes["fan"]
    assert fan.status is StageStatus.FAIL
    assert "a: exit code 1" in fan.failure_reason and "b: exit code 4" in fan.failure_reason
    assert result.completed_nodes[0] == "start"
    assert sorted(result.completed_nodes[1:3]) == ["a", "b"]
    assert result.completed_nodes[3:] == ["fan", "recover", "done"]


def test_branches_run_concurrently_up_to_max_parallel(tmp_path: Path) -> None:
    source = """
    digraph p {
      start [shape=Mdiamond]
      fan [shape=component, max_parallel=%d]
      a [type=rendezvous]
      b [type=rendezvous]
      join [shape=tripleoctagon]
      done [shape=Msquare]
      start -> fan
      fan -> a
      fan -> b
      a -> join
      b -> join
      join -> done
    }
    """

    class Rendezvous:
        """Succeeds only when the other branch is running at the same time (it waits ``patience``
        seconds for it: generous when both may run, as a loaded machine may be slow to start
        the second; short when one at a time, as no wait would be long enough)."""

        def __init__(self, patience: float) -> None:
            self.barrier = threading.Barrier(2, timeout=patience)

        def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
            self.barrier.wait()
            return Outcome(notes=f"{node.id} met its peer")

    cases = ((2, 60.0, StageStatus.SUCCESS), (1, 0.5, StageStatus.PARTIAL_SUCCESS))
    for max_parallel, patience, expected in cases:
        registry = default_registry()
        registry.register("rendezvous", Rendezvous(patience))
        run, _ = run_pipeline(source % max_parallel, tmp_path, registry=registry)
        assert run.node_outcomes["fan"].status is expected


def test_branch_follows_conditions_and_handler_exceptions_fail_the_branch(tmp_path: Path) -> None:
    source = """
    digraph p {
      start [shape=Mdiamond]
      fan [shape=component]
      check [shape=parallelogram, tool_command="exit 1"]
      fix [prompt="fix it"]
      boom [type=explode]
      join [shape=tripleoctagon]
      done [shape=Msquare]
      start -> fan
      fan -> check
      fan -> boom
      check -> fix [condition="outcome=fail"]
      check -> join [condition="outcome=success"]
      fix -> join
      boom -> join
      join -> done
    }
    """

    class Explode:
        def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
            raise RuntimeError("kaboom")

    registry = default_registry()
    registry.register("explode", Explode())
    run, _ = run_pipeline(source, tmp_path, registry=registry)
    results = {r["id"]: r for r in run.context["parallel.results"]}
    assert results["check"]["completed_nodes"] == ["check", "fix"]
    assert results["check"]["status"] == "success"
    assert results["boom"]["status"] == "fail"
    assert "kaboom" in results["boom"]["failure_reason"]
    assert run.result().status == "completed"


def fan_in(results: object) -> Outcome:
    graph = Graph(name="g", nodes={"join": Node("join", {"shape": "tripleoctagon"})})
    env = StepEnv(graph=graph, run_dir=Path("/nonexistent"), workdir=Path("."))
    ctx = Context({} if results is None else {"parallel.results": results})
    return FanInHandler().execute(graph.nodes["join"], ctx, env)


@pytest.mark.parametrize(
    ("results", "best"),
    [
        (
            [
                {"id": "a", "status": "partial_success", "score": 9},
                {"id": "b", "status": "success"},
            ],
            "b",
        ),
        (
            [
                {"id": "a", "status": "success", "score": 1},
                {"id": "b", "status": "success", "score": 3},
            ],
            "b",
        ),
        (
            [
                {"id": "b", "status": "success", "score": 2},
                {"id": "a", "status": "success", "score": 2},
            ],
            "a",
        ),
        ([{"id": "a", "status": "fail"}, {"id": "b", "status": "retry"}], "b"),
        ([{"id": "a", "status": "success"}, {"id": "0", "status": "skipped"}], "a"),
    ],
)
def test_fan_in_ranks_status_then_score_then_id(
    results: list[dict[str, object]], best: str
) -> None:
    outcome = fan_in(results)
    assert outcome.status is StageStatus.SUCCESS
    assert outcome.context_updates["parallel.fan_in.best_id"] == best


def test_fan_in_fails_without_results_or_when_all_failed() -> None:
    assert fan_in(None).status is StageStatus.FAIL
    assert "no parallel results" in fan_in([]).failure_reason
    outcome = fan_in([{"id": "a", "status": "fail"}, {"id": "b", "status": "fail", "score": 1}])
    assert outcome.status is StageStatus.FAIL
    assert outcome.context_updates["parallel.fan_in.best_id"] == "b"
    assert "all 2 branches failed" in outcome.failure_reason


def test_fail_fast_stops_launching_branches(tmp_path: Path) -> None:
    source = (FAN_OUT % ("wait_all", 1)).replace(
        'join_policy="wait_all"', 'join_policy="wait_all", error_policy="fail_fast"'
    )
    run, _ = run_pipeline(source, tmp_path)
    statuses = {r["id"]: r["status"] for r in run.context["parallel.results"]}
    assert statuses == {"bad": "fail", "good": "skipped", "last": "skipped"}
    assert run.node_outcomes["fan"].status is StageStatus.PARTIAL_SUCCESS
    assert not (tmp_path / "good.txt").exists()
    assert run.context["parallel.fail_count"] == 1


def test_unknown_join_policy_is_a_clear_failure(tmp_path: Path) -> None:
    """Refused before the run (validation), and by the handler for a graph changed after."""
    with pytest.raises(ValidationError, match="join_policy='most' is not one the parallel"):
        run_pipeline(FAN_OUT.replace('"%s"', '"most"') % 2, tmp_path)
    run = open_run(load_pipeline(FAN_OUT % ("wait_all", 2)), workdir=tmp_path, extensions=[])
    run.graph.nodes["fan"].attrs["join_policy"] = "most"
    run.run()
    reason = run.node_outcomes["fan"].failure_reason
    assert "unknown join_policy 'most'" in reason and "first_success" in reason


def test_fan_in_with_prompt_asks_the_backend(tmp_path: Path) -> None:
    graph = Graph(name="g", nodes={"join": Node("join", {"prompt": "Pick the best for $goal"})})
    graph.attrs["goal"] = "speed"
    env = StepEnv(graph=graph, run_dir=tmp_path, workdir=tmp_path)
    results = [
        {"id": "fast", "status": "success", "score": 1},
        {"id": "fast_v2", "status": "partial_success", "notes": "cut corners"},
        {"id": "broken", "status": "fail"},
    ]
    prompts: list[str] = []

    def judge(answer: str) -> FanInHandler:
        def backend(node: Node, prompt: str, context: Context) -> str:
            prompts.append(prompt)
            return answer

        return FanInHandler(backend)

    ctx = Context({"parallel.results": results})
    picked = judge("I prefer fast_v2 over fast.").execute(graph.nodes["join"], ctx, env)
    assert picked.context_updates["parallel.fan_in.best_id"] == "fast_v2"
    assert picked.notes.endswith("(partial_success; backend)")
    assert prompts[0].startswith("Pick the best for speed\n\nCandidates:\n- fast: success")
    assert "- fast_v2: partial_success, score 0, notes: cut corners" in prompts[0]
    assert (tmp_path / "nodes/join/response.md").read_text() == "I prefer fast_v2 over fast."

    failed_only = judge("broken is best").execute(graph.nodes["join"], ctx, env)
    assert failed_only.context_updates["parallel.fan_in.best_id"] == "fast"
    assert failed_only.notes.endswith("(success; heuristic)")


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("join_policy=k_of_n, join_k=2", StageStatus.SUCCESS),
        ("join_policy=k_of_n, join_k=3", StageStatus.FAIL),
        ('join_policy=quorum, join_quorum="0.6"', StageStatus.SUCCESS),
        ('join_policy=quorum, join_quorum="0.7"', StageStatus.FAIL),
    ],
)
def test_k_of_n_and_quorum(tmp_path: Path, policy: str, expected: StageStatus) -> None:
    source = FAN_OUT.replace('join_policy="%s", max_parallel=%d', policy)
    run, _ = run_pipeline(source, tmp_path)
    assert run.node_outcomes["fan"].status is expected


def test_nested_parallel_runs_its_own_fan_in_inside_the_branch(tmp_path: Path) -> None:
    source = """
    digraph p {
      start [shape=Mdiamond]
      outer [shape=component]
      x [prompt="x"]
      inner [shape=component]
      i1 [prompt="i1"]
      i2 [prompt="i2"]
      ijoin [shape=tripleoctagon]
      after_inner [prompt="after inner"]
      join [shape=tripleoctagon]
      done [shape=Msquare]
      start -> outer
      outer -> x
      outer -> inner
      inner -> i1
      inner -> i2
      i1 -> ijoin
      i2 -> ijoin
      ijoin -> after_inner -> join
      x -> join
      join -> done
    }
    """
    run, _ = run_pipeline(source, tmp_path)
    result = run.result()
    assert [step.node_id for step in run.history] == ["start", "outer", "join", "done"]
    inner_branch = ["i1", "i2", "inner", "ijoin", "after_inner"]
    assert set(inner_branch) | {"x"} <= set(result.completed_nodes)
    branches = {r["id"]: r for r in result.context["parallel.results"]}
    assert branches["inner"]["completed_nodes"] == ["inner", "ijoin", "after_inner"]
    assert branches["inner"]["fan_in"] == "join"
    assert branches["inner"]["context_updates"]["parallel.fan_in.best_id"] == "i1"
    assert branches["x"]["completed_nodes"] == ["x"]
    # every execution has its trace, each branch node inside the parallel node it ran in
    traces = {t.node_id: t for t in run.traces}
    assert sorted(traces) == sorted(result.completed_nodes)
    outer, inner = traces["outer"].step, traces["inner"].step
    assert {n: t.within for n, t in traces.items() if t.branch_of is not None} == {
        "i1": inner,
        "i2": inner,
        "x": outer,
        "inner": outer,
        "ijoin": outer,
        "after_inner": outer,
    }
    assert {r.part: r.writer for r in traces["ijoin"].reads} == {
        "i1": traces["i1"].step,
        "i2": traces["i2"].step,
    }


def test_retrying_a_branch_node_runs_its_parallel_node_again_with_every_branch(
    tmp_path: Path,
) -> None:
    """Alone, the branch would go on to the fan-in and join its new result with the other
    branches' old ones."""
    from freshness_magic.engine.recovery import rearmed_note

    run = open_run(load_pipeline(TWO_BRANCHES), workdir=tmp_path, extensions=[])
    events: list[Event] = []
    run.events.subscribe(events.append)
    for _ in range(3):  # start, fan (with both branches), join
        run.step()
    assert run.retry("b2") == "fan"
    assert run.retry("start") == "start" and run.retry("fan") == "fan"
    assert run.retry("b2") == "fan"
    assert "fan runs again with all its branches" in (rearmed_note("b2", "fan") or "")
    assert rearmed_note("fan", "fan") is None and rearmed_note(None, "fan") is None
    run.run()
    assert run.result().status == "completed"
    started = [e.node_id for e in events if e.type is EventType.PARALLEL_STARTED]
    assert started == ["fan", "fan"]
    assert (tmp_path / "b1.txt").read_text() == "b1\nb1\n"
    assert (tmp_path / "b2.txt").read_text() == "b2\nb2\n"


def interrupt_after_quick(tmp_path: Path) -> tuple[Run, list[Event]]:
    """A run of ONE_ENDS_ONE_WAITS stopped (``Run.interrupt``) once ``quick`` is saved."""
    run = open_run(load_pipeline(ONE_ENDS_ONE_WAITS), workdir=tmp_path, extensions=[])
    events: list[Event] = []
    run.events.subscribe(events.append)

    def stop() -> None:
        wait_until(
            lambda: (tmp_path / "slow.txt").exists() and partial_key("fan") in run.result().context,
            "quick ended and was saved while slow runs",
        )
        run.interrupt()

    stopper = threading.Thread(target=stop)
    stopper.start()
    try:
        assert run.run().interrupted_node == "fan"
    finally:
        stopper.join()
    return run, events


def test_an_interrupted_parallel_node_runs_only_the_branches_that_had_not_ended(
    tmp_path: Path,
) -> None:
    """Before, every branch ran again: a tool's work done twice, its side effects doubled."""
    run, events = interrupt_after_quick(tmp_path)
    (tmp_path / "go").touch()
    result = run.run()
    run.close()
    assert result.status == "completed"
    assert (tmp_path / "quick.txt").read_text() == "quick\n"  # once: its result was kept
    assert (tmp_path / "slow.txt").read_text() == "slow\nslow\n"
    joined = {b["id"]: b for b in result.context["parallel.results"]}
    assert joined["quick"]["status"] == joined["slow"]["status"] == "success"
    assert joined["quick"]["completed_nodes"] == ["quick"]
    assert result.node_outcomes["fan"].notes == (
        "2 of 2 branches succeeded (wait_all); quick: ended before the node was interrupted, "
        "not run again"
    )
    kept = [e.data for e in events if e.type is EventType.PARALLEL_BRANCH_COMPLETED]
    assert [(d["branch"], d["status"], d.get("kept", False)) for d in kept] == [
        ("quick", "success", False),
        ("slow", "skipped", False),  # interrupted
        ("quick", "success", True),
        ("slow", "success", False),
    ]
    assert partial_key("fan") not in result.context  # the node finished: nothing left to keep
    assert result.node_outcomes["join"].notes.startswith("Selected best candidate")
    # quick's execution keeps its trace, and the fan-in reads its result from it
    traces = {t.node_id: t for t in run.traces}
    assert [t.node_id for t in run.traces] == ["start", "quick", "slow", "fan", "join", "done"]
    assert traces["quick"].within == traces["fan"].step == traces["slow"].within
    assert {r.part: r.writer for r in traces["join"].reads} == {
        "quick": traces["quick"].step,
        "slow": traces["slow"].step,
    }


@pytest.mark.parametrize("node", [None, "start"])
def test_a_retry_after_an_interrupted_parallel_node_runs_every_branch_afresh(
    tmp_path: Path, node: str | None
) -> None:
    """A retry asks for the work again: of the interrupted node, or from a node before it."""
    run, _ = interrupt_after_quick(tmp_path)
    (tmp_path / "go").touch()
    assert run.retry(node) == (node or "fan")
    assert partial_key("fan") not in run.result().context
    assert run.run().status == "completed"
    run.close()
    assert (tmp_path / "quick.txt").read_text() == "quick\nquick\n"


def test_a_parallel_node_whose_driver_was_killed_keeps_the_branches_that_had_ended(
    tmp_path: Path,
) -> None:
    """SIGKILL with ``quick`` ended and ``slow`` running: a resume in a new process runs only
    ``slow`` (each ended branch is journaled at once)."""
    (tmp_path / "p.dot").write_text(ONE_ENDS_ONE_WAITS)
    run_dir = killed_after_quick(tmp_path)
    for node in ("fan", "slow"):  # what was running is named cut off, as status does
        said = cli("why", str(run_dir), node, cwd=tmp_path).stdout.splitlines()
        assert said[:2] == [
            f"{node}: interrupted",
            "  was running when its driver stopped without saving (killed?); resume runs it again",
        ], said
    assert cli("why", str(run_dir), "quick", cwd=tmp_path).stdout.startswith("quick: succeeded")
    said = cli("why", str(run_dir), "fan", cwd=tmp_path).stdout.splitlines()
    assert said[-2:] == [  # the branch that had ended is named: it does not run again
        "  next: run it again and go on from it (quick had ended: not run again):",
        f"      python -m freshness_magic resume {run_dir}",
    ]
    (tmp_path / "go").touch()
    resumed = cli("resume", str(run_dir), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "quick: ended before the node was interrupted, not run again" in resumed.stdout
    assert (tmp_path / "quick.txt").read_text() == "quick\n"
    assert (tmp_path / "slow.txt").read_text() == "slow\nslow\n"
