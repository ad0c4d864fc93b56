"""check_run: the report of a run on disk, its git status started before the checkpoint is read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from freshness_magic.commands.check import outdated_nodes
from freshness_magic.engine import checkpoint
from freshness_magic.errors import FreshnessError
from freshness_magic.freshness.runcheck import check_run
from freshness_magic.session import open_run
from freshness_magic.vcs import git as vcs_git
from tests.gitrepo import git
from tests.processes import fresh_python

from .conftest import write

PIPELINE = """
digraph p {
  start [shape=Mdiamond]
  work  [shape=parallelogram, tool_command="printf ran > ran.txt", source_files="src/*.py",
         freshness="warn"]
  done  [shape=Msquare]
  start -> work -> done
}
"""


def _ran(repo: Path) -> Path:
    """A completed run over ``repo``'s src/*.py; src/a.py edited since."""
    run = open_run(PIPELINE, workdir=repo)
    assert run.run().status == "completed"
    write(repo, "src/a.py", "a = 2\n")
    return run.run_dir


def _command(args: Sequence[str]) -> str:
    """git's command in ``args`` (after the ``-c`` settings and options)."""
    words = iter(args)
    for word in words:
        if word == "-c":
            next(words)
        elif not word.startswith("-"):
            return word
    return ""


def _order(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records, in order, each git process started and each checkpoint read (both still run)."""
    seen: list[str] = []
    start, load = vcs_git.start, checkpoint.load_checkpoint

    def starting(args: list[str], cwd: str) -> vcs_git.Pending:
        seen.append(f"git {_command(args)} {cwd}")
        return start(args, cwd)

    def loading(*args: object, **kwargs: object) -> object:
        seen.append("checkpoint")
        return load(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(vcs_git, "start", starting)
    monkeypatch.setattr(checkpoint, "load_checkpoint", loading)
    return seen


def test_git_runs_while_the_checkpoint_is_read(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = _ran(repo)
    seen = _order(monkeypatch)
    report = check_run(run_dir).report
    assert seen[:3] == [f"git diff-index {repo}", f"git rev-parse {repo}", "checkpoint"]
    assert report.nodes["work"].since_baseline.stale_files == ["src/a.py"]


def test_a_manifest_naming_another_folder_is_not_taken_for_the_working_directory(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint's working directory decides: a git status started in the folder the
    manifest names is stopped and one of the right folder is asked."""
    run_dir = _ran(repo)
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, "src/a.py", "a = 1\n")
    git(elsewhere, "init", "-q")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["workdir"] = str(elsewhere)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    seen = _order(monkeypatch)
    report = check_run(run_dir).report
    assert seen[:5] == [
        f"git diff-index {elsewhere}",
        f"git rev-parse {elsewhere}",
        "checkpoint",
        f"git diff-index {repo}",
        f"git rev-parse {repo}",
    ]
    assert report.workdir == str(repo)
    assert report.nodes["work"].since_baseline.stale_files == ["src/a.py"]


@pytest.mark.parametrize("manifest", ["missing", "damaged", "no workdir", "a folder gone"])
def test_without_a_usable_manifest_the_checkpoint_names_the_working_directory(
    repo: Path, monkeypatch: pytest.MonkeyPatch, manifest: str
) -> None:
    run_dir = _ran(repo)
    path = run_dir / "manifest.json"
    if manifest == "missing":
        path.unlink()
    elif manifest == "damaged":
        path.write_text('{"workdir": ')
    elif manifest == "no workdir":
        path.write_text('{"run_id": "x"}')
    else:
        path.write_text(json.dumps({"workdir": str(repo / "gone")}))
    seen = _order(monkeypatch)
    report = check_run(run_dir).report
    assert seen[:3] == ["checkpoint", f"git diff-index {repo}", f"git rev-parse {repo}"]
    assert report.nodes["work"].since_baseline.stale_files == ["src/a.py"]


def test_a_checkpoint_without_baselines_is_an_error_after_git_started(repo: Path) -> None:
    run_dir = _ran(repo)
    data = json.loads((run_dir / "checkpoint.json").read_text())
    del data["extensions"]["freshness"]
    (run_dir / "journal.jsonl").unlink()
    (run_dir / "checkpoint.json").write_text(json.dumps(data) + "\n")
    with pytest.raises(FreshnessError, match="has no freshness baselines"):
        check_run(run_dir)


def test_a_run_whose_executions_read_no_value_of_another_builds_no_traces(repo: Path) -> None:
    """Nothing can be outdated then: ``check`` loads neither the traces nor the marks."""
    run_dir = _ran(repo)
    checked = check_run(run_dir)
    assert checked.graph is not None and checked.traces == []
    assert outdated_nodes(checked) == {}
    code = (
        "import sys\n"
        "from freshness_magic import cli\n"
        f"code = cli.main(['check', {str(run_dir)!r}])\n"
        "print(code, sorted(m for m in sys.modules if m.startswith("
        "('freshness_magic.engine.marks', 'freshness_magic.engine.trace'))))\n"
    )
    assert _last_line_of_a_check(code, repo) == "1 []"


def test_the_status_starts_before_the_comparing_code_is_loaded(repo: Path) -> None:
    """``check`` starts git's whole-tree status (on one thread, beside this process) before it
    imports the modules that load baselines and compare files, or ``dataclasses`` and
    ``hashlib``, which git does not need, so git runs while they load."""
    run_dir = _ran(repo)
    code = (
        "import sys\n"
        "from freshness_magic import cli\n"
        "from freshness_magic.vcs import git\n"
        "start, seen = git.start, []\n"
        "def starting(args, cwd):\n"
        "    loaded = [m for m in ('freshness_magic.freshness.check', "
        "'freshness_magic.freshness.baseline', 'freshness_magic.engine.checkpoint', "
        "'dataclasses', 'hashlib') if m in sys.modules]\n"
        "    seen.append((args.count('core.preloadIndex=false'), loaded))\n"
        "    return start(args, cwd)\n"
        "git.start = starting\n"
        f"code = cli.main(['check', {str(run_dir)!r}])\n"
        "print(code, seen[0])\n"
    )
    assert _last_line_of_a_check(code, repo) == "1 (1, [])"


def _last_line_of_a_check(code: str, repo: Path) -> str:
    """The last line ``code`` (which runs ``check`` on ``_ran``'s run) prints in a fresh
    interpreter, after the report that names the edited file."""
    printed = fresh_python(code, cwd=repo)
    assert "src/a.py" in printed, printed
    return printed.splitlines()[-1]
