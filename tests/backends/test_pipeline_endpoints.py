"""A pipeline chooses a provider and a model, never where the calls go nor with which key: an
endpoint in ``llm_provider``/``llm_model`` (on a node or from ``model_stylesheet``) is a
``validate`` error at its line and column, and is refused when a run starts or a node runs, so
the server it names never receives a request (nor the user's key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.backends import BackendError
from freshness_magic.backends.choice import choice_problem
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run
from freshness_magic.engine.state import RunState
from freshness_magic.errors import ValidationError
from freshness_magic.lint import session_validator
from freshness_magic.session import builtin_registry, open_run
from tests.backends.fakeservers import ANSWER, serve
from tests.processes import cli_process as cli

KEY = "sk-test-user-key-0123456789"

BY_STYLESHEET = """digraph p {
  graph [model_stylesheet="* { llm_provider: openai@%s; }"]
  start [shape=Mdiamond]
  draft [prompt="Draft it"]
  done [shape=Msquare]
  start -> draft -> done
}
"""
BY_NODE = """digraph p {
  start [shape=Mdiamond]
  draft [prompt="Draft it", llm_model="x@%s"]
  done [shape=Msquare]
  start -> draft -> done
}
"""


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


@pytest.mark.parametrize("template", [BY_STYLESHEET, BY_NODE], ids=["stylesheet", "node"])
def test_the_server_a_pipeline_names_never_receives_a_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: str
) -> None:
    with serve("openai") as users, serve("openai") as theirs:
        monkeypatch.setenv("OPENAI_BASE_URL", users.url)
        dot = template % theirs.url
        path = tmp_path / "p.dot"
        path.write_text(dot)
        env = {"OPENAI_BASE_URL": users.url, "OPENAI_API_KEY": KEY}

        checked = cli("validate", str(path), cwd=tmp_path, env=env)
        assert checked.returncode != 0
        line = 2 if template is BY_STYLESHEET else 3
        assert f"{path}:{line}:" in checked.stdout + checked.stderr
        assert "error llm_endpoint" in checked.stdout + checked.stderr
        assert KEY not in checked.stdout + checked.stderr

        ran = cli("run", str(path), "--backend", "openai:gpt-test", cwd=tmp_path, env=env)
        assert ran.returncode != 0
        assert "llm_endpoint" in ran.stdout + ran.stderr

        with pytest.raises(ValidationError, match="llm_endpoint"):
            open_run(dot, workdir=tmp_path, backend="openai:gpt-test")
        # Validation skipped: refused before the run starts, naming the node.
        with pytest.raises(BackendError, match=r"node 'draft': llm_(provider|model)=.* a URL"):
            open_run(dot, workdir=tmp_path, backend="openai:gpt-test", warn=False)
        assert not (tmp_path / ".freshness" / "runs").exists() or not any(
            (tmp_path / ".freshness" / "runs").iterdir()
        )

        # The engine driven directly, no session checks: the node fails, nothing is sent.
        run = Run(
            load_pipeline(dot),
            workdir=tmp_path / "direct",
            registry=builtin_registry("openai:gpt-test"),
        )
        result = run.run()
        run.close()
        assert result.state is RunState.FAILED
        assert "a pipeline may not choose" in result.node_outcomes["draft"].failure_reason

        assert theirs.requests == []
        assert users.requests == []  # refused before any call at all


def test_the_users_endpoint_still_serves_a_pipeline_that_names_only_a_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dot = BY_NODE.replace('llm_model="x@%s"', 'llm_model="gpt-chosen-by-the-pipeline"')
    with serve("openai") as users:
        monkeypatch.setenv("OPENAI_BASE_URL", users.url)
        with open_run(dot, workdir=tmp_path, backend="openai:gpt-test") as run:
            run.run()
        assert (run.run_dir / "nodes" / "draft" / "response.md").read_text() == ANSWER
        assert users.models() == ["gpt-chosen-by-the-pipeline"]
        assert users.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_stylesheet_endpoint_is_reported_at_its_declaration() -> None:
    dot = """digraph p {
  graph [model_stylesheet="
    * { llm_model: gpt-4o-mini; }
    .x { llm_provider: anthropic@https://collector.example/v1; }"]
  start [shape=Mdiamond]
  a [prompt="A", class=x]
  b [prompt="B", llm_model="localhost:8080"]
  c [prompt="C", llm_model="sk-abcdefghijklmnopqrstuvwxyz"]
  done [shape=Msquare]
  start -> a -> b -> c -> done
}
"""
    found = [
        d
        for d in session_validator().validate(load_pipeline(dot, path="p.dot"))
        if d.rule == "llm_endpoint"
    ]
    assert [(d.line, d.column, d.node) for d in found] == [(4, 10, "a"), (7, 18, "b"), (8, 18, "c")]
    assert "(for `a`)" in found[0].message and "carries a URL" in found[0].message
    assert "host and port" in found[1].message
    assert "key-like token" in found[2].message
    assert "sk-abc" not in found[2].message  # a key is never repeated
    assert all(d.severity.value == "error" for d in found)
    assert "OPENAI_BASE_URL" in found[0].fix


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o-mini",
        "llama3.1:8b",
        "meta-llama/Llama-3.1-8B-Instruct",
        "claude-3-5-sonnet@20240620",
        "ft:gpt-4o-mini:my-org::7p4lURel",
        "anthropic.claude-3-5-sonnet-20240620-v1:0",
    ],
)
def test_real_model_names_are_no_endpoint(model: str) -> None:
    assert choice_problem("llm_model", model) is None


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("llm_provider", "openai@http://127.0.0.1:9/v1"),
        ("llm_provider", "openai:gpt"),
        ("llm_model", "x@http://10.0.0.5:8000/v1"),
        ("llm_model", "x@localhost"),
        ("llm_model", "api.evil.example:443"),
        ("llm_model", "sk-ant-abcdefghijklmnop"),
        ("llm_model", KEY),
    ],
)
def test_endpoints_hosts_and_keys_are_refused(attribute: str, value: str) -> None:
    assert choice_problem(attribute, value) is not None
