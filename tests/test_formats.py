"""Every file a real run writes matches its published JSON Schema (``freshness_magic/schemas``).

The run has a human gate answered twice (a loop back through the gate), a ``loop_restart`` into a
second run directory, a parallel fan-out with a join, and evidence (one node writes its own
record first). Every file of every run directory and of ``.orchestrator/`` must be named in the
schema tables: a new kind of file without a schema fails here until someone describes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

from freshness_magic import schemas
from freshness_magic.engine.events import EventType
from freshness_magic.events import session_event_kinds
from freshness_magic.freshness.baseline import STORED_FROM_FILES
from freshness_magic.freshness.filestore import FOLDER
from tests.processes import cli

REPO = Path(__file__).resolve().parents[1]

WRITE_EVIDENCE = """import json, pathlib
folder = pathlib.Path(".orchestrator/evidence")
folder.mkdir(parents=True, exist_ok=True)
record = {"version": 1, "nodeId": "build", "timestamp": "2026-01-02T03:04:05Z",
          "summary": "built", "type": "analysis", "outcome": {"files": 1}}
(folder / "build.json").write_text(json.dumps(record))
"""

PIPELINE = """digraph tour {
  graph [goal="Format tour", evidence="record"]
  start   [shape=Mdiamond]
  build   [shape=parallelogram, source_files="src/*.py", freshness="warn",
           tool_command="python3 write_evidence.py"]
  fan     [shape=component]
  left    [shape=parallelogram, tool_command="echo left"]
  right   [prompt="the right branch"]
  join    [shape=tripleoctagon]
  draft   [prompt="Summarise $goal"]
  approve [shape=hexagon, label="Ship it?"]
  check   [shape=parallelogram, tool_command="test -f once.flag || { touch once.flag; exit 1; }"]
  done    [shape=Msquare]
  start -> build -> fan
  fan -> left -> join
  fan -> right -> join
  join -> draft -> approve
  approve -> check [label="[Y] Yes"]
  approve -> draft [label="[N] No, redo"]
  check -> done  [condition="outcome=success"]
  check -> build [condition="outcome=fail", loop_restart=true]
}
"""


def registry() -> Registry:
    resources = [
        (schemas.BASE_URI + name, Resource.from_contents(schemas.load(name)))
        for name in schemas.names()
    ]
    return Registry().with_resources(resources)


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(
        schemas.load(name), registry=registry(), format_checker=FormatChecker()
    )


def documents(path: Path) -> list[Any]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [json.loads(path.read_text())]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("formats")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("x = 1\n")
    for i in range(STORED_FROM_FILES):  # enough for the snapshot's block (baselines/)
        (root / "src" / f"m{i:04d}.py").write_text(f"n = {i}\n")
    (root / "tour.dot").write_text(PIPELINE)
    (root / "write_evidence.py").write_text(WRITE_EVIDENCE)
    first = cli(
        "run",
        "tour.dot",
        *("--backend", "simulated", "--executor", "local"),  # backend.json, executor.json
        *("--answer", "approve=N", "--answer", "approve=Y"),
        cwd=root,
    )
    assert first.returncode == 3, first.stdout + first.stderr  # waits at approve after restart
    run_dir = first.stdout.split("resume ", 1)[1].split()[0]
    second = cli("resume", run_dir, "--answer", "approve=Y", cwd=root)
    assert second.returncode == 0, second.stdout + second.stderr
    return root


def test_a_loop_restart_continuation_keeps_its_own_copy_of_the_block(workdir: Path) -> None:
    first, second = sorted((workdir / ".freshness" / "runs").iterdir())
    kept = [sorted(p.name for p in (d / FOLDER).iterdir()) for d in (first, second)]
    assert kept[0] and set(kept[0]) <= set(kept[1])
    checked = cli("check", str(second), cwd=workdir)
    assert checked.returncode in (0, 1), checked.stderr


def test_every_shipped_schema_is_a_valid_schema() -> None:
    assert len(schemas.names()) >= 7
    for name in schemas.names():
        schema = schemas.load(name)
        Draft202012Validator.check_schema(schema)
        assert schema["$id"] == schemas.BASE_URI + name


def test_every_event_type_has_a_payload_schema() -> None:
    event = schemas.load("event.schema.json")
    names = {t.value for enum in session_event_kinds().enums for t in enum}
    assert {t.value for t in EventType} < names
    assert set(event["properties"]["type"]["enum"]) == names
    assert set(event["$defs"]) == names


def test_every_file_of_a_real_run_matches_its_schema(workdir: Path) -> None:
    run_dirs = sorted((workdir / ".freshness" / "runs").iterdir())
    assert len(run_dirs) == 2  # the run and its loop_restart continuation
    checked: dict[str, int] = {}
    unknown: list[str] = []
    for base, table in [(d, schemas.RUN_DIR_FILES) for d in run_dirs] + [
        (workdir / ".orchestrator", schemas.EVIDENCE_DIR_FILES)
    ]:
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            relative = path.relative_to(base).as_posix()
            known, schema = schemas.schema_for(relative, table)
            if not known:
                unknown.append(str(path.relative_to(workdir)))
                continue
            if schema is None:
                continue
            check = validator(schema)
            for number, document in enumerate(documents(path), start=1):
                problems = [e.message for e in check.iter_errors(document)]
                assert not problems, f"{path.relative_to(workdir)} document {number}: {problems}"
            checked[schema] = checked.get(schema, 0) + 1
    assert not unknown, f"files without an entry in freshness_magic/schemas tables: {unknown}"
    assert set(checked) == {
        "checkpoint.schema.json",
        "journal-record.schema.json",
        "driver-lock.schema.json",
        "event.schema.json",
        "evidence-claim.schema.json",
        "evidence-node.schema.json",
        "evidence-record.schema.json",
        "manifest.schema.json",
        "restart-link.schema.json",
        "node-status.schema.json",
        "backend.schema.json",
        "executor.schema.json",
    }


def test_the_run_covered_a_gate_a_loop_a_fan_out_and_evidence(workdir: Path) -> None:
    kinds: set[str] = set()
    for run_dir in (workdir / ".freshness" / "runs").iterdir():
        kinds |= {e["type"] for e in documents(run_dir / "events.jsonl")}
        assert all(e["v"] == 1 for e in documents(run_dir / "events.jsonl"))
    assert {"gate_waiting", "gate_answered", "parallel_started", "pipeline_restarted"} <= kinds
    assert {"evidence_recorded", "pipeline_completed"} <= kinds
    build = json.loads((workdir / ".orchestrator" / "evidence" / "build.json").read_text())
    assert "engine" not in build["outcome"]  # the node's own file, kept as it wrote it
    assert build["outcome"]["files"] == 1
    claim = json.loads((workdir / ".orchestrator" / "evidence" / "build.engine.json").read_text())
    assert claim["counted"] is True
    logged = [
        record
        for run_dir in (workdir / ".freshness" / "runs").iterdir()
        for record in documents(run_dir / "evidence.jsonl")
        if record["nodeId"] == "build"
    ]
    assert any(r["outcome"]["engine"]["node_record"] for r in logged)  # its file counted once


def test_the_node_written_format_is_the_seed_format() -> None:
    node = validator("evidence-node.schema.json")
    engine = validator("evidence-record.schema.json")
    seed = {
        "version": 1,
        "nodeId": "deploy_staging",
        "timestamp": "2026-02-07T16:00:00.000Z",
        "summary": "Deployed build #1234 to staging environment",
        "type": "external_effect",
        "outcome": {"environment": "staging", "buildId": "1234"},
    }
    assert node.is_valid(seed)
    minimal = {k: seed[k] for k in ("version", "nodeId", "timestamp", "summary")}
    assert node.is_valid(minimal)
    assert not engine.is_valid(seed)  # no outcome.engine: not written by the engine
    for broken in (
        {**seed, "version": 2},
        {**seed, "type": "deploy"},
        {**seed, "summary": "  "},
        {**seed, "outcome": ["not", "an", "object"]},
        {**seed, "timestamp": "yesterday"},
        {k: v for k, v in seed.items() if k != "summary"},
    ):
        assert not node.is_valid(broken), broken
