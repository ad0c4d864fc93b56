"""Reuse: an execution taken from an earlier successful execution of the same node, not run.

With reuse on (``Run(reuse=True)``, ``--reuse``, the graph attribute ``reuse="true"``), an
execution whose definition, declared input files and read context values equal those of an
earlier successful execution of the same node of the same pipeline in this work directory (this
run or an earlier one) is not executed: its outcome, context updates and output files are taken
from that execution, and the outcome says so (``Outcome.reused_from``: which run and step).

**Why the index is keyed without the reads.** What an execution reads from the context is known
only after it ran (a prompt expands the keys it names; a handler reads what it reads), so reads
cannot be part of a key computed before running. The index is keyed by what *is* known before
running: the pipeline's name, the node id, the definition fingerprint and the declared input
files' fingerprint (:func:`reuse_key`). Each key holds the few latest successful executions with
that key, each with the reads it recorded (context key -> value fingerprint). A lookup opens the
one file of its key (O(1) however many runs the folder holds) and *verifies* each candidate,
newest first: every key it read must have the same value fingerprint in the current context (the
verifying traces of build systems such as Shake and Salsa). The first candidate that passes is
reused: a deterministic node that reads the same values does the same thing. A candidate whose
output files are gone is passed over. Nothing found: the node runs as usual.

**What may be reused.** Only nodes whose inputs are fully known: codergen nodes, and tool nodes
that declare ``source_files`` (a tool without declared inputs, say ``git status``, reads the
world and always runs unless it says ``reuse="true"``). Gates never are, nor parallel, fan-in or
manager nodes (their results are their children's). ``reuse="false"`` on a node never reuses it.

**On disk** (``<workdir>/.freshness/reuse/``, written through :mod:`~freshness_magic.atomicio`):

- ``index/<k>.jsonl``: one line per recorded execution of key ``k`` (schema
  ``reuse-entry.schema.json``); appended, a torn last line skipped; over
  :data:`KEEP_PER_KEY` lines the file is rewritten atomically with the newest ones.
- ``blobs/<d>``: the output files of recorded executions by content digest, made before the
  index line that names them, so a line never names a blob that is not there.

Both folders are flat: a fan-out of sub-folders by the first two hex digits (as git's objects)
cost a ``mkdir`` per new prefix, three per step while a store is young, about as much as the
rest of the recording; one folder of many files is cheap on today's file systems.

**Recording is cheap, restoring is checked.** A file the engine writes into the node folder as
a *new file* every time (:data:`LINKED_OUTPUTS`: the prompt, the carried context, the response,
a tool's stdout and stderr; never rewritten in place, so an old link keeps the old bytes) is
hard-linked as its blob: one ``link`` instead of writing a copy. Any other file (what a user's
tool or agent wrote, which it may later rewrite in place) is copied, atomically. Whatever wrote
a file, :meth:`ReuseIndex.find` and :meth:`ReuseIndex.restore_outputs` hash a blob before
using it: a blob whose bytes are not its digest (changed through a link, a race, a crash) is
removed and its execution is not reused (the safe side), so reuse restores the exact bytes.

The index is a cache: deleting the folder loses nothing but the chance to reuse.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import append_jsonl, read_jsonl, write_atomic
from freshness_magic.engine.model import Node, parse_bool
from freshness_magic.engine.outcome import Outcome, ReusedFrom, StageStatus
from freshness_magic.engine.persistence import outcome_record
from freshness_magic.engine.trace import Trace, value_fingerprint
from freshness_magic.errors import FreshnessMagicError, ReuseError
from freshness_magic.pathsafety import make_state_dir, read_state

log = logging.getLogger(__name__)

REUSE_FOLDER = Path(".freshness") / "reuse"
"""Where the reuse index lives, relative to the work directory."""
INDEX_VERSION = 1
KEEP_PER_KEY = 8
"""Executions kept per key (the newest): enough for a loop's passes with different reads."""
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
"""An execution with a larger output file is not recorded (its outputs would not be kept)."""
LINKED_OUTPUTS = frozenset({"prompt.md", "context.md", "response.md"})
"""Output files the engine writes into a node folder as a new file each time (an atomic
replace, or a removal before writing), never in place: their blobs are hard links. A tool's
``stdout*.txt``/``stderr*.txt`` are such files too (:func:`linked_output`)."""

NOT_REUSED_TYPES = frozenset(
    {"wait.human", "parallel", "parallel.fan_in", "stack.manager_loop", "start", "exit"}
)
"""Handler types never reused: gates ask a person, the others' results are other nodes'."""
KNOWN_INPUT_TYPES = frozenset({"codergen"})
"""Handler types whose inputs are fully known (definition, prompt file, read values)."""


