"""``%%node`` cells as node handlers: the cell's code runs in the user namespace.

The cell sees ``context`` (the live run context), ``node`` and ``outcome`` (a string); an exception
is the node's FAIL, its failure reason the exception and the cell's line, its traceback (from the
cell's frames on) kept with what the cell printed. What the cell prints goes to the
node's folder (``nodes/<id>/cell_output.txt``) and to a ``stage_output`` event, never to
whichever notebook cell happens to be executing (a widget button runs nodes on a worker thread).
"""

from __future__ import annotations

import io
import linecache
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from freshness_magic.atomicio import write_atomic
from freshness_magic.engine.events import EventType
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.views.state import CELL_OUTPUT_FILE

CELL_HANDLER_TYPE = "notebook.cell"
"""The handler type given to nodes whose handler is a ``%%node`` cell."""

OUTCOME_WORDS: Mapping[str, StageStatus] = {
    "success": StageStatus.SUCCESS,
    "fail": StageStatus.FAIL,
    "partial_success": StageStatus.PARTIAL_SUCCESS,
    "retry": StageStatus.RETRY,
}
_NAMES = ("context", "node", "outcome")


class _ThreadStream(io.TextIOBase):
    """A stand-in for ``sys.stdout``/``sys.stderr``: writes from one thread go to a buffer,
    writes from every other thread go on to the stream it replaced."""

    def __init__(self, original: TextIO, thread: int) -> None:
        self.original = original
        self.thread = thread
        self.buffer_text = io.StringIO()

    def write(self, text: str) -> int:
        if threading.get_ident() == self.thread:
            return self.buffer_text.write(text)
        return self.original.write(text)

    def flush(self) -> None:
        if threading.get_ident() != self.thread:
            self.original.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


@contextmanager
def captured_output() -> Iterator[dict[str, str]]:
    """Capture what this thread prints; the dict gets ``stdout`` and ``stderr`` on exit."""
    me = threading.get_ident()
    out, err = _ThreadStream(sys.stdout, me), _ThreadStream(sys.stderr, me)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    found: dict[str, str] = {}
    try:
        yield found
    finally:
        if sys.stdout is out:
            sys.stdout = saved[0]
        if sys.stderr is err:
            sys.stderr = saved[1]
        found["stdout"] = out.buffer_text.getvalue()
        found["stderr"] = err.buffer_text.getvalue()


def _cell_failure(exc: BaseException, filename: str) -> tuple[str, str]:
    """The failure reason of a cell that raised, ``ValueError: boom (cell line 2)`` (the line
    of the innermost frame of the cell's code), and its traceback from the cell's frames on."""
    shown = f"{type(exc).__qualname__}: {exc}" if str(exc) else type(exc).__qualname__
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [i for i, frame in enumerate(frames) if frame.filename == filename]
    if not ours:
        return shown, traceback.format_exc()
    tb = exc.__traceback__
    for _ in range(ours[0]):  # the handler's own frames above the cell
        tb = tb.tb_next if tb is not None else None
    return f"{shown} (cell line {frames[ours[-1]].lineno})", "".join(
        traceback.format_exception(type(exc), exc, tb)
    )


def cell_runs_in(node_id: str) -> str:
    """Where a ``%%node`` cell's node runs, as a run records it for other processes."""
    return (
        f"a %%node cell of the notebook that runs the pipeline (there: %pipeline retry {node_id},"
        " or %pipeline run)"
    )


@dataclass
class CellHandler:
    """The handler of every ``%%node`` cell of one pipeline (``cells``: node id -> code)."""

    cells: dict[str, str]
    namespace: dict[str, Any]
    fallback: Callable[[Node, Any, Any], Outcome] | None = None

    def reuse_identity(self, node: Node) -> str:
        """What decides the node's work besides its definition: its cell's code (an edited
        cell is never taken from an execution of its earlier code)."""
        return f"%%node cell: {self.cells.get(node.id, '')}"

    def execute(self, node: Node, context: Any, env: Any) -> Outcome:
        code = self.cells.get(node.id)
        if code is None:
            if self.fallback is None:
                return Outcome(StageStatus.FAIL, failure_reason=f"no %%node cell for {node.id}")
            return self.fallback(node, context, env)
        ns = self.namespace
        saved: dict[str, Any] = {k: ns[k] for k in _NAMES if k in ns}
        ns["context"], ns["node"], ns["outcome"] = context, node, "success"
        failure = ""
        word = "success"
        filename = f"<%%node {node.id}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        try:
            with captured_output() as printed:
                try:
                    exec(compile(code, filename, "exec"), ns)
                    word = str(ns.get("outcome", "success")).strip().lower()
                except (Exception, SystemExit) as exc:  # sys.exit() fails the node too
                    failure, trace = _cell_failure(exc, filename)
                    if isinstance(exc, SystemExit):
                        failure += "; a %%node cell sets outcome ('fail', ...) to end its node"
                    sys.stderr.write(trace)  # kept with what the cell printed
        finally:
            for key in _NAMES:
                ns.pop(key, None)
            ns.update(saved)
            self._keep_output(node, env, printed)
        if failure:
            return Outcome(StageStatus.FAIL, failure_reason=failure)
        status = OUTCOME_WORDS.get(word)
        if status is None:
            return Outcome(
                StageStatus.FAIL,
                failure_reason=f"%%node {node.id} set outcome={word!r}; use one of "
                + ", ".join(OUTCOME_WORDS),
            )
        notes = f"%%node {node.id} cell ran"
        reason = "" if status.is_success else f"%%node {node.id} set outcome={word}"
        return Outcome(status, notes=notes, failure_reason=reason)

    @staticmethod
    def _keep_output(node: Node, env: Any, printed: dict[str, str]) -> None:
        """Write the cell's output to its node folder and report it as ``stage_output``."""
        text = printed.get("stdout", "") + printed.get("stderr", "")
        if not text or env is None:
            return
        write_atomic(env.node_dir(node.id) / CELL_OUTPUT_FILE, text)
        for stream in ("stdout", "stderr"):
            if printed.get(stream):
                env.emit(EventType.STAGE_OUTPUT, {"stream": stream, "text": printed[stream]})
