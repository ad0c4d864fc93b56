"""The default registry: every built-in type, wired to the given backend and interviewer."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.builtin import default_registry
from freshness_magic.engine.interviewers import QueueInterviewer
from freshness_magic.engine.model import BUILTIN_HANDLER_TYPES, Node
from freshness_magic.engine.pipeline import load_pipeline
from freshness_magic.engine.run import Run


def test_every_builtin_type_is_registered() -> None:
    registry = default_registry()
    assert set(registry.types()) == set(BUILTIN_HANDLER_TYPES)
    unknown = Node("x", {"type": "no.such.type"})
    assert registry.resolve(unknown) is registry.resolve(Node("y", {"shape": "box"}))


def test_registering_what_is_not_a_handler_is_refused_at_once() -> None:
    """A plain function would only fail at the node, called a run extension's error."""
    registry = default_registry()
    with pytest.raises(TypeError, match=r"is not a handler for 'count': it needs a method exec"):
        registry.register("count", lambda node, context, env: None)  # type: ignore[arg-type]
    assert "count" not in registry


def test_backend_and_interviewer_are_used(tmp_path: Path) -> None:
    source = """
    digraph p {
      start [shape=Mdiamond]
      draft [prompt="Write about $goal"]
      gate [shape=hexagon]
      done [shape=Msquare]
      redo [prompt="again"]
      start -> draft -> gate
      gate -> done [label="[A] Accept"]
      gate -> redo [label="[R] Redo"]
      redo -> done
      graph [goal="tests"]
    }
    """
    prompts: list[str] = []

    def backend(node: Node, prompt: str, context: Context) -> str:
        prompts.append(prompt)
        return f"answer to {node.id}"

    registry = default_registry(backend=backend, interviewer=QueueInterviewer(["R"]))
    run = Run(load_pipeline(source), workdir=tmp_path, registry=registry)
    result = run.run()
    assert result.completed_nodes == ["start", "draft", "gate", "redo", "done"]
    assert prompts == ["Write about tests", "again"]
    assert result.context["last_response"] == "answer to redo"
