"""Running a streaming backend to its end, for callers that want the whole text at once."""

from __future__ import annotations

import threading

from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.llm import BackendRequest, StreamingBackend
from freshness_magic.engine.model import Node


def collect_text(backend: StreamingBackend, node: Node, prompt: str, context: Context) -> str:
    """Run a streaming backend without a sink (no deadline) and return the whole text."""
    import tempfile
    from pathlib import Path

    parts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fm-backend-") as folder:
        stage = Path(folder)
        prompt_file = stage / "prompt.md"
        prompt_file.write_text(prompt, encoding="utf-8")
        request = BackendRequest(
            node=node,
            prompt=prompt,
            context=context,
            workdir=Path.cwd(),
            stage_dir=stage,
            prompt_file=prompt_file,
            on_text=parts.append,
            cancel=threading.Event(),
        )
        reply = backend.generate(request)
    return "".join(parts) + reply.text
