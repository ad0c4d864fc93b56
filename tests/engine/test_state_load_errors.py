"""Loading a run directory whose state files are of another format or hold fields of the wrong
type: a one-line error or a fallback naming the file and the field, never a traceback, and a
run directory of a newer format is never written (real files, the real CLI)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from freshness_magic import schemas
from freshness_magic.engine import Run, RunState
from freshness_magic.engine.checkpoint import FormatMismatch, load_state
from freshness_magic.engine.checkpoint_format import (
    CHECKPOINT_FILE,
    JOURNAL_FILE,
    journal_line,
    parse_journal_line,
)
from freshness_magic.engine.outcome import Outcome
from freshness_magic.schemas._check import ANNOTATIONS, KEYWORDS
from tests.engine.runkit import Scripted, make_run
from tests.processes import cli

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def waiting_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart run, waiting at its gate ``approve`` (made once by the real CLI)."""
    base = tmp_path_factory.mktemp("quickstart")
    (base / "W" / "docs").mkdir(parents=True)
    (base / "W" / "docs" / "spec.md").write_text("spec\n")
    made = cli("run", str(REPO / "examples" / "quickstart.dot"), "--workdir", "W", cwd=base)
    assert made.returncode == 3, made.stderr
    (run_dir,) = (base / "W" / ".freshness" / "runs").iterdir()
    return run_dir


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(run_dir, target)
    return target


def files(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and mtime."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def rewrite_journal(run_dir: Path, change: Any) -> None:
    """Apply ``change(record)`` to every journal record, writing valid checksums."""
    journal = run_dir / JOURNAL_FILE
    out = []
    for raw in journal.read_bytes().splitlines(keepends=True):
        record = parse_journal_line(raw)
        assert record is not None
        change(record)
        out.append(journal_line(record))
    journal.write_bytes(b"".join(out))


def snapshots(run_dir: Path) -> list[Path]:
    return [run_dir / CHECKPOINT_FILE, *sorted((run_dir / "checkpoints").glob("*.json"))]


def edit_snapshot(path: Path, change: Any) -> None:
    """Change one snapshot as a person would: read, edit, write a new file in its place."""
    data = json.loads(path.read_text())
    change(data)
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(data) + "\n")
    os.replace(temp, path)


def one_line_error(proc: subprocess.CompletedProcess[str], *, alone: bool = True) -> str:
    """The error line (exit 2, no traceback); ``alone``: nothing else was printed (without
    it, warnings about the files skipped on the way may come first)."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.stdout.startswith("{"):  # --json: the error is the JSON object on stdout
        error = json.loads(proc.stdout)
        assert not proc.stderr or not alone, proc.stderr
        return f"freshness-magic {error['command']}: {error['error']}"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 or not alone, proc.stderr
    assert lines[-1].startswith(("freshness-magic ", "python -m freshness_magic ")), lines[-1]
    return lines[-1]


# ---------------------------------------------------------------- another format


def to_format_99(run_dir: Path) -> None:
    def future(record: dict[str, Any]) -> None:
        if record.get("kind") == "full":
            record["format"] = 99

    rewrite_journal(run_dir, future)
    for path in snapshots(run_dir):
        edit_snapshot(path, lambda data: data.update(format=99))


def test_a_run_directory_of_a_newer_format_is_refused_and_not_written(
    waiting_run: Path, tmp_path: Path
) -> None:
    run_dir = copy_of(waiting_run, tmp_path)
    to_format_99(run_dir)
    before = files(run_dir)
    resumed = cli("resume", str(run_dir), "--answer", "approve=Y", cwd=tmp_path)
    message = one_line_error(resumed)
    assert "format 99" in message and "the version that started it" in message
    assert "not usable" not in resumed.stderr  # no fallback was tried
    for args in (("status", str(run_dir)), ("status", str(run_dir), "--json")):
        assert one_line_error(cli(*args, cwd=tmp_path)).endswith(message.partition(": ")[2])
    assert files(run_dir) == before
    with pytest.raises(FormatMismatch):
        Run.resume(run_dir)
    assert files(run_dir) == before


def test_a_newer_snapshot_is_refused_even_when_an_older_one_of_this_format_exists(
    waiting_run: Path, tmp_path: Path
) -> None:
    run_dir = copy_of(waiting_run, tmp_path)
    edit_snapshot(run_dir / CHECKPOINT_FILE, lambda data: data.update(format=3))
    before = files(run_dir)
    with pytest.raises(FormatMismatch, match="format 3"):
        load_state(run_dir)
    message = one_line_error(cli("resume", str(run_dir), "--answer", "approve=Y", cwd=tmp_path))
    assert "format 3" in message
    assert files(run_dir) == before


def test_a_newer_whole_state_record_after_the_snapshot_is_refused(
    waiting_run: Path, tmp_path: Path
) -> None:
    """A newer version resumed the run and stopped before its first snapshot: the journal goes
    on with its whole-state record, which must not be replayed as this format's."""
    run_dir = copy_of(waiting_run, tmp_path)
    journal = run_dir / JOURNAL_FILE
    first = parse_journal_line(journal.read_bytes().splitlines(keepends=True)[0])
    assert first is not None
    with journal.open("ab") as handle:
        handle.write(journal_line({**first, "format": 3}))
    before = files(run_dir)
    with pytest.raises(FormatMismatch, match="format 3"):
        load_state(run_dir)
    assert "format 3" in one_line_error(cli("status", str(run_dir), cwd=tmp_path))
    with pytest.raises(FormatMismatch):
        Run.resume(run_dir)
    assert files(run_dir) == before


