"""OpenAI-compatible and Anthropic backends through the real client libraries, against local
servers on 127.0.0.1 (tests/backends/fakeservers.py)."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from freshness_magic.backends import BackendError, describe_backend, resolve_backend
from freshness_magic.engine.context import Context
from freshness_magic.engine.events import Event, EventType
from freshness_magic.engine.handlers import llm
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.codergen import CodergenHandler
from freshness_magic.engine.handlers.llm import BackendReply, BackendRequest
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import StageStatus
from freshness_magic.session import open_run
from tests.backends.fakeservers import ANSWER, serve

ONE_NODE = """digraph p {
  graph [goal="Ship the fix"]
  start [shape=Mdiamond]
  draft [prompt="Plan for $goal"%s]
  done [shape=Msquare]
  start -> draft -> done
}"""


def run_one(tmp_path: Path, backend: str, extra: str = "") -> tuple[object, list[Event]]:
    run = open_run(ONE_NODE % extra, workdir=tmp_path, backend=backend)
    events: list[Event] = []
    run.events.subscribe(events.append)
    run.run()
    return run, events


pytestmark = pytest.mark.usefixtures("model_keys")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_streamed_answer_reaches_response_events_status_and_evidence(
    tmp_path: Path, kind: str
) -> None:
    with serve(kind) as server:
        run, events = run_one(tmp_path, f"{kind}:test-model@{server.url}")
    assert run.result().status == "completed"
    folder = run.run_dir / "nodes" / "draft"
    assert (folder / "response.md").read_text() == ANSWER
    streamed = [e.data for e in events if e.type is EventType.STAGE_OUTPUT]
    assert streamed and all(d["stream"] == "response" for d in streamed)
    assert "".join(d["text"] for d in streamed) == ANSWER
    request = server.requests[0]
    assert request.body["stream"] is True
    assert request.body["messages"] == [{"role": "user", "content": "Plan for Ship the fix"}]
    assert "reasoning_effort" not in request.body and "thinking" not in request.body
    facts = json.loads((folder / "status.json").read_text())["context_updates"]["llm.draft"]
    expected_in = 11 if kind == "openai" else 13
    assert facts["model"] == "test-model"
    assert facts["backend"] == kind
    assert facts["usage"] == {"input_tokens": expected_in, "output_tokens": 6}
    record = json.loads((tmp_path / ".orchestrator/evidence/draft.json").read_text())
    assert record["outcome"]["engine"]["llm"] == facts


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_plain_call_uses_one_json_response(tmp_path: Path, kind: str) -> None:
    with serve(kind) as server:
        backend = resolve_backend(f"{kind}:json-model@{server.url}")
        text = backend(Node("n", {}), "Say it", Context())
    assert text == ANSWER
    assert "stream" not in server.requests[0].body


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_rate_limit_is_retried_then_succeeds(tmp_path: Path, kind: str) -> None:
    with serve(kind) as server:
        run, _ = run_one(tmp_path, f"{kind}:flaky-model@{server.url}")
    assert run.result().status == "completed"
    assert server.models() == ["flaky-model", "flaky-model"]
    assert (run.run_dir / "nodes/draft/response.md").read_text() == ANSWER


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_server_error_fails_with_the_providers_message_in_one_line(
    tmp_path: Path, kind: str
) -> None:
    with serve(kind) as server:
        run, _ = run_one(tmp_path, f"{kind}:broken-model@{server.url}", ', timeout="2s"')
    result = run.result()
    assert result.status == "failed"
    assert "HTTP 500: the model is on fire" in result.failure_reason
    assert "\n" not in result.failure_reason
    assert len(server.requests) >= 2


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_stream_without_any_text_fails_the_node(tmp_path: Path, kind: str) -> None:
    """A trial's server that sent no text (or no stream) was recorded as an empty success."""
    with serve(kind) as server:
        run, _ = run_one(tmp_path, f"{kind}:silent-model@{server.url}")
    assert run.result().status == "failed"
    reason = run.node_outcomes["draft"].failure_reason  # named once, not "spec: ... spec"
    assert reason == (
        f"{kind}:silent-model@{server.url} answered without any text (an empty answer): there "
        "is no response to go on with"
    ), reason
    assert len(server.requests) == 1  # nothing to retry: the server answered


