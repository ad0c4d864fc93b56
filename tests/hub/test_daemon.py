"""The hub as a process: start/stop/status, live updates, concurrent readers, crashes, restarts."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from freshness_magic.errors import HubError
from freshness_magic.freshness.hashing import StatKey, hash_file
from freshness_magic.hub import daemon
from freshness_magic.hub.client import HubClient, HubNotRunning
from freshness_magic.hub.lock import lock_held
from freshness_magic.hub.store import db_path
from tests.waiting import wait_until

from .conftest import write


def _wait_for(client: HubClient, predicate: Callable[[], object], timeout: float = 30.0) -> None:
    """Wait on the store's change seq until ``predicate()`` holds."""
    seq = [client.seq()]

    def next_change() -> None:
        seq[0] = client.wait_for_change(seq[0], 1.0)

    wait_until(predicate, "the hub to index the change", timeout=timeout, pause=next_change)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "freshness_magic", "hub", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_start_status_query_stop(hub_dir: Path) -> None:
    started = _cli("start", "--workdir", str(hub_dir))
    assert started.returncode == 0, started.stderr
    assert "hub running" in started.stdout and "caught up" in started.stdout
    again = _cli("start", "--workdir", str(hub_dir))
    assert again.returncode == 0 and "hub already running" in again.stdout
    status = daemon.status(hub_dir)
    assert status.running and status.caught_up and status.files == 4
    query = _cli("query", "src/auth.py:login", "--workdir", str(hub_dir))
    assert query.returncode == 0
    assert (
        "def login(user, pw):" in query.stdout and "tests/test_auth.py:test_login" in query.stdout
    )
    as_json = _cli("query", "src/auth.py", "docs/nope.md", "--json", "--workdir", str(hub_dir))
    assert as_json.returncode == 1 and '"exists": false' in as_json.stdout
    auth = json.loads(as_json.stdout)[0]
    login = next(s for s in auth["symbols"] if s["qualname"] == "login")
    assert login["callers"] == ["node:src/app.py:main", "node:tests/test_auth.py:test_login"]
    assert login["signature"] == "def login(user, pw):" and login["docstring_outdated"] is False
    assert "    callers by name (calls of 'login' here or in files that import this one): " in (
        query.stdout
    )
    nosuch = _cli("query", "src/auth.py:logn", "src", "src/auth.py:", "--workdir", str(hub_dir))
    assert nosuch.returncode == 1
    lines = nosuch.stdout.splitlines()
    assert lines[0] == (
        "node:src/auth.py:logn: src/auth.py has no symbol 'logn' (hub query src/auth.py lists "
        "its symbols)"
    )
    assert lines[1] == "node:src: src is a folder; name a file in it"
    assert lines[2].startswith("node:src/auth.py  [python,")  # "PATH:" is the file
    empty = _cli("query", "", "--workdir", str(hub_dir))
    assert empty.returncode == 2 and "is empty (an unset variable?): give a path" in empty.stderr
    no_file = _cli("query", ":login", "--workdir", str(hub_dir))
    assert no_file.returncode == 2 and ":login: names no file; write PATH or PATH:QUALNAME" in (
        no_file.stderr
    )
    below = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "hub", "query", "auth.py:login"],
        cwd=hub_dir / "src",
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert below.returncode == 2 and below.stderr.rstrip().endswith(
        f"or ask the hub running for {hub_dir.resolve()}: `python -m freshness_magic hub query "
        f"--workdir {hub_dir.resolve()} src/auth.py:login`"
    ), below.stderr
    for outside in ("../../etc/passwd", "/etc/passwd", "src/../../x.py:f"):
        refused = _cli("query", outside, "--workdir", str(hub_dir))
        assert refused.returncode == 2, (outside, refused.stdout)
        assert f"{outside.partition(':')[0]}: outside the hub's working directory" in refused.stderr
        assert "Traceback" not in refused.stderr
    pid = status.pid
    assert pid is not None
    stopped = _cli("stop", "--workdir", str(hub_dir))
    assert stopped.returncode == 0 and f"pid {pid}" in stopped.stdout
    assert not daemon.status(hub_dir).running
    assert not (hub_dir / ".freshness" / "hub.pid").exists()
    after = _cli("status", "--workdir", str(hub_dir))
    assert after.returncode == 1 and "no hub running" in after.stdout


