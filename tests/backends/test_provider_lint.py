"""An ``llm_provider`` no model backend knows: ``validate`` warns with did-you-mean, and a model
backend refuses the run, before any node runs, naming the node and the attribute."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.backends import BackendError
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
