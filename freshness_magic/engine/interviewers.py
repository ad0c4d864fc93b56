"""Interviewers (spec §6): the frontends a human gate asks when the run is not in a notebook.

An interviewer's ``ask(question)`` returns an :class:`Answer` (a choice given as key, label or
target id, or TIMEOUT / SKIPPED) or ``None`` to *defer*: it cannot answer now, so the gate's run
pauses in WAITING until someone calls ``Run.answer``. That is how the queue interviewer behaves
when it runs out of scripted answers and how the notebook works (it never blocks the kernel).
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import selectors
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, Protocol

from freshness_magic.engine.outcome import Question

MAX_CONSOLE_ATTEMPTS = 3


class AnswerKind(StrEnum):
    """Answers that are not a choice."""

    TIMEOUT = "timeout"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Answer:
    """A human's reply: a choice (key, label or target id) or an :class:`AnswerKind`."""

    value: str | AnswerKind

    @property
    def is_timeout(self) -> bool:
        return self.value is AnswerKind.TIMEOUT

    @property
    def is_skipped(self) -> bool:
        return self.value is AnswerKind.SKIPPED

    @classmethod
    def timeout(cls) -> Answer:
        return cls(AnswerKind.TIMEOUT)

    @classmethod
    def skipped(cls) -> Answer:
        return cls(AnswerKind.SKIPPED)


class Interviewer(Protocol):
    """Presents a question to a human; ``None`` means "cannot answer now, let the run wait".

    ``question.timeout_seconds`` (the gate's ``human.timeout``, else its node ``timeout``, cut
    to the node's deadline) is the interviewer's to honour: return :meth:`Answer.timeout` when
    it passes, and the gate takes its ``human.default_choice``. An interviewer still blocked at
    the node's deadline is abandoned, and the node fails as timed out.
    """

    def ask(self, question: Question) -> Answer | None: ...


def _as_answer(item: Answer | str | AnswerKind) -> Answer:
    return item if isinstance(item, Answer) else Answer(item)


class QueueInterviewer:
    """Answers from a pre-filled queue, in order; an empty queue defers (the run waits)."""

    def __init__(self, answers: Iterable[Answer | str | AnswerKind] = ()) -> None:
        self._answers: collections.deque[Answer] = collections.deque(_as_answer(a) for a in answers)
        self._lock = threading.Lock()

    def push(self, answer: Answer | str | AnswerKind) -> None:
        with self._lock:
            self._answers.append(_as_answer(answer))

    def __len__(self) -> int:
        with self._lock:
            return len(self._answers)

    def ask(self, question: Question) -> Answer | None:
        with self._lock:
            return self._answers.popleft() if self._answers else None


class AutoApproveInterviewer:
    """Picks the first choice (§6.4: "the first option for multiple choice"), not the default.

    The first outgoing edge is what the pipeline author lists as the main path; a gate's default
    is for timeouts. A gate without choices gets SKIPPED (the handler turns that into FAIL).
    """

    def ask(self, question: Question) -> Answer | None:
        if not question.choices:
            return Answer.skipped()
        return Answer(question.choices[0].key)


class CallbackInterviewer:
    """Delegates to a function (a web UI, a chat bot, a test)."""

    def __init__(self, callback: Callable[[Question], Answer | str | None]) -> None:
        self._callback = callback

    def ask(self, question: Question) -> Answer | None:
        result = self._callback(question)
        if result is None:
            return None
        return _as_answer(result)


@dataclass
class RecordingInterviewer:
    """Wraps another interviewer and keeps every (question, answer) pair, deferrals included."""

    inner: Interviewer
    recordings: list[tuple[Question, Answer | None]] = field(default_factory=list)

    def ask(self, question: Question) -> Answer | None:
        answer = self.inner.ask(question)
        self.recordings.append((question, answer))
        return answer


