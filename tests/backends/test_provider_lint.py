"""An ``llm_provider`` no model backend knows: ``validate`` warns with did-you-mean, and a model
backend refuses the run, before any node runs, naming the node and the attribute."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.backends import BackendError, resolve_backend
from freshness_magic.backends.base import ModelBackend, ModelSettings
from freshness_magic.backends.openai_compat import OpenAIBackend
from freshness_magic.engine.model import Node
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.validation import Severity
from freshness_magic.lint import session_validator
from freshness_magic.session import PipelineWarning, open_run

PIPELINE = """digraph p {
  graph [model_stylesheet="* { llm_provider: opnai; }"]
  start [shape=Mdiamond]
  a [prompt="A", llm_provider="anthropc"]
  b [prompt="B"]
  c [prompt="C", llm_provider="openai"]
  t [shape=parallelogram, tool_command="true"]
  done [shape=Msquare]
  start -> a -> b -> c -> t -> done
}
"""


def test_validate_warns_of_an_unknown_provider_once_per_node_or_stylesheet_value() -> None:
    found = [
        d
        for d in session_validator().validate(load_pipeline(PIPELINE, path="p.dot"))
        if d.rule == "llm_provider_known"
    ]
    assert [(d.severity, d.node, d.line) for d in found] == [
        (Severity.WARNING, None, 2),
        (Severity.WARNING, "a", 4),
    ]
    stylesheet, node = found
    assert stylesheet.message.startswith(
        "model_stylesheet line 1, column 5: llm_provider 'opnai' (for `b`)"  # not start, t, done
    )
    assert stylesheet.fix.startswith("did you mean 'openai'?")
    assert node.message.startswith("node `a`: llm_provider='anthropc' is not a model backend")
    assert node.fix.startswith("did you mean 'anthropic'?")


def test_a_run_with_a_model_backend_is_refused_naming_the_nodes_provider(tmp_path: Path) -> None:
    """Before any node runs (it failed at the node, after the ones before it had run)."""
    with (
        pytest.raises(BackendError) as refused,
        pytest.warns(PipelineWarning, match="llm_provider='anthropc' is not a model backend"),
    ):
        open_run(
            load_pipeline(PIPELINE.replace("opnai", "openai")),
            workdir=tmp_path,
            backend="openai:gpt-4o-mini@http://127.0.0.1:9/v1",
            extensions=[],
        )
    reason = str(refused.value)
    assert reason.startswith("node 'a': llm_provider='anthropc': unknown backend 'anthropc'")
    assert "did you mean 'anthropic'?" in reason
    assert not (tmp_path / ".freshness").exists()


def test_a_provider_with_no_backend_here_is_not_taken_for_a_typo() -> None:
    """The spec names gemini: "did you mean 'openai'?" was no help."""
    graph = load_pipeline(PIPELINE.replace("opnai", "gemini"), path="p.dot")
    found = [d for d in session_validator().validate(graph) if d.rule == "llm_provider_known"]
    assert found[0].fix.startswith(
        "this package has no gemini backend: reach it through an OpenAI-compatible endpoint "
        "(llm_provider=openai, backend openai:MODEL@URL), or use one of openai, anthropic"
    )


def test_a_node_naming_a_builtin_that_is_no_model_api_is_refused() -> None:
    backend = resolve_backend("openai:gpt-4o-mini@http://127.0.0.1:9/v1")
    assert isinstance(backend, ModelBackend)
    node = Node("a", {"prompt": "A", "llm_provider": "command", "llm_model": "true"})
    with pytest.raises(BackendError, match=r"^node 'a': llm_provider='command' is not a model API"):
        backend.for_node(node)


def test_a_model_backend_made_by_hand_hands_no_node_to_another_provider() -> None:
    """The registry gives a backend the other providers; one made without it says so."""
    backend = OpenAIBackend(ModelSettings("openai", "gpt-4o-mini", "http://127.0.0.1:9/v1"))
    node = Node("a", {"prompt": "A", "llm_provider": "anthropic", "llm_model": "claude-x"})
    with pytest.raises(BackendError, match="not made by resolve_backend"):
        backend.for_node(node)
    same = backend.for_node(Node("b", {"prompt": "B", "llm_provider": "openai"}))
    assert isinstance(same, OpenAIBackend) and same.config.model == "gpt-4o-mini"
    other = resolve_backend("openai:gpt-4o-mini@http://127.0.0.1:9/v1")
    assert isinstance(other, ModelBackend)
    assert other.for_node(node).name == "anthropic"
