"""The hub used by freshness, prompts and the notebook helpers, with a real hub process."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from freshness_magic.errors import HubError
from freshness_magic.evidence.extension import EvidenceExtension
from freshness_magic.freshness.hashing import StatKey, hash_file
from freshness_magic.hub import daemon
from freshness_magic.hub.client import Change, HubClient
from freshness_magic.hub.extension import HubContextExtension, seq_key
from freshness_magic.hub.integration import (
    HubHashSource,
    context_packet_for,
    hub_command,
    indexed_paths,
    live_refresh,
    symbol_changes,
)
from freshness_magic.session import open_run
from tests.pipelines import one_step
from tests.waiting import wait_until

from .conftest import write

PIPELINE = one_step(
    'prompt="Review the auth module", source_files="src/*.py", hub_context=true', node="draft"
)


def _age(path: Path) -> StatKey:
    old = time.time() - 60
    os.utime(path, (old, old))
    return StatKey.of(os.stat(path))


def _wait_seq(client: HubClient, predicate: Callable[[], object]) -> None:
    seq = [client.seq()]

    def next_change() -> None:
        seq[0] = client.wait_for_change(seq[0], 1.0)

    wait_until(predicate, "the hub to index the change", pause=next_change)


def _hub_holding_aged_sources(hub_dir: Path) -> None:
    """Age ``src/auth.py`` and ``src/app.py``, start the hub and wait until it holds their stat
    keys: a hash source then answers from the hub."""
    daemon.start(hub_dir)
    client = HubClient(hub_dir)
    keys = {rel: _age(hub_dir / rel) for rel in ("src/auth.py", "src/app.py")}
    _wait_seq(
        client,
        lambda: all(s.stat == keys[s.path] for s in client.get_context(sorted(keys))),
    )


def test_hash_source_answers_only_with_a_caught_up_hub(hub_dir: Path) -> None:
    path = hub_dir / "src/auth.py"
    key = _age(path)
    source = HubHashSource(hub_dir, recheck=0)
    assert source.file_hash("src/auth.py", key) is None
    daemon.start(hub_dir)
    assert source.file_hash("src/auth.py", key) == hash_file(path).digest
    assert source.file_hash("src/auth.py", key._replace(mtime_ns=key.mtime_ns + 1)) is None
    assert source.file_hash("/elsewhere/x.py", key) is None
    assert (source.hits, source.misses) == (1, 2)
    daemon.stop(hub_dir)
    assert source.file_hash("src/auth.py", key) is None
    source.close()


def test_symbol_level_why(hub_dir: Path) -> None:
    assert symbol_changes(hub_dir, ["src/auth.py"], 0.0) == {}
    daemon.start(hub_dir)
    client = HubClient(hub_dir)
    since = time.time()
    write(
        hub_dir,
        "src/auth.py",
        'def login(user):\n    """Log a user in."""\n    return helper(user)\n\n\n'
        "def helper(u):\n    return u\n",
    )
    write(hub_dir, "docs/notes.md", "# Changed\n")
    _wait_seq(
        client,
        lambda: "login(user)" in client.get_context(["src/auth.py:login"])[0].symbols[0].signature,
    )
    found = symbol_changes(hub_dir, ["src/auth.py", "docs/notes.md", "src/app.py"], since)
    assert found == {"src/auth.py": "src/auth.py: login() signature changed"}


def test_context_packet_for_globs(hub_dir: Path) -> None:
    assert context_packet_for(hub_dir, ["src/*.py"]) is None
    daemon.start(hub_dir)
    assert indexed_paths(hub_dir, ["src/**/*.py", "./docs/*.md"]) == [
        "docs/notes.md",
        "src/app.py",
        "src/auth.py",
    ]
    packet = context_packet_for(hub_dir, ["src/auth.py"])
    assert packet is not None and packet.paths == ("src/auth.py",)
    assert "`def login(user, pw):`" in packet.text
    assert "tests: tests/test_auth.py:test_login" in packet.text
    empty = context_packet_for(hub_dir, ["nothing/*.rs"])
    assert empty is not None and "no indexed files match nothing/*.rs" in empty.text


def _run(workdir: Path) -> tuple[str, str]:
    run = open_run(
        PIPELINE, workdir=workdir, extensions=[EvidenceExtension(), HubContextExtension()]
    )
    run.run()
    prompt = (Path(run.run_dir) / "nodes" / "draft" / "prompt.md").read_text()
    return prompt, run.context.get_string(seq_key("draft"))


def test_session_runs_record_the_hub_seq_in_evidence(hub_dir: Path) -> None:
    from freshness_magic.evidence.record import read_evidence_log

    daemon.start(hub_dir)
    current = HubClient(hub_dir).seq()
    run = open_run(PIPELINE, workdir=hub_dir)
    run.run()
    prompt = (Path(run.run_dir) / "nodes" / "draft" / "prompt.md").read_text()
    assert f"change seq {current})" in prompt
    record = [r for r in read_evidence_log(run.run_dir) if r.node_id == "draft"][-1]
    assert record.engine["hub_seq"] == current


def test_hub_context_prompt_packet_and_seq(hub_dir: Path) -> None:
    prompt, seq = _run(hub_dir)
    assert "Review the auth module" in prompt
    assert "not available: no hub running" in prompt and seq == ""
    daemon.start(hub_dir)
    current = HubClient(hub_dir).seq()
    prompt, seq = _run(hub_dir)
    assert f"## Code context (Node State Hub, change seq {current})" in prompt
    assert "`def login(user, pw):`" in prompt and "`def main():`" in prompt
    assert seq == str(current)


def test_hub_command_text(hub_dir: Path) -> None:
    assert hub_command(hub_dir, ["status"]).startswith("no hub running")
    assert "caught up" in hub_command(hub_dir, ["start"])
    assert "hub already running" in hub_command(hub_dir, ["start"])
    assert "def helper(u):" in hub_command(hub_dir, ["query", "src/auth.py"])
    with pytest.raises(HubError, match="usage: %pipeline hub"):
        hub_command(hub_dir, ["query"])
    with pytest.raises(HubError, match="usage"):
        hub_command(hub_dir, ["restart"])
    assert hub_command(hub_dir, ["stop"]).startswith("hub stopped")
    assert hub_command(hub_dir, ["stop"]).startswith("no hub running")


def test_live_refresh_calls_back_after_a_save(hub_dir: Path) -> None:
    assert live_refresh(hub_dir, lambda seq, changes: None) is None
    daemon.start(hub_dir)
    got: list[list[Change]] = []
    called = threading.Event()

    def on_change(seq: int, changes: list[Change]) -> None:
        got.append(changes)
        called.set()

    sub = live_refresh(hub_dir, on_change, poll=0.05)
    assert sub is not None
    try:
        write(hub_dir, "src/app.py", "def main():\n    return 2\n")
        assert called.wait(30)
        assert any(c.path == "src/app.py" and c.kind == "body_changed" for c in got[0])
    finally:
        sub.stop()


def test_freshness_check_takes_hashes_from_the_hub(hub_dir: Path) -> None:
    from freshness_magic.freshness.check import FreshnessTracker

    _hub_holding_aged_sources(hub_dir)
    source = HubHashSource(hub_dir, recheck=0)
    tracker = FreshnessTracker(hub_dir, git=False, hash_source=source)
    baseline = tracker.capture({"n": ["src/*.py"]})["n"]
    assert source.hits == 2
    assert baseline.files["src/auth.py"].digest == hash_file(hub_dir / "src/auth.py").digest
    write(hub_dir, "src/auth.py", "def login():\n    return 0\n")
    report = tracker.check("n")
    assert report.stale_files == ["src/auth.py"]
    source.close()


def test_a_session_run_takes_hashes_from_a_running_hub(hub_dir: Path) -> None:
    """The session hands freshness the hub's hash source; freshness alone knows no hub."""
    from freshness_magic.freshness.extension import FreshnessExtension

    _hub_holding_aged_sources(hub_dir)
    run = open_run(PIPELINE, workdir=hub_dir)
    run.step()
    (freshness,) = [e for e in run.extensions if isinstance(e, FreshnessExtension)]
    assert freshness.tracker is not None
    source = freshness.tracker.snapshotter.hash_source
    assert isinstance(source, HubHashSource) and source.hits >= 2
    assert FreshnessExtension().hash_sources is None


