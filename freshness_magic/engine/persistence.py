"""The run directory: what a run remembers, its checkpoint payload, restore, and loop restarts.

A run's state between steps is one :class:`RunMemory`. :func:`checkpoint_payload` turns it into
the whole checkpoint (the §5.3 field names plus the engine's own: ``node_outcomes``,
``next_node``, ``pending_gate``, the failure, the extensions' state), :func:`step_record` into one
journal record of what changed since the last record (see :mod:`.checkpoint_format`), and
:func:`restore_memory` reads the checkpoint back.
The pipeline text is kept once per run directory as ``pipeline.dot``
(:func:`.runread.stored_pipeline` rebuilds the Graph on resume), and ``loop_restart`` continues
in ``<run_id>-r<N>`` linked from the old directory by ``restarted_as.json``
(:func:`.runread.follow_restarts`). What read-only commands need of a run directory lives in
:mod:`.runread`, re-exported here.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import compress, islice, repeat
from operator import is_not
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import write_atomic, write_json_atomic
from freshness_magic.engine.checkpoint_format import (
    CHECKPOINT_FORMAT,
    EncodedList,
    EncodedMap,
    encode_json,
)
from freshness_magic.engine.checkpoint_writer import write_manifest
from freshness_magic.engine.context import Context
from freshness_magic.engine.events import utc_now_iso
from freshness_magic.engine.model import Graph
from freshness_magic.engine.outcome import Outcome, Question
from freshness_magic.engine.routing import ConditionTrial, DeadEnd
from freshness_magic.engine.runread import RESTART_LINK as RESTART_LINK
from freshness_magic.engine.runread import follow_restarts as follow_restarts
from freshness_magic.engine.runread import source_hash as source_hash
from freshness_magic.engine.runread import stored_pipeline as stored_pipeline
from freshness_magic.engine.runread import workdir_gone as workdir_gone
from freshness_magic.engine.state import RunResult, RunState
from freshness_magic.engine.trace import Trace, latest_writers
from freshness_magic.errors import CheckpointError
from freshness_magic.pathsafety import read_state

PIPELINE_FILE = "pipeline.dot"
DAMAGED_PIPELINE_FILE = "pipeline.dot.damaged"
"""The pipeline text, stored once per run directory so a resume needs no original file."""
EVENTS_FILE = "events.jsonl"
RUN_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")


def same_pipeline(source: str, stored_hash: str | None) -> bool:
    """Whether a run started from text hashed ``stored_hash`` ran the pipeline ``source`` holds:
    the same text, give or take its final newlines (a ``%%pipeline`` cell's body ends with one,
    a file may not), so a run started from the cell is found from the file and the other way."""
    if not stored_hash:
        return False
    body = source.rstrip("\n")
    return stored_hash in {source_hash(source), source_hash(body), source_hash(body + "\n")}


def new_run_id() -> str:
    """``20260122T101500-1a2b3c``: sortable by start time, unique."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


_TEXT_FIELDS = ("preferred_label", "notes", "failure_reason")


def outcome_record(outcome: Outcome) -> dict[str, Any]:
    """An outcome for the checkpoint without its empty fields (they come back as defaults).

    Its fields get the types of the schema a resume checks them against (custom code may put
    a number in ``notes``): what the run writes, it can always read back.
    """
    data = outcome.to_dict()
    for key in _TEXT_FIELDS:
        data[key] = str(data[key]) if data[key] else ""
    data["suggested_next_ids"] = [str(i) for i in data["suggested_next_ids"]]
    return {k: v for k, v in data.items() if v or k == "outcome"}