def test_client_without_hub_says_how_to_start(project: Path) -> None:
    client = HubClient(project)
    assert not client.is_running() and not client.caught_up()
    with pytest.raises(HubNotRunning, match="hub start"):
        client.get_context(["src/auth.py"])
    assert client.file_hash("src/auth.py", StatKey.of(os.stat(project / "src/auth.py"))) is None
    result = _cli("query", "src/auth.py", "--workdir", str(project))
    assert result.returncode == 2 and "no hub running for" in result.stderr


def test_live_update_and_describe_changes(hub_dir: Path) -> None:
    daemon.start(hub_dir)
    client = HubClient(hub_dir)
    seq = client.seq()
    write(
        hub_dir,
        "src/auth.py",
        'def login(user, pw, otp=None):\n    """Log a user in."""\n    return helper(user)\n\n\n'
        "def helper(u):\n    return u.strip()\n",
    )
    _wait_for(
        client, lambda: "otp" in client.get_context(["src/auth.py:login"])[0].symbols[0].signature
    )
    assert (
        client.describe_changes("src/auth.py", seq)
        == "src/auth.py: login() signature changed; helper() body changed"
    )
    state = client.get_context(["src/auth.py:login"])[0]
    assert state.symbol is not None and state.symbol.docstring_outdated
    packet = client.context_packet(["src/auth.py"])
    assert f"change seq {packet.seq}" in packet.text
    assert "`def login(user, pw, otp=None):`" in packet.text and "docstring outdated" in packet.text
    # file_hash answers only for the exact stat key the hub indexed, outside the racy window
    path = hub_dir / "docs/notes.md"
    old = time.time() - 60
    os.utime(path, (old, old))
    _wait_for(
        client,
        lambda: client.get_context(["docs/notes.md"])[0].stat == StatKey.of(os.stat(path)),
    )
    key = StatKey.of(os.stat(path))
    assert client.file_hash("docs/notes.md", key) == hash_file(path).digest
    assert client.file_hash("docs/notes.md", key._replace(size=key.size + 1)) is None


def test_new_folder_rename_and_delete_are_seen(hub_dir: Path) -> None:
    daemon.start(hub_dir)
    client = HubClient(hub_dir)
    write(hub_dir, "pkg/mod.py", "def f():\n    return 1\n")
    _wait_for(client, lambda: client.get_context(["pkg/mod.py:f"])[0].exists)
    os.rename(hub_dir / "pkg", hub_dir / "lib")
    _wait_for(client, lambda: client.get_context(["lib/mod.py:f"])[0].exists)
    assert not client.get_context(["pkg/mod.py"])[0].exists
    (hub_dir / "lib/mod.py").unlink()
    _wait_for(client, lambda: not client.get_context(["lib/mod.py"])[0].exists)


