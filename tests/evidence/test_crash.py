"""SIGKILL while evidence is being written never leaves an unparseable file or log line."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from freshness_magic.evidence.record import (
    EVIDENCE_LOG,
    EvidenceRecord,
    append_evidence_log,
    evidence_dir,
    read_evidence,
    read_evidence_log,
)
from tests.forkserver import Forked, ForkServer

WRITER = """
import itertools, sys
from freshness_magic.evidence.record import EvidenceRecord, append_evidence_log, write_evidence

workdir, run_dir = sys.argv[1], sys.argv[2]
payload = "x" * 60000
for i in itertools.count():
    node = f"node_{i % 3}"
    record = EvidenceRecord(node, f"write {i}", "analysis", {"i": i, "payload": payload})
    write_evidence(workdir, record)
    append_evidence_log(run_dir, record)
"""

KILLS = 25
PAYLOAD = "x" * 60000


def wait_for_growth(path: Path, size: int, proc: Forked) -> None:
    """Until the writer has appended to ``path`` (or exited, which fails the test)."""
    while not path.exists() or path.stat().st_size <= size:
        if proc.poll() is not None:
            raise AssertionError(f"writer exited early: {proc.communicate()[1]!r}")
        time.sleep(0.005)


@pytest.fixture
def writers() -> Iterator[ForkServer]:
    """Where the writer processes come from: each is a process of its own, killed for real."""
    with ForkServer(["freshness_magic.evidence.record"]) as server:
        yield server


@pytest.mark.slow
def test_sigkill_during_writes_leaves_only_whole_records(
    tmp_path: Path, writers: ForkServer
) -> None:
    workdir, run_dir = tmp_path / "work", tmp_path / "run"
    workdir.mkdir()
    rng = random.Random(5)
    log = run_dir / EVIDENCE_LOG
    for _ in range(KILLS):
        size = log.stat().st_size if log.exists() else 0
        proc = writers.start(
            ["-c", str(workdir), str(run_dir)],
            code=WRITER,
            cwd=Path(__file__).resolve().parents[2],
            env=os.environ,
        )
        wait_for_growth(log, size, proc)
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL

    # A write killed mid-way may leave part of a record after the last newline (the kernel can
    # stop a write at a page boundary); every newline-terminated line must be a whole record.
    raw = log.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    lines = complete.split(b"\n")[:-1]
    assert len(lines) >= KILLS
    for line in lines:
        record = json.loads(line)
        assert record["version"] == 1 and record["outcome"]["payload"] == PAYLOAD
    assert len(read_evidence_log(run_dir)) == len(lines)

    # The next append (a resumed run) cuts a torn tail, so the log is whole again.
    append_evidence_log(run_dir, EvidenceRecord("node_0", "after", "analysis", {"k": 1}))
    raw = log.read_bytes()
    assert raw.endswith(b"\n")
    assert [json.loads(line)["summary"] for line in raw.split(b"\n")[:-1]][-1] == "after"

    files = sorted(p for p in evidence_dir(workdir).iterdir() if not p.name.startswith("."))
    assert files, "no evidence file was written"
    for path in files:
        result = read_evidence(path, path.stem)
        assert result.valid, result.problems
