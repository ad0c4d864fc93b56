"""Backends as the user meets them: the CLI, resume, credentials, prompt files, evidence
guidance, entry points and a missing extra."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from freshness_magic.backends import BackendError, resolve_backend
from freshness_magic.engine.context import Context
from freshness_magic.engine.model import Node
from freshness_magic.engine.pipeline import load_pipeline_file
from freshness_magic.engine.validation import validate
from freshness_magic.evidence.record import read_evidence, read_evidence_log
from freshness_magic.freshness.extension import extension_of
from freshness_magic.session import open_run, resume_run
from tests.backends.fakeservers import serve
from tests.processes import cli_process as cli

SECRET = "sk-test-SECRET-7f3a9c1e55"

TWO_NODES = """digraph p {
  start [shape=Mdiamond]
  draft [prompt="Draft it"]
  check [prompt="Check it"]
  done [shape=Msquare]
  start -> draft -> check -> done
}"""


def test_cli_says_when_the_backend_is_simulated_and_names_a_real_one(tmp_path: Path) -> None:
    (tmp_path / "p.dot").write_text(TWO_NODES)
    proc = cli("run", "p.dot", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "codergen backend: simulated (no model is called; use --backend" in proc.stdout
    with serve("openai") as server:
        spec = f"openai:cli-model@{server.url}"
        proc = cli("run", "p.dot", "--backend", spec, cwd=tmp_path, env={"OPENAI_API_KEY": SECRET})
    assert proc.returncode == 0, proc.stderr
    assert f"codergen backend: {spec}" in proc.stdout
    assert server.models() == ["cli-model", "cli-model"]


def test_cli_bad_backend_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "p.dot").write_text(TWO_NODES)
    proc = cli("run", "p.dot", "--backend", "gemeni:pro", cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown backend 'gemeni'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_resume_uses_the_backend_the_run_was_opened_with(tmp_path: Path) -> None:
    (tmp_path / "p.dot").write_text(
        TWO_NODES.replace("start -> draft -> check -> done", "start -> draft -> gate\n")
        .replace("done [shape=Msquare]", "done [shape=Msquare]\n  gate [shape=hexagon]")
        .replace("}", '  gate -> check [label="[Y] Yes"]\n  check -> done\n}')
    )
    with serve("openai") as server:
        spec = f"openai:resume-model@{server.url}"
        env = {"OPENAI_API_KEY": SECRET}
        first = cli("run", "p.dot", "--backend", spec, cwd=tmp_path, env=env)
        assert first.returncode == 3, first.stderr
        run_dir = next((tmp_path / ".freshness/runs").iterdir())
        second = cli("resume", str(run_dir), "--answer", "gate=Y", cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stderr
    assert f"codergen backend: {spec}" in second.stdout
    assert server.models() == ["resume-model", "resume-model"]


def test_no_credential_is_written_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    dot = TWO_NODES.replace(
        'check [prompt="Check it"]', 'check [prompt="Check it", llm_model="badkey-model"]'
    )
    with serve("openai") as server:
        run = open_run(dot, workdir=tmp_path, backend=f"openai:good-model@{server.url}")
        run.run()
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    result = run.result()
    assert result.status == "failed"
    assert "HTTP 401: Incorrect API key provided: ***" in result.failure_reason
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "events.jsonl" for p in files)
    assert any(p.name == "checkpoint.json" for p in files)
    leaks = [p for p in files if SECRET.encode() in p.read_bytes()]
    assert leaks == []


def test_credentials_in_a_base_url_are_not_stored_and_a_resume_asks_for_the_spec(
    tmp_path: Path,
) -> None:
    """A trial resumed such a run: the remembered spec sent ``***`` as the password. The user
    part and query parameters named like a credential are left out of every file; a resume
    without the spec says to give it again, and goes on with it."""
    with serve("openai") as server:
        host = server.url.removeprefix("http://")
        spec = f"openai:good-model@http://user:pw-{SECRET}@{host}?api_key={SECRET}&v=2"
        run = open_run(TWO_NODES, workdir=tmp_path, backend=spec, run_id="r1")
        run.run(to="check")
        run.close()
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        assert [p for p in files if SECRET.encode() in p.read_bytes()] == []
        stored = (run.run_dir / "backend.json").read_text()
        assert f"http://***@{host}?api_key=***&v=2" in stored
        with pytest.raises(BackendError, match=r"whose base URL held credentials, which are ne"):
            resume_run(run.run_dir)
        again = resume_run(run.run_dir, backend=spec)
        again.run()
        assert again.result().status == "completed"
        again.close()


PROMPT_PIPELINE = """digraph p {
  graph [goal="Ship the login fix"]
  start [shape=Mdiamond]
  plan [prompt="@prompts/plan.md", freshness="warn"]
  done [shape=Msquare]
  start -> plan -> done
}"""


def test_prompt_file_is_read_expanded_and_an_input_of_the_node(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    prompt = tmp_path / "prompts/plan.md"
    prompt.write_text("Plan $goal for {who}.\n")
    (tmp_path / "p.dot").write_text(PROMPT_PIPELINE)
    graph = load_pipeline_file(tmp_path / "p.dot")
    work = tmp_path / "work"
    work.mkdir()
    run = open_run(graph, workdir=tmp_path)
    run.context.set("who", "reviewers")
    run.run()
    assert run.result().status == "completed"
    assert (
        run.run_dir / "nodes/plan/prompt.md"
    ).read_text() == "Plan Ship the login fix for reviewers.\n"
    freshness = extension_of(run)
    assert freshness.report(run).stale_nodes == []
    prompt.write_text("Plan something else.\n")
    report = freshness.report(run)
    assert report.stale_nodes == ["plan"]
    assert report.nodes["plan"].effective.stale_files == ["prompts/plan.md"]


def test_missing_prompt_file_is_a_validation_error_with_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "p.dot").write_text(PROMPT_PIPELINE)
    graph = load_pipeline_file(tmp_path / "p.dot")
    found = [d for d in validate(graph) if d.rule == "prompt_file_exists"]
    assert len(found) == 1
    assert (found[0].severity.value, found[0].line, found[0].column) == ("error", 4, 9)
    proc = cli("validate", "p.dot", cwd=tmp_path)
    assert proc.returncode != 0
    assert re.search(
        r"p\.dot:4:9: error prompt_file_exists: node `plan`: prompt file "
        r"'prompts/plan.md' does not exist",
        proc.stdout + proc.stderr,
    )


AGENT = """
import json, re, sys
prompt = sys.stdin.read()
section = prompt[prompt.index("## Work evidence"):]
path = re.search(r"`([^`]+\\.json)`", section).group(1)
example = next(line.strip() for line in section.splitlines() if line.strip().startswith("{"))
import os
os.makedirs(os.path.dirname(path), exist_ok=True)
open(path, "w").write(example)
print("wrote", path)
"""


def test_evidence_guidance_ends_the_prompt_and_its_example_validates(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(AGENT))
    dot = (
        TWO_NODES.replace("digraph p {", 'digraph p {\n graph [evidence="require"]')
        .replace(' check [prompt="Check it"]\n', "")
        .replace("draft -> check -> done", "draft -> done")
    )
    work = tmp_path / "work"
    work.mkdir()
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(agent))}"
    run = open_run(dot, workdir=work, backend=f"command:{command}")
    run.run()
    prompt = (run.run_dir / "nodes/draft/prompt.md").read_text()
    assert prompt.startswith("Draft it\n\n## Work evidence")
    assert "`.orchestrator/evidence/draft.json`" in prompt
    assert "are optional" in prompt
    assert run.result().status == "completed", run.result().failure_reason
    record = read_evidence_log(run.run_dir, "draft")[-1]
    assert record.engine["evidence_method"] == "evidence_file"
    assert read_evidence(work / ".orchestrator/evidence/draft.json", "draft").valid


def test_entry_point_backends_are_found_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fm_test_plugin.py").write_text(
        "def make(argument):\n    return lambda node, prompt, context: f'{argument}: {prompt}'\n"
    )
    info = tmp_path / "fm_test_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fm-test-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[freshness_magic.backends]\nechoer = fm_test_plugin:make\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    backend = resolve_backend("echoer:hello")
    assert backend(Node("n", {}), "world", Context()) == "hello: world"
    with pytest.raises(BackendError, match="echoer"):
        resolve_backend("nosuch:x")


def test_python_callable_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fm_test_llm.py").write_text(
        "def answer(node, prompt, context):\n    return prompt.upper()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    run = open_run(TWO_NODES, workdir=tmp_path, backend="python:fm_test_llm:answer")
    run.run()
    assert (run.run_dir / "nodes/draft/response.md").read_text() == "DRAFT IT"
    assert run.context["llm.draft"]["backend"] == "python:fm_test_llm:answer"
    with pytest.raises(BackendError, match="has no 'nope'"):
        resolve_backend("python:fm_test_llm:nope")


def test_a_python_backend_in_the_current_folder_gets_the_path_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``freshness-magic`` script does not import from the current folder (``python -m``
    does): a trial's module beside the pipeline was "not found" with no word why."""
    (tmp_path / "fm_here.py").write_text("def answer(node, prompt, context):\n    return 'x'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    with pytest.raises(BackendError) as info:
        resolve_backend("python:fm_here:answer")
    assert str(info.value).endswith(
        "cannot import 'fm_here': No module named 'fm_here' (fm_here is in the current folder, "
        "which is not on Python's path here: run with PYTHONPATH=.)"
    )
    with pytest.raises(BackendError) as elsewhere:
        resolve_backend("python:fm_nowhere:answer")
    assert str(elsewhere.value).endswith("No module named 'fm_nowhere'")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            "return {'not': 'a str'}",
            "python:fm_wrong:answer returned dict, not a str or an Outcome (a codergen backend "
            "returns the response text, or an Outcome)",
        ),
        ("pass", "python:fm_wrong:answer returned NoneType, not a str or an Outcome"),
        ("raise RuntimeError('kaboom')", "python:fm_wrong:answer: RuntimeError: kaboom"),
    ],
    ids=["dict", "none", "raises"],
)
def test_a_python_backend_that_returns_no_text_or_raises_fails_the_node_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, reason: str
) -> None:
    """A trial's dict was recorded as the response (its ``str()``) and None as an empty one,
    both as success; an exception showed its message without its type."""
    module = f"fm_wrong_{abs(hash(body))}"  # a module of its own per case (imports are cached)
    (tmp_path / f"{module}.py").write_text(f"def answer(node, prompt, context):\n    {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    run = open_run(TWO_NODES, workdir=tmp_path, backend=f"python:{module}:answer")
    reason = reason.replace("fm_wrong", module)
    run.run()
    outcome = run.node_outcomes["draft"]
    assert outcome.status.value == "fail"
    assert outcome.failure_reason.startswith(reason), outcome.failure_reason
    kept = run.run_dir / "nodes" / "draft" / "traceback.txt"
    if "raise" in body:  # a bug in the user's code: its traceback is kept, and named
        assert outcome.failure_reason.endswith(f" (traceback: {kept})")
        assert "in answer\n    raise RuntimeError('kaboom')" in kept.read_text()
    else:
        assert not kept.exists()


@pytest.mark.parametrize("package", ["openai", "anthropic"])
def test_missing_extra_is_one_line_naming_it(package: str) -> None:
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "from freshness_magic.backends import resolve_backend\n"
        f"resolve_backend({package + ':m'!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        f"freshness_magic.errors.BackendError: the {package} backend needs the {package!r} "
        f"package: pip install 'freshness_magic[{package}]'"
    )
