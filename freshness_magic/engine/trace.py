"""What each execution of a node read and wrote: the basis of every freshness mark.

Every execution of a node (on the main path, in a parallel branch, a retry, a loop's next pass)
gets one :class:`Trace` when it finishes with an outcome:

- ``definition``: a fingerprint of the node as it ran: its attributes after the stylesheet and
  the transforms, and the content of its prompt file (``prompt="@file"``);
- ``inputs``: its declared input files (``source_files``, the prompt file) with their content
  digests, as a run extension that fingerprints files reports them (freshness);
- ``reads``: the context values its handler read, each with the fingerprint of the value and the
  execution (``writer``, a step of this run) that wrote it. The context records them itself
  (:meth:`~.context.Context.recording`) while the handler runs, never the engine's own reads
  (routing, checkpoints). A fan-in reads each branch's result: one :class:`Read` per branch
  (``part``), written by the last node of that branch (``via``: the parallel execution);
- ``writes``: the context keys it set, with fingerprints (and each branch's result, for a
  parallel node's ``parallel.results``);
- ``cause``: the execution that led to this one (the step before it on its path), None when a
  person asked for it (``Run.retry``) or it is the first; ``within``: the parallel execution a
  branch node ran inside. A later execution *descends* from an earlier one when its causes lead
  back to it: a loop's next pass descends from the pass before.

A handler call shipped to a cluster worker (:mod:`.dispatch`) runs against a copy of the
context: the worker records its reads in a trace of its own and returns them as a
:class:`ReadReport`, which the driver folds into the execution's trace with the writer of each
key as the copy held it (:meth:`Trace.fold`), so a shipped execution reads what a local one
does. A worker that reports no reads (an older version) leaves ``reads_unknown`` set: its
``reads`` are then every written value the copy held (what it *may* have read), so no mark is
falsely absent, and it is never reused (nothing can verify it).

A trace is bounded: values whose encoding is longer than :data:`VALUE_CHARS` are kept as their
fingerprint only, and at most :data:`MAX_READS` reads are kept (``truncated`` counts the rest).
``step`` is the execution's place in the run's ``completed_nodes`` plus one (the ``step`` of
its evidence record); ``id`` adds the run id.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import xxhash

from freshness_magic.engine.checkpoint_format import encode_json

if TYPE_CHECKING:
    from pathlib import Path

    from freshness_magic.engine.model import Edge, Graph, Node

VALUE_CHARS = 200
"""A value read or written whose JSON is longer than this is kept as its fingerprint only."""
MAX_READS = 64
"""Reads kept per execution; more are counted in ``Trace.truncated``."""
MAX_INPUT_FILES = 32
"""Input files listed one by one per execution; past that only ``Trace.inputs_fingerprint``."""
NO_VALUE = object()
"""``Read.value`` / ``Write.value`` when only the fingerprint is kept."""


def value_fingerprint(value: Any) -> str:
    """The fingerprint of a context value: xxh3_128 of its canonical JSON (32 hex digits)."""
    return xxhash.xxh3_128_hexdigest(encode_json(value).encode("utf-8"))


def _kept(value: Any) -> Any:
    """``value`` when its JSON is short, else :data:`NO_VALUE`."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= VALUE_CHARS else NO_VALUE
    try:
        return value if len(encode_json(value)) <= VALUE_CHARS else NO_VALUE
    except (TypeError, ValueError):
        return NO_VALUE


def definition_fingerprint(
    attrs: Mapping[str, str],
    prompt_text: str | None = None,
    fidelity: Mapping[str, str] | None = None,
) -> str:
    """The fingerprint of a node's definition: its attributes (after the stylesheet and the
    transforms), its prompt file's text (None: it has none, or it could not be read) and, for a
    node that passes context to a model, its resolved fidelity (:mod:`.fidelity`)."""
    data: dict[str, Any] = {"attrs": dict(attrs), "prompt_file": prompt_text}
    if fidelity is not None:
        data["fidelity"] = dict(fidelity)
    return value_fingerprint(data)


def edge_key(edge: Edge) -> str:
    """``source->target``: how a trace names the edge the run took to its node."""
    return f"{edge.source}->{edge.target}"


def node_definition(node: Node, graph: Graph, workdir: Path, edge: Edge | None = None) -> str:
    """The definition fingerprint of ``node`` now, reached by ``edge``: its attributes, its
    prompt file's text and its resolved fidelity (as an execution of it records it)."""
    from freshness_magic.engine.fidelity import definition_part

    return definition_fingerprint(
        node.attrs, _prompt_text(node, graph, workdir), definition_part(graph, node, edge)
    )


