"""The ``stack.manager_loop`` handler (spec §4.11): supervise a child pipeline in cycles.

The child is the DOT file named by ``stack.child_dotfile`` (on the node, else on the graph),
resolved against the working directory and then the parent pipeline file's folder. It runs as
its own run, started through ``StepEnv.child_runs`` (same handler registry) in
``<run_dir>/nodes/<node>/children/<child_run_id>``. Each cycle steps the child up to
``manager.steps_per_cycle`` nodes (default 1), copies its telemetry into the context
(``stack.child.status``, ``stack.child.outcome``, ``stack.child.completed_nodes``, ...), then
decides: child completed -> SUCCESS, child failed -> FAIL, ``manager.stop_condition`` holds ->
SUCCESS, else wait ``manager.poll_interval`` and go on, up to ``manager.max_cycles`` (1000).

``manager.actions`` (default ``observe,wait``): without ``observe`` the ``stack.child.*`` keys
reach the context only with the final outcome; without ``wait`` there is no pause between
cycles; ``steer`` is not performed (``validate`` refuses it: see ``MANAGER_ACTIONS``).

A child that waits at a human gate makes the manager node wait with the child's question (its
``child_gate``): the parent run waits at the manager node, and its answer reaches the child gate
when the manager node runs again and resumes the child. So a child's gate is answered wherever
the parent's are (``--answer MANAGER=CHOICE``, ``--auto-approve``, the notebook's gate panel).

A child the manager finished supervising gets ``supervision.json``; if the parent process dies
mid-supervision, or the manager waits for an answer, the next execution of the manager node
resumes that child from its checkpoint.

Deviation from the spec's 45 s default: ``manager.poll_interval`` defaults to 0, because the
child runs in-process and each cycle already does the child's work; the wait uses the run's
injectable sleep.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import write_json_atomic
from freshness_magic.engine.conditions import evaluate_condition, parse_condition
from freshness_magic.engine.context import Context
from freshness_magic.engine.gates import child_answer_key
from freshness_magic.engine.handlers.base import ChildRun, StepEnv
from freshness_magic.engine.model import (
    MANAGER_ACTIONS,
    Graph,
    Node,
    parse_duration,
    parse_int,
    split_list,
)
from freshness_magic.engine.outcome import Outcome, Question, StageStatus
from freshness_magic.engine.runread import last_written_ns
from freshness_magic.engine.state import RunState
from freshness_magic.errors import FreshnessMagicError, RunError
from freshness_magic.pathsafety import pipeline_path_problem

DEFAULT_MAX_CYCLES = 1000
SUPERVISION_FILE = "supervision.json"


def _attr(node: Node, env: StepEnv, key: str) -> str:
    return (node.get(key) or env.graph.attrs.get(key, "")).strip()


def resolve_child_dotfile(name: str, env: StepEnv) -> tuple[Path | None, list[Path]]:
    """The child pipeline file and the places looked at (working dir, parent file's folder)."""
    given = Path(name).expanduser()
    if given.is_absolute():
        candidates = [given]
    else:
        candidates = [env.workdir / given]
        if env.graph.path:
            beside = Path(env.graph.path).resolve().parent / given
            if beside.resolve() != candidates[0].resolve():
                candidates.append(beside)
    for candidate in candidates:
        if candidate.is_file():
            return candidate, candidates
    return None, candidates


CHILD_PATHS = ("stack.child_dotfile", "stack.child_workdir")
"""The manager attributes that name a path: the child pipeline read, the folder it works in."""


def child_path_problem(node: Node, graph: Graph, workdir: Path | str) -> str:
    """Why a manager's child pipeline file or child working directory may not be used ("" when
    they may): each lies in the work tree (the one rule of
    :func:`freshness_magic.pathsafety.pipeline_path_problem`; the child file may also be named
    relative to the pipeline file's folder)."""
    import os

    for key in CHILD_PATHS:
        name = (node.get(key) or graph.attrs.get(key, "")).strip()
        if not name:
            continue
        bases = [workdir]
        if key == "stack.child_dotfile" and graph.path:
            bases.append(os.path.dirname(os.path.realpath(graph.path)))
        problems = [pipeline_path_problem(name, base, workdir) for base in bases]
        if all(problems):
            return f"manager node {node.id!r}: {key}={name!r} is refused: {problems[0]}"
    return ""


def unfinished_child(children: Path) -> Path | None:
    """The child run folder a crash left mid-supervision (newest first), if any.

    A manager marks every child it finished supervising with ``supervision.json``; a folder with
    a checkpoint and no marker was interrupted, so the next execution resumes it instead of
    starting the child pipeline over.
    """
    if not children.is_dir():
        return None
    interrupted = [
        (stamp, folder)
        for folder in children.iterdir()
        if (stamp := last_written_ns(folder)) is not None
        and not (folder / SUPERVISION_FILE).exists()
    ]
    return max(interrupted, default=(0, None))[1]


MAX_CHILD_DEPTH = 8
"""How deep child pipelines may nest (a manager's child running a manager of its own...)."""


def _nesting(node: Node, env: StepEnv, path: Path) -> str:
    """Why the child at ``path`` must not start ("" when it may): it is the pipeline running
    it (it would start itself without end), or children already nest :data:`MAX_CHILD_DEPTH`
    deep (a cycle through several files)."""
    if env.graph.path and Path(env.graph.path).resolve() == path.resolve():
        return (
            f"manager node {node.id!r}: its child pipeline {path} is the pipeline it is in, which "
            "would start itself without end; name another pipeline in stack.child_dotfile"
        )
    depth = env.node_dir(node.id).parts.count("children")
    if depth >= MAX_CHILD_DEPTH:
        return (
            f"manager node {node.id!r}: child pipelines already nest {depth} deep (at most "
            f"{MAX_CHILD_DEPTH}); do the child pipelines start each other in a cycle? "
            f"{path} is the next"
        )
    return ""


def _fail(reason: str, updates: dict[str, Any] | None = None) -> Outcome:
    return Outcome(status=StageStatus.FAIL, failure_reason=reason, context_updates=updates or {})


CHILD_FAILED_AT = "Child failed at node "


def child_failure(child: ChildRun) -> str:
    """Why a failed child failed: the failed node and its own reason.

    The child run's reason adds how its routing ended, which says nothing to the parent; a
    child that is itself a manager's failure folds into one path (``'inner' > 'build'``)
    instead of nesting the same sentence once per level.
    """
    outcomes = child.node_outcomes
    candidates = (child.current_node, *child.completed_nodes[-1:])
    failed = next(
        (n for n in candidates if n in outcomes and outcomes[n].status is StageStatus.FAIL), None
    )
    if failed is None:
        return f"Child failed: {child.failure_reason}"
    reason = outcomes[failed].failure_reason
    if reason.startswith(CHILD_FAILED_AT):
        return f"{CHILD_FAILED_AT}{failed!r} > {reason.removeprefix(CHILD_FAILED_AT)}"
    return f"{CHILD_FAILED_AT}{failed!r}: {reason}"


class ManagerLoopHandler:
    """Runs and observes a child pipeline until it finishes, a stop condition, or max cycles."""

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        name = _attr(node, env, "stack.child_dotfile")
        if not name:
            return _fail(
                f"manager node {node.id!r} has no stack.child_dotfile; set it on the node or the "
                "graph to the child pipeline's .dot file"
            )
        refused = child_path_problem(node, env.graph, env.workdir)
        if refused:
            return _fail(refused)
        path, looked = resolve_child_dotfile(name, env)
        if path is not None and (outside := pipeline_path_problem(str(path), "/", env.workdir)):
            return _fail(
                f"manager node {node.id!r}: child pipeline {str(path)!r} is refused: {outside}"
            )
        if path is None:
            return _fail(
                f"manager node {node.id!r}: child pipeline {name!r} not found (looked at "
                + ", ".join(str(p) for p in looked)
                + ")"
            )
        max_cycles = max(parse_int(node.get("manager.max_cycles", "")) or DEFAULT_MAX_CYCLES, 1)
        per_cycle = max(parse_int(node.get("manager.steps_per_cycle", "")) or 1, 1)
        poll = parse_duration(node.get("manager.poll_interval", "0") or "0") or 0.0
        stop_condition = node.get("manager.stop_condition").strip()
        actions = set(split_list(node.get("manager.actions") or ",".join(MANAGER_ACTIONS)))
        if "wait" not in actions:
            poll = 0.0
        if stop_condition:
            try:
                parse_condition(stop_condition)
            except FreshnessMagicError as exc:
                return _fail(f"manager node {node.id!r}: manager.stop_condition: {exc}")
        nested = _nesting(node, env, path)
        if nested:
            return _fail(nested)
        try:
            child, first_dir = self._start_child(node, env, path)
            self._pass_answer(node, context, child)
        except FreshnessMagicError as exc:
            return _fail(f"manager node {node.id!r}: cannot start child pipeline {path}: {exc}")
        outcome = self._supervise(
            node,
            context,
            env,
            child,
            max_cycles,
            per_cycle,
            poll,
            stop_condition,
            observe="observe" in actions,
        )
        if outcome.status is StageStatus.WAITING:  # the child goes on when this node runs again
            return outcome
        record = {"manager_node": node.id, "outcome": outcome.to_dict()}
        for folder in dict.fromkeys((first_dir, child.run_dir)):
            write_json_atomic(folder / SUPERVISION_FILE, record)
        return outcome

    @staticmethod
    def _pass_answer(node: Node, context: Context, child: ChildRun) -> None:
        """Give the child the answer the parent run took for its waiting gate, if any."""
        key = child_answer_key(node.id)
        answer = context.get(key)
        if not isinstance(answer, dict):
            return
        context.delete(key)
        gate = child.pending_gate
        if child.state is RunState.WAITING and gate is not None and gate.node_id == answer["gate"]:
            child.answer(gate.node_id, answer["choice"], answer.get("comment"))

    @staticmethod
    def _start_child(node: Node, env: StepEnv, path: Path) -> tuple[ChildRun, Path]:
        """The child run and its first folder: a new run, or one a crash left unfinished."""
        from freshness_magic.engine.pipeline import load_pipeline_file

        if env.child_runs is None:
            raise RunError("the step environment gives no way to start child runs")
        graph = load_pipeline_file(path)
        workdir_attr = _attr(node, env, "stack.child_workdir")
        workdir = env.workdir / workdir_attr if workdir_attr else env.workdir
        children = env.node_dir(node.id) / "children"
        leftover = unfinished_child(children)
        if leftover is not None:
            try:
                return env.child_runs.resume(leftover, graph, workdir), leftover
            except FreshnessMagicError:
                pass
        child = env.child_runs.start(graph, workdir, children)
        return child, child.run_dir

    def _supervise(
        self,
        node: Node,
        context: Context,
        env: StepEnv,
        child: ChildRun,
        max_cycles: int,
        per_cycle: int,
        poll: float,
        stop_condition: str,
        *,
        observe: bool = True,
    ) -> Outcome:
        updates: dict[str, Any] = {}
        for cycle in range(1, max_cycles + 1):
            for _ in range(per_cycle):
                if child.state.finished or child.state is RunState.WAITING:
                    break
                child.step()
            updates = self._observe(child, cycle)
            if observe:
                context.apply_updates(updates)
            state = child.state
            if state is RunState.COMPLETED:
                return Outcome(
                    status=StageStatus.SUCCESS,
                    context_updates=updates,
                    notes=f"Child completed after {cycle} cycle(s): {child.run_dir}",
                )
            if state is RunState.FAILED:
                return _fail(child_failure(child), updates)
            if state is RunState.WAITING:
                return self._waiting(node, child, updates)
            if stop_condition and evaluate_condition(
                stop_condition,
                outcome=str(updates["stack.child.outcome"]),
                context=context,
            ):
                return Outcome(
                    status=StageStatus.SUCCESS,
                    context_updates=updates,
                    notes=f"Stop condition satisfied after {cycle} cycle(s): {stop_condition}",
                )
            if env.deadline is not None and time.monotonic() >= env.deadline:
                return _fail(f"timed out after {cycle} cycle(s) supervising the child", updates)
            if poll > 0 and cycle < max_cycles:
                env.sleep(poll)
        ran = len(child.completed_nodes)
        return _fail(
            f"Max cycles exceeded ({max_cycles}): a cycle runs {per_cycle} node(s) of the child "
            f"(manager.steps_per_cycle); after {ran} node run(s) its next is "
            f"'{child.next_node}'; raise manager.max_cycles or manager.steps_per_cycle",
            updates,
        )

    @staticmethod
    def _waiting(node: Node, child: ChildRun, updates: dict[str, Any]) -> Outcome:
        """The manager waits with the child's question (see the module docstring)."""
        gate = child.pending_gate
        question = Question(
            node_id=node.id,
            text=f"{gate.text} (gate '{gate.node_id}' of the child pipeline)",
            choices=gate.choices,
            default=gate.default,
            timeout_seconds=gate.timeout_seconds,
            child_gate=gate.node_id,
        )
        return Outcome(
            status=StageStatus.WAITING,
            question=question,
            context_updates=updates,
            notes=f"Waiting for a human answer at gate '{gate.node_id}' of the child pipeline",
        )

    @staticmethod
    def _observe(child: ChildRun, cycle: int) -> dict[str, Any]:
        """The child's telemetry as ``stack.child.*`` context keys."""
        completed = child.completed_nodes
        outcomes = child.node_outcomes
        last = outcomes.get(completed[-1]) if completed else None
        return {
            "stack.child.status": child.state.value,
            "stack.child.outcome": last.status.value if last is not None else "",
            "stack.child.completed_nodes": completed,
            "stack.child.current_node": child.current_node or "",
            "stack.child.next_node": child.next_node or "",
            "stack.child.failure_reason": child.failure_reason,
            "stack.child.run_dir": str(child.run_dir),
            "stack.child.cycle": cycle,
        }
