"""Interviewers: queue, auto-approve, callback, recording and the console with real pipes."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import IO

import pytest

from freshness_magic.engine.interviewers import (
    Answer,
    AnswerKind,
    AutoApproveInterviewer,
    CallbackInterviewer,
    ConsoleInterviewer,
    QueueInterviewer,
    RecordingInterviewer,
)
from freshness_magic.engine.outcome import Choice, Question

CHOICES = (
    Choice("Y", "[Y] Yes", "done"),
    Choice("N", "[N] No, redo", "draft"),
)


def question(default: str | None = None, timeout: float | None = None) -> Question:
    return Question("approve", "Ship it?", CHOICES, default=default, timeout_seconds=timeout)


@pytest.fixture
def pipe() -> Iterator[tuple[IO[str], IO[str]]]:
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "r")
    writer = os.fdopen(write_fd, "w")
    yield reader, writer
    reader.close()
    if not writer.closed:
        writer.close()


def test_queue_answers_in_order_then_defers() -> None:
    interviewer = QueueInterviewer(["Y", Answer.skipped()])
    interviewer.push(AnswerKind.TIMEOUT)
    assert interviewer.ask(question()) == Answer("Y")
    assert interviewer.ask(question()) == Answer.skipped()
    assert interviewer.ask(question()) == Answer.timeout()
    assert interviewer.ask(question()) is None
    assert len(interviewer) == 0


def test_auto_approve_picks_first_choice_not_default() -> None:
    assert AutoApproveInterviewer().ask(question(default="draft")) == Answer("Y")
    empty = Question("g", "?", ())
    assert AutoApproveInterviewer().ask(empty) == Answer.skipped()


def test_callback_and_recording() -> None:
    asked: list[str] = []

    def callback(q: Question) -> str | None:
        asked.append(q.node_id)
        return None if len(asked) > 1 else "N"

    recorder = RecordingInterviewer(CallbackInterviewer(callback))
    assert recorder.ask(question()) == Answer("N")
    assert recorder.ask(question()) is None
    assert [a for _q, a in recorder.recordings] == [Answer("N"), None]
    assert asked == ["approve", "approve"]


def test_console_reads_a_key_from_a_pipe(pipe: tuple[IO[str], IO[str]]) -> None:
    reader, writer = pipe
    writer.write("n\n")
    writer.flush()
    out = io.StringIO()
    answer = ConsoleInterviewer(reader, out, timeout=5).ask(question())
    assert answer == Answer("N")
    assert "[?] Ship it?" in out.getvalue()
    assert "  [Y] Yes\n  [N] No, redo\n" in out.getvalue()


def test_console_timeout_on_a_silent_pipe_is_a_timeout(pipe: tuple[IO[str], IO[str]]) -> None:
    """Not the default's key: the gate takes its default and says no one chose it."""
    reader, _writer = pipe
    out = io.StringIO()
    answer = ConsoleInterviewer(reader, out, timeout=0.2).ask(question(default="draft"))
    assert answer == Answer.timeout()
    assert "(default)" in out.getvalue()


def test_console_timeout_without_default_is_timeout(pipe: tuple[IO[str], IO[str]]) -> None:
    reader, _writer = pipe
    answer = ConsoleInterviewer(reader, io.StringIO()).ask(question(timeout=0.2))
    assert answer is not None and answer.is_timeout


def test_console_empty_line_takes_default(pipe: tuple[IO[str], IO[str]]) -> None:
    reader, writer = pipe
    writer.write("\n")
    writer.flush()
    assert ConsoleInterviewer(reader, io.StringIO(), timeout=5).ask(question("done")) == Answer("Y")


def test_console_reasks_invalid_answers_then_defers(pipe: tuple[IO[str], IO[str]]) -> None:
    reader, writer = pipe
    writer.write("maybe\nperhaps\ndraft\nsoon\nnever\nlater\ny\n")
    writer.flush()
    out = io.StringIO()
    console = ConsoleInterviewer(reader, out, timeout=5)
    assert console.ask(question()) == Answer("N")
    assert "'maybe' is not a choice. Valid choices: Y (Yes), N (No, redo)" in out.getvalue()
    assert console.ask(question()) is None
    assert "gate stays open" in out.getvalue()
    # Lines after the answered question are kept for the next question, not lost.
    assert console.ask(question()) == Answer("Y")


def test_console_end_of_input_is_a_timeout(pipe: tuple[IO[str], IO[str]]) -> None:
    """When its time is up: a default that leads back to the gate must not loop at once (a
    trial's run made 957 visits in 10 s, 8.9 MB, after its input ended)."""
    reader, writer = pipe
    writer.close()
    waited: list[float] = []
    console = ConsoleInterviewer(reader, io.StringIO(), timeout=30, sleep=waited.append)
    assert console.ask(question("draft")) == Answer.timeout()
    assert console.ask(question("draft")) == Answer.timeout()
    assert len(waited) == 2 and all(29 < w <= 30 for w in waited)  # the rest of each timeout


def test_console_on_a_stream_without_file_descriptor() -> None:
    console = ConsoleInterviewer(io.StringIO("bogus\nyes\n"), io.StringIO(), timeout=0.2)
    assert console.ask(question()) == Answer("Y")
    assert console.ask(question(default="draft")) == Answer.timeout()
