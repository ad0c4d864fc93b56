"""A model answer counts only when the provider said it ended (OpenAI-compatible: a
``finish_reason`` or ``[DONE]``; Anthropic: ``message_stop``/``stop_reason``). A stream that
closes cleanly without it is a retryable failure saying the answer was cut off, its partial text
kept in ``response.md``; a server that ignores ``stream=true`` and answers one JSON document is
read as that. Against local servers (tests/backends/fakeservers.py), for each streaming
backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from freshness_magic.engine.events import Event, EventType
from freshness_magic.engine.state import RunState
from freshness_magic.engine.status import StageStatus
from freshness_magic.session import open_run
from tests.backends.fakeservers import ANSWER, serve

ONE_NODE = """digraph p {
  start [shape=Mdiamond]
  draft [prompt="Plan it"%s]
  done [shape=Msquare]
  start -> draft -> done
}"""

KINDS = ["openai", "anthropic"]


pytestmark = pytest.mark.usefixtures("model_keys")


def run_one(tmp_path: Path, spec: str, extra: str = "") -> tuple[Any, Any, list[Event]]:
    events: list[Event] = []
    with open_run(ONE_NODE % extra, workdir=tmp_path, backend=spec) as run:
        run.events.subscribe(events.append)
        result = run.run()
    return run, result, events


@pytest.mark.parametrize("kind", KINDS)
def test_a_stream_closed_before_its_end_is_a_retry_with_the_partial_text_kept(
    tmp_path: Path, kind: str
) -> None:
    with serve(kind) as server:
        run, result, events = run_one(
            tmp_path, f"{kind}:cutoff-model@{server.url}", ", max_retries=1"
        )
    partial = " ".join(ANSWER.split(" ")[:3])
    assert result.state is RunState.FAILED
    outcome = result.node_outcomes["draft"]
    assert outcome.status is StageStatus.FAIL  # retries exhausted: the last RETRY as a failure
    assert "the answer was cut off" in outcome.failure_reason
    missing = "a finish_reason or [DONE]" if kind == "openai" else "message_stop"
    assert missing in outcome.failure_reason
    assert len(server.requests) == 2  # retried once, as max_retries says
    node_dir = run.run_dir / "nodes" / "draft"
    assert (node_dir / "response.md").read_text() == partial
    retrying = [e for e in events if e.type is EventType.STAGE_RETRYING]
    assert len(retrying) == 1 and "cut off" in json.dumps(retrying[0].data)


@pytest.mark.parametrize("kind", KINDS)
def test_a_json_answer_to_a_streamed_request_is_accepted(tmp_path: Path, kind: str) -> None:
    with serve(kind) as server:
        run, result, _ = run_one(tmp_path, f"{kind}:plainjson-model@{server.url}")
    assert result.state is RunState.COMPLETED
    assert server.requests[0].body["stream"] is True
    node_dir = run.run_dir / "nodes" / "draft"
    assert (node_dir / "response.md").read_text() == ANSWER
    facts = result.context["llm.draft"]
    assert facts["model"] == "plainjson-model" and facts["usage"]["output_tokens"] == 6


def test_a_finish_reason_without_done_ends_an_openai_answer(tmp_path: Path) -> None:
    with serve("openai") as server:
        run, result, _ = run_one(tmp_path, f"openai:nodone-model@{server.url}")
    assert result.state is RunState.COMPLETED
    assert (run.run_dir / "nodes" / "draft" / "response.md").read_text() == ANSWER


@pytest.mark.parametrize("kind", KINDS)
def test_a_complete_stream_still_succeeds(tmp_path: Path, kind: str) -> None:
    with serve(kind) as server:
        run, result, _ = run_one(tmp_path, f"{kind}:good-model@{server.url}")
    assert result.state is RunState.COMPLETED
    assert (run.run_dir / "nodes" / "draft" / "response.md").read_text() == ANSWER


@pytest.mark.parametrize("kind", KINDS)
def test_the_plain_call_refuses_an_answer_without_its_end_and_takes_a_whole_one(
    kind: str,
) -> None:
    """The one-response interface (fan-in, callables) holds answers to the same rule."""
    from freshness_magic.backends import resolve_backend
    from freshness_magic.engine.model import Node
    from freshness_magic.errors import BackendError

    node = Node("judge", {"prompt": "Which branch is best?"})
    with serve(kind) as server:
        whole = resolve_backend(f"{kind}:whole-model@{server.url}")
        assert whole(node, "Which branch is best?", {}) == ANSWER
        cut = resolve_backend(f"{kind}:cutoff-model@{server.url}")
        with pytest.raises(BackendError, match="the answer was cut off: it came without a"):
            cut(node, "Which branch is best?", {})
