"""``parallel.fan_in`` (spec §4.9): pick the best branch result of the preceding parallel node."""

from __future__ import annotations

import re
from typing import Any

from freshness_magic.atomicio import write_atomic
from freshness_magic.engine.context import Context
from freshness_magic.engine.handlers.base import CodergenBackend, StepEnv
from freshness_magic.engine.handlers.codergen import expand_prompt
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus

_STATUS_RANK = {
    StageStatus.SUCCESS.value: 0,
    StageStatus.PARTIAL_SUCCESS.value: 1,
    StageStatus.RETRY.value: 2,
    StageStatus.FAIL.value: 3,
}


def rank_key(result: dict[str, Any]) -> tuple[int, float, str]:
    """Fan-in ranking: success, partial, retry, fail (others last); then highest score; then id."""
    status = str(result.get("status", result.get("outcome", "")))
    try:
        score = float(result.get("score", 0) or 0)
    except (TypeError, ValueError):
        score = 0.0
    return (_STATUS_RANK.get(status, len(_STATUS_RANK)), -score, str(result.get("id", "")))


class FanInHandler:
    """Picks the best branch result of the preceding parallel node (§4.9).

    With a ``prompt`` on the node and a backend, the backend is asked to choose: it gets the
    prompt followed by one line per candidate and its answer is the first candidate id it names
    (a returned Outcome may set ``parallel.fan_in.best_id`` instead). Otherwise, or when the
    answer names no usable candidate, the heuristic of :func:`rank_key` decides.
    """

    def __init__(self, backend: CodergenBackend | None = None) -> None:
        self.backend = backend

    def execute(self, node: Node, context: Context, env: StepEnv) -> Outcome:
        raw = context.get("parallel.results")
        candidates = [
            r
            for r in (raw if isinstance(raw, list) else [])
            if isinstance(r, dict) and r.get("status") != StageStatus.SKIPPED.value
        ]
        if not candidates:
            return Outcome(
                status=StageStatus.FAIL,
                failure_reason=f"fan-in {node.id!r}: no parallel results to evaluate (a "
                "parallel node must run before it)",
            )
        best = min(candidates, key=rank_key)
        how = "heuristic"
        if all(str(r.get("status")) == StageStatus.FAIL.value for r in candidates):
            return Outcome(
                status=StageStatus.FAIL,
                context_updates=self._updates(best),
                failure_reason=f"fan-in {node.id!r}: all {len(candidates)} branches failed",
            )
        if self.backend is not None and node.prompt:
            try:
                chosen = self._ask_backend(self.backend, node, candidates, context, env)
            except Exception as exc:
                return Outcome(
                    status=StageStatus.FAIL,
                    failure_reason=f"fan-in {node.id!r}: backend raised "
                    f"{type(exc).__name__}: {exc}",
                )
            if chosen is not None:
                best, how = chosen, "backend"
        return Outcome(
            status=StageStatus.SUCCESS,
            context_updates=self._updates(best),
            notes=f"Selected best candidate: {best.get('id')} ({best.get('status')}; {how})",
        )

    @staticmethod
    def _updates(best: dict[str, Any]) -> dict[str, Any]:
        return {
            "parallel.fan_in.best_id": best.get("id"),
            "parallel.fan_in.best_outcome": str(best.get("status", "")),
        }

    @staticmethod
    def _ask_backend(
        backend: CodergenBackend,
        node: Node,
        candidates: list[dict[str, Any]],
        context: Context,
        env: StepEnv,
    ) -> dict[str, Any] | None:
        """The candidate the backend names, or None when it names none that did not fail."""
        lines = [
            f"- {r.get('id')}: {r.get('status')}, score {r.get('score', 0)}"
            + (f", notes: {r.get('notes')}" if r.get("notes") else "")
            for r in candidates
        ]
        prompt = (
            expand_prompt(node.prompt, env.graph, context)
            + "\n\nCandidates:\n"
            + "\n".join(lines)
            + "\n\nAnswer with the id of the best candidate."
        )
        stage_dir = env.node_dir(node.id)
        write_atomic(stage_dir / "prompt.md", prompt)
        answer = backend(node, prompt, context)
        usable = {
            str(r.get("id")): r for r in candidates if r.get("status") != StageStatus.FAIL.value
        }
        if isinstance(answer, Outcome):
            named = answer.context_updates.get("parallel.fan_in.best_id")
            return usable.get(str(named)) if named is not None else None
        text = str(answer)
        write_atomic(stage_dir / "response.md", text)
        hits = [
            (match.start(), cid)
            for cid in usable
            for match in [re.search(rf"(?<![\w.-]){re.escape(cid)}(?![\w-])", text)]
            if match is not None
        ]
        return usable[min(hits)[1]] if hits else None
