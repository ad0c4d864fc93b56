"""CLI manners: a closed output pipe, ``--json`` errors, shell completion, branch progress, lazy
imports. The pipe tests run the CLI as a real subprocess whose stdout is a pipe that the reading
side closes after the first line, as ``freshness-magic ... | head -1`` does."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from freshness_magic import cli
from freshness_magic.commands.run import Progress
from freshness_magic.engine.events import EventBus, EventType
from tests.pipelines import ECHO_HI
from tests.processes import fresh_python

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "freshness_magic"]


def big_pipeline(nodes: int = 1500, goal: str = "ship") -> str:
    ids = [f"n{i}" for i in range(nodes)]
    chain = " -> ".join(["start", *ids, "done"])
    body = "\n".join(f'  {i} [prompt="step {i}"]' for i in ids)
    return (
        f'digraph big {{\n  graph [goal="{goal}"]\n  start [shape=Mdiamond]\n{body}\n'
        f"  done [shape=Msquare]\n  {chain}\n}}\n"
    )


def first_line_then_close(
    args: list[str], cwd: Path, before_wait: Path | None = None
) -> tuple[str, str, int]:
    """Run ``args``, read one line of stdout, close the pipe; (line, stderr, exit code)."""
    proc = subprocess.Popen(
        args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    proc.stdout.close()
    if before_wait is not None:
        before_wait.touch()
    err = proc.stderr.read()
    code = proc.wait(timeout=120)
    return line, err, code


def test_parse_into_a_closed_pipe_exits_141_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "big.dot").write_text(big_pipeline())
    line, err, code = first_line_then_close([*CLI, "parse", "big.dot"], tmp_path)
    assert line == "{\n"
    assert err == ""
    assert code == cli.EXIT_BROKEN_PIPE


def test_status_json_into_a_closed_pipe_exits_141_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "p.dot").write_text(big_pipeline(nodes=2, goal="g" * 200_000))
    done = subprocess.run(
        [*CLI, "run", "p.dot", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    run_dir = json.loads(done.stdout)["run_dir"]
    line, err, code = first_line_then_close([*CLI, "status", run_dir, "--json"], tmp_path)
    assert line == "{\n"
    assert err == ""
    assert code == cli.EXIT_BROKEN_PIPE


def test_a_run_goes_on_when_its_progress_pipe_closes(tmp_path: Path) -> None:
    (tmp_path / "p.dot").write_text(
        "digraph p {\n  start [shape=Mdiamond]\n"
        '  hold [shape=parallelogram, tool_command="while [ ! -f go ]; do sleep 0.05; done"]\n'
        '  after [shape=parallelogram, tool_command="echo after > after.txt"]\n'
        "  done [shape=Msquare]\n  start -> hold -> after -> done\n}\n"
    )
    line, err, code = first_line_then_close([*CLI, "run", "p.dot"], tmp_path, tmp_path / "go")
    assert "start" in line
    assert "Traceback" not in err and err == ""
    assert code == cli.EXIT_BROKEN_PIPE
    assert (tmp_path / "after.txt").read_text() == "after\n"
    run_dir = next((tmp_path / ".freshness" / "runs").iterdir())
    status = subprocess.run(
        [*CLI, "status", str(run_dir), "--json"], capture_output=True, text=True, timeout=120
    )
    assert json.loads(status.stdout)["status"] == "completed"


def test_hub_query_json_into_a_closed_pipe_exits_141(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    return 1\n")
    start = subprocess.run(
        [*CLI, "hub", "start", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert start.returncode == 0, start.stderr
    try:
        targets = ["src/app.py:main"] * 2000
        line, err, code = first_line_then_close(
            [*CLI, "hub", "query", "--workdir", str(tmp_path), "--json", *targets], tmp_path
        )
    finally:
        subprocess.run([*CLI, "hub", "stop", "--workdir", str(tmp_path)], timeout=120)
    assert line == "[\n"
    assert err == ""
    assert code == cli.EXIT_BROKEN_PIPE


def run_json(*args: str, cwd: Path) -> tuple[dict[str, object], subprocess.CompletedProcess[str]]:
    proc = subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout), proc


def test_json_errors_are_json_objects_with_the_same_exit_codes(tmp_path: Path) -> None:
    (tmp_path / "bad.dot").write_text("digraph g {\n  start [shape=Mdiamond]\n  a -- b\n}\n")
    for command in ("validate", "parse", "run"):
        error, proc = run_json(command, "bad.dot", "--json", cwd=tmp_path)
        assert proc.returncode == 2
        assert error["kind"] == "ParseError"
        assert error["command"] == command
        assert (error["file"], error["line"], error["column"]) == ("bad.dot", 3, 5)
        assert isinstance(error["error"], str) and "--" in error["error"]

    error, proc = run_json("run", "missing.dot", "--json", cwd=tmp_path)
    assert proc.returncode == 2
    assert error["kind"] == "PipelineFileError" and "no such pipeline file" in str(error["error"])
    assert error["file"] == "missing.dot" and error["line"] is None

    error, proc = run_json("status", str(tmp_path), "--json", cwd=tmp_path)
    assert proc.returncode == 2 and "no usable checkpoint" in str(error["error"])

    error, proc = run_json("run", "bad.dot", "--answer", "oops", "--json", cwd=tmp_path)
    assert proc.returncode == 2
    assert error["kind"] == "usage" and "expected NODE=CHOICE" in str(error["error"])

    invalid = "digraph g { a [prompt=x] done [shape=Msquare] a -> done }"
    (tmp_path / "invalid.dot").write_text(invalid)
    error, proc = run_json("run", "invalid.dot", "--json", cwd=tmp_path)
    assert proc.returncode == 2
    assert error["kind"] == "ValidationError"
    assert any(d["rule"] == "start_node" for d in error["diagnostics"])  # type: ignore[union-attr]


def test_without_json_errors_stay_text(tmp_path: Path) -> None:
    (tmp_path / "bad.dot").write_text("digraph g {\n  a -- b\n}\n")
    proc = subprocess.run(
        [*CLI, "validate", "bad.dot"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("bad.dot:2:") and "^" in proc.stderr


def test_bash_completion_script_is_valid_and_knows_the_commands() -> None:
    proc = subprocess.run(
        [*CLI, "--print-completion", "bash"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout
    for word in ("validate", "resume", "--strict", "--auto-approve", "query"):
        assert word in script
    bash = shutil.which("bash")
    assert bash is not None
    syntax = subprocess.run([bash, "-n"], input=script, capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    loaded = subprocess.run(
        [bash, "-c", "source /dev/stdin; complete -p freshness-magic"],
        input=script,
        capture_output=True,
        text=True,
    )
    assert loaded.returncode == 0 and "freshness-magic" in loaded.stdout


def test_progress_lists_branch_nodes_indented_under_their_parallel_node() -> None:
    out = io.StringIO()
    bus = EventBus("run1")
    bus.subscribe(Progress(out))
    bus.emit(EventType.STAGE_STARTED, "fan", {"handler_type": "parallel"})
    bus.emit(EventType.STAGE_COMPLETED, "left", {"status": "success", "branch_of": "fan"})
    bus.emit(
        EventType.STAGE_FAILED,
        "right",
        {"status": "fail", "branch_of": "fan", "failure_reason": "exit 2"},
    )
    bus.emit(EventType.STAGE_COMPLETED, "fan", {"status": "partial_success", "notes": "1 of 2"})
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:2] == ["ok", "left"] and "  left" in lines[0]
    assert "[branch of fan]" in lines[0]
    assert lines[1].split()[:2] == ["FAIL", "right"] and "exit 2" in lines[1]
    assert lines[2].split()[:2] == ["partial", "fan"] and "  fan" not in lines[2][9:]


@pytest.mark.parametrize("argv", [["--help"], ["validate", "--help"], ["--version"]])
def test_building_the_parser_loads_no_engine_hub_or_evidence_code(argv: list[str]) -> None:
    code = (
        "import sys\n"
        "from freshness_magic import cli\n"
        f"try:\n    cli.main({argv!r})\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(("
        "'freshness_magic.engine', 'freshness_magic.hub', 'freshness_magic.evidence', "
        "'freshness_magic.freshness', 'freshness_magic.session', 'IPython')))\n"
        "print('HEAVY', heavy)\n"
    )
    assert fresh_python(code).splitlines()[-1] == "HEAVY []"


@pytest.mark.parametrize("stylesheet", [False, True])
def test_validating_loads_the_stylesheet_code_only_for_a_pipeline_with_one(
    tmp_path: Path, stylesheet: bool
) -> None:
    """Every command that reads a pipeline validates it: a pipeline without a stylesheet does
    not pay for loading the stylesheet's parser."""
    graph = 'model_stylesheet="* { llm_model: m; }"' if stylesheet else ""
    pipeline = tmp_path / "p.dot"
    pipeline.write_text(ECHO_HI.replace("digraph p {", f"digraph p {{ graph [{graph}]", 1))
    code = (
        "import sys\n"
        "from freshness_magic import cli\n"
        f"code = cli.main(['validate', {str(pipeline)!r}])\n"
        "print(code, 'freshness_magic.engine.stylesheet' in sys.modules)\n"
    )
    assert fresh_python(code).splitlines()[-1] == f"0 {stylesheet}"