# ---------------------------------------------------------------- fields of the wrong type

BAD_FIELDS = [
    (
        lambda d: d["node_outcomes"].update(lint=None),
        "node_outcomes.lint: expected an object, got null",
    ),
    (
        lambda d: d.update(completed_nodes="start"),
        'completed_nodes: expected an array, got a string ("start")',
    ),
    (lambda d: d.update(pending_gate="approve"), "pending_gate: expected an object or null"),
    (
        lambda d: d.update(pending_gate={"node": "approve", "choices": "Y"}),
        "pending_gate.question: missing",
    ),
    (lambda d: d["node_outcomes"]["lint"].update(outcome="great"), "node_outcomes.lint.outcome"),
    (lambda d: d.update(node_retries={"lint": "x"}), "node_retries.lint: expected an integer"),
]


@pytest.mark.parametrize(("change", "field"), BAD_FIELDS)
def test_a_snapshot_with_a_wrong_typed_field_is_skipped_naming_file_and_field(
    waiting_run: Path, tmp_path: Path, change: Any, field: str
) -> None:
    run_dir = copy_of(waiting_run, tmp_path)
    edit_snapshot(run_dir / CHECKPOINT_FILE, change)
    status = cli("status", str(run_dir), "--json", cwd=tmp_path)
    assert status.returncode == 3, status.stderr
    assert "Traceback" not in status.stderr
    assert f"{run_dir / CHECKPOINT_FILE} is not usable ({field}" in status.stderr
    shown = json.loads(status.stdout)
    assert shown["status"] == "waiting" and shown["pending_gate"]["node"] == "approve"
    assert shown["completed_nodes"] == ["start", "lint", "draft"]
    loaded = load_state(run_dir)
    assert loaded.path != run_dir / CHECKPOINT_FILE
    resumed = cli("resume", str(run_dir), "--answer", "approve=Y", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert resumed.stderr.count("is not usable") == 1  # said once (the state is loaded once)


@pytest.mark.parametrize(("change", "field"), BAD_FIELDS[:4])
def test_a_wrong_typed_field_with_nothing_else_usable_is_a_one_line_error(
    waiting_run: Path, tmp_path: Path, change: Any, field: str
) -> None:
    run_dir = copy_of(waiting_run, tmp_path)
    edit_snapshot(run_dir / CHECKPOINT_FILE, change)
    shutil.rmtree(run_dir / "checkpoints")
    (run_dir / JOURNAL_FILE).unlink()
    for args in (("status", str(run_dir)), ("status", str(run_dir), "--json")):
        message = one_line_error(cli(*args, cwd=tmp_path), alone=False)
        assert f"{run_dir / CHECKPOINT_FILE}: {field}" in message
    before = files(run_dir)
    resumed = cli("resume", str(run_dir), "--answer", "approve=Y", cwd=tmp_path)
    assert f"{run_dir / CHECKPOINT_FILE}: {field}" in one_line_error(resumed, alone=False)
    after = files(run_dir)
    after.pop("driver.lock", None)  # taken and let go: the lock is taken before the state is read
    before.pop("driver.lock", None)
    assert after == before


def test_a_wrong_typed_first_journal_record_names_its_field(
    waiting_run: Path, tmp_path: Path
) -> None:
    run_dir = copy_of(waiting_run, tmp_path)
    for path in snapshots(run_dir):
        path.unlink()

    def bad(record: dict[str, Any]) -> None:
        if record["kind"] == "full":
            record["completed_nodes"] = "start"

    rewrite_journal(run_dir, bad)
    message = one_line_error(cli("status", str(run_dir), cwd=tmp_path), alone=False)
    assert "first record: completed_nodes: expected an array" in message


def test_a_wrong_typed_step_record_ends_the_journal_there(
    waiting_run: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run_dir = copy_of(waiting_run, tmp_path)
    for path in snapshots(run_dir):
        path.unlink()
    steps = 0

    def bad(record: dict[str, Any]) -> None:
        nonlocal steps
        if record["kind"] == "step" and "completed" in record:
            steps += 1
            if steps == 2:
                record["outcomes"] = {node: None for node in record["completed"]}

    rewrite_journal(run_dir, bad)
    loaded = load_state(run_dir)
    assert "expected an object, got null" in caplog.text and "outcomes." in caplog.text
    assert len(loaded.data["completed_nodes"]) < 3
    assert all(isinstance(o, dict) for o in loaded.data["node_outcomes"].values())


# ---------------------------------------------------------------- what a run writes it reads


def test_an_outcome_with_fields_of_other_types_is_written_so_it_reads_back(
    tmp_path: Path,
) -> None:
    dot = (
        "digraph g { start [shape=Mdiamond] a [prompt=x] b [prompt=y] done [shape=Msquare] "
        "start -> a -> b -> done }"
    )
    odd = Outcome(notes=42, suggested_next_ids=[7], failure_reason=None)  # type: ignore[arg-type]
    run = make_run(dot, tmp_path, handler=Scripted({"a": [odd]}))
    run.run(max_steps=2)
    run.save_checkpoint()
    loaded = load_state(run.run_dir)
    assert loaded.path == run.run_dir / CHECKPOINT_FILE
    assert loaded.data["node_outcomes"]["a"]["notes"] == "42"
    run.close()
    again = Run.resume(run.run_dir)
    assert again.run().state is RunState.COMPLETED


def test_outcome_from_dict_names_what_is_not_of_its_type() -> None:
    with pytest.raises(ValueError, match="expected an object, got null"):
        Outcome.from_dict(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="suggested_next_ids: expected an array"):
        Outcome.from_dict({"outcome": "success", "suggested_next_ids": "b"})


# ---------------------------------------------------------------- the checker and the schemas


def keywords(schema: Any, found: set[str]) -> set[str]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key in ("properties", "$defs"):
                for sub in value.values():
                    keywords(sub, found)
            elif key not in ("enum", "const", "required"):
                keywords(value, found)
    elif isinstance(schema, list):
        for item in schema:
            keywords(item, found)
    return found


@pytest.mark.parametrize("name", schemas.names())
def test_the_checker_knows_every_keyword_of_the_shipped_schemas(name: str) -> None:
    assert keywords(schemas.load(name), set()) <= KEYWORDS | ANNOTATIONS


def test_the_checker_agrees_with_jsonschema_on_a_real_snapshot(waiting_run: Path) -> None:
    registry = Registry().with_resources(
        (schemas.BASE_URI + n, Resource.from_contents(schemas.load(n))) for n in schemas.names()
    )
    reference = Draft202012Validator(schemas.load("checkpoint.schema.json"), registry=registry)
    good = json.loads((waiting_run / CHECKPOINT_FILE).read_text())
    assert schemas.first_problem(good, "checkpoint.schema.json", strict=True) is None
    changes = [change for change, _ in BAD_FIELDS] + [
        lambda d: d.update(format="2"),
        lambda d: d.pop("journal_offset"),
        lambda d: d.update(journal_offset=-1),
        lambda d: d["pipeline"].update(sha256="zz"),
        lambda d: d.update(dead_end={"node": "x", "conditions": [{"edge": 1}]}),
        lambda d: d.update(dead_end={"node": "x", "conditions": []}),
        lambda d: d.update(pending_gate=None),
        lambda d: d.update(event_seq=3.0),
        lambda d: d.update(event_seq=True),
    ]
    for change in changes:
        data = json.loads(json.dumps(good))
        change(data)
        mine = schemas.first_problem(data, "checkpoint.schema.json", strict=True)
        assert (mine is None) == reference.is_valid(data), (data, mine)
