"""The ``codergen`` handler (spec §4.5): prompt -> backend -> response, with files on disk.

The backend is a plain callable ``(node, prompt, context) -> str | Outcome`` or a
:class:`~freshness_magic.engine.handlers.llm.StreamingBackend`; the default is the simulated one,
so no example or test needs a network (docs/ARCHITECTURE.md). Each call leaves ``prompt.md``,
``context.md`` (what its fidelity mode carried besides the prompt, :mod:`..fidelity`; only when
something is), ``response.md`` (streamed: appended as chunks arrive) and ``status.json`` in the
node's folder of the run directory. The outcome's context updates carry ``llm.<node_id>``: the
backend, the model and the token usage, which the node's status file and evidence record show.

Prompt files: ``prompt="@prompts/plan.md"`` (one token starting with ``@``) reads the file
relative to the pipeline file's folder (the working directory for a pipeline without a path);
``$goal`` and ``{key}`` are expanded in its text as in an inline prompt.

Status-file contract (Appendix C): a backend (or the agent it drives) may write ``status.json``
in the node's folder itself; the folder is in the context as ``internal.stage_dir`` during the
call. When that file changed during the call it *is* the outcome.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import loads_bounded, write_atomic, write_json_atomic
from freshness_magic.engine.context import Context
from freshness_magic.engine.fidelity import (
    THREAD_PREFIX,
    THREAD_TEXT_CHARS,
    carry,
    resolve,
    thread_value,
    value_text,
)
from freshness_magic.engine.handlers.base import CodergenBackend, StepEnv
from freshness_magic.engine.handlers.llm import (
    REQUEST_TIMED_OUT,
    STOP_GRACE_SECONDS,
    BackendReply,
    BackendRequest,
    ResponseSink,
    Stopped,
    StreamingBackend,
    invoke,
)
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.prompts import (
    prompt_file_name,
    prompt_file_path,
    prompt_file_problem,
    read_prompt_file,
)
from freshness_magic.errors import BackendError, FreshnessMagicError

STAGE_DIR_KEY = "internal.stage_dir"
PROMPT_SUFFIX_KEY = "internal.prompt_suffix.{node_id}"
"""Context key a run extension sets to append a section to a node's prompt (work evidence)."""
CONTEXT_FILE = "context.md"
"""What the node's fidelity mode carried to the model besides the prompt (written only when
something is carried); ``prompt.md`` stays the prompt as the node expands it."""
LLM_KEY = "llm.{node_id}"
"""Context key of the backend facts of a node's last call (backend, model, usage)."""

_PLACEHOLDER = re.compile(r"\$goal\b|\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")


class PromptFileError(OSError):
    """A node's ``prompt="@path"`` file cannot be read."""


def simulated_backend(node: Node, prompt: str, context: Context) -> str:
    """The §4.5 simulation: a fixed response naming the stage."""
    return f"[Simulated] Response for stage: {node.id}"


def describe_backend(backend: object) -> str:
    """A short name for any backend: its ``describe()``, ``simulated`` or ``python:mod.fn``."""
    describe = getattr(backend, "describe", None)
    if callable(describe):
        return str(describe())
    if backend is None or backend is simulated_backend:
        return "simulated"
    name = getattr(backend, "__qualname__", type(backend).__qualname__)
    return f"python:{getattr(backend, '__module__', '?')}.{name}"


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
                return value_text(context[candidate])
        return match.group(0)

    return _PLACEHOLDER.sub(replace, text)