class _LineReader:
    """Reads one line at a time with a timeout from a file descriptor or any text stream.

    A stream with a usable file descriptor is read with ``selectors`` + ``os.read`` so nothing
    is consumed while no question is pending; other streams (``io.StringIO``, wrappers) are read
    by one long-lived daemon thread that hands lines over through a queue.
    """

    _EOF = object()

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._fd: int | None = None
        self._buffer = b""
        self._eof = False
        self._lines: queue.Queue[object] | None = None
        try:
            fd = stream.fileno()
            probe = selectors.DefaultSelector()
            try:
                probe.register(fd, selectors.EVENT_READ)
            finally:
                probe.close()
            self._fd = fd
        except (AttributeError, OSError, ValueError, PermissionError):
            self._fd = None

    def readline(self, timeout: float | None) -> str | None:
        """The next line without its newline; None on timeout; raises EOFError at end of input."""
        if self._fd is not None:
            return self._read_fd(self._fd, timeout)
        return self._read_thread(timeout)

    def _read_fd(self, fd: int, timeout: float | None) -> str | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                if self._eof:
                    if self._buffer:
                        line, self._buffer = self._buffer, b""
                        return line.decode("utf-8", "replace").rstrip("\r")
                    raise EOFError
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                if not selector.select(remaining):
                    return None
                chunk = os.read(fd, 4096)
                if chunk:
                    self._buffer += chunk
                else:
                    self._eof = True
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace").rstrip("\r")

    def _read_thread(self, timeout: float | None) -> str | None:
        if self._lines is None:
            self._lines = queue.Queue()
            threading.Thread(
                target=self._pump, args=(self._lines,), name="console-interviewer", daemon=True
            ).start()
        if self._eof:
            raise EOFError
        try:
            item = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is self._EOF:
            self._eof = True
            raise EOFError
        return str(item)

    def _pump(self, lines: queue.Queue[object]) -> None:
        try:
            while True:
                line = self._stream.readline()
                if not line:
                    break
                lines.put(line.rstrip("\n").rstrip("\r"))
        except (OSError, ValueError):
            pass
        lines.put(self._EOF)


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


class ConsoleInterviewer:
    """Asks on a text console: prints the question and ``[K] label`` lines, reads a line.

    An empty line picks the default; an answer that matches no choice is re-asked (listing the
    valid choices) up to ``max_attempts`` times, after which the interviewer defers so the run
    waits for an explicit answer. On timeout (``timeout`` here, else the question's
    ``timeout_seconds``) it returns TIMEOUT, which the gate turns into its default. End of input
    answers like a timeout once the time is up (``sleep`` waits the rest); at a gate without a
    timeout it is no answer.
    """

    def __init__(
        self,
        stdin: IO[str],
        stdout: IO[str],
        *,
        timeout: float | None = None,
        max_attempts: int = MAX_CONSOLE_ATTEMPTS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._sleep = sleep
        self._output = stdout
        self._reader = _LineReader(stdin)
        self._echo = not _is_terminal(stdin)
        """Input from a pipe or file is not echoed by a terminal: write each answer after the
        prompt, so the transcript reads as a dialogue."""
        self._timeout = timeout
        self._max_attempts = max(1, max_attempts)

    @classmethod
    def stdio(cls, *, timeout: float | None = None) -> ConsoleInterviewer:
        """A console interviewer on the process's stdin and stdout."""
        return cls(sys.stdin, sys.stdout, timeout=timeout)

    def _say(self, text: str) -> None:
        self._output.write(text)
        with contextlib.suppress(AttributeError, OSError, ValueError):
            self._output.flush()

    def ask(self, question: Question) -> Answer | None:
        from freshness_magic.engine.gates import (
            default_choice_of,
            match_choice,
            parse_accelerator,
        )

        default = default_choice_of(question)
        timeout = self._timeout if self._timeout is not None else question.timeout_seconds
        self._say(f"[?] {question.text}\n")
        for option in question.choices:
            marker = " (default)" if default is not None and option == default else ""
            text = parse_accelerator(option.label)[1]
            self._say(f"  [{option.key}] {text}{marker}\n")
        for _attempt in range(self._max_attempts):
            self._say("Select: ")
            asked = time.monotonic()
            try:
                line = self._reader.readline(timeout)
            except EOFError:
                # No one can answer now: a gate with a timeout ends as its wait would, when it
                # would (a default that leads back to the gate must not loop at once); one
                # without stays open (`< /dev/null` must not take a default such as "approve").
                if timeout is None:
                    self._say("\n(input closed: the gate stays open)\n")
                    return None
                self._sleep(max(0.0, timeout - (time.monotonic() - asked)))
                line = None
            if line is None:
                self._say("\n(no answer)\n")
                return Answer.timeout()
            if self._echo:
                self._say(f"{line}\n")
            text = line.strip()
            if not text:
                if default is not None:
                    return Answer(default.key)
                self._say("There is no default; type one of the keys.\n")
                continue
            choice = match_choice(question, text)
            if choice is not None:
                return Answer(choice.key)
            valid = ", ".join(
                f"{c.key} ({parse_accelerator(c.label)[1]})" for c in question.choices
            )
            self._say(f"{text!r} is not a choice. Valid choices: {valid}\n")
        self._say("No valid answer; the gate stays open.\n")
        return None
