"""An API key is checked before a run starts, like a missing client package: a model backend
without its key refuses the pipeline in one line naming the variable to set, and no run
directory is left behind (CLI and API). A server the user names in the spec needs no key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_magic.backends import BackendError
from freshness_magic.session import open_run
from tests.backends.fakeservers import ANSWER, serve

PIPELINE = """digraph p {
  start [shape=Mdiamond]
  plan [prompt="Plan it"]
  review [prompt="Review it", llm_provider=anthropic, llm_model=claude-test]
  done [shape=Msquare]
  start -> plan -> review -> done
}
"""
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*KEYS, "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def no_run_left(workdir: Path) -> None:
    runs = workdir / ".freshness" / "runs"
    assert not runs.exists() or not any(runs.iterdir())


@pytest.mark.parametrize(
    ("given", "wanted"),
    [
        ({}, "set OPENAI_API_KEY in the environment"),
        ({"OPENAI_API_KEY": "sk-test-0000000"}, "set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"),
    ],
)
def test_a_missing_key_refuses_the_run_before_its_directory_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: dict[str, str], wanted: str
) -> None:
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(BackendError, match=wanted) as refused:
        open_run(PIPELINE, workdir=tmp_path, backend="openai:gpt-test", warn=False)
    assert "\n" not in str(refused.value)
    no_run_left(tmp_path)

    path = tmp_path / "p.dot"
    path.write_text(PIPELINE)
    env = {k: v for k, v in os.environ.items() if k not in KEYS} | given
    done = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "run", str(path), "--backend", "openai:gpt-test"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2, done
    assert wanted in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    no_run_left(tmp_path)


def test_a_server_named_in_the_spec_needs_no_key(tmp_path: Path) -> None:
    one = PIPELINE.replace(
        '  review [prompt="Review it", llm_provider=anthropic, llm_model=claude-test]\n', ""
    ).replace("plan -> review", "plan")
    with serve("openai") as server:
        run = open_run(one, workdir=tmp_path, backend=f"openai:gpt-test@{server.url}")
        with run:
            run.run()
    assert (run.run_dir / "nodes" / "plan" / "response.md").read_text() == ANSWER
