"""``command:`` backends: real agent scripts run as subprocesses in the work directory."""

from __future__ import annotations

import os
import shlex
import sys
import textwrap
import threading
import time
from pathlib import Path

from freshness_magic.backends import resolve_backend
from freshness_magic.engine.context import Context
from freshness_magic.engine.events import Event, EventType
from freshness_magic.engine.handlers.base import StepEnv
from freshness_magic.engine.handlers.codergen import CodergenHandler
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.outcome import StageStatus
from freshness_magic.session import open_run

PIPELINE = """digraph p {
  graph [goal="Fix the bug"]
  start [shape=Mdiamond]
  fix [prompt="Edit notes.txt for $goal"%s]
  done [shape=Msquare]
  start -> fix -> done
}"""

EDITOR = """
import os, sys
prompt = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
with open("notes.txt", "a") as out:
    out.write("edited: " + prompt.splitlines()[0] + "\\n")
print("I edited notes.txt")
print("model=" + os.environ.get("FRESHNESS_LLM_MODEL", "-"))
"""

HANG = """
import os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(60)
"""


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (it was our grandchild: a zombie never stays long)."""
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_agent_edits_a_file_with_prompt_on_stdin(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    command = script(tmp_path, "editor.py", EDITOR)
    run = open_run(
        PIPELINE % ', llm_model="agent-model"', workdir=work, backend=f"command:{command}"
    )
    events: list[Event] = []
    run.events.subscribe(events.append)
    run.run()
    assert run.result().status == "completed"
    assert (work / "notes.txt").read_text() == "edited: Edit notes.txt for Fix the bug\n"
    response = (run.run_dir / "nodes/fix/response.md").read_text()
    assert response == "I edited notes.txt\nmodel=agent-model\n"
    streamed = "".join(e.data["text"] for e in events if e.type is EventType.STAGE_OUTPUT)
    assert streamed == response
    assert run.context["llm.fix"] == {"backend": f"command:{command}", "model": "agent-model"}


def test_agent_reads_the_prompt_file(tmp_path: Path) -> None:
    command = script(tmp_path, "editor.py", EDITOR) + " {prompt_file}"
    run = open_run(PIPELINE % "", workdir=tmp_path, backend=f"command:{command}")
    run.run()
    assert run.result().status == "completed"
    assert (tmp_path / "notes.txt").read_text() == "edited: Edit notes.txt for Fix the bug\n"


def test_non_zero_exit_fails_with_code_and_stderr_tail(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        "bad.py",
        "import sys\nprint('first', file=sys.stderr)\n"
        "print('no key', file=sys.stderr)\nsys.exit(3)\n",
    )
    run = open_run(PIPELINE % "", workdir=tmp_path, backend=f"command:{command}")
    run.run()
    reason = run.result().failure_reason
    assert "exit code 3" in reason
    assert "stderr: first | no key" in reason


def test_hanging_agent_is_killed_at_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = script(tmp_path, "hang.py", HANG) + f" {shlex.quote(str(pid_file))}"
    run = open_run(PIPELINE % ', timeout="2s"', workdir=tmp_path, backend=f"command:{command}")
    run.run()
    assert run.result().status == "failed"
    assert "timed out" in run.result().failure_reason
    assert gone(int(pid_file.read_text()))


def test_cancel_kills_the_agent_and_fails_interrupted(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = script(tmp_path, "hang.py", HANG) + f" {shlex.quote(str(pid_file))}"
    graph = Graph(name="g")
    graph.nodes["n"] = Node("n", {"prompt": "wait"})
    env = StepEnv(graph=graph, run_dir=tmp_path / "run", workdir=tmp_path)

    def cancel_when_started() -> None:
        while not (pid_file.exists() and pid_file.read_text()):
            time.sleep(0.02)
        env.cancel.set()

    threading.Thread(target=cancel_when_started, daemon=True).start()
    outcome = CodergenHandler(resolve_backend(f"command:{command}")).execute(
        graph.nodes["n"], Context(), env
    )
    assert outcome.status is StageStatus.FAIL
    assert outcome.failure_reason == "interrupted"
    assert gone(int(pid_file.read_text()))


def test_plain_call_returns_stdout(tmp_path: Path) -> None:
    backend = resolve_backend("command:cat")
    assert backend(Node("n", {}), "echo me", Context()) == "echo me"