def flag(value: str | None) -> bool | None:
    """``reuse`` attribute text as a bool (None: not set or not a boolean)."""
    return None if value is None else parse_bool(value)


def reusable(node: Node, declares_inputs: bool) -> bool:
    """Whether ``node`` may be taken from an earlier execution (see the module docstring).

    ``declares_inputs``: the node names its input files (``source_files``).
    """
    own = flag(node.attrs.get("reuse"))
    if own is False or node.handler_type in NOT_REUSED_TYPES:
        return False
    if own is True:
        return True
    if node.handler_type in KNOWN_INPUT_TYPES:
        return True
    return node.handler_type == "tool" and declares_inputs


def reuse_key(pipeline: str, node_id: str, definition: str, inputs: str) -> str:
    """The index key of an execution: what is known before it runs (not its reads)."""
    text = "\0".join((str(INDEX_VERSION), pipeline, node_id, definition, inputs))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


ABSENT = "-"
"""The fingerprint recorded for a key the execution looked for that was not set
(``Trace.absent``)."""


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One recorded successful execution: where it ran, what it read, what it gave."""

    run_id: str
    run_dir: str
    """The run directory it ran in (context values naming its node folder are moved)."""
    node: str
    step: int
    reads: dict[str, str]
    """Context key -> fingerprint of the value read (:data:`ABSENT` for a key not set)."""
    outcome: dict[str, Any]
    """The outcome in its checkpoint form (``outcome_record``)."""
    outputs: dict[str, str] = field(default_factory=dict)
    """Output file name in the node's folder -> blob digest."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": INDEX_VERSION,
            "run_id": self.run_id,
            "run_dir": self.run_dir,
            "node": self.node,
            "step": self.step,
            "reads": dict(self.reads),
            "outcome": dict(self.outcome),
            "outputs": dict(self.outputs),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexEntry | None:
        """None for a line of another version or shape (a reader skips it)."""
        try:
            if data.get("v") != INDEX_VERSION:
                return None
            reads, outputs, outcome = data["reads"], data.get("outputs", {}), data["outcome"]
            if not (
                isinstance(reads, dict)
                and isinstance(outputs, dict)
                and isinstance(outcome, dict)
                and isinstance(data["step"], int)
            ):
                return None
            return cls(
                run_id=str(data["run_id"]),
                run_dir=str(data["run_dir"]),
                node=str(data["node"]),
                step=int(data["step"]),
                reads={str(k): str(v) for k, v in reads.items()},
                outcome=dict(outcome),
                outputs={str(k): str(v) for k, v in outputs.items()},
            )
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def source(self) -> ReusedFrom:
        return ReusedFrom(self.run_id, self.step)


def linked_output(name: str) -> bool:
    """Whether the engine writes ``name`` as a new file each time (its blob may be a link)."""
    if name in LINKED_OUTPUTS:
        return True
    return name.endswith(".txt") and name.startswith(("stdout", "stderr"))


def _safe_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\0" not in name and name not in {".", ".."}