def test_slow_response_past_the_timeout_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node fails with the handler's own message (what was waited for), not the run's
    bare "timed out after Ns" given to a handler that did not return in time.

    The deadline passes once the server holds the request, not after a second of real time:
    the run abandons a handler a tenth of its timeout (at most a second) past the deadline,
    and a loaded machine may take longer than a tenth of a second to stop the call. The
    handler's clock jumps a day when the request has arrived, so the run's own limit (in
    real time) stays a minute away."""
    with serve("openai") as server:

        class Clock:
            """``time`` for the handler's deadline checks: a day later once the server has
            the request."""

            @staticmethod
            def monotonic() -> float:
                return time.monotonic() + (86400.0 if server.received.is_set() else 0.0)

        monkeypatch.setattr(llm, "time", Clock)
        run, _ = run_one(tmp_path, f"openai:slow-model@{server.url}", ', timeout="60s"')
    result = run.result()
    assert result.status == "failed"
    assert result.failure_reason.startswith(
        f"node 'draft' failed (timed out after 60s waiting for openai:slow-model@{server.url}"
    ), result.failure_reason
    assert "last error" not in result.failure_reason
    assert len(server.requests) == 1  # stopped while it waited: not sent again


def test_the_clients_own_timeout_at_the_deadline_reads_as_the_nodes_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client's timeout is set to the time left, so it may give up before the handler
    stops it: its "request timed out" is the node's timeout, not a last error to show. The
    handler looks at its deadline only every minute here, so the client's timeout is what
    ends the wait; the handler runs alone (no run to abandon it), so a loaded machine
    changes nothing."""
    monkeypatch.setattr(llm, "POLL_SECONDS", 60.0)
    graph = Graph(name="g")
    graph.nodes["n"] = Node("n", {"prompt": "go", "timeout": "1s"})
    node = graph.nodes["n"]
    env = StepEnv(
        graph=graph, run_dir=tmp_path / "run", workdir=tmp_path, deadline=time.monotonic() + 1
    )
    with serve("openai") as server:
        backend = f"openai:slow-model@{server.url}"
        outcome = CodergenHandler(resolve_backend(backend)).execute(node, Context(), env)
    assert outcome.status is StageStatus.FAIL
    assert outcome.failure_reason == f"timed out after 1s waiting for {backend}"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_stream_cut_by_the_timeout_names_no_error_of_its_own_stop(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trial's timed-out stream said "(last error: cannot connect ...: Bad file descriptor)":
    the error of the stream the stop itself had closed, after text had arrived.

    The deadline passes when the first text has arrived, not after a second of real time (a
    loaded machine may take longer than that to connect): the handler's clock jumps past it
    on the streamed text's event."""
    arrived = threading.Event()

    class Clock:
        """``time`` for the handler's deadline checks: a day later once text arrived."""

        @staticmethod
        def monotonic() -> float:
            return time.monotonic() + (86400.0 if arrived.is_set() else 0.0)

    monkeypatch.setattr(llm, "time", Clock)
    with serve(kind) as server:
        backend = f"{kind}:trickle-model@{server.url}"
        run = open_run(ONE_NODE % ', timeout="60s"', workdir=tmp_path, backend=backend)
        run.events.subscribe(
            lambda e: arrived.set() if e.data.get("stream") == "response" else None
        )
        run.run()
        server.stop.set()
    reason = run.node_outcomes["draft"].failure_reason
    assert reason == f"timed out after 60s waiting for {backend}", reason


def test_cancel_closes_the_stream_and_fails_interrupted(tmp_path: Path) -> None:
    graph = Graph(name="g")
    graph.nodes["n"] = Node("n", {"prompt": "go"})
    env = StepEnv(graph=graph, run_dir=tmp_path / "run", workdir=tmp_path)
    response = tmp_path / "run/nodes/n/response.md"

    def stop_after_first_chunk() -> None:
        while not (response.exists() and response.read_text()):
            time.sleep(0.02)
        env.cancel.set()

    with serve("openai") as server:
        handler = CodergenHandler(resolve_backend(f"openai:trickle-model@{server.url}"))
        threading.Thread(target=stop_after_first_chunk, daemon=True).start()
        outcome = handler.execute(graph.nodes["n"], Context(), env)
    assert outcome.status is StageStatus.FAIL
    assert outcome.failure_reason == "interrupted"
    assert response.read_text() == ANSWER.split(" ")[0]


def test_stylesheet_model_and_provider_override_the_default_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dot = """digraph p {
      graph [model_stylesheet="* { llm_model: base-model; }
                               #special { llm_model: special-model; reasoning_effort: low; }
                               .claude { llm_provider: anthropic; llm_model: claude-test;
                                         reasoning_effort: medium; }"]
      start [shape=Mdiamond]
      a [prompt="A"]
      special [prompt="S"]
      c [prompt="C", class="claude"]
      done [shape=Msquare]
      start -> a -> special -> c -> done
    }"""
    with serve("openai") as oai, serve("anthropic") as ant:
        monkeypatch.setenv("OPENAI_BASE_URL", oai.url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", ant.url)
        run = open_run(dot, workdir=tmp_path, backend="openai:default-model")
        run.run()
    assert run.result().status == "completed"
    assert oai.models() == ["base-model", "special-model"]
    assert oai.requests[1].body["reasoning_effort"] == "low"
    assert ant.models() == ["claude-test"]
    assert ant.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert run.context["llm.c"]["backend"] == "anthropic"


def test_a_model_backend_without_a_model_is_refused_before_any_node_runs(tmp_path: Path) -> None:
    """It failed at its first LLM node, after the tool nodes before it had run."""
    dot = """digraph p {
      start [shape=Mdiamond]
      lint [shape=parallelogram, tool_command="touch linted"]
      draft [prompt="Plan"]
      review [prompt="Review", llm_model="set-here"]
      done [shape=Msquare]
      start -> lint -> draft -> review -> done
    }"""
    with serve("openai") as server, pytest.raises(BackendError) as refused:
        open_run(dot, workdir=tmp_path, backend=f"openai@{server.url}")
    assert str(refused.value) == (
        "no model for the openai backend at node 'draft' (llm_model is not set); write "
        "openai:MODEL or set llm_model on the node or in the stylesheet"
    )
    assert server.requests == []
    assert not (tmp_path / "linted").exists() and not (tmp_path / ".freshness").exists()
    styled = dot.replace("start [", 'graph [model_stylesheet="* { llm_model: m; }"]\n  start [')
    with serve("openai") as server:
        run = open_run(styled, workdir=tmp_path, backend=f"openai@{server.url}")
        run.run()
    assert run.result().status == "completed"
    assert server.models() == ["m", "set-here"]


def test_spec_strings_and_descriptions() -> None:
    backend = resolve_backend("openai:llama3@http://127.0.0.1:11434/v1")
    assert describe_backend(backend) == "openai:llama3@http://127.0.0.1:11434/v1"
    assert describe_backend(resolve_backend(None)) == "simulated"
    assert describe_backend(resolve_backend("anthropic:claude-x@20240620")) == (
        "anthropic:claude-x@20240620"
    )
    with pytest.raises(BackendError, match="unknown backend 'gemeni'"):
        resolve_backend("gemeni:pro")
    with pytest.raises(BackendError, match="needs an argument"):
        resolve_backend("command:")
    with pytest.raises(BackendError, match="the simulated backend takes no argument; write sim"):
        resolve_backend("simulated:gpt-4o")  # it was ignored: no model was called
    # a base URL that is not one: it became part of the model's name, which failed per node
    for spec, said in [
        (
            "openai:ok@127.0.0.1:8000/v1",
            "'127.0.0.1:8000/v1' after the @ is not an http(s) URL; "
            "write openai:ok@http://127.0.0.1:8000/v1",
        ),
        ("openai:m@localhost:11434", "write openai:m@http://localhost:11434"),
        (
            "anthropic:m@ftp://x",
            "'ftp://x' after the @ is not an http(s) URL; write anthropic:m@http://HOST:PORT/v1",
        ),
        ("openai:m@", "no URL after the @; write openai:m@http://HOST:PORT/v1"),
    ]:
        with pytest.raises(BackendError) as info:
            resolve_backend(spec)
        assert str(info.value).endswith(said), info.value


class ManyChunks:
    """A streaming backend given as an object: 2,000 one-character chunks as fast as it can."""

    name = "python"

    def describe(self) -> str:
        return "many-chunks"

    def settings(self) -> dict[str, object]:
        return {"backend": "many-chunks"}

    def for_node(self, node: Node) -> ManyChunks:
        return self

    def generate(self, request: BackendRequest) -> BackendReply:
        for _ in range(2000):
            request.on_text("x")
        return BackendReply(text="!", model="chunky", usage={"output_tokens": 2001})


def test_stream_events_are_merged_and_the_file_has_everything(tmp_path: Path) -> None:
    run = open_run(ONE_NODE % "", workdir=tmp_path, backend=ManyChunks())
    events: list[Event] = []
    run.events.subscribe(events.append)
    run.run()
    texts = [e.data["text"] for e in events if e.type is EventType.STAGE_OUTPUT]
    assert "".join(texts) == "x" * 2000 + "!"
    assert len(texts) < 2000
    assert (run.run_dir / "nodes/draft/response.md").read_text() == "x" * 2000 + "!"
    assert run.context["last_response"] == "x" * 200
    assert run.context["llm.draft"] == {
        "backend": "many-chunks",
        "model": "chunky",
        "usage": {"output_tokens": 2001},
    }


class Flood(ManyChunks):
    """An agent printing 5 MB as fast as it can (one numbered line per chunk)."""

    def generate(self, request: BackendRequest) -> BackendReply:
        for number in range(100_000):
            request.on_text(f"line {number:06d} " + "." * 38 + "\n")
        return BackendReply(model="chunky")


def test_a_flood_of_output_is_all_in_the_file_and_bounded_in_the_events(tmp_path: Path) -> None:
    """A trial's agent printed 6 MB: ``events.jsonl`` held all of it again. The events now say
    what they skipped and carry the newest text; ``response.md`` has everything."""
    run = open_run(ONE_NODE % "", workdir=tmp_path, backend=Flood())
    events: list[Event] = []
    run.events.subscribe(events.append)
    run.run()
    text = (run.run_dir / "nodes/draft/response.md").read_text()
    assert len(text) == 5_100_000 and text.endswith("line 099999 " + "." * 38 + "\n")
    shown = [e.data["text"] for e in events if e.type is EventType.STAGE_OUTPUT]
    assert sum(map(len, shown)) < 500_000
    assert all(len(t) <= 4096 + 100 for t in shown)
    assert shown[-1].endswith("line 099999 " + "." * 38 + "\n")
    assert any(
        re.match(r"\[\.\.\. \d+ characters not shown: all are in response.md", t) for t in shown
    )


def test_anthropic_without_a_key_says_which_variable_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with serve("anthropic") as server, pytest.raises(BackendError) as refused:
        run_one(tmp_path, f"anthropic:test-model@{server.url}")
    assert not server.requests  # refused before anything was sent
    reason = str(refused.value)
    assert "set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN" in reason
    assert "Could not resolve" not in reason