def test_check_command_prints_symbol_changes(hub_dir: Path) -> None:
    import subprocess
    import sys

    run = open_run(PIPELINE, workdir=hub_dir)
    run.step()
    daemon.start(hub_dir)
    client = HubClient(hub_dir)
    write(
        hub_dir,
        "src/auth.py",
        'def login(user, pw):\n    """Log a user in."""\n    return helper(user.strip())\n\n\n'
        "def helper(u):\n    return u\n",
    )
    _wait_seq(client, lambda: any(c.kind == "body_changed" for c in client.changes_since(0)))
    result = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "check", str(run.run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # draft's freshness is unset (ignore): the audit lists its change, symbols too, and passes.
    assert result.returncode == 0, result.stderr
    assert "draft: src/auth.py: login() body changed (first indexed by the hub" in result.stdout
    assert "changed but not checked (freshness=ignore): draft" in result.stdout


def test_hash_source_while_a_hub_is_still_starting(project: Path) -> None:
    """A lock holder without a store yet (a hub starting up) means "hash it yourself"."""
    import fcntl

    from freshness_magic.hub.store import state_dir

    folder = state_dir(project)
    folder.mkdir(parents=True)
    fd = os.open(folder / "hub.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        source = HubHashSource(project, recheck=0)
        assert source.client.is_running() and not source.client.caught_up()
        key = StatKey.of(os.stat(project / "src/auth.py"))
        assert source.file_hash("src/auth.py", key) is None
        (folder / "hub.sqlite").write_bytes(b"")
        assert source.file_hash("src/auth.py", key) is None
    finally:
        os.close(fd)