class ReuseIndex:
    """The on-disk index of a work directory's reusable executions (module docstring)."""

    def __init__(self, workdir: str | os.PathLike[str]) -> None:
        self.folder = Path(workdir) / REUSE_FOLDER

    def _index_file(self, key: str) -> Path:
        return self.folder / "index" / f"{key}.jsonl"

    def _blob(self, digest: str) -> Path:
        return self.folder / "blobs" / digest

    def _intact(self, digest: str) -> bytes | None:
        """The bytes of blob ``digest`` when they hash to it (None: missing, or changed since
        it was made, and then removed so that a later recording makes it again)."""
        blob = self._blob(digest)
        try:
            data = read_state(blob)
        except FileNotFoundError:
            return None
        if hashlib.sha256(data).hexdigest() == digest:
            return data
        log.warning("reuse index: blob %s no longer holds its content; it is removed", blob)
        with contextlib.suppress(OSError):
            blob.unlink()
        return None

    # ----------------------------------------------------------------- reading

    def candidates(self, key: str) -> list[IndexEntry]:
        """The executions recorded under ``key``, newest first."""
        path = self._index_file(key)
        if not path.exists():
            return []
        found = [e for r in read_jsonl(path) if (e := IndexEntry.from_dict(r)) is not None]
        found.reverse()
        return found

    def find(
        self,
        key: str,
        current: Callable[[str], str],
        skip: Callable[[IndexEntry], bool] | None = None,
    ) -> IndexEntry | None:
        """The newest execution under ``key`` whose every read has the fingerprint ``current``
        gives for that key now, and whose outputs are all kept (None: nothing to reuse)."""
        for entry in self.candidates(key):
            if skip is not None and skip(entry):
                continue
            if all(current(k) == fp for k, fp in entry.reads.items()) and all(
                self._intact(d) is not None for d in entry.outputs.values()
            ):
                return entry
        return None

    def restore_outputs(self, entry: IndexEntry, node_dir: Path) -> None:
        """Copy the entry's output files into ``node_dir`` (written atomically), every blob
        checked against its digest first: none is written unless all are intact."""
        kept: list[tuple[str, bytes]] = []
        for name, digest in entry.outputs.items():
            if not _safe_name(name):
                continue
            data = self._intact(digest)
            if data is None:
                raise ReuseError(
                    f"the reuse index's copy of {name} of node '{entry.node}' (run "
                    f"{entry.run_id}) is gone or changed; the node runs instead"
                )
            kept.append((name, data))
        for name, data in kept:
            write_atomic(node_dir / name, data, fsync=False)

    # ----------------------------------------------------------------- writing

    def keep_outputs(self, node_dir: Path, names: list[str]) -> dict[str, str] | None:
        """Store the files ``names`` of ``node_dir`` as blobs; their digests (None: one is too
        large or unreadable, and the execution cannot be recorded). A file the engine writes
        anew each time (:func:`linked_output`) is hard-linked, any other copied."""
        outputs: dict[str, str] = {}
        made = False
        for name in names:
            path = node_dir / name
            try:
                if path.stat().st_size > MAX_OUTPUT_BYTES:
                    return None
                data = path.read_bytes()
            except OSError:
                return None
            digest = hashlib.sha256(data).hexdigest()
            blob = self._blob(digest)
            if not made:
                make_state_dir(blob.parent)
                made = True
            self._make_blob(blob, path, data, link=linked_output(name))
            outputs[name] = digest
        return outputs

    @staticmethod
    def _make_blob(blob: Path, source: Path, data: bytes, *, link: bool) -> None:
        """Make ``blob`` (kept as it is when there) a hard link to ``source`` (``link``) or an
        atomic copy of ``data``. A link that cannot be made (another device, a file system
        without links) is a copy; one whose file changed since ``data`` was read is caught
        when the blob is used."""
        if link:
            try:
                os.link(source, blob, follow_symlinks=False)
                return
            except FileExistsError:
                return
            except OSError:
                pass
        if not os.path.lexists(blob):
            write_atomic(blob, data)

    def add(self, key: str, entry: IndexEntry) -> None:
        """Record ``entry`` under ``key``; the file keeps the newest :data:`KEEP_PER_KEY`."""
        path = self._index_file(key)  # its folder made and checked by the append
        new = not path.exists()
        append_jsonl(path, entry.to_dict())
        if new:  # it holds this one line: nothing to trim, so it is not read back
            return
        lines = [r for r in read_jsonl(path) if IndexEntry.from_dict(r) is not None]
        if len(lines) > KEEP_PER_KEY:
            text = "".join(
                json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n"
                for r in lines[-KEEP_PER_KEY:]
            )
            write_atomic(path, text)

    def count(self) -> int:
        """How many keys the index holds (for ``status`` and benchmarks)."""
        folder = self.folder / "index"
        if not folder.is_dir():
            return 0
        return sum(1 for _ in folder.glob("*.jsonl"))


@dataclass(slots=True)
class _Looked:
    """What the lookup before an execution knew: its key and the node folder's files then."""

    key: str
    before: dict[str, tuple[int, int, int]]
    reused: bool = False


_NOT_OUTPUTS = frozenset({"status.json", "pgid"})
"""Files of a node's folder that are the run's bookkeeping, not the execution's output."""
_BOOKKEEPING_PREFIXES = ("worker-", "stop-", "events-", ".")


