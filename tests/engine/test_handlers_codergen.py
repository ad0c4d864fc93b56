"""Start/exit/conditional and codergen handlers: prompts, backends, files, status contract."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.codergen import (
    CodergenHandler,
    expand_prompt,
    simulated_backend,
)
from freshness_magic.engine.handlers.simple import ConditionalHandler, ExitHandler, StartHandler
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus


def make_graph(nodes: dict[str, dict[str, str]], goal: str = "Ship it") -> Graph:
    graph = Graph(name="g", attrs={"goal": goal})
    for node_id, attrs in nodes.items():
        graph.nodes[node_id] = Node(node_id, dict(attrs))
    return graph


def make_env(graph: Graph, tmp_path: Path, **kwargs: object) -> StepEnv:
    return StepEnv(graph=graph, run_dir=tmp_path / "run", workdir=tmp_path, **kwargs)  # type: ignore[arg-type]


def test_noop_handlers_succeed(tmp_path: Path) -> None:
    graph = make_graph({"s": {"shape": "Mdiamond"}, "e": {"shape": "Msquare"}, "c": {}})
    env = make_env(graph, tmp_path)
    ctx = Context()
    cases = (
        (StartHandler(), "s", "Pipeline started"),
        (ExitHandler(), "e", "Pipeline complete"),
        (ConditionalHandler(), "c", "Conditions evaluated"),
    )
    for handler, node_id, notes in cases:
        outcome = handler.execute(graph.nodes[node_id], ctx, env)
        assert outcome.status is StageStatus.SUCCESS and outcome.notes == notes
    assert len(ctx) == 0


def test_expand_prompt_goal_context_and_unknown_keys() -> None:
    graph = make_graph({}, goal="Fix {login}")
    ctx = Context({"user": "ada", "lint.errors": 3, "data": {"a": 1}, "x": "$goal"})
    text = "Goal: $goal; user {user}; errors {lint.errors}; {context.user}; {data}; {x}; {nope} {}"
    assert expand_prompt(text, graph, ctx) == (
        'Goal: Fix {login}; user ada; errors 3; ada; {"a": 1}; $goal; {nope} {}'
    )
    assert expand_prompt("$goals stay", graph, ctx) == "$goals stay"
    assert expand_prompt("[{unset}]", graph, Context({"unset": None})) == "[]"


def test_simulated_backend_writes_prompt_response_and_status(tmp_path: Path) -> None:
    graph = make_graph({"draft": {"prompt": "Summarise for $goal by {who}"}})
    ctx = Context({"who": "reviewers"})
    env = make_env(graph, tmp_path)
    outcome = CodergenHandler().execute(graph.nodes["draft"], ctx, env)
    folder = tmp_path / "run" / "nodes" / "draft"
    assert (folder / "prompt.md").read_text() == "Summarise for Ship it by reviewers"
    assert (folder / "response.md").read_text() == "[Simulated] Response for stage: draft"
    status = json.loads((folder / "status.json").read_text())
    assert status["outcome"] == "success"
    assert status["context_updates"]["last_stage"] == "draft"
    assert outcome.status is StageStatus.SUCCESS
    assert outcome.context_updates == {
        "last_stage": "draft",
        "last_response": "[Simulated] Response for stage: draft",
        "llm.draft": {"backend": "simulated", "note": "simulated: no model was called"},
    }
    assert "internal.stage_dir" not in ctx


def test_prompt_falls_back_to_label(tmp_path: Path) -> None:
    graph = make_graph({"n": {"label": "Plan $goal"}})
    seen: list[str] = []

    def backend(node: Node, prompt: str, context: Context) -> str:
        seen.append(prompt)
        return "ok"

    CodergenHandler(backend).execute(graph.nodes["n"], Context(), make_env(graph, tmp_path))
    assert seen == ["Plan Ship it"]


def test_long_response_is_truncated_in_context(tmp_path: Path) -> None:
    graph = make_graph({"n": {"prompt": "p"}})
    outcome = CodergenHandler(lambda n, p, c: "x" * 500).execute(
        graph.nodes["n"], Context(), make_env(graph, tmp_path)
    )
    assert outcome.context_updates["last_response"] == "x" * 200
    assert (tmp_path / "run/nodes/n/response.md").read_text() == "x" * 500


def test_backend_outcome_is_returned_and_recorded(tmp_path: Path) -> None:
    graph = make_graph({"n": {"prompt": "p"}})
    wanted = Outcome(status=StageStatus.RETRY, failure_reason="rate limited", preferred_label="Y")
    outcome = CodergenHandler(lambda n, p, c: wanted).execute(
        graph.nodes["n"], Context(), make_env(graph, tmp_path)
    )
    assert outcome is wanted
    status = json.loads((tmp_path / "run/nodes/n/status.json").read_text())
    assert status["outcome"] == "retry"
    assert status["preferred_label"] == "Y"  # Appendix C


def test_backend_exception_is_fail_with_text(tmp_path: Path) -> None:
    graph = make_graph({"n": {"prompt": "p"}})

    def backend(node: Node, prompt: str, context: Context) -> str:
        raise RuntimeError("model unavailable")

    outcome = CodergenHandler(backend).execute(
        graph.nodes["n"], Context(), make_env(graph, tmp_path)
    )
    assert outcome.status is StageStatus.FAIL
    assert "model unavailable" in outcome.failure_reason
    assert json.loads((tmp_path / "run/nodes/n/status.json").read_text())["outcome"] == "fail"


def test_status_file_written_by_agent_is_the_outcome(tmp_path: Path) -> None:
    graph = make_graph({"n": {"prompt": "p"}})

    def agent(node: Node, prompt: str, context: Context) -> str:
        folder = Path(context["internal.stage_dir"])
        (folder / "status.json").write_text(
            json.dumps(
                {
                    "outcome": "partial_success",
                    "preferred_next_label": "Fix",
                    "suggested_next_ids": ["fix"],
                    "context_updates": {"review.issues": "2"},
                    "notes": "two issues left",
                }
            )
        )
        return "done"

    env = make_env(graph, tmp_path)
    handler = CodergenHandler(agent)
    outcome = handler.execute(graph.nodes["n"], Context(), env)
    assert outcome.status is StageStatus.PARTIAL_SUCCESS
    assert outcome.preferred_label == "Fix"
    assert outcome.suggested_next_ids == ["fix"]
    assert outcome.context_updates["review.issues"] == "2"
    assert outcome.context_updates["last_stage"] == "n"
    assert json.loads((tmp_path / "run/nodes/n/status.json").read_text())["notes"] == (
        "two issues left"
    )

    # A second attempt whose backend writes nothing ignores the stale file of the first.
    again = CodergenHandler(simulated_backend).execute(graph.nodes["n"], Context(), env)
    assert again.status is StageStatus.SUCCESS


def test_invalid_status_file_is_fail_naming_the_file(tmp_path: Path) -> None:
    graph = make_graph({"n": {"prompt": "p"}})

    def agent(node: Node, prompt: str, context: Context) -> str:
        (Path(context["internal.stage_dir"]) / "status.json").write_text('{"outcome": "great"}')
        return "done"

    outcome = CodergenHandler(agent).execute(graph.nodes["n"], Context(), make_env(graph, tmp_path))
    assert outcome.status is StageStatus.FAIL
    assert "status.json" in outcome.failure_reason
    assert "great" in outcome.failure_reason


def test_backend_past_the_deadline_fails(tmp_path: Path) -> None:
    graph = make_graph({"n": {"prompt": "p"}})
    release = threading.Event()

    def slow(node: Node, prompt: str, context: Context) -> str:
        release.wait(30)
        return "late"

    env = make_env(graph, tmp_path, deadline=time.monotonic() + 0.2)
    try:
        outcome = CodergenHandler(slow).execute(graph.nodes["n"], Context(), env)
    finally:
        release.set()
    assert outcome.status is StageStatus.FAIL
    assert "timed out" in outcome.failure_reason
    assert not (tmp_path / "run/nodes/n/response.md").exists()


def test_a_timed_out_call_names_the_nodes_timeout(tmp_path: Path) -> None:
    """The reason says the timeout the node set (as tool nodes do), not the time measured until
    the call was given up, which includes the stop grace (and read 1.2e+03s for timeout=20m)."""
    graph = make_graph({"n": {"prompt": "p", "timeout": "0.2s"}})
    release = threading.Event()

    def stuck(node: Node, prompt: str, context: Context) -> str:
        release.wait(30)
        return "late"

    env = make_env(graph, tmp_path, deadline=time.monotonic() + 0.2, slack=0.02)
    try:
        outcome = CodergenHandler(stuck).execute(graph.nodes["n"], Context(), env)
    finally:
        release.set()
    assert outcome.status is StageStatus.FAIL
    assert outcome.failure_reason.startswith("timed out after 0.2s waiting for ")
