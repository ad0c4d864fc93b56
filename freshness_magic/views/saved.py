"""Runs of a pipeline saved on disk: the newest one, and an unfinished one to offer to resume.

After a kernel restart (or a re-load) the notebook looks here so it can offer to resume the
run that waits at a gate, is paused, or failed at a node (a retry goes on from there) instead
of silently starting a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.atomicio import loads_bounded
from freshness_magic.engine.checkpoint import load_checkpoint
from freshness_magic.engine.handlers.tool import orphaned_tools
from freshness_magic.engine.model import Graph
from freshness_magic.engine.persistence import follow_restarts, same_pipeline
from freshness_magic.engine.runread import last_written_ns
from freshness_magic.engine.state import RunState
from freshness_magic.errors import FreshnessMagicError

if TYPE_CHECKING:
    from freshness_magic.views.why import PipelineCommands


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = loads_bounded(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_dir_hash(run_dir: Path) -> str | None:
    """The hash of the pipeline text a run was started with (from its manifest)."""
    manifest = _json(run_dir / "manifest.json")
    found = manifest.get("pipeline_hash") if manifest is not None else None
    return str(found) if found else None


def latest_run_dir(graph: Graph, workdir: Path) -> Path | None:
    """The newest run folder under ``<workdir>/.freshness/runs`` of a pipeline named like
    ``graph``."""
    root = workdir / ".freshness" / "runs"
    if not root.is_dir():
        return None
    mine = [
        (stamp, p)
        for p in root.iterdir()
        if (stamp := last_written_ns(p)) is not None
        and (_json(p / "manifest.json") or {}).get("name") == graph.name
    ]
    return max(mine, default=(0, None))[1]


@dataclass(frozen=True)
class ResumeOffer:
    """An unfinished run of the same pipeline (same text, same work directory) found on disk:
    waiting, paused, or failed at a node."""

    run_dir: Path
    state: RunState
    where: str | None
    """The waiting gate, the node that failed, else the node it would run next."""
    orphans: tuple[str, ...] = ()
    """Tools of the run that still run although the kernel that started them is gone (it was
    killed): :func:`~freshness_magic.engine.handlers.tool.orphaned_tools`."""
    edited: bool = False
    """The run was started from another text of the pipeline: taking the offer carries it
    over to this text (``Run.carry_over``) instead of resuming it as it was."""
    left: bool = False
    """Offered after a reset in this kernel: the user chose to leave it, so the next action
    starts a new run, as the reset said (found on disk after a load: the user has not chosen)."""

    def headline(self, name: str) -> str:
        """What the offered run is: ``an unfinished run of review (ID) waits at approve``, and
        any of its tools still running on their own."""
        at = f" at {self.where}" if self.where else ""
        if self.edited:
            head = (
                f"a run of an earlier text of {name} ({self.run_dir.name}, "
                f"{self.state.value}{at}) can go on with this edit"
            )
        elif self.state is RunState.FAILED:
            head = f"the last run of {name} ({self.run_dir.name}) failed{at}"
        else:
            verb = "waits" if self.state is RunState.WAITING else "is paused"
            head = f"an unfinished run of {name} ({self.run_dir.name}) {verb}{at}"
        return "; ".join((head, *self.orphans))

    @property
    def way(self) -> str:
        """The magics that take the offer or decline it."""
        return self.way_in(None)

    def way_in(self, commands: PipelineCommands | None) -> str:
        """The actions that take the offer or decline it, spelled by ``commands`` (None: the
        magics)."""
        keep, reset, resume = (
            ("%pipeline keep", "%pipeline reset", "%pipeline resume")
            if commands is None
            else (commands.keep(), commands.reset(), commands.resume())
        )
        if self.edited:
            return (
                f"{keep} carries it over (unchanged nodes keep their results, edited "
                f"ones show stale), {reset} starts a new one"
            )
        again = "reopens it to retry" if self.state is RunState.FAILED else "reopens it"
        return f"{resume} {again}, {reset} starts a new one"

    def describe(self, name: str, commands: PipelineCommands | None = None) -> str:
        """The offer as text: :meth:`headline` and :meth:`way_in` ``commands``."""
        return f"{self.headline(name)}: {self.way_in(commands)}"


STARTED_BY_FILE = "started_by.json"
"""In a run directory opened from a notebook: ``{"notebook": ...}``, the notebook (its path as
the Jupyter server names the kernel's session) whose kernel started the run."""


def started_by(run_dir: Path) -> str | None:
    """The notebook that started the run in ``run_dir`` (None: not recorded, e.g. the CLI)."""
    data = _json(run_dir / STARTED_BY_FILE)
    found = data.get("notebook") if data else None
    return found if isinstance(found, str) and found else None


def find_unfinished(
    graph: Graph, workdir: Path, *, any_text: bool = False, notebook: str | None = None
) -> ResumeOffer | None:
    """The newest run of ``graph`` in ``workdir`` that executed at least one node and did not
    complete: waiting, paused, or failed at a node (not one that failed otherwise). With
    ``any_text``, a run of any text of a pipeline of the same name (one that can be resumed only
    with the text it started with). With ``notebook``, a run another notebook started is not
    offered (two notebooks in one folder each see only their own runs and unrecorded ones)."""
    root = workdir / ".freshness" / "runs"
    if not root.is_dir():
        return None
    candidates = []
    for folder in root.iterdir():
        stamp = last_written_ns(folder)
        if stamp is None or follow_restarts(folder) != folder:
            continue  # no state, or a loop restart continued this run in another folder
        manifest = _json(folder / "manifest.json")
        if manifest is None:
            continue
        if any_text:
            if manifest.get("name") != graph.name:
                continue
        elif not same_pipeline(graph.source, manifest.get("pipeline_hash")):
            continue
        if notebook is not None and started_by(folder) not in (None, notebook):
            continue
        if manifest.get("workdir") == str(workdir):
            candidates.append((stamp, folder))
    for _, folder in sorted(candidates, reverse=True):  # newest first: the first one found wins
        try:
            data, _ = load_checkpoint(folder)  # the snapshot and the journal after it
            state = RunState(str(data.get("state", "")))
        except (FreshnessMagicError, ValueError):
            continue
        if state is RunState.COMPLETED or not data.get("completed_nodes"):
            continue
        if state is RunState.FAILED and not data.get("failed_node"):
            continue  # nothing to retry
        gate = data.get("pending_gate")
        if state is RunState.FAILED:
            where = data.get("failed_node")
        else:
            where = gate.get("node") if isinstance(gate, dict) else data.get("next_node")
        orphans = tuple(orphaned_tools(folder))
        edited = any_text and not same_pipeline(graph.source, run_dir_hash(folder))
        return ResumeOffer(folder, state, str(where) if where else None, orphans, edited)
    return None
