"""What a streaming codergen backend gets and returns, and how the handler drives one.

A plain :class:`~freshness_magic.engine.handlers.base.CodergenBackend` is a callable
``(node, prompt, context) -> str | Outcome`` (spec §4.5). A :class:`StreamingBackend` is richer:
it gets a :class:`BackendRequest` (deadline, a cancel event, a sink for response chunks, the
node's model settings) and returns a :class:`BackendReply` (model name, token usage). The codergen
handler adapts plain callables, so every backend goes down one path: :func:`invoke` runs the
call on a worker thread and stops it (``request.stop()``: cancel event plus closers such as
"close the HTTP stream" or "kill the process group") when the run is cancelled or the node's
deadline is near. The engine knows only these types; the backends live in
``freshness_magic.backends``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from freshness_magic.engine.context import Context
from freshness_magic.engine.events import EventType
from freshness_magic.engine.fidelity import Carried
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome

EMIT_INTERVAL = 0.1
"""Seconds between STAGE_OUTPUT events of one streamed response (chunks are merged between)."""
EMIT_MAX_CHARS = 4096
"""Most characters of one ``STAGE_OUTPUT`` event of a response (the newest; more is skipped)."""
HEAD_CHARS = 200
"""How much of the response the handler keeps in memory (``last_response``, spec §4.5)."""
POLL_SECONDS = 0.05
STOP_GRACE_SECONDS = 1.0
REQUEST_TIMED_OUT = "the request timed out"
"""A backend's retryable error when its client gave up waiting (the handler words the failure
with the node's timeout when that is what set the client's)."""


@dataclass
class BackendRequest:
    """One call of a streaming backend for one attempt of a codergen node."""

    node: Node
    prompt: str
    context: Context
    workdir: Path
    stage_dir: Path
    prompt_file: Path
    """``prompt.md`` in the node's folder: the full prompt, for agents that read a file."""
    on_text: Callable[[str], None]
    """Give each response chunk here as it arrives; it reaches ``response.md`` and the UI."""
    deadline: float | None = None
    """``time.monotonic()`` value by which the call must have returned."""
    carried: Carried | None = None
    """What the node's fidelity mode passes to the model besides the prompt (a summary and,
    for ``full``, the thread's earlier messages); None: nothing. A chat API sends it as a
    system text and prior messages (:meth:`system` and :meth:`messages`), a backend with one
    text input sends :meth:`text`."""
    context_file: Path | None = None
    """``context.md`` in the node's folder when something is carried (what :meth:`text` puts
    before the prompt), for agents that read files."""
    cancel: threading.Event = field(default_factory=threading.Event)
    last_error: str = ""
    """The latest retryable problem (kept for the message when the deadline ends the retries)."""
    _closers: list[Callable[[], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def system(self) -> str:
        """The carried summary ('' when none): a chat API's system text."""
        return self.carried.preamble if self.carried is not None else ""

    def messages(self) -> list[dict[str, str]]:
        """The thread's earlier messages, then the prompt as the user's message."""
        earlier = self.carried.history if self.carried is not None else ()
        return [{"role": m.role, "content": m.text} for m in earlier] + [
            {"role": "user", "content": self.prompt}
        ]

    def text(self) -> str:
        """Everything as one text: the carried context, then the prompt (the prompt alone
        when nothing is carried)."""
        return self.carried.with_prompt(self.prompt) if self.carried is not None else self.prompt

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None: no deadline; never negative)."""
        if self.deadline is None:
            return None
        return max(self.deadline - time.monotonic(), 0.0)

    def add_closer(self, closer: Callable[[], None]) -> None:
        """Register what stops the call from outside (close a stream, kill a process)."""
        with self._lock:
            stopped = self.cancel.is_set()
            if not stopped:
                self._closers.append(closer)
        if stopped:
            with contextlib.suppress(Exception):
                closer()

    def stop(self) -> None:
        """Set the cancel event and run every closer on a helper thread (a closer may wait,
        e.g. for a process to end after SIGTERM; the handler does not)."""
        with self._lock:
            self.cancel.set()
            closers, self._closers = self._closers, []

        def close_all() -> None:
            for closer in closers:
                with contextlib.suppress(Exception):
                    closer()

        if closers:
            threading.Thread(target=close_all, name="codergen-stop", daemon=True).start()


@dataclass
class BackendReply:
    """What a streaming backend returns. Text given to ``on_text`` is not repeated here."""

    text: str = ""
    """Response text not already streamed through ``on_text`` (appended after it)."""
    outcome: Outcome | None = None
    """A full outcome instead of the default SUCCESS (spec §4.5: a backend may return one)."""
    model: str = ""
    """The model that answered, as the provider named it."""
    usage: dict[str, int] = field(default_factory=dict)
    """Token counts (``input_tokens``, ``output_tokens``) when the provider reported them."""


@runtime_checkable
class StreamingBackend(Protocol):
    """A backend that streams, honours cancel and deadline, and reports model and usage."""

    name: str
    """Short kind: ``simulated``, ``openai``, ``anthropic``, ``command``, ``python``."""

    def describe(self) -> str:
        """What is called, for views and records (``openai:gpt-4o-mini``); no credentials."""
        ...

    def settings(self) -> dict[str, Any]:
        """Facts for the node's status and evidence (backend, model, provider, ...)."""
        ...

    def for_node(self, node: Node) -> StreamingBackend:
        """This backend with the node's ``llm_provider``/``llm_model``/``reasoning_effort``."""
        ...

    def generate(self, request: BackendRequest) -> BackendReply:
        """Answer ``request.prompt``; raise an exception with a one-line message on failure."""
        ...


class Stopped(Exception):
    """The call was stopped: ``reason`` is ``"interrupted"`` or ``"timeout"``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def invoke(
    backend: StreamingBackend,
    request: BackendRequest,
    cancel: threading.Event,
    stop_at: float | None,
    grace: float = STOP_GRACE_SECONDS,
) -> BackendReply:
    """Run ``backend.generate(request)`` on a worker thread; raise :class:`Stopped` when
    ``cancel`` is set or ``stop_at`` (monotonic) passes, after stopping the call.

    A backend that has not returned ``grace`` seconds after the stop is abandoned (its thread is
    a daemon and its late result is dropped).
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["reply"] = backend.generate(request)
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name=f"codergen-{request.node.id}", daemon=True).start()
    reason = ""
    try:
        while not done.wait(POLL_SECONDS):
            if cancel.is_set():
                reason = "interrupted"
            elif stop_at is not None and time.monotonic() >= stop_at:
                reason = "timeout"
            if reason:
                break
    finally:  # stopped, or Ctrl-C in this thread: stop the call before the process may exit
        if not done.is_set():
            request.stop()
            done.wait(grace)
    if reason:
        raise Stopped(reason)
    if cancel.is_set():
        raise Stopped("interrupted")
    error = box.get("error")
    if isinstance(error, BaseException):
        raise error
    reply = box.get("reply")
    if isinstance(reply, BackendReply):
        return reply
    raise TypeError(f"backend {backend.describe()} returned {type(reply).__name__}")