def _head(path: Path, chars: int) -> str:
    """The first ``chars`` characters of a text file ('' when it cannot be read)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return f.read(chars)
    except OSError:
        return ""


def _file_signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _exception_text(exc: BaseException) -> str:
    """One line, whitespace folded: our own errors' message (written to be read); another
    exception (a bug in a ``python:`` backend) with its type name, as Python shows it."""
    text = " ".join(str(exc).split())
    if isinstance(exc, FreshnessMagicError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _timed_out(node: Node, started: float, backend: StreamingBackend, last_error: str) -> str:
    """The reason of an attempt the node's ``timeout`` ended (the wait, or the client's own
    timeout set to the time left), with the last problem the backend reported."""
    waited = node.timeout or round(time.monotonic() - started, 2)
    reason = f"timed out after {waited:g}s waiting for {backend.describe()}"
    if last_error and last_error != REQUEST_TIMED_OUT:
        reason += f" (last error: {last_error})"
    return reason


class CallableBackend:
    """Adapts a plain ``(node, prompt, context) -> str | Outcome`` callable (not streamed)."""

    name = "python"

    def __init__(self, fn: CodergenBackend, node: Node | None = None, label: str = "") -> None:
        self.fn = fn
        self.node = node
        self.label = label

    def describe(self) -> str:
        return self.label or describe_backend(self.fn)

    def __call__(self, node: Node, prompt: str, context: Context) -> str | Outcome:
        return self.fn(node, prompt, context)

    def settings(self) -> dict[str, Any]:
        simulated = self.fn is simulated_backend
        facts: dict[str, Any] = {"backend": self.describe()}
        if self.node is not None and self.node.llm_model:
            facts["model"] = self.node.llm_model
        if simulated:
            facts["note"] = "simulated: no model was called"
        return facts

    def for_node(self, node: Node) -> CallableBackend:
        return CallableBackend(self.fn, node, self.label)

    def generate(self, request: BackendRequest) -> BackendReply:
        """Call the function with the carried context before the prompt (one text)."""
        result = self.fn(request.node, request.text(), request.context)
        if isinstance(result, Outcome):
            return BackendReply(outcome=result)
        if not isinstance(result, str):
            raise BackendError(
                f"{self.describe()} returned {type(result).__name__}, not a str or an Outcome "
                "(a codergen backend returns the response text, or an Outcome)"
            )
        return BackendReply(text=result)


class CodergenHandler:
    """Builds the prompt, calls the backend, records prompt, response and status."""

    portable = True
    """A call can run on a cluster worker when the backend can be pickled (else on the driver)."""

    def __init__(self, backend: CodergenBackend | StreamingBackend | None = None) -> None:
        self.backend: CodergenBackend | StreamingBackend = backend or simulated_backend

    def reuse_identity(self, node: Node) -> str:
        """What decides the node's work besides its definition and reads: the backend (a
        response of the simulation is never taken for a model's)."""
        return f"codergen: {describe_backend(self.backend)}"

    def _streaming(self) -> StreamingBackend:
        if isinstance(self.backend, StreamingBackend):
            return self.backend
        return CallableBackend(self.backend)

    def _prompt(self, node: Node, context: Context, env: StepEnv) -> str:
        """The expanded prompt (from the prompt file when ``prompt="@path"``) plus the suffix."""
        text = node.prompt or node.label
        if prompt_file_name(node) is not None:
            problem = prompt_file_problem(node, env.graph, env.workdir)
            if problem is not None:  # never read, never copied into prompt.md
                raise PromptFileError(
                    f"the prompt file {node.prompt!r} of node '{node.id}' is refused: {problem}"
                )
            path = prompt_file_path(node, env.graph, env.workdir)
            try:
                text = read_prompt_file(path) if path is not None else ""
            except (OSError, ValueError) as exc:
                raise PromptFileError(
                    f"cannot read the prompt file {node.prompt!r} of node '{node.id}' "
                    f"({path}): {_exception_text(exc)}"
                ) from exc
        prompt = expand_prompt(text, env.graph, context)
        suffix = context.get_string(PROMPT_SUFFIX_KEY.format(node_id=node.id))
        return f"{prompt}\n\n{suffix}" if suffix else prompt

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        stage_dir = env.node_dir(node.id)
        status_path = stage_dir / "status.json"
        try:
            prompt = self._prompt(node, context, env)
            resolved = env.fidelity or resolve(env.graph, node, None)
            carried = carry(resolved, env.graph, node, context)
            backend = self._streaming().for_node(node)
        except Exception as exc:
            return self._finish(
                status_path, Outcome(status=StageStatus.FAIL, failure_reason=_exception_text(exc))
            )
        facts = backend.settings()
        if carried.thread is not None:
            facts["thread"] = carried.thread
        llm_key = LLM_KEY.format(node_id=node.id)
        write_atomic(stage_dir / "prompt.md", prompt)
        context_file = stage_dir / CONTEXT_FILE
        if carried.empty:
            context_file.unlink(missing_ok=True)  # an earlier attempt's would mislead
        else:
            write_atomic(context_file, carried.transcript())
        before = _file_signature(status_path)
        sink = ResponseSink(stage_dir / "response.md", env.emit)
        request = BackendRequest(
            node=node,
            prompt=prompt,
            context=context,
            workdir=env.workdir,
            stage_dir=stage_dir,
            prompt_file=stage_dir / "prompt.md",
            on_text=sink,
            deadline=env.deadline,
            carried=None if carried.empty else carried,
            context_file=None if carried.empty else context_file,
        )
        started = time.monotonic()
        context.set(STAGE_DIR_KEY, str(stage_dir))
        reason: str | None = None
        try:
            grace = STOP_GRACE_SECONDS
            if env.deadline is not None:
                grace = min(grace, env.slack / 2)
            reply = invoke(backend, request, env.cancel, request.deadline, grace)
        except Stopped as stop:
            sink.close()
            if stop.reason == "interrupted":
                reason = "interrupted"
            else:
                reason = _timed_out(node, started, backend, request.last_error)
        except Exception as exc:
            sink.close()
            if request.remaining() == 0:  # the client's own timeout, set to the time left
                # an error after the stop is the stop's own (a closed stream), not the provider's
                said = request.last_error if request.cancel.is_set() else _exception_text(exc)
                reason = _timed_out(node, started, backend, said)
            else:
                said, name = _exception_text(exc), backend.describe()
                reason = said if said.startswith(name) else f"{name}: {said}"
                if not isinstance(exc, FreshnessMagicError):  # a bug in user code: its trace
                    kept = env.keep_traceback(node.id, exc)
                    reason += f" (traceback: {kept})" if kept else ""
        finally:
            context.delete(STAGE_DIR_KEY)
        if (
            reason is not None
        ):  # stopped, timed out or refused: the backend's facts stay with the failure
            failed = Outcome(
                StageStatus.FAIL, failure_reason=reason, context_updates={llm_key: facts}
            )
            return self._finish(status_path, failed)
        sink(reply.text)
        sink.close(create=True)
        if reply.model:
            facts["model"] = reply.model
        if reply.usage:
            facts["usage"] = dict(reply.usage)
        if reply.outcome is not None:
            reply.outcome.context_updates.setdefault(llm_key, facts)
            return self._finish(status_path, reply.outcome)
        updates: dict[str, Any] = {
            "last_stage": node.id,
            "last_response": sink.head,
            llm_key: facts,
        }
        if carried.thread is not None:  # a full session goes on with this exchange
            response = _head(sink.path, THREAD_TEXT_CHARS + 1)
            exchanges = thread_value(carried, node.id, prompt, response)
            updates[THREAD_PREFIX + carried.thread] = exchanges
        if _file_signature(status_path) != before:
            outcome = self._read_status_file(status_path)
            for key, value in updates.items():
                outcome.context_updates.setdefault(key, value)
            return outcome
        outcome = Outcome(
            status=StageStatus.SUCCESS,
            notes=f"Stage completed: {node.id}",
            context_updates=updates,
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
            data = loads_bounded(status_path.read_text(encoding="utf-8"))
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