class TraceEncodings:
    """Each kept trace's JSON, encoded once: the journal record that adds a trace and every
    later snapshot (which holds every trace of the run) splice the same text. A trace is kept
    only once it is sealed and its input digests are set, and never changes after that."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple[Trace, str]] = {}

    def of(self, traces: list[Trace], *, whole: bool = False) -> EncodedList:
        """The encoded ``traces``; ``whole``: they are all the run's traces, and encodings of
        traces no longer among them (a restart replaced the list) are dropped."""
        texts = self._texts
        items = []
        for trace in traces:
            known = texts.get(id(trace))
            if known is None or known[0] is not trace:
                known = (trace, encode_json(trace.to_dict()))
                texts[id(trace)] = known
            items.append(known[1])
        if whole and len(texts) > len(traces):
            kept = {id(t) for t in traces}
            self._texts = {k: v for k, v in texts.items() if k in kept}
        return EncodedList(items)


@dataclass
class RunMemory:
    """Everything a run remembers between steps, except the context."""

    state: RunState = RunState.READY
    next_node: str | None = None
    current_node: str | None = None
    completed: list[str] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    records: EncodedMap = field(default_factory=EncodedMap)
    """Checkpoint form of each outcome, kept so a step does not re-encode every outcome."""
    retries: dict[str, int] = field(default_factory=dict)
    pending_gate: Question | None = None
    redirects: int = 0
    failure_redirects: dict[str, int] = field(default_factory=dict)
    """Per node: how many times in a row its failure was routed to a retry target."""
    failure_reason: str = ""
    failed_node: str | None = None
    dead_end: DeadEnd | None = None
    interrupted_node: str | None = None
    restarts: int = 0
    restarted_from: str | None = None
    traces: list[Trace] = field(default_factory=list)
    encoded_traces: TraceEncodings = field(
        default_factory=TraceEncodings, compare=False, repr=False
    )
    """What each execution read and wrote, in the order of their steps (:mod:`.trace`)."""
    rearmed: bool = False
    """The next node runs because a person asked for it (``retry``): no step led to it."""

    def record(self, node_id: str, outcome: Outcome) -> int:
        """Remember a node's outcome; returns its index in ``completed``."""
        self.completed.append(node_id)
        self.outcomes[node_id] = outcome
        self.records.set(node_id, outcome_record(outcome))
        return len(self.completed) - 1

    def result(self, run_dir: Path, context: Context) -> RunResult:
        """Where the run stands, for scripts, the CLI (``--json``) and ``status``."""
        return RunResult(
            state=self.state,
            run_dir=run_dir,
            completed_nodes=list(self.completed),
            node_outcomes=dict(self.outcomes),
            next_node=self.next_node,
            pending_gate=self.pending_gate,
            context=context.snapshot(),
            failure_reason=self.failure_reason,
            failed_node=self.failed_node,
            dead_end=self.dead_end,
            interrupted_node=self.interrupted_node,
            restarts=self.restarts,
        )

    def forget_nodes(self) -> None:
        """Start over with no completed nodes (a ``loop_restart``)."""
        self.completed, self.outcomes, self.retries = [], {}, {}
        self.traces = []
        self.records.clear()
        self.redirects = 0
        self.failure_redirects = {}


def checkpoint_payload(
    memory: RunMemory,
    context: Context,
    *,
    run_id: str,
    graph: Graph,
    pipeline_path: str | None,
    pipeline_hash: str,
    workdir: Path,
    event_seq: int,
    now: float,
    extensions: dict[str, Any],
    pipeline_file: str = PIPELINE_FILE,
) -> dict[str, Any]:
    """Everything a resume needs (§5.3 fields plus the engine's own), ready to encode."""
    return {
        "format": CHECKPOINT_FORMAT,
        **_scalar_fields(memory, event_seq=event_seq, now=now),
        "run_id": run_id,
        "completed_nodes": list(memory.completed),
        "node_outcomes": memory.records,
        "traces": memory.encoded_traces.of(memory.traces, whole=True),
        "context": context.snapshot(),
        "logs": context.logs,
        "workdir": str(workdir),
        "pipeline": {
            "name": graph.name,
            "path": pipeline_path,
            "sha256": pipeline_hash,
            "source_file": pipeline_file if graph.source else None,
        },
        "extensions": extensions,
    }


def stored_pipeline_path(path: str | None) -> str | None:
    """A pipeline file's path as a run stores it (checkpoint and manifest): absolute, so
    ``status`` and a resume from another folder name (and find ``@prompt`` files next to) the
    same file; other names (``<stdin>``, a cell) as given. Taken once, when the run is made."""
    return os.path.abspath(path) if path and os.path.isfile(path) else path


def _scalar_fields(memory: RunMemory, *, event_seq: int, now: float) -> dict[str, Any]:
    return {
        "timestamp": datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds"),
        "state": memory.state.value,
        "current_node": memory.current_node,
        "next_node": memory.next_node,
        "node_retries": dict(memory.retries),
        "pending_gate": memory.pending_gate.to_dict() if memory.pending_gate else None,
        "goal_gate_redirects": memory.redirects,
        "failure_redirects": dict(memory.failure_redirects),
        "failure_reason": memory.failure_reason,
        "failed_node": memory.failed_node,
        "dead_end": memory.dead_end.to_dict() if memory.dead_end else None,
        "interrupted_node": memory.interrupted_node,
        "restarts": memory.restarts,
        "restarted_from": memory.restarted_from,
        "rearmed": memory.rearmed,
        "event_seq": event_seq,
    }


