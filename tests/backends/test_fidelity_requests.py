"""What a node's fidelity mode carries reaches the model as its own part of the request: the
OpenAI-compatible and Anthropic backends (real client libraries, local servers) send the carried
summary as the system text and a ``full`` thread's earlier exchanges as prior messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.session import open_run
from tests.backends.fakeservers import ANSWER, serve

PIPELINE = """digraph p {
  graph [goal="Ship the fix"]
  start [shape=Mdiamond]
  plan  [prompt="Plan for $goal", fidelity="truncate"]
  draft [prompt="Draft it", fidelity="full", thread_id="work"]
  check [prompt="Check it", fidelity="full", thread_id="work"]
  done  [shape=Msquare]
  start -> plan -> draft -> check -> done
}"""


pytestmark = pytest.mark.usefixtures("model_keys")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_server_receives_the_carried_context(tmp_path: Path, kind: str) -> None:
    with serve(kind) as server:
        run = open_run(PIPELINE, workdir=tmp_path, backend=f"{kind}:test-model@{server.url}")
        run.run()
    assert run.result().status == "completed"
    plan, draft, check = (r.body for r in server.requests)
    user = [{"role": "user", "content": "Plan for Ship the fix"}]
    if kind == "openai":  # the carried summary is a system message before the prompt
        assert plan["messages"] == [{"role": "system", "content": "Goal: Ship the fix"}, *user]
    else:  # the Anthropic API's system text
        assert plan["system"] == "Goal: Ship the fix"
        assert plan["messages"] == user
    # the first node of thread "work" starts it; the next one continues it
    assert draft["messages"] == [{"role": "user", "content": "Draft it"}]
    assert check["messages"] == [
        {"role": "user", "content": "Draft it"},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": "Check it"},
    ]
    assert "system" not in check
    transcript = (run.run_dir / "nodes" / "check" / "context.md").read_text()
    assert transcript == (
        "# Carried context\n\n<!-- how much was carried: full (from node) -->\n\n"
        "## Earlier in thread `work`\n\n### draft (user)\n\nDraft it\n\n"
        f"### draft (assistant)\n\n{ANSWER}\n"
    )


def test_an_agent_cli_reads_the_carried_context_before_the_prompt(tmp_path: Path) -> None:
    dot = """digraph p {
      graph [goal="Ship the fix"]
      start [shape=Mdiamond]
      plan  [prompt="Plan for $goal", fidelity="truncate"]
      again [prompt="Again", fidelity="truncate"]
      done  [shape=Msquare]
      start -> plan -> again -> done
    }"""
    run = open_run(dot, workdir=tmp_path, backend="command:cat")
    run.run()
    nodes = run.run_dir / "nodes"
    assert (nodes / "plan" / "response.md").read_text() == (
        "# Carried context\n\nGoal: Ship the fix\n\n# Prompt\n\nPlan for Ship the fix"
    )
    run.close()
    # {context_file} names the node's context.md (the prompt file stays the prompt)
    files = open_run(dot, workdir=tmp_path, backend="command:cat {context_file} {prompt_file}")
    files.run()
    folder = files.run_dir / "nodes" / "again"
    assert (folder / "response.md").read_text() == (folder / "context.md").read_text() + "Again"
    files.close()