class Reuser:
    """Reuse for one run: looks an execution up before it runs, records it after it succeeded.

    Recorded executions are held until the step's journal record is written (:meth:`flush`), so
    the index never names a step its run does not have.
    """

    def __init__(self, index: ReuseIndex, pipeline: str) -> None:
        self.index = index
        self.pipeline = pipeline
        self._looked: dict[str, _Looked] = {}
        self._pending: list[tuple[str, IndexEntry]] = []
        self._lock = threading.Lock()

    def lookup(
        self,
        node: Node,
        context: Mapping[str, Any],
        *,
        definition: str,
        inputs: Mapping[str, str] | None,
        handler: str,
        run_dir: Path,
        search: bool = True,
    ) -> IndexEntry | None:
        """The earlier execution equal to this one (None: the node runs): same ``definition``,
        declared ``inputs`` (path -> digest; None: it declares none) and ``handler`` (the
        handler and backend that would run it), and every value it read equal now. Remembers
        the key for :meth:`executed`; without ``search`` (the run does not reuse) only that:
        a run records its executions whether or not it reuses, so a later run can."""
        if not reusable(node, inputs is not None):
            return None
        key = reuse_key(
            self.pipeline,
            node.id,
            definition,
            value_fingerprint([handler, sorted((inputs or {}).items())]),
        )
        looked = _Looked(key, _files(run_dir / "nodes" / node.id))
        with self._lock:
            self._looked[node.id] = looked
        if not search:
            return None
        entry = self.index.find(key, lambda k: current_fingerprint(context, k))
        looked.reused = entry is not None
        return entry

    def take(self, entry: IndexEntry, node: Node, run_dir: Path) -> Outcome:
        """The outcome of ``entry`` for this run: its output files copied into the node's
        folder, context values naming them moved there, ``reused_from`` set."""
        node_dir = make_state_dir(run_dir / "nodes" / node.id)
        self.index.restore_outputs(entry, node_dir)
        outcome = Outcome.from_dict(entry.outcome)
        old = os.fspath(Path(entry.run_dir) / "nodes" / node.id)
        outcome.context_updates = {
            k: _moved(v, old, os.fspath(node_dir)) for k, v in outcome.context_updates.items()
        }
        outcome.reused_from = entry.source
        return outcome

    def executed(
        self, node: Node, outcome: Outcome, trace: Trace, run_dir: Path, run_id: str
    ) -> None:
        """Note a finished execution and its sealed ``trace``: a successful one that ran (not
        reused), whose reads are all known, is recorded at the next :meth:`flush`."""
        with self._lock:
            looked = self._looked.pop(node.id, None)
        if (
            looked is None
            or looked.reused
            or outcome.status is not StageStatus.SUCCESS
            or trace.step is None
            or trace.truncated  # reads were left out: it cannot be verified
            or trace.reads_unknown  # its worker did not report them: neither can this
            or any(r.part is not None for r in trace.reads)
        ):
            return
        node_dir = run_dir / "nodes" / node.id
        after = _files(node_dir)
        written = sorted(name for name, sig in after.items() if looked.before.get(name) != sig)
        outputs = self.index.keep_outputs(node_dir, written)
        if outputs is None:
            return
        entry = IndexEntry(
            run_id=run_id,
            run_dir=os.fspath(run_dir),
            node=node.id,
            step=trace.step,
            reads={
                **{r.key: r.fingerprint for r in trace.reads},
                **dict.fromkeys(trace.absent, ABSENT),
            },
            outcome=outcome_record(outcome),
            outputs=outputs,
        )
        with self._lock:
            self._pending.append((looked.key, entry))

    def flush(self) -> None:
        """Write the executions noted since the last flush (after the step is journaled)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for key, entry in pending:
            try:
                self.index.add(key, entry)
            except (OSError, FreshnessMagicError) as exc:  # a cache: the run goes on without it
                log.warning("reuse index: could not record node %s: %s", entry.node, exc)


def current_fingerprint(context: Mapping[str, Any], key: str) -> str:
    """The fingerprint of ``context[key]`` now, as a trace records a read of it (of a key-set
    read ``<prefix>*``: the sorted keys it names, :func:`~.fidelity.selected_keys`)."""
    from freshness_magic.engine.fidelity import key_set_prefix, selected_keys

    prefix = key_set_prefix(key)
    if prefix is not None:
        return value_fingerprint(selected_keys(list(context), prefix))
    if key not in context:
        return ABSENT
    return value_fingerprint(context[key])


def _moved(value: Any, old: str, new: str) -> Any:
    """A context value naming a file of the earlier execution's node folder names the copy."""
    if isinstance(value, str) and value.startswith(old) and old != new:
        return new + value[len(old) :]
    return value


def _files(node_dir: Path) -> dict[str, tuple[int, int, int]]:
    """The output files of ``node_dir`` with (inode, size, mtime): compared before and after an
    execution, the ones it wrote (an atomic write gives a new inode)."""
    try:
        entries = list(os.scandir(node_dir))
    except OSError:
        return {}
    found = {}
    for entry in entries:
        name = entry.name
        if name in _NOT_OUTPUTS or name.startswith(_BOOKKEEPING_PREFIXES):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found[name] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return found
