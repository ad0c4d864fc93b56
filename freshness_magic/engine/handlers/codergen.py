"""The ``codergen`` handler (spec §4.5): prompt -> backend -> response, with files on disk.

The backend is any callable ``(node, prompt, context) -> str | Outcome``; the default is the
simulated one, so no example or test needs a network (DESIGN §4 item 10). Each call leaves
``prompt.md``, ``response.md`` and ``status.json`` in the node's folder of the run directory.

Status-file contract (Appendix C): a backend (or the agent it drives) may write ``status.json``
in the node's folder itself; the folder is in the context as ``internal.stage_dir`` during the
call. When that file changed during the call it *is* the outcome.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import write_atomic, write_json_atomic
from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import CodergenBackend, StepEnv
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus

RESPONSE_SNIPPET_CHARS = 200
STAGE_DIR_KEY = "internal.stage_dir"
PROMPT_SUFFIX_KEY = "internal.prompt_suffix.{node_id}"
"""Context key a run extension sets to append a section to a node's prompt (work evidence)."""

_PLACEHOLDER = re.compile(r"\$goal\b|\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")


def simulated_backend(node: Node, prompt: str, context: Context) -> str:
    """The §4.5 simulation: a fixed response naming the stage."""
    return f"[Simulated] Response for stage: {node.id}"


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)


def expand_prompt(text: str, graph: Graph, context: Context) -> str:
    """Replace ``$goal`` with the graph goal and ``{key}`` with context values, in one pass.

    ``{context.a.b}`` is looked up as ``context.a.b`` and then ``a.b`` (as in conditions). An
    unknown ``{key}`` stays as written, so prompts may contain literal braces (code, JSON).
    Substituted text is never expanded again.
    """

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key is None:
            return graph.goal
        for candidate in (key, key.removeprefix("context.")):
            if candidate in context:
                return _as_text(context[candidate])
        return match.group(0)

    return _PLACEHOLDER.sub(replace, text)


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


def _file_signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class DeadlineExceeded(TimeoutError):
    """A call did not finish by the node's deadline."""


def call_with_deadline(call: Callable[[], Any], deadline: float | None) -> Any:
    """Run ``call`` and return its result; raise :class:`DeadlineExceeded` past ``deadline``.

    With a deadline the call runs on a daemon worker thread; a call that overruns is abandoned
    (Python cannot stop a thread), its late result ignored.
    """
    if deadline is None:
        return call()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=work, name="codergen-backend", daemon=True)
    worker.start()
    worker.join(max(deadline - time.monotonic(), 0.0))
    if worker.is_alive():
        raise DeadlineExceeded
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _exception_text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class CodergenHandler:
    """Builds the prompt, calls the backend, records prompt, response and status."""

    def __init__(self, backend: CodergenBackend | None = None) -> None:
        self.backend: CodergenBackend = backend or simulated_backend

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        stage_dir = env.node_dir(node.id)
        prompt = expand_prompt(node.prompt or node.label, env.graph, context)
        suffix = context.get_string(PROMPT_SUFFIX_KEY.format(node_id=node.id))
        if suffix:
            prompt = f"{prompt}\n\n{suffix}"
        write_atomic(stage_dir / "prompt.md", prompt)
        status_path = stage_dir / "status.json"
        before = _file_signature(status_path)
        started = time.monotonic()
        context.set(STAGE_DIR_KEY, str(stage_dir))
        try:
            result = call_with_deadline(lambda: self.backend(node, prompt, context), env.deadline)
        except DeadlineExceeded:
            waited = (env.deadline or started) - started
            return self._finish(
                status_path,
                Outcome(
                    status=StageStatus.FAIL,
                    failure_reason=f"timed out after {waited:g}s waiting for the backend",
                ),
            )
        except Exception as exc:
            return self._finish(
                status_path,
                Outcome(status=StageStatus.FAIL, failure_reason=_exception_text(exc)),
            )
        finally:
            context.delete(STAGE_DIR_KEY)
        if isinstance(result, Outcome):
            return self._finish(status_path, result)
        response = "" if result is None else str(result)
        write_atomic(stage_dir / "response.md", response)
        snippet = {
            "last_stage": node.id,
            "last_response": _truncate(response, RESPONSE_SNIPPET_CHARS),
        }
        if _file_signature(status_path) != before:
            outcome = self._read_status_file(status_path)
            for key, value in snippet.items():
                outcome.context_updates.setdefault(key, value)
            return outcome
        outcome = Outcome(
            status=StageStatus.SUCCESS,
            notes=f"Stage completed: {node.id}",
            context_updates=snippet,
        )
        return self._finish(status_path, outcome)

    @staticmethod
    def _finish(status_path: Path, outcome: Outcome) -> Outcome:
        write_json_atomic(status_path, outcome.to_dict())
        return outcome

    @staticmethod
    def _read_status_file(status_path: Path) -> Outcome:
        """The outcome an agent wrote; a file that does not parse is a FAIL naming it."""
        try:
            data = json.loads(status_path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
            return Outcome.from_dict(data)
        except (OSError, ValueError, TypeError) as exc:
            return Outcome(
                status=StageStatus.FAIL,
                failure_reason=(
                    f"{status_path}: status file written by the backend is not valid "
                    f'({exc}); write an object with at least "outcome": "success|fail|'
                    'retry|partial_success"'
                ),
            )