def test_help_is_wrapped_to_the_columns_the_environment_names() -> None:
    for columns in (50, 120):
        proc = subprocess.run(
            [*CLI, "validate", "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env={**os.environ, "COLUMNS": str(columns)},
        )
        widths = [len(line) for line in proc.stdout.splitlines()]
        assert max(widths) <= columns - 2
        if columns == 120:
            assert max(widths) > 50  # the wide terminal is used, not a fixed width


def test_a_misspelt_command_names_the_likely_one_or_both_when_equally_near(
    tmp_path: Path,
) -> None:
    def usage_error(*args: str) -> str:
        proc = subprocess.run([*CLI, *args], cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 2 and proc.stdout == "", proc
        usage, error = proc.stderr.splitlines()[0], proc.stderr.splitlines()[-1]
        assert usage.startswith("usage: python -m freshness_magic"), proc.stderr
        return error

    error = usage_error("valdate", "x.dot")
    assert error.startswith("python -m freshness_magic: error: argument COMMAND: ")
    assert "invalid choice: 'valdate' (did you mean 'validate'? choose from 'parse'" in error
    assert "(did you mean 'hub' or 'run'?" in usage_error("rub", "x.dot")
    assert "(did you mean 'resume' or 'run'?" in usage_error("reu", "x.dot")
    assert "(did you mean 'resume'?" in usage_error("rseume", "x.dot")  # letters swapped
    assert "did you mean" not in usage_error("xyz", "x.dot")  # nothing near: argparse's words
    assert "(did you mean 'start'?" in usage_error("hub", "strat")
    error, proc = run_json("valdate", "x.dot", "--json", cwd=tmp_path)
    assert proc.returncode == 2 and error["kind"] == "usage"
    assert "did you mean 'validate'?" in str(error["error"])


ERRING = [
    ["parse", "missing.dot"],
    ["validate", "missing.dot"],
    ["evidence", "no-run"],
    ["run", "missing.dot"],
    ["resume", "no-run"],
    ["status", "no-run"],
    ["check", "no-run"],
]


@pytest.mark.parametrize("argv", ERRING, ids=[a[0] for a in ERRING])
def test_an_error_line_names_the_program_as_it_was_called(tmp_path: Path, argv: list[str]) -> None:
    as_module = subprocess.run([*CLI, *argv], cwd=tmp_path, capture_output=True, text=True)
    assert as_module.returncode == 2
    assert as_module.stderr.startswith(f"python -m freshness_magic {argv[0]}: "), as_module.stderr
    as_script = subprocess.run(  # what the installed freshness-magic script runs
        [
            sys.executable,
            "-c",
            "import sys; from freshness_magic.cli import program; "
            f"sys.argv = ['/usr/bin/freshness-magic', *{argv!r}]; raise SystemExit(program())",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert as_script.returncode == 2
    assert as_script.stderr.startswith(f"freshness-magic {argv[0]}: "), as_script.stderr


def test_a_required_package_that_is_missing_is_named_with_what_to_install(
    tmp_path: Path,
) -> None:
    """As after ``pip install --no-deps``: a one-line error, not an import traceback."""
    import os
    import subprocess
    import sys

    blocked = tmp_path / "blocked" / "xxhash"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'xxhash'\", name='xxhash')\n"
    )
    (tmp_path / "p.dot").write_text(
        'digraph p { start [shape=Mdiamond]; t [shape=parallelogram, tool_command="true"]; '
        "done [shape=Msquare]; start -> t -> done }"
    )
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "run", "p.dot"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{tmp_path / 'blocked'}{os.pathsep}{repo}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == (
        "python -m freshness_magic run: the package 'xxhash', which freshness_magic needs, is "
        "not installed; install it (pip install xxhash) or install freshness_magic again with its "
        "dependencies\n"
    )


class _SlowOut(io.StringIO):
    """A terminal-less stream that yields to other threads inside every write."""

    def write(self, text: str) -> int:
        time.sleep(0.0005)
        return super().write(text)


def test_progress_lines_of_parallel_branches_never_run_together() -> None:
    """Branch threads report at once; one run printed two lines glued and a blank one."""
    out = _SlowOut()
    progress = Progress(out)
    bus = EventBus("r")
    bus.subscribe(progress)

    def branch(name: str) -> None:
        for n in range(15):
            bus.emit(
                EventType.STAGE_COMPLETED,
                f"{name}_{n}",
                {"status": "success", "notes": "done", "branch_of": "fan", "duration": 0.1},
            )

    threads = [threading.Thread(target=branch, args=(f"b{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = out.getvalue().split("\n")
    assert lines.pop() == ""
    assert len(lines) == 90
    assert all(
        line.startswith("  ok        b") and line.endswith("[branch of fan] done") for line in lines
    ), lines
