"""``freshness-magic parse`` and ``validate``: output formats and exit codes (0/1/2)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_magic import cli
from tests.processes import cli_process

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.dot"

CLEAN = """digraph clean {
  graph [goal="Ship", model_stylesheet="* { llm_model: m; } .fast { llm_model: f; }"]
  node [timeout="900s"]
  start [shape=Mdiamond]
  plan  [prompt="Plan $goal", class="fast"]
  build [shape=parallelogram, tool_command="true"]
  done  [shape=Msquare]
  start -> plan -> build
  build -> done [condition="outcome=success", label="ok"]
  build -> plan [condition="outcome=fail", weight=2]
}
"""

WARNS = CLEAN.replace(
    "  done  [shape=Msquare]\n", '  done  [shape=Msquare]\n  lonely [prompt="x"]\n'
)

ERRORS = CLEAN.replace('condition="outcome=fail"', 'condition="outcome==fail"')

LINE_RE = re.compile(
    r"^(?P<path>.+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|info) "
    r"(?P<rule>[a-z_]+): (?P<msg>.+?)(?: \(fix: (?P<fix>.+)\))?$"
)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_process(*args, cwd=ROOT)


# -- parse --------------------------------------------------------------------------------------


def test_parse_prints_the_loaded_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "clean.dot", CLEAN)
    assert cli.main(["parse", path]) == 0
    model = json.loads(capsys.readouterr().out)
    assert model["name"] == "clean"
    assert model["attributes"]["goal"] == "Ship"
    assert [n["id"] for n in model["nodes"]] == ["start", "plan", "build", "done"]
    plan = model["nodes"][1]
    assert plan["type"] == "codergen"
    assert plan["classes"] == ["fast"]
    assert plan["attributes"] == {
        "timeout": "900s",
        "prompt": "Plan Ship",
        "class": "fast",
        "llm_model": "f",
    }
    assert model["nodes"][2]["type"] == "tool"
    assert model["nodes"][2]["attributes"]["llm_model"] == "m"
    assert [(e["source"], e["target"]) for e in model["edges"]] == [
        ("start", "plan"),
        ("plan", "build"),
        ("build", "done"),
        ("build", "plan"),
    ]
    assert model["edges"][3]["attributes"] == {"condition": "outcome=fail", "weight": "2"}


def test_parse_nodes_in_order_of_first_appearance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "order.dot", "digraph o { z -> y\n x\n y [label=Y] }")
    assert cli.main(["parse", path, "--compact"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert [n["id"] for n in json.loads(out)["nodes"]] == ["z", "y", "x"]


def test_parse_via_subprocess() -> None:
    result = run_module("parse", str(QUICKSTART))
    assert result.returncode == 0, result.stderr
    model = json.loads(result.stdout)
    assert model["name"] == "review"
    approve = next(n for n in model["nodes"] if n["id"] == "approve")
    assert approve["type"] == "wait.human"


def test_parse_error_exit_2_with_caret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "bad.dot", "digraph g {\n  a -- b\n}\n")
    assert cli.main(["parse", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0].startswith(f"{path}:2:")
    assert lines[1].strip() == "a -- b"
    assert lines[2].strip() == "^"


# -- validate ------------------------------------------------------------------------------------


def test_validate_clean_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "clean.dot", CLEAN)
    assert cli.main(["validate", path]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "0 error(s), 0 warning(s)" in captured.err
    assert cli.main(["validate", path, "--strict"]) == 0


def test_validate_warnings_exit_0_unless_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "warns.dot", WARNS)
    assert cli.main(["validate", path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    match = LINE_RE.match(out[0])
    assert match is not None, out[0]
    assert match.group("path") == path
    assert (match.group("line"), match.group("col")) == ("8", "3")
    assert (match.group("sev"), match.group("rule")) == ("warning", "reachability")
    assert match.group("fix")
    assert cli.main(["validate", path, "--strict"]) == 1


def test_validate_errors_exit_1_with_path_line_col(tmp_path: Path) -> None:
    path = write(tmp_path, "errors.dot", ERRORS)
    result = run_module("validate", path)
    assert result.returncode == 1
    (line,) = result.stdout.splitlines()
    match = LINE_RE.match(line)
    assert match is not None, line
    assert (match.group("sev"), match.group("rule")) == ("error", "condition_syntax")
    source_line = ERRORS.splitlines()[int(match.group("line")) - 1]
    assert source_line[int(match.group("col")) - 1 :].startswith("==fail")
    assert match.group("fix") == "write `outcome=fail`"
    assert "1 error(s)" in result.stderr


def test_validate_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path, "errors.dot", ERRORS.replace("  done  [", '  lonely [prompt="x"]\n  done  [')
    )
    assert cli.main(["validate", path, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [d["rule"] for d in data] == ["reachability", "condition_syntax"]
    for item in data:
        assert list(item) == [
            "rule",
            "severity",
            "message",
            "node",
            "edge",
            "line",
            "column",
            "fix",
        ]
    assert data[0]["node"] == "lonely"
    assert data[1]["edge"] == ["build", "plan"]
    assert data[1]["severity"] == "error"


def test_validate_json_empty_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", write(tmp_path, "c.dot", CLEAN), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_validate_parse_error_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.dot", 'digraph g {\n  a [label="open\n}\n')
    result = run_module("validate", path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"{path}:2:")
    assert "^" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_unreadable_file_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.dot")
    assert cli.main(["validate", missing]) == 2
    err = capsys.readouterr().err
    assert missing in err and "no such pipeline file" in err
    assert cli.main(["parse", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_validate_quickstart_via_subprocess(tmp_path: Path) -> None:
    # `validate` checks literal source_files paths against the current folder (the folder a
    # `run` without --workdir works in): the quickstart's `draft` reads docs/spec.md.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "spec.md").write_text("spec\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "validate", str(QUICKSTART), "--strict"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_help_lists_both_commands() -> None:
    result = run_module("--help")
    assert result.returncode == 0
    assert "parse" in result.stdout and "validate" in result.stdout


def test_validate_and_parse_read_the_pipeline_from_stdin_given_as_dash(tmp_path: Path) -> None:
    """`-` is standard input; messages name it `<stdin>`, as a file is named by its path."""

    def fm(*args: str, text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "freshness_magic", *args],
            input=text,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    clean = fm("validate", "-", text=CLEAN)
    assert clean.returncode == 0, clean.stderr
    assert clean.stderr.strip() == "<stdin>: 0 error(s), 0 warning(s), 0 info"
    errors = fm("validate", "-", text=ERRORS)
    assert errors.returncode == 1
    assert all(LINE_RE.match(line)["path"] == "<stdin>" for line in errors.stdout.splitlines())
    broken = fm("validate", "-", text="digraph g { a -- b }")
    assert broken.returncode == 2
    assert broken.stderr.startswith("<stdin>:1:15: undirected edge")
    parsed = fm("parse", "-", "--compact", text=CLEAN)
    assert parsed.returncode == 0, parsed.stderr
    assert json.loads(parsed.stdout)["name"] == "clean"


KEY_TYPOS = """digraph keys {
  start [shape=Mdiamond]
  a     [prompt="a"]
  fix   [prompt="fix"]
  done  [shape=Msquare]
  start -> a
  a -> fix  [condition="outcom=fail"]
  a -> done [condition="outcome=success && contxt.tests=ok"]
  a -> done [condition="prefered_label=Yes"]
  a -> done
  fix -> a
}
"""


def test_validate_warns_where_a_condition_key_is_a_near_miss_of_one_the_engine_reads(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "keys.dot", KEY_TYPOS)
    result = run_module("validate", path)
    assert result.returncode == 0, result.stderr
    found = [LINE_RE.match(line) for line in result.stdout.splitlines()]
    assert all(m is not None and m.group("rule") == "condition_values" for m in found), found
    where = [(m["line"], m["col"], m["sev"], m["fix"]) for m in found if m is not None]
    assert where == [
        ("7", "25", "warning", "write `outcome` instead of `outcom`"),
        ("8", "44", "warning", "write `context.tests` instead of `contxt.tests`"),
        ("9", "25", "warning", "write `preferred_label` instead of `prefered_label`"),
    ]
    assert found[0] is not None
    assert found[0]["msg"] == (
        "edge a -> fix: key `outcom` looks like a typo of `outcome`; "
        "as written it reads the context key `outcom` (§10), which is probably never set, "
        "instead of the outcome"
    )


def test_context_keys_that_are_not_near_misses_pass(tmp_path: Path) -> None:
    legal = KEY_TYPOS.replace("outcom=fail", "tool.exit_code!=0 && income=low").replace(
        "contxt.tests", "context.tests"
    )
    legal = legal.replace("prefered_label=Yes", "graph.mode=fast && preferred_label=Yes")
    result = run_module("validate", write(tmp_path, "legal.dot", legal), "--strict")
    assert result.returncode == 0, result.stdout
    assert result.stdout == ""


DEAD_FAIL_EDGE = """digraph dead {
  start      [shape=Mdiamond]
  unit_tests [shape=parallelogram, tool_command="exit 1"]
  tests_ok   [shape=diamond]
  fix_tests  [shape=parallelogram, tool_command="echo fixing"]
  next       [shape=parallelogram, tool_command="echo next"]
  done       [shape=Msquare]
  start -> unit_tests
  unit_tests -> tests_ok
  tests_ok -> fix_tests [condition="outcome=fail"]
  tests_ok -> next [condition="outcome=success"]
  fix_tests -> done
  next -> done
}
"""


def test_validate_warns_that_a_diamond_s_fail_edge_can_never_be_taken(tmp_path: Path) -> None:
    path = write(tmp_path, "dead.dot", DEAD_FAIL_EDGE)
    result = run_module("validate", path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{path}:10:26: warning conditional_outcome: edge tests_ok -> fix_tests: `outcome=fail` "
        "can never hold: at the conditional node `tests_ok` (shape=diamond) `outcome` is that "
        "node's own outcome, always success, not the outcome of the node before it; a node "
        "that fails follows only edges whose condition matches its failure (§3.7) (fix: put "
        "the condition on the edge out of the node that fails: "
        '`unit_tests -> fix_tests [condition="outcome=fail"]`)'
    ]
    fixed = DEAD_FAIL_EDGE.replace("tests_ok -> fix_tests", "unit_tests -> fix_tests")
    result = run_module("validate", write(tmp_path, "fixed.dot", fixed), "--strict")
    assert result.returncode == 0, result.stdout


def test_a_diamond_routes_on_its_own_outcome_even_after_a_failure_led_to_it(
    tmp_path: Path,
) -> None:
    """Why the warning holds when the failing node reaches the diamond by a fail edge: the
    diamond's edges see the diamond's own success, so a run takes `outcome=success`."""
    text = DEAD_FAIL_EDGE.replace(
        "  unit_tests -> tests_ok\n",
        '  unit_tests -> tests_ok [condition="outcome=fail"]\n  unit_tests -> tests_ok\n',
    )
    path = write(tmp_path, "via_fail.dot", text)
    warned = run_module("validate", path)
    assert " warning conditional_outcome: edge tests_ok -> fix_tests: " in warned.stdout
    ran = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "run", path, "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    ran_nodes = [line.split()[1] for line in ran.stdout.splitlines() if line.startswith("  ")]
    assert ran_nodes == ["start", "unit_tests", "tests_ok", "next", "done"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a tool's own fail edge is taken when the tool fails
        ("tests_ok -> fix_tests", "unit_tests -> fix_tests"),
        # a diamond routing on the context, or on its own success
        ('"outcome=fail"', '"context.tool.exit_code!=0"'),
        ('"outcome=fail"', '"outcome!=fail"'),
        # a diamond an extension may hold back or fail (freshness=block) can have another outcome
        (
            "tests_ok   [shape=diamond]",
            'tests_ok   [shape=diamond, source_files="src/*.py", freshness="block"]',
        ),
    ],
)
def test_no_dead_fail_edge_warning_where_the_condition_can_hold(
    tmp_path: Path, old: str, new: str
) -> None:
    text = DEAD_FAIL_EDGE.replace(old, new, 1)
    assert text != DEAD_FAIL_EDGE
    result = run_module("validate", write(tmp_path, "ok.dot", text))
    assert "conditional_outcome" not in result.stdout, result.stdout


def test_a_missing_closing_quote_is_named_where_the_string_opened(tmp_path: Path) -> None:
    stages = "".join(f'  s{n} [prompt="stage {n}"]\n' for n in range(33))
    text = (
        f"digraph quote {{\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n{stages}"
        '  a [label="Estimate]\n  b [label="Review", prompt="x"]\n  start -> a -> b -> done\n}\n'
    )
    assert text.splitlines()[36] == '  a [label="Estimate]'  # line 37
    path = write(tmp_path, "quote.dot", text)
    result = run_module("validate", path)
    assert result.returncode == 2
    assert result.stdout == ""
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{path}:38:13: attribute 'Review' has no value: ")
    assert first.endswith(
        "; the quoted string that starts at line 37, column 12 runs on to line 38: if its "
        "closing '\"' is missing, add it there"
    )


def test_validate_json_gives_where_a_file_stops_being_utf8(tmp_path: Path) -> None:
    """The message said line 2, column 9, and the JSON error had null for both."""
    (tmp_path / "latin1.dot").write_bytes(
        'digraph g {\n  a [label="caf\xe9"]\n}\n'.encode("latin-1")
    )
    done = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "validate", "--json", "latin1.dot"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    error = json.loads(done.stdout)
    assert (error["line"], error["column"]) == (2, 16)
    assert "not UTF-8 text at line 2, column 16" in error["error"]


def test_a_misspelt_option_names_the_likely_one(tmp_path: Path) -> None:
    """``run x.dot --wrokdir x`` printed the usage and "unrecognized arguments" only."""
    done = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "run", "x.dot", "--wrokdir", "w"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    # the usage of the command given, not of the program (which lists no --workdir)
    assert done.stderr.startswith("usage: python -m freshness_magic run [-h] [--workdir DIR]")
    assert (
        "python -m freshness_magic run: error: unrecognized arguments: --wrokdir w "
        "(did you mean --workdir?)"
    ) in done.stderr
    bogus = cli_process("--bogus", cwd=tmp_path)
    assert bogus.stderr.splitlines()[-1].endswith("error: unrecognized arguments: --bogus")


def test_a_refused_run_shows_the_warnings_with_the_errors(tmp_path: Path) -> None:
    """The error said `a` has no tool_command; the warning that names the misspelt
    `tool_comand` was dropped (``validate`` showed it, ``run`` did not)."""
    (tmp_path / "p.dot").write_text(
        "digraph p {\n  start [shape=Mdiamond]\n"
        '  a [shape=parallelogram, tool_comand="echo hi", timout="2s"]\n'
        "  done [shape=Msquare]\n  start -> a -> done\n}\n"
    )
    done = cli_process("run", "p.dot", "--json", cwd=tmp_path)
    assert done.returncode == 2
    refused = json.loads(done.stdout)
    assert refused["error"].startswith(
        "pipeline `p` has 1 validation error and 2 warnings; fix the error before running:"
    )
    assert [(d["severity"], d["column"]) for d in refused["diagnostics"]] == [
        ("error", 6),
        ("warning", 27),
        ("warning", 50),
    ]
    assert "rename `timout` to `timeout`" in refused["error"]
    assert not (tmp_path / ".freshness").exists()
