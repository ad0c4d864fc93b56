"""One frame of a pipeline's view: everything the widget shows at one moment, as plain data.

The pipeline builds a :class:`ViewFrame` from its published view model at every step boundary and
pushes it to its frame listeners; the widget only serialises frames into its traits (it never
reads the pipeline object back to learn what to show). Frozen: a frame is never changed after it
is made; the next publish makes a new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from freshness_magic.engine.model import Graph
from freshness_magic.engine.outcome import Question
from freshness_magic.engine.state import RunState
from freshness_magic.views.state import NodeView, RunBanner


@dataclass(frozen=True)
class ViewFrame:
    """What a pipeline's view shows at one moment (states, run line, banner, gate, evidence)."""

    name: str
    graph: Graph
    structure_version: int
    """Bumped when something the layout shows changes (a ``%%node`` changes a node's type)."""
    views: Mapping[str, NodeView]
    state: RunState
    state_name: str
    """``ready``, ``running``, ``superseded`` or the run's state."""
    status_line: str
    next_node: str | None
    nodes_run: int
    backend: str
    superseded: bool = False
    banner: RunBanner | None = None
    gate: Question | None = None
    gate_note: str = ""
    gate_visit: int = 0
    """Which time the waiting gate asks (1: the first)."""
    approving: Mapping[str, str] = field(default_factory=dict)
    """What the waiting gate approves: ``title`` and ``text`` (empty when nothing ran)."""
    evidence: Sequence[Mapping[str, Any]] = ()
    """The run's evidence records on disk, oldest first."""
    stopped: Sequence[tuple[float, float]] = ()
    """When stopped attempts worked (the run's active time counts them)."""