def _prompt_text(node: Node, graph: Graph, workdir: Path) -> str | None:
    from freshness_magic.engine.prompts import prompt_file_name, prompt_file_path, read_prompt_file

    text: str | None = None
    if prompt_file_name(node) is not None:
        path = prompt_file_path(node, graph, workdir)
        try:
            text = read_prompt_file(path) if path is not None else None
        except (OSError, ValueError):
            text = None
    return text


def graph_definitions(graph: Graph, workdir: Path) -> dict[str, str]:
    """Every node's definition fingerprint now (the marks compare an edited pipeline's nodes
    with the executions of their earlier definitions), by node id; and, keyed by the edge
    (:func:`edge_key`), the definition of a node reached by an edge that sets its fidelity or
    thread (an execution that came by that edge is compared with it)."""
    from freshness_magic.engine.fidelity import definition_part

    found: dict[str, str] = {}
    for node_id, node in graph.nodes.items():
        text = _prompt_text(node, graph, workdir)
        found[node_id] = definition_fingerprint(
            node.attrs, text, definition_part(graph, node, None)
        )
        for edge in graph.incoming(node_id):
            if "fidelity" in edge.attrs or "thread_id" in edge.attrs:
                part = definition_part(graph, node, edge)
                found[edge_key(edge)] = definition_fingerprint(node.attrs, text, part)
    return found


@dataclass(frozen=True, slots=True)
class Read:
    """One context value an execution read."""

    key: str
    fingerprint: str
    writer: int | None
    """The step of the execution that wrote the value (None: the run itself, a graph attribute,
    an extension or a person wrote it)."""
    writer_run: str | None = None
    """The run of ``writer`` when it is not this run (a ``loop_restart`` carried the value)."""
    part: str | None = None
    """For a fan-in's read of one branch's result: the branch (its first node)."""
    via: int | None = None
    """For a ``part``: the step of the parallel execution whose ``parallel.results`` held it."""
    value: Any = NO_VALUE

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"key": self.key, "fp": self.fingerprint, "writer": self.writer}
        if self.writer_run is not None:
            data["writer_run"] = self.writer_run
        if self.part is not None:
            data["part"] = self.part
            data["via"] = self.via
        if self.value is not NO_VALUE:
            data["value"] = self.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Read:
        writer, via = data.get("writer"), data.get("via")
        return cls(
            key=str(data["key"]),
            fingerprint=str(data["fp"]),
            writer=int(writer) if writer is not None else None,
            writer_run=data.get("writer_run"),
            part=data.get("part"),
            via=int(via) if via is not None else None,
            value=data.get("value", NO_VALUE),
        )


@dataclass(frozen=True, slots=True)
class Part:
    """One branch's result inside a parallel node's ``parallel.results``."""

    writer: int | None
    """The step of the branch's last node (None: the branch ended in an earlier attempt)."""
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Write:
    """One context key an execution set."""

    fingerprint: str
    value: Any = NO_VALUE
    parts: Mapping[str, Part] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"fp": self.fingerprint}
        if self.value is not NO_VALUE:
            data["value"] = self.value
        if self.parts is not None:
            data["parts"] = {
                k: {"writer": p.writer, "fp": p.fingerprint} for k, p in self.parts.items()
            }
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Write:
        parts = data.get("parts")
        return cls(
            fingerprint=str(data["fp"]),
            value=data.get("value", NO_VALUE),
            parts=None
            if parts is None
            else {
                str(k): Part(int(p["writer"]) if p.get("writer") is not None else None, p["fp"])
                for k, p in dict(parts).items()
            },
        )


@dataclass(frozen=True, slots=True)
class ReadReport:
    """The reads of a handler call on a worker, sent back to the driver (picklable): each key
    read with the fingerprint of the value the worker saw (in order), the keys looked for and
    not set, the values composed of others' results (:meth:`~.context.Context.note_parts`),
    and how many reads were not kept."""

    reads: tuple[tuple[str, str], ...] = ()
    absent: tuple[str, ...] = ()
    parts: Mapping[str, Mapping[str, Part]] = field(default_factory=dict)
    truncated: int = 0


