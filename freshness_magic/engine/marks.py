"""Freshness marks derived from traces: which executions are *stale* or *outdated*, and why.

The one derivation every view uses (the notebook view, ``%pipeline status``/``why``, the CLI's
``status``/``why``/``check`` and a waiting gate's note). It reads only the run's traces
(:mod:`.trace`) and what changed since (the changed input files of each node's latest execution,
and optionally each node's definition fingerprint now); never the graph's shape.

- **stale**: a declared input file of the execution, or its definition, differs now from what it
  read. For a node's latest execution the caller says which files changed (freshness compares
  them with the snapshot taken when it finished); an earlier execution of the node is stale for
  those and for every file whose digest differs from the latest execution's.
- **outdated**: a value the execution read was written by an execution that is stale or outdated
  itself; or it was superseded: a newer execution of the node that wrote it, one that does not
  descend from the reader, wrote a different value. Equal values cut the chain off (early
  cutoff): the reader is then judged by the newer execution instead. An execution *descends*
  from another when its causes (:attr:`.trace.Trace.cause`) lead back to it, or to the parallel
  execution it ran inside: a loop's next pass that the reader led to never marks it.

An execution whose reads were not reported (a cluster worker of an older version:
``Trace.reads_unknown``) is judged by every written value it was sent, and its mark says "may
have read": a false "fresh" is the one answer a mark must never give.

Each :class:`Mark` carries its reason as a chain (:meth:`Mark.because`, e.g. "`docs_join` read
the result of `cli_docs` (step 14), whose input `docs/cli.md` changed") and the stale executions
at the chain's ends (:meth:`Mark.roots`: accepting their inputs clears it).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from freshness_magic.engine.trace import Read, Trace

MAX_REASONS = 8
"""Reads a mark keeps as its reasons (the first explains it; the others add roots)."""


class MarkKind(StrEnum):
    STALE = "stale"
    OUTDATED = "outdated"


@dataclass(frozen=True, slots=True)
class Link:
    """One reason an execution is outdated: a read, from whom, and what is wrong with it."""

    read: Read
    writer_node: str
    writer_step: int
    superseded_by: int | None = None
    """The newer execution of ``writer_node`` that wrote a different value (None: ``source``)."""
    source: Mark | None = None
    """The mark of the execution whose value was read (stale or outdated itself)."""


@dataclass(frozen=True, slots=True)
class Mark:
    """Why one execution (``node_id`` at ``step``) cannot be trusted now."""

    kind: MarkKind
    node_id: str
    step: int
    files: tuple[str, ...] = ()
    """Stale: the declared input files that changed."""
    definition: bool = False
    """Stale: its definition (attributes, prompt file text) changed."""
    links: tuple[Link, ...] = field(default=())
    """Outdated: the reads that make it so."""
    unsure: bool = False
    """Outdated: its reads were not reported (``Trace.reads_unknown``), so the links are
    values it *may* have read."""

    def roots(self) -> list[str]:
        """The stale nodes at the ends of the chains (the node itself when it is stale); a
        mark that rests only on a superseded value has none."""
        if self.kind is MarkKind.STALE:
            return [self.node_id]
        found: list[str] = []
        for link in self.links:
            if link.source is not None:
                found.extend(n for n in link.source.roots() if n not in found)
        return found

    @property
    def superseded(self) -> bool:
        """Outdated only because a newer execution upstream wrote a different value (running
        this node again is the only way back; no input to accept)."""
        return self.kind is MarkKind.OUTDATED and not self.roots()

    def because(self) -> str:
        """The chain in one sentence, from this execution to the change at its end."""
        if self.kind is MarkKind.STALE:
            return f"`{self.node_id}` {self._stale_words()}"
        said = f"`{self.node_id}` {self._chain()}"
        first = self.links[0].source.roots() if self.links[0].source is not None else []
        others = [n for n in self.roots() if n not in first]
        if others:
            said += f"; it also rests on {', '.join(f'`{n}`' for n in others)}, changed too"
        return said

    def _stale_words(self) -> str:
        said = []
        if self.files:
            shown = ", ".join(f"`{f}`" for f in self.files[:5])
            more = f" and {len(self.files) - 5} more" if len(self.files) > 5 else ""
            word = "input" if len(self.files) == 1 else "inputs"
            said.append(f"its {word} {shown}{more} changed")
        if self.definition:
            said.append("its definition changed")
        return " and ".join(said) or "changed"

    def _chain(self) -> str:
        link = self.links[0]
        what = "the result" if link.read.part is not None else f"`{link.read.key}`"
        verb = "may have read" if self.unsure else "read"
        head = f"{verb} {what} of `{link.writer_node}` (step {link.writer_step})"
        if link.superseded_by is not None:
            return (
                f"{head}, and `{link.writer_node}` ran again (step {link.superseded_by}) "
                "and wrote a different value"
            )
        source = link.source
        assert source is not None
        if source.kind is MarkKind.STALE:
            return f"{head}, whose {source._stale_words().removeprefix('its ')}"
        return f"{head}, which {source._chain()}"


UNLISTED = "(inputs not listed one by one)"
"""The file a mark names when an earlier execution's many inputs differ from the latest's."""


def _changed_inputs(trace: Trace, latest: Trace, stale_now: Sequence[str]) -> tuple[str, ...]:
    if trace is latest or trace.inputs_fingerprint == latest.inputs_fingerprint:
        return tuple(stale_now)
    found = list(stale_now)
    paths = set(trace.inputs) | set(latest.inputs)
    for path in sorted(paths):
        if latest.inputs.get(path) != trace.inputs.get(path) and path not in found:
            found.append(path)
    if len(found) == len(stale_now):  # they differ, but not file by file: too many to list
        found.append(UNLISTED)
    return tuple(found)


class _Derivation:
    """The marks of one set of traces; memoised, each trace judged once."""

    def __init__(
        self,
        traces: Sequence[Trace],
        stale_inputs: Mapping[str, Sequence[str]],
        definitions: Mapping[str, str] | None,
    ) -> None:
        self.by_step = {t.step: t for t in traces if t.step is not None}
        self.latest: dict[str, Trace] = {}
        self.runs_of: dict[str, list[Trace]] = {}
        self.steps_of: dict[str, list[int]] = {}
        for step in sorted(self.by_step):
            trace = self.by_step[step]
            self.latest[trace.node_id] = trace
            self.runs_of.setdefault(trace.node_id, []).append(trace)
            self.steps_of.setdefault(trace.node_id, []).append(step)
        self.stale_inputs = stale_inputs
        self.definitions = definitions or {}
        self.memo: dict[int, Mark | None] = {}
        self.busy: set[int] = set()
        self._segments()

    def _segments(self) -> None:
        """Number the stretches of the main path that follow one another by cause (a retry a
        person asked for begins a new one), and each branch's chain inside its parallel
        execution: :meth:`descends` is then a comparison, not a walk."""
        self.segment: dict[int, int] = {}
        self.segment_end: dict[int, int] = {}
        self.root: dict[int, int] = {}
        number, previous = 0, None
        for step in sorted(self.by_step):
            trace = self.by_step[step]
            if trace.branch_of is None:
                if trace.cause is None or trace.cause != previous:
                    number += 1
                self.segment[step] = number
                previous = step
            else:
                cause = self.by_step.get(trace.cause) if trace.cause is not None else None
                if cause is not None and cause.branch_of is not None and cause.step is not None:
                    self.root[step] = self.root.get(cause.step, step)
                else:
                    self.root[step] = step
        for step in self.by_step:
            anchor = self.anchor(self.by_step[step])
            seg = self.segment.get(anchor.step or 0, 0)
            self.segment_end[seg] = max(self.segment_end.get(seg, 0), step)

    def anchor(self, trace: Trace) -> Trace:
        """The main-path execution ``trace`` ran in: itself, or its parallel execution."""
        seen = 0
        while trace.branch_of is not None and trace.within in self.by_step and seen < 64:
            trace = self.by_step[trace.within]
            seen += 1
        return trace

    def mark(self, step: int) -> Mark | None:
        if step in self.memo:
            return self.memo[step]
        if step in self.busy:
            return None  # a cycle of reads through a retried node: judged where it began
        self.busy.add(step)
        try:
            found = self._judge(self.by_step[step])
        finally:
            self.busy.discard(step)
        self.memo[step] = found
        return found

    def _judge(self, trace: Trace) -> Mark | None:
        step = trace.step
        assert step is not None
        latest = self.latest[trace.node_id]
        files = _changed_inputs(trace, latest, self.stale_inputs.get(trace.node_id, ()))
        now = self.definitions.get(trace.edge) if trace.edge is not None else None
        now = now if now is not None else self.definitions.get(trace.node_id)
        definition = now is not None and now != trace.definition
        if files or definition:
            return Mark(MarkKind.STALE, trace.node_id, step, files, definition)
        links: list[Link] = []
        for read in trace.reads:
            link = self._link(trace, read)
            if link is not None:
                links.append(link)
                if len(links) >= MAX_REASONS:
                    break
        if links:
            return Mark(
                MarkKind.OUTDATED,
                trace.node_id,
                step,
                links=tuple(links),
                unsure=trace.reads_unknown,
            )
        return None

    def _link(self, reader: Trace, read: Read) -> Link | None:
        if read.writer is None or read.writer_run is not None:
            return None
        writer = self.by_step.get(read.writer)
        anchor = writer if read.part is None or read.via is None else self.by_step.get(read.via)
        if writer is None or anchor is None:
            return None
        source: int | None = writer.step
        newer = self._superseding(anchor, reader)
        if newer is not None:
            if read.part is not None:
                written = newer.writes.get(read.key)
                part = (written.parts or {}).get(read.part) if written is not None else None
                fingerprint, source = (part.fingerprint, part.writer) if part else (None, None)
            else:
                written = newer.writes.get(read.key)
                fingerprint = written.fingerprint if written is not None else None
                source = newer.step
            if fingerprint != read.fingerprint:
                assert newer.step is not None and writer.step is not None
                return Link(read, writer.node_id, writer.step, superseded_by=newer.step)
        if source is None or source not in self.by_step:
            return None
        found = self.mark(source)
        if found is None:
            return None
        assert writer.step is not None
        return Link(read, writer.node_id, writer.step, source=found)

    def _superseding(self, anchor: Trace, reader: Trace) -> Trace | None:
        """The latest execution of ``anchor``'s node after it that does not descend from
        ``reader`` (None: there is none). Every execution from the reader's main-path
        execution to the end of its segment descends from it (inside the reader's own parallel
        execution only its branch does): that stretch is skipped at once."""
        assert anchor.step is not None
        runs, steps = self.runs_of[anchor.node_id], self.steps_of[anchor.node_id]
        base = self.anchor(reader)
        assert base.step is not None
        end = self.segment_end.get(self.segment.get(base.step, -1), base.step)
        lowest = bisect.bisect_right(steps, anchor.step)
        index = len(runs) - 1
        while index >= lowest:
            step = steps[index]
            if step > end:
                return runs[index]  # a later segment: a retry a person asked for, or after it
            if step >= base.step:
                index = bisect.bisect_left(steps, base.step) - 1
                continue
            if not self.descends(runs[index], reader):
                return runs[index]
            index -= 1
        return None

    def descends(self, later: Trace, earlier: Trace) -> bool:
        """Whether ``later``'s causes lead back to ``earlier`` or to the parallel execution it
        ran inside (a loop's next pass descends from the pass before; a retry a person asked
        for begins a new segment, which descends from nothing before it)."""
        if later is earlier:
            return True
        mine, theirs = self.anchor(later), self.anchor(earlier)
        assert mine.step is not None and theirs.step is not None
        assert later.step is not None and earlier.step is not None
        if self.segment.get(mine.step) != self.segment.get(theirs.step):
            return False
        if earlier.branch_of is None:
            return (later.step if later.branch_of is None else mine.step) >= earlier.step
        if later.branch_of is None:
            return later.step >= theirs.step
        if mine is theirs:
            same = self.root.get(later.step) == self.root.get(earlier.step)
            return same and later.step >= earlier.step
        return mine.step > theirs.step


def derive_marks(
    traces: Sequence[Trace],
    stale_inputs: Mapping[str, Sequence[str]],
    definitions: Mapping[str, str] | None = None,
) -> dict[int, Mark]:
    """The mark of every execution that has one, by step. ``stale_inputs``: node id -> the
    input files that changed since its latest execution; ``definitions``: node id -> its
    definition fingerprint now (None: definitions are not compared)."""
    derivation = _Derivation(traces, stale_inputs, definitions)
    found: dict[int, Mark] = {}
    for step in sorted(derivation.by_step):
        mark = derivation.mark(step)
        if mark is not None:
            found[step] = mark
    return found


def node_marks(
    traces: Sequence[Trace],
    stale_inputs: Mapping[str, Sequence[str]],
    definitions: Mapping[str, str] | None = None,
) -> dict[str, Mark]:
    """The mark of each node's latest execution (the nodes a view shows stale or outdated)."""
    derivation = _Derivation(traces, stale_inputs, definitions)
    for step in sorted(derivation.by_step):  # in step order: no deep chains of judgements
        derivation.mark(step)
    found: dict[str, Mark] = {}
    for node_id, trace in derivation.latest.items():
        assert trace.step is not None
        mark = derivation.mark(trace.step)
        if mark is not None:
            found[node_id] = mark
    return found


