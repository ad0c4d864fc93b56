"""How long a hub lives: a hub started for a notebook kernel ends with it; state folder hygiene."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from freshness_magic.hub import daemon
from freshness_magic.hub.store import SCHEMA_VERSION, connect_writer, db_path
from tests.waiting import wait_until

KERNEL = """
import sys, time
from freshness_magic.hub.integration import hub_command
print(hub_command(sys.argv[1], ["start"], stop_with_this_process=True), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_hub_started_by_a_kernel_stops_when_the_kernel_is_killed(hub_dir: Path) -> None:
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL, str(hub_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert kernel.stdout is not None
        line = kernel.stdout.readline()
        assert "hub running" in line, kernel.stderr.read() if kernel.stderr else line
        status = daemon.status(hub_dir)
        assert status.running and status.pid is not None and status.pid != kernel.pid
        hub_pid = status.pid
        kernel.send_signal(signal.SIGKILL)
        # Not reaped yet: the kernel is a zombie, which must count as ended.
        wait_until(lambda: not daemon.status(hub_dir).running, "the hub to stop", timeout=30)
        wait_until(lambda: not _alive(hub_pid), "the hub process to exit", timeout=30)
        assert "owner process" in (hub_dir / ".freshness" / "hub.log").read_text()
    finally:
        kernel.kill()
        kernel.wait()


def test_hub_started_without_owner_outlives_its_starter(hub_dir: Path) -> None:
    starter = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from freshness_magic.hub.integration import hub_command; "
            "print(hub_command(sys.argv[1], ['start']))",
            str(hub_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "hub running" in starter.stdout, starter.stderr
    status = daemon.status(hub_dir)
    assert status.running and status.pid is not None and _alive(status.pid)


def test_daemon_refuses_to_start_for_an_owner_that_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "freshness_magic.hub.daemon",
            "--workdir",
            str(tmp_path),
            "--owner-pid",
            str(gone.pid),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == daemon.EXIT_OWNER_GONE
    assert f"owner process {gone.pid} is not running" in result.stderr
    assert not daemon.status(tmp_path).running


def test_hub_only_state_folder_gets_its_gitignore(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "main.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    connect_writer(tmp_path).close()
    assert (tmp_path / ".freshness" / ".gitignore").read_text().splitlines()[-1] == "*"
    porcelain = subprocess.run(
        ["git", "-C", str(tmp_path), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert porcelain.splitlines() == ["?? main.py"]


def test_store_of_another_schema_is_rebuilt_keeping_the_change_log(tmp_path: Path) -> None:
    conn = connect_writer(tmp_path)
    conn.execute(
        "INSERT INTO files(path, dev, ino, mode, size, mtime_ns, ctime_ns, hash, "
        "language, indexed_at) VALUES ('a.py', 0, 0, 0, 0, 0, 0, 'h', 'python', 0)"
    )
    conn.execute("INSERT INTO changes(time, path, kind) VALUES (0, 'a.py', 'file_added')")
    conn.execute("UPDATE meta SET value='1' WHERE key='schema'")
    conn.execute("INSERT INTO meta(key, value) VALUES ('indexed', '1')")
    conn.close()
    connect_writer(tmp_path).close()
    check = sqlite3.connect(db_path(tmp_path))
    assert check.execute("SELECT count(*) FROM files").fetchone() == (0,)
    assert check.execute("SELECT count(*) FROM changes").fetchone() == (1,)
    assert dict(check.execute("SELECT key, value FROM meta").fetchall())["schema"] == SCHEMA_VERSION
    assert "indexed" not in dict(check.execute("SELECT key, value FROM meta").fetchall())
    check.close()