def state_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What turns ``old`` into ``new``: ``set`` keys, ``unset`` keys, ``sub`` patches of dicts.

    Extension state (a freshness tracker's hashes, an evidence index) is large and changes a
    little per step; the journal stores this patch, not the whole state. Values that are the
    same objects are skipped at C speed before any comparison.
    """
    patch: dict[str, Any] = {}
    sets: dict[str, Any] = {}
    subs: dict[str, Any] = {}
    for key in _changed_keys(old, new):
        value = new[key]
        before = old.get(key, _ABSENT)
        if before is _ABSENT:
            sets[key] = value
        elif before != value:
            if isinstance(before, dict) and isinstance(value, dict):
                subs[key] = state_patch(before, value)
            else:
                sets[key] = value
    unset = sorted(old.keys() - new.keys())
    if sets:
        patch["set"] = sets
    if subs:
        patch["sub"] = subs
    if unset:
        patch["unset"] = unset
    return patch


_ABSENT = object()


def _changed_keys(old: dict[str, Any], new: dict[str, Any]) -> Iterable[str]:
    """Keys of ``new`` whose value may differ from ``old``'s, found at C speed.

    A map that only grew by appends (an index of nodes) is recognised by a subset test and its
    new keys read from the end; anything else skips the values that are the same objects.
    """
    extra = len(new) - len(old)
    if 0 <= extra <= 64 and old.items() <= new.items():
        tail = list(islice(reversed(new.keys()), extra))
        if not any(key in old for key in tail):
            return reversed(tail)
    return compress(
        new.keys(), map(is_not, new.values(), map(old.get, new.keys(), repeat(_ABSENT)))
    )


@dataclass
class JournalMarks:
    """What the journal already holds: completed nodes and log lines written, extension state."""

    completed: int = 0
    logs: int = 0
    traces: int = 0
    extensions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def reset(self, memory: RunMemory, context: Context, extensions: dict[str, Any]) -> None:
        """After a whole-state record: everything so far is written."""
        self.completed = len(memory.completed)
        self.logs = context.log_count()
        self.traces = len(memory.traces)
        self.extensions = dict(extensions)
        context.take_changes()


def step_record(
    memory: RunMemory,
    context: Context,
    marks: JournalMarks,
    *,
    event_seq: int,
    now: float,
    extensions: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """One journal record: what changed since ``marks`` (which it advances)."""
    record: dict[str, Any] = {
        "kind": "step",
        "fields": _scalar_fields(memory, event_seq=event_seq, now=now),
    }
    completed = memory.completed[marks.completed :]
    if completed:
        record["completed"] = completed
        record["outcomes"] = memory.records.subset(list(dict.fromkeys(completed)))
    traces = memory.traces[marks.traces :]
    if traces:
        record["traces"] = memory.encoded_traces.of(traces)
    changed, deleted = context.take_changes()
    if changed:
        record["set"] = changed
    if deleted:
        record["unset"] = deleted
    logs = context.logs_since(marks.logs)
    if logs:
        record["logs"] = logs
    patches = {}
    for name, state in extensions.items():
        before = marks.extensions.get(name)
        if before is None:
            patches[name] = state_patch({}, state)
        elif before != state:
            patches[name] = state_patch(before, state)
    if patches:
        record["extensions"] = patches
    marks.completed = len(memory.completed)
    marks.traces = len(memory.traces)
    marks.logs += len(logs)
    marks.extensions = dict(extensions)
    return record


def _dead_end(data: Any) -> DeadEnd | None:
    if not isinstance(data, dict):
        return None
    trials = tuple(
        ConditionTrial(str(c["edge"]), str(c["condition"]), c.get("value"), c.get("error") or "")
        for c in data.get("conditions", [])
    )
    return DeadEnd(str(data["node"]), trials)


def restore_memory(data: dict[str, Any], run_dir: Path) -> tuple[RunMemory, Context]:
    """The memory and context a checkpoint holds; CheckpointError when it does not fit."""
    try:
        state = RunState(str(data.get("state", "paused")))
        memory = RunMemory(
            state=state,
            completed=[str(n) for n in data["completed_nodes"]],
            retries={str(k): int(v) for k, v in dict(data["node_retries"]).items()},
            redirects=int(data.get("goal_gate_redirects", 0)),
            failure_redirects={
                str(k): int(v) for k, v in dict(data.get("failure_redirects") or {}).items()
            },
            restarts=int(data.get("restarts", 0)),
            failure_reason=str(data.get("failure_reason") or ""),
            failed_node=data.get("failed_node"),
            dead_end=_dead_end(data.get("dead_end")),
            interrupted_node=data.get("interrupted_node"),
            restarted_from=data.get("restarted_from"),
            rearmed=bool(data.get("rearmed", False)),
        )
        run_id = str(data.get("run_id") or "")
        memory.traces = [Trace.from_dict(t, run_id) for t in data.get("traces") or ()]
        for key, value in dict(data["node_outcomes"]).items():
            restored = Outcome.from_dict(value)
            memory.outcomes[str(key)] = restored
            memory.records.set(str(key), outcome_record(restored))
        gate = data.get("pending_gate")
        memory.pending_gate = Question.from_dict(gate) if isinstance(gate, dict) else None
        context = Context(dict(data["context"]), [str(x) for x in data.get("logs", [])])
        context.adopt_writers(latest_writers(memory.traces, context.snapshot()))
        nxt, cur = data.get("next_node"), data.get("current_node")
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint of {run_dir} has an invalid field ({exc}); it was not written "
            "by this version of freshness_magic"
        ) from exc
    memory.next_node = str(nxt) if nxt is not None else None
    memory.current_node = str(cur) if cur is not None else None
    if memory.state in (RunState.RUNNING, RunState.READY):
        memory.state = RunState.PAUSED
    if memory.state is RunState.WAITING and memory.pending_gate is None:
        memory.state = RunState.PAUSED
    return memory, context


def was_edited(data: dict[str, Any]) -> bool:
    """Whether the run a checkpoint holds was carried over to an edited pipeline (its text is
    in an ``edited_pipeline_file``, not ``pipeline.dot``)."""
    stored = (data.get("pipeline") or {}).get("source_file")
    return isinstance(stored, str) and stored not in ("", PIPELINE_FILE)


def edited_pipeline_file(source: str) -> str:
    """The run directory's file that holds an edited pipeline's text (``Run.carry_over``)."""
    return f"pipeline-{source_hash(source)[:12]}.dot"


def write_pipeline(run_dir: Path, graph: Graph) -> None:
    """``pipeline.dot``: the pipeline text a resume rebuilds the Graph from."""
    if graph.source:
        write_atomic(run_dir / PIPELINE_FILE, graph.source)


def write_run_files(
    run_dir: Path, graph: Graph, run_id: str, workdir: Path, memory: RunMemory, path: str | None
) -> None:
    """``pipeline.dot`` and ``manifest.json`` of a new run directory."""
    write_pipeline(run_dir, graph)
    write_manifest_file(run_dir, graph, run_id, workdir, memory, path)


def write_manifest_file(
    run_dir: Path, graph: Graph, run_id: str, workdir: Path, memory: RunMemory, path: str | None
) -> None:
    """``manifest.json`` of a run directory."""
    write_manifest(
        run_dir,
        {
            "name": graph.name,
            "goal": graph.goal,
            "run_id": run_id,
            "started_at": utc_now_iso(),
            "pipeline_path": path,
            "pipeline_hash": source_hash(graph.source),
            "workdir": str(workdir),
            "restarted_from": memory.restarted_from,
        },
    )


def restart_dir(old_dir: Path, old_id: str, restarts: int, target: str) -> tuple[str, Path]:
    """The run id and folder a ``loop_restart`` continues in; links the old folder to it."""
    base_id = re.sub(r"-r\d+\Z", "", old_id)
    new_id = f"{base_id}-r{restarts}"
    new_dir = old_dir.parent / new_id
    write_json_atomic(
        old_dir / RESTART_LINK, {"run_id": new_id, "run_dir": str(new_dir), "target": target}
    )
    return new_id, new_dir


def restore_stored_pipeline(folder: Path, pipeline: dict[str, Any], source: str) -> str | None:
    """Put the run directory's ``pipeline.dot`` back from ``source`` (the pipeline text of the
    run, as ``same_pipeline`` found) when that copy is missing or altered, so that later commands
    read it again without being given the file; an altered copy is kept beside it as
    ``pipeline.dot.damaged``. What was done, for the run's output; None when the copy was sound
    or could not be put back (the run goes on with ``source`` all the same)."""
    stored_hash = pipeline.get("sha256")
    if not pipeline.get("source_file") or not stored_hash:
        return None
    body = source.rstrip("\n")
    text = next((t for t in (source, body, body + "\n") if source_hash(t) == stored_hash), None)
    if text is None:
        return None
    stored = folder / str(pipeline["source_file"])
    kept = ""
    try:
        try:
            if source_hash(read_state(stored).decode("utf-8", "replace")) == stored_hash:
                return None
            os.replace(stored, folder / DAMAGED_PIPELINE_FILE)
            kept = f"; the altered copy is kept as {folder / DAMAGED_PIPELINE_FILE}"
        except FileNotFoundError:
            pass
        write_atomic(stored, text)
    except OSError:
        return None
    return f"put back the run's copy of its pipeline, {stored}, from the pipeline given{kept}"