class ResponseSink:
    """Appends response chunks to ``response.md`` and emits them as rate-limited events.

    The file is created with the first chunk (or by ``close(create=True)``), so a call that
    failed before answering leaves none. Memory and the event log stay bounded: only the first
    :data:`HEAD_CHARS` characters and the pending (not yet emitted) text are kept, and an event
    carries at most :data:`EMIT_MAX_CHARS` (the newest; it says how much it skipped), so an agent
    printing megabytes does not copy them all into ``events.jsonl``.
    """

    def __init__(self, path: Path, emit: Callable[[str, dict[str, Any]], None]) -> None:
        self.path = path
        self._emit = emit
        self._file: IO[str] | None = None
        self._pending: list[str] = []
        self._pending_chars = 0
        self._skipped = 0
        self._last_emit = 0.0
        self._lock = threading.Lock()
        self.head = ""
        self.chars = 0
        self.closed = False

    def __call__(self, text: str) -> None:
        if not text:
            return
        with self._lock:
            if self.closed:
                return
            if self._file is None:
                self._file = self._create()
            self._file.write(text)
            self._file.flush()
            if len(self.head) < HEAD_CHARS:
                self.head += text[: HEAD_CHARS - len(self.head)]
            self.chars += len(text)
            self._pending.append(text)
            self._pending_chars += len(text)
            if self._pending_chars > 2 * EMIT_MAX_CHARS:  # faster than the events: skip
                kept = "".join(self._pending)[-EMIT_MAX_CHARS:]
                self._skipped += self._pending_chars - len(kept)
                self._pending, self._pending_chars = [kept], len(kept)
            now = time.monotonic()
            if now - self._last_emit >= EMIT_INTERVAL:
                self._flush(now)

    def _create(self) -> IO[str]:
        """A new ``response.md``: an earlier one (a loop's previous pass) is removed, not
        truncated, so a hard link to it (the reuse index's blob) keeps its bytes."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        return self.path.open("w", encoding="utf-8")

    def _flush(self, now: float) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        if len(text) > EMIT_MAX_CHARS:
            self._skipped += len(text) - EMIT_MAX_CHARS
            text = text[-EMIT_MAX_CHARS:]
        if self._skipped:
            skipped = f"{self._skipped} characters not shown: all are in {self.path.name}"
            text = f"[... {skipped} ...]\n{text}"
        self._pending, self._pending_chars, self._last_emit, self._skipped = [], 0, now, 0
        with contextlib.suppress(Exception):
            self._emit(EventType.STAGE_OUTPUT, {"stream": "response", "text": text})

    def close(self, create: bool = False) -> None:
        """Emit what is pending and close the file (``create``: even an empty one); later
        chunks are dropped."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._flush(time.monotonic())
            if self._file is None and create:
                self._file = self._create()
            if self._file is not None:
                self._file.close()