@dataclass(slots=True, eq=False)
class Trace:
    """What one execution of a node read and wrote; see the module docstring.

    Built while the node runs (the context appends reads, the executor the writes), then
    sealed: ``step`` is set when its outcome is recorded and it is never changed after.
    """

    node_id: str
    run_id: str
    definition: str
    step: int | None = None
    status: str = ""
    cause: int | None = None
    within: int | None = None
    branch_of: str | None = None
    edge: str | None = None
    """The edge the run took to reach the node (``source->target``; None: none), when it
    decides the node's fidelity (:mod:`.fidelity`)."""
    fidelity: str = ""
    """The fidelity mode it ran with (codergen nodes; ``summary:high`` for a ``full`` node
    degraded on resume)."""
    inputs: dict[str, str] = field(default_factory=dict)
    """Declared input file -> content digest (``freshness/hashing``), as the node ran; empty
    past :data:`MAX_INPUT_FILES` files (``inputs_fingerprint`` still tells them apart)."""
    inputs_fingerprint: str = ""
    """One fingerprint of all its input files and digests (empty: it has none)."""
    reads: list[Read] = field(default_factory=list)
    writes: dict[str, Write] = field(default_factory=dict)
    truncated: int = 0
    """Reads not kept past :data:`MAX_READS`."""
    absent: list[str] = field(default_factory=list)
    """Keys the handler looked for that were not set: their absence decided what it did (a
    prompt left ``{key}`` as written), so reuse verifies they are still not set. Not reads:
    no execution wrote them, so they make no marks."""
    reads_unknown: bool = False
    """Its handler ran on a worker that did not report its reads: ``reads`` are every value
    written by an execution that the worker's copy of the context held (what it may have
    read). Marks say "may have read"; it is never reused."""
    children: list[Trace] = field(default_factory=list, repr=False)
    """The traces of the branch nodes a parallel execution ran (recorded with it)."""
    parts: dict[str, dict[str, Part]] = field(default_factory=dict, repr=False)
    """Values it composed of branch results (:meth:`~.context.Context.note_parts`), by key."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _read_keys: set[tuple[str, str | None]] = field(default_factory=set, repr=False)

    @property
    def id(self) -> str:
        """``<run id>:<step>``: names the execution across runs (the step alone within one)."""
        return f"{self.run_id}:{self.step}"

    # ------------------------------------------------------------ recording (the context's side)

    def record_read(
        self, key: str, value: Any, writer: Trace | None, fingerprint: str | None = None
    ) -> None:
        """Note that the handler read ``value`` of ``key`` (once per key), written by
        ``writer``; a read of the branch results a parallel node wrote is one read per branch
        (:meth:`~.context.Context.note_parts`). ``fingerprint``: the one a worker saw (default:
        that of ``value``)."""
        if writer is self:
            return  # a key it set itself during its own run
        written = writer.writes.get(key) if writer is not None else None
        if written is not None and written.parts is not None:
            for part, found in written.parts.items():
                self._add(
                    Read(
                        key=key,
                        fingerprint=found.fingerprint,
                        writer=found.writer,
                        writer_run=self._other_run(writer),
                        part=part,
                        via=writer.step if writer is not None else None,
                    )
                )
            return
        self._add(
            Read(
                key=key,
                fingerprint=fingerprint or value_fingerprint(value),
                writer=writer.step if writer is not None else None,
                writer_run=self._other_run(writer),
                value=_kept(value),
            )
        )

    def record_absent(self, key: str) -> None:
        """Note that the handler looked for ``key`` and it was not set (once per key)."""
        with self._lock:
            if key in self.absent:
                return
            if len(self.absent) >= MAX_READS:
                self.truncated += 1
                return
            self.absent.append(key)

    def _other_run(self, writer: Trace | None) -> str | None:
        return writer.run_id if writer is not None and writer.run_id != self.run_id else None

    def _add(self, read: Read) -> None:
        with self._lock:
            if (read.key, read.part) in self._read_keys:
                return
            self._read_keys.add((read.key, read.part))
            if len(self.reads) >= MAX_READS:
                self.truncated += 1
                return
            self.reads.append(read)

    def record_write(self, key: str, value: Any) -> None:
        """Note that this execution set ``key`` to ``value`` (not the engine's ``internal.``
        bookkeeping a handler keeps there)."""
        if key.startswith("internal."):
            return
        with self._lock:
            parts = self.parts.get(key)
            if parts is not None:
                self.writes[key] = Write(value_fingerprint(value), NO_VALUE, parts)
            else:
                self.writes[key] = Write(value_fingerprint(value), _kept(value))

    def forget_write(self, key: str) -> None:
        with self._lock:
            self.writes.pop(key, None)

    def report(self) -> ReadReport:
        """What a worker's trace returns to the driver (:meth:`fold`): its reads, absent keys,
        composed values and count of reads not kept; no writers (the worker knows none)."""
        with self._lock:
            return ReadReport(
                reads=tuple((r.key, r.fingerprint) for r in self.reads if r.part is None),
                absent=tuple(self.absent),
                parts={k: dict(v) for k, v in self.parts.items()},
                truncated=self.truncated,
            )

    def fold(
        self, report: ReadReport | None, values: Mapping[str, Any], writers: Mapping[str, Trace]
    ) -> None:
        """Take the reads a shipped handler call reported, as if it had run here against
        ``values`` (the copy it was given) whose writers were ``writers``. ``report`` None (a
        worker that does not report reads): every value of the copy that an execution wrote is
        noted as read and ``reads_unknown`` is set (see the module docstring)."""
        from freshness_magic.engine.fidelity import key_set_prefix, selected_keys

        if report is None:
            self.reads_unknown = True
            for key in sorted(k for k in values if k in writers):
                self.record_read(key, values[key], writers[key])
            return
        for key, fingerprint in report.reads:
            prefix = key_set_prefix(key)
            if prefix is not None:  # which keys were set: the names, as a local read keeps
                value: Any = selected_keys(values, prefix)
            else:
                value = values.get(key, NO_VALUE)
            self.record_read(key, value, writers.get(key), fingerprint)
        for key in report.absent:
            self.record_absent(key)
        with self._lock:
            for key, parts in report.parts.items():
                self.parts[key] = dict(parts)
            self.truncated += report.truncated

    def set_inputs(self, digests: Mapping[str, str]) -> None:
        """Its declared input files with their digests (a run extension reports them)."""
        self.inputs_fingerprint = (
            value_fingerprint(dict(sorted(digests.items()))) if digests else ""
        )
        self.inputs = dict(digests) if len(digests) <= MAX_INPUT_FILES else {}

    def seal(self, step: int | None, status: str) -> None:
        """The outcome is recorded: its step in the run and status."""
        self.step = step
        self.status = status
        for child in self.children:
            if child.within is None:  # a nested parallel node's own branch nodes keep theirs
                child.within = step

    # ------------------------------------------------------------ the journal's side

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "node": self.node_id,
            "step": self.step,
            "status": self.status,
            "definition": self.definition,
            "cause": self.cause,
            "inputs": dict(self.inputs),
            "inputs_fp": self.inputs_fingerprint,
            "reads": [r.to_dict() for r in self.reads],
            "writes": {k: w.to_dict() for k, w in self.writes.items()},
        }
        if self.branch_of is not None:
            data["branch_of"] = self.branch_of
            data["within"] = self.within
        if self.edge is not None:
            data["edge"] = self.edge
        if self.fidelity:
            data["fidelity"] = self.fidelity
        if self.truncated:
            data["truncated"] = self.truncated
        if self.absent:
            data["absent"] = list(self.absent)
        if self.reads_unknown:
            data["reads_unknown"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], run_id: str = "") -> Trace:
        cause, within = data.get("cause"), data.get("within")
        return cls(
            node_id=str(data["node"]),
            run_id=run_id,
            definition=str(data["definition"]),
            step=int(data["step"]) if data.get("step") is not None else None,
            status=str(data.get("status") or ""),
            cause=int(cause) if cause is not None else None,
            within=int(within) if within is not None else None,
            branch_of=data.get("branch_of"),
            edge=data.get("edge"),
            fidelity=str(data.get("fidelity") or ""),
            inputs={str(k): str(v) for k, v in dict(data.get("inputs") or {}).items()},
            inputs_fingerprint=str(data.get("inputs_fp") or ""),
            reads=[Read.from_dict(r) for r in data.get("reads") or ()],
            writes={str(k): Write.from_dict(w) for k, w in dict(data.get("writes") or {}).items()},
            truncated=int(data.get("truncated") or 0),
            absent=[str(k) for k in data.get("absent") or ()],
            reads_unknown=data.get("reads_unknown") is True,
        )


def latest_writers(
    traces: Iterable[Trace], values: Mapping[str, Any], branch_of: str | None = None
) -> dict[str, Trace]:
    """Which execution on one path wrote each value of ``values`` (a restored context): the
    latest one that wrote that key with that value's fingerprint. A value no execution wrote
    (or that something else changed since) has none. The path is the main path, or with
    ``branch_of`` a branch of that parallel node (``traces`` then those of one branch)."""
    last: dict[str, Trace] = {}
    for trace in traces:
        if trace.branch_of == branch_of:
            for key in trace.writes:
                last[key] = trace
    found: dict[str, Trace] = {}
    for key, trace in last.items():
        if key in values and trace.writes[key].fingerprint == value_fingerprint(values[key]):
            found[key] = trace
    return found
