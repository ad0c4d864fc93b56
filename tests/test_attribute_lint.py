"""Freshness and evidence lint rules reach validation through the Validator's rule registry.

The engine alone checks none of their attributes; ``freshness_magic.lint.session_validator``
registers their rules for ``freshness-magic validate`` (and the notebook, see
``tests/notebook/test_attribute_lint.py``), and a session run gets the same rules from its
extensions. The expected lines are what ``validate`` printed while the engine still held these
rules: names, messages, severities and positions are unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_magic import session
from freshness_magic.engine.pipeline import load_pipeline, load_pipeline_file
from freshness_magic.engine.validation import (
    BOOL,
    DURATION,
    Validator,
    attr_type_rule,
    default_rules,
    validate,
)
from freshness_magic.errors import ValidationError
from freshness_magic.lint import session_validator

BAD = """digraph bad {
  commit=sure
  evidence=maybe
  start [shape=Mdiamond]
  a [prompt="x", freshness=blok, evidence=strict, commit=perhaps,
     expects_no_changes=kinda, source_files="../up"]
  b [prompt="y", freshness=warn]
  done [shape=Msquare]
  start -> a -> b -> done
}
"""

EXPECTED = [
    "2:3: error attr_type: graph: commit='sure' is not true or false "
    "(fix: write commit as true or false)",
    "3:3: error evidence_valid: graph evidence='maybe' is not one of record|require "
    '(fix: write evidence="record" or evidence="require")',
    "5:18: error freshness_valid: node `a`: freshness 'blok' is not one of ignore|warn|block "
    '(fix: write freshness="ignore", "warn" or "block")',
    "5:34: error evidence_valid: node `a`: evidence='strict' is not one of record|require "
    '(fix: write evidence="record" or evidence="require")',
    "5:51: error attr_type: node `a`: commit='perhaps' is not true or false "
    "(fix: write commit as true or false)",
    "6:6: error attr_type: node `a`: expects_no_changes='kinda' is not true or false "
    "(fix: write expects_no_changes as true or false)",
    "6:46: error source_files_path: node `a`: source_files entry '../up' is outside the "
    "working directory (not allowed): it climbs out of the working directory with `..` "
    "(fix: use a path relative to the working directory)",
    "7:18: warning freshness_sources: node `b` has freshness='warn' but no source_files, so "
    'there is nothing to check (fix: add source_files="path/or/*.glob" to `b`, or remove '
    "freshness)",
]

ATTRIBUTE_RULES = [
    "freshness_valid",
    "freshness_sources",
    "freshness_unset",
    "source_files_path",
    "evidence_valid",
    "attr_type",
    "attr_type",
    "executor_valid",
    "llm_endpoint",
    "llm_provider_known",
]


def test_the_engine_alone_checks_none_of_their_attributes() -> None:
    # It only notes that nothing it knows reads them (their rules are not registered).
    found = validate(load_pipeline(BAD))
    assert {(d.rule, d.severity.value) for d in found} == {
        ("node_attr_known", "info"),
        ("graph_attr_known", "info"),
    }
    named = {d.message.split("`")[3] for d in found if d.rule == "node_attr_known"}
    assert named == {"freshness", "evidence", "commit", "expects_no_changes", "source_files"}
    graph = {d.message.split("`")[1] for d in found if d.rule == "graph_attr_known"}
    assert graph == {"commit", "evidence"}


def test_session_validator_registers_their_rules_after_the_engine_rules() -> None:
    names = [rule.name for rule in session_validator().rules]
    assert names == [rule.name for rule in default_rules()] + ATTRIBUTE_RULES


def test_cli_validate_reports_them_as_before(tmp_path: Path) -> None:
    path = tmp_path / "bad.dot"
    path.write_text(BAD, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stdout.splitlines() == [f"{path}:{line}" for line in EXPECTED]
    assert result.stderr.strip() == f"{path}: 7 error(s), 1 warning(s), 0 info"


def test_cli_validate_json_names_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "bad.dot"
    path.write_text(BAD, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "validate", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = [(d["rule"], d["severity"], d["node"]) for d in json.loads(result.stdout)]
    assert found == [
        ("attr_type", "error", None),
        ("evidence_valid", "error", None),
        ("freshness_valid", "error", "a"),
        ("evidence_valid", "error", "a"),
        ("attr_type", "error", "a"),
        ("attr_type", "error", "a"),
        ("source_files_path", "error", "a"),
        ("freshness_sources", "warning", "b"),
    ]


def test_a_session_run_refuses_with_the_same_errors_and_warnings(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as info:
        session.open_run(BAD, workdir=tmp_path)
    graph = load_pipeline(BAD)
    expected = [d for d in session_validator().validate(graph) if d.severity.value != "info"]
    assert info.value.diagnostics == expected
    assert not (tmp_path / ".freshness").exists()  # refused before a run directory exists


def test_attr_type_rule_checks_a_package_s_own_attributes_like_the_engine_s() -> None:
    validator = Validator()
    validator.register_rule(attr_type_rule(node_typed={"my_flag": BOOL, "my_wait": DURATION}))
    graph = load_pipeline(
        BAD.replace("  b [prompt=", "  b [my_flag=sometimes, my_wait=10s, max_retries=x, prompt=")
    )
    found = [d for d in validator.validate(graph) if d.node == "b"]
    assert [(d.rule, d.message, d.column) for d in found if d.rule == "attr_type"] == [
        ("attr_type", "node `b`: my_flag='sometimes' is not true or false", 6),
        ("attr_type", "node `b`: max_retries='x' is not a whole number >= 0, e.g. 3", 38),
    ]
    assert found[0].fix == "write my_flag as true or false"
    # The rule declares its attributes: node_attr_known notes only `freshness` (whose rules
    # this validator lacks), not my_flag or my_wait.
    unknown = [d.message.split("`")[3] for d in found if d.rule == "node_attr_known"]
    assert unknown == ["freshness"]


def test_attr_type_rule_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        attr_type_rule(node_typed={"my_flag": "yes or no"})


MISSING_INPUT = """digraph g {
  start [shape=Mdiamond]
  a [prompt="a", source_files="nope.txt,data/*.txt, present.txt", freshness=warn]
  done [shape=Msquare]
  start -> a -> done
}
"""


def test_a_literal_source_file_missing_from_the_workdir_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "present.txt").write_text("here\n", encoding="utf-8")
    graph = load_pipeline(MISSING_INPUT)
    found = [
        d for d in session_validator(workdir=tmp_path).validate(graph)
        if d.rule == "source_files_exist"
    ]  # fmt: skip
    assert len(found) == 1, found  # not the glob, not present.txt
    d = found[0]
    assert (d.severity.value, d.node, d.line, d.column) == ("warning", "a", 3, 32)
    assert d.message == (
        f"node `a`: source_files entry 'nope.txt' does not exist under the working directory "
        f"{tmp_path.resolve()}; freshness has nothing to track for it"
    )
    assert "write a glob if the file comes later" in d.fix
    # Without a working directory the validator cannot know, and says nothing.
    assert not [d for d in session_validator().validate(graph) if d.rule == "source_files_exist"]


def test_cli_validate_checks_source_files_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from freshness_magic import cli

    path = tmp_path / "p.dot"
    path.write_text(MISSING_INPUT, encoding="utf-8")
    (tmp_path / "present.txt").write_text("here\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["validate", str(path), "--strict"]) == 1
    out = capsys.readouterr().out
    assert (
        f"{path}:3:32: warning source_files_exist: node `a`: source_files entry 'nope.txt'" in out
    )
    (tmp_path / "nope.txt").write_text("now\n", encoding="utf-8")
    assert cli.main(["validate", str(path)]) == 0
    assert "source_files_exist" not in capsys.readouterr().out


def test_run_and_the_notebook_look_for_source_files_in_the_run_s_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run --workdir W`` and ``%pipeline load --workdir W`` check the entries under W, where
    the run reads them, not under the folder the command was started in."""
    from IPython.core.interactiveshell import InteractiveShell

    from freshness_magic import cli

    path = tmp_path / "p.dot"
    path.write_text(MISSING_INPUT, encoding="utf-8")
    work = tmp_path / "w"
    work.mkdir()
    (work / "present.txt").write_text("here\n", encoding="utf-8")
    (tmp_path / "nope.txt").write_text("not where the run reads\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cli.main(["run", str(path), "--workdir", str(work)])
    err = capsys.readouterr().err
    assert f"source_files entry 'nope.txt' does not exist under the working directory {work}" in err
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "freshness_magic")
    try:
        shell.run_line_magic("pipeline", f"load {path} --workdir {work} --name missing")
        assert "source_files entry 'nope.txt'" in capsys.readouterr().err
        (work / "nope.txt").write_text("now\n", encoding="utf-8")
        shell.run_line_magic("pipeline", f"load {path} --workdir {work} --name missing")
        assert "source_files_exist" not in capsys.readouterr().err
    finally:
        shell.user_ns.pop("missing", None)
        shell.run_line_magic("unload_ext", "freshness_magic")


def test_a_prompt_file_is_what_freshness_checks_so_no_source_files_is_no_warning(
    tmp_path: Path,
) -> None:
    """``prompt="@prompts/plan.md", freshness="warn"`` was told it had nothing to check, though
    its prompt file is an input a change to which shows it stale."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "plan.md").write_text("Plan it.\n")
    dot = tmp_path / "p.dot"
    dot.write_text(
        "digraph p {\n  start [shape=Mdiamond]\n"
        '  plan [prompt="@prompts/plan.md", freshness="warn"]\n'
        '  other [prompt="inline", freshness="warn"]\n'
        "  done [shape=Msquare]\n  start -> plan -> other -> done\n}\n"
    )
    found = session_validator().validate(load_pipeline_file(dot))
    assert [(d.rule, d.node) for d in found if d.rule == "freshness_sources"] == [
        ("freshness_sources", "other")
    ]