def led_to(traces: Sequence[Trace]) -> set[str]:
    """The nodes whose latest execution led to where the run stands now: the causes of its
    latest main-path execution back to the start (or to a retry a person asked for), the branch
    nodes of the parallel executions among them, and every execution whose value any of those
    read (and so on). What a waiting gate's question rests on: its note names the marked ones."""
    by_step = {t.step: t for t in traces if t.step is not None}
    main = [t for t in traces if t.branch_of is None and t.step is not None]
    if not main:
        return set()
    found: set[int] = set()
    todo: list[int] = []
    current: Trace | None = main[-1]
    while current is not None and current.step is not None and current.step not in found:
        found.add(current.step)
        todo.append(current.step)
        current = by_step.get(current.cause) if current.cause is not None else None
    for step, trace in by_step.items():
        if trace.within in found and step not in found:
            found.add(step)
            todo.append(step)
    while todo:  # what they read, and what that read
        trace = by_step[todo.pop()]
        for read in trace.reads:
            if read.writer in by_step and read.writer_run is None and read.writer not in found:
                found.add(read.writer)
                todo.append(read.writer)
    latest: dict[str, int] = {}
    for step, trace in sorted(by_step.items()):
        latest[trace.node_id] = step
    return {node for node, step in latest.items() if step in found}