def test_second_start_reports_the_running_hub_and_stop_checks_ownership(hub_dir: Path) -> None:
    first = daemon.start(hub_dir)
    second = daemon.start(hub_dir)
    assert second.already_running and second.pid == first.pid
    direct = subprocess.run(
        [sys.executable, "-m", "freshness_magic.hub.daemon", "--workdir", str(hub_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert direct.returncode == daemon.EXIT_ALREADY_RUNNING and "already running" in direct.stderr
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    pid_file = hub_dir / ".freshness" / "hub.pid"
    original = pid_file.read_text()
    try:
        pid_file.write_text(f'{{"pid": {bystander.pid}}}')
        with pytest.raises(HubError, match="refusing to signal"):
            daemon.stop(hub_dir)
        assert bystander.poll() is None and daemon.status(hub_dir).running
    finally:
        pid_file.write_text(original)
        bystander.kill()
        bystander.wait()
    daemon.stop(hub_dir)
    assert not daemon.status(hub_dir).running


def test_overflow_falls_back_to_a_full_sweep(hub_dir: Path) -> None:
    daemon.start(hub_dir, extra_args=["--overflow-threshold", "1"])
    client = HubClient(hub_dir)
    for i in range(5):
        write(hub_dir, f"src/burst{i}.py", f"def f{i}():\n    return {i}\n")
    _wait_for(
        client,
        lambda: all(s.exists for s in client.get_context([f"src/burst{i}.py" for i in range(5)])),
    )
    log = (hub_dir / ".freshness" / "hub.log").read_text()
    assert "sweep (overflow:" in log
    # SIGUSR1 forces a sweep too
    status = daemon.status(hub_dir)
    assert status.pid is not None
    os.kill(status.pid, signal.SIGUSR1)
    wait_until(
        lambda: "requested (SIGUSR1)" in (hub_dir / ".freshness" / "hub.log").read_text(),
        "the hub to log the SIGUSR1 sweep",
    )


def test_two_clients_read_while_the_hub_writes(hub_dir: Path) -> None:
    daemon.start(hub_dir)
    errors: list[BaseException] = []
    seen: list[list[int]] = [[], []]
    done = threading.Event()

    def reader(index: int) -> None:
        client = HubClient(hub_dir)
        try:
            while not done.is_set():
                state = client.get_context(["src/auth.py", "src/auth.py:login"])
                seen[index].append(state[0].seq)
                assert state[0].exists and state[1].exists
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    writer = HubClient(hub_dir)
    for i in range(20):
        write(
            hub_dir,
            "src/auth.py",
            f'def login(user, pw):\n    """Log a user in."""\n    return helper(user) + {i}\n\n\n'
            "def helper(u):\n    return u\n",
        )
        time.sleep(0.05)
    final = hash_file(hub_dir / "src/auth.py").digest
    _wait_for(writer, lambda: writer.get_context(["src/auth.py"])[0].content_hash == final)
    done.set()
    for t in threads:
        t.join(30)
    assert not errors
    for observed in seen:
        assert observed and observed == sorted(observed)


def test_sigkill_during_writes_leaves_a_consistent_store(hub_dir: Path) -> None:
    for i in range(40):
        write(
            hub_dir, f"many/m{i}.py", "".join(f"def f{j}():\n    return {j}\n" for j in range(30))
        )
    status = daemon.start(hub_dir)
    assert status.pid is not None
    stop_writing = threading.Event()

    def churn() -> None:
        n = 0
        while not stop_writing.is_set():
            n += 1
            for i in range(40):
                write(hub_dir, f"many/m{i}.py", f"def g{n}():\n    return {n}\n" * (1 + i % 3))

    writer = threading.Thread(target=churn)
    writer.start()
    time.sleep(1.0)
    os.kill(status.pid, signal.SIGKILL)
    stop_writing.set()
    writer.join()
    wait_until(lambda: not lock_held(hub_dir), "the killed hub's lock to be released")
    conn = sqlite3.connect(db_path(hub_dir))
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    orphans = conn.execute(
        "SELECT count(*) FROM symbols WHERE path NOT IN (SELECT path FROM files)"
    ).fetchone()
    assert orphans == (0,)
    conn.close()
    daemon.start(hub_dir)
    client = HubClient(hub_dir)
    on_disk = {
        p.relative_to(hub_dir).as_posix(): hash_file(p).digest
        for p in hub_dir.rglob("*")
        if p.is_file() and ".freshness" not in p.parts
    }
    states = client.get_context(sorted(on_disk))
    assert {s.path: s.content_hash for s in states} == on_disk
    for state in states:
        if state.path.startswith("many/"):
            text = (hub_dir / state.path).read_text()
            assert {s.qualname for s in state.symbols} == {
                line[4:].split("(")[0] for line in text.splitlines() if line.startswith("def ")
            }


def test_stop_and_restart_picks_up_changes(hub_dir: Path) -> None:
    daemon.start(hub_dir)
    client = HubClient(hub_dir)
    seq = client.seq()
    daemon.stop(hub_dir)
    write(hub_dir, "src/auth.py", "def login(user):\n    return user\n")
    write(hub_dir, "src/added.py", "def fresh():\n    pass\n")
    (hub_dir / "docs/notes.md").unlink()
    daemon.start(hub_dir)
    assert client.get_context(["src/added.py:fresh"])[0].exists
    assert not client.get_context(["docs/notes.md"])[0].exists
    assert client.describe_changes("src/auth.py", seq) == (
        "src/auth.py: helper() removed; login() signature changed; login() body changed; "
        "login() docstring changed"
    )
    assert client.describe_changes("docs/notes.md", seq) == "docs/notes.md: removed"


def test_hub_stops_itself_when_its_tree_is_removed(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "gone"
    write(root, "src/a.py", "def a():\n    pass\n")
    status = daemon.start(root)
    try:
        shutil.rmtree(root)

        def hub_gone() -> bool:
            try:
                os.kill(status.pid or 0, 0)
                os.waitpid(status.pid or 0, os.WNOHANG)
            except (ProcessLookupError, ChildProcessError):
                return True
            return False

        wait_until(hub_gone, "the hub to stop once its folder is gone")
    finally:
        if root.exists():
            daemon.stop(root)
        elif status.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(status.pid, signal.SIGTERM)
