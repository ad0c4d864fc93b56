"""The package as a user gets it: build the sdist and the wheel, check their metadata, install the
wheel into a fresh virtual environment outside the checkout and use it there (the extension in
IPython, a step, the command line, the demo). The installer uses pip's configured index and
find-links."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

PIPELINE = """digraph hello {
  start [shape=Mdiamond]
  greet [shape=parallelogram, tool_command="echo hello > greeting.txt"]
  done  [shape=Msquare]
  start -> greet -> done
}
"""

IN_IPYTHON = textwrap.dedent(
    """
    import json
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "freshness_magic")
    shell.run_cell_magic("pipeline", "hello", open("hello.dot").read())
    first = shell.run_line_magic("pipeline", "step")
    second = shell.run_line_magic("pipeline", "step")
    import freshness_magic
    print(json.dumps({
        "package": freshness_magic.__file__,
        "pipeline": type(shell.user_ns["hello"]).__name__,
        "greeting": open("greeting.txt").read(),
    }))
    """
)


def run(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # Default `build`: the sdist first, then the wheel built from that sdist, so a file missing
    # from the sdist breaks the wheel too. --no-isolation: setuptools comes from the dev extra.
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)], REPO)
    return out


def test_twine_check_is_clean(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir())
    assert len(files) == 2
    proc = run([sys.executable, "-m", "twine", "check", "--strict", *files], dist)
    assert proc.stdout.count("PASSED") == 2


def test_the_sdist_holds_what_the_tests_need(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for needed in (
        "LICENSE",
        "README.md",
        "Makefile",
        "docs/FORMATS.md",
        "examples/quickstart.dot",
        "notebooks/quickstart.ipynb",
        "notebooks/sanitize.cfg",
        "benchmarks/bench_cli.py",
        "tests/test_formats.py",
        "tests/engine/test_run_core.py",
        "freshness_magic/schemas/event.schema.json",
        "scripts/system-deps.sh",
        "scripts/venv-install.py",
    ):
        assert needed in names, needed
    checkout_tests = {p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("*.py")}
    assert checkout_tests <= names


def test_tests_that_read_checkout_files_pass_in_the_unpacked_sdist(
    dist: Path, tmp_path: Path
) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    (root,) = tmp_path.iterdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            # None of these tests uses hypothesis, whose plugin costs seconds to import.
            "-p",
            "no:hypothesispytest",
            "tests/test_readme_examples.py",
            "tests/test_readme_headline.py",
            "tests/test_formats.py",
            "tests/notebook/test_packaged_quickstart.py",
            "tests/test_cli_parse_validate.py",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "passed" in proc.stdout


def test_the_wheel_carries_license_schemas_and_the_demo_notebook(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "freshness_magic/schemas/evidence-node.schema.json" in names
    assert "freshness_magic/notebook/data/quickstart.ipynb" in names
    assert "freshness_magic/py.typed" in names
    text = metadata.decode()
    assert "License-Expression: MIT" in text
    assert "Classifier: Framework :: Jupyter" in text
    assert "Provides-Extra: completion" in text


def test_the_wheel_works_in_a_fresh_venv_outside_the_checkout(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    env_dir = tmp_path / "env"
    # The project's installer (uv when it can, else pip, as `make setup`) installs into the new
    # environment from this one (--python), which saves setting up a pip there; neither
    # byte-compiles up front, leaving that to the imports that need it.
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    installer = [sys.executable, str(REPO / "scripts" / "venv-install.py"), "--python", str(python)]
    run([*installer, f"{wheel}[completion,demo]"], tmp_path, 900)
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.dot").write_text(PIPELINE)

    facts = json.loads(run([str(python), "-c", IN_IPYTHON], work).stdout.strip().splitlines()[-1])
    assert facts["package"].startswith(str(env_dir))
    assert facts["pipeline"] == "Pipeline"
    assert facts["greeting"] == "hello\n"

    program = str(env_dir / "bin" / "freshness-magic")
    assert run([program, "--version"], work).stdout.startswith("freshness-magic ")
    run([program, "validate", "hello.dot", "--strict"], work)
    result = json.loads(run([program, "run", "hello.dot", "--json"], work).stdout)
    assert result["status"] == "completed"
    assert "complete -o" in run([program, "--print-completion", "bash"], work).stdout

    demo = run([str(python), "-m", "freshness_magic.notebook.demo", "--out", "demo"], work)
    assert "HTML export" in demo.stdout
    html = (work / "demo" / "quickstart.html").read_text()
    assert "approve" in html and "Traceback" not in html
