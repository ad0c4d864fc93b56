"""Retry policy and backoff (spec §3.5–§3.6, docs/ARCHITECTURE.md).

``max_retries`` counts *additional* attempts: ``max_retries=2`` means up to three executions. The
value comes from the node, else the graph's ``default_max_retries`` (alias ``default_max_retry``),
else 0. Delays grow exponentially from 200 ms by a factor of 2 up to 60 s, with ±50 % jitter; the
random source is injectable so tests are deterministic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from freshness_magic.engine.model import Graph, Node


@dataclass(frozen=True)
class BackoffConfig:
    """How long to wait before retry number ``attempt`` (1-based)."""

    initial_delay: float = 0.2
    """Seconds before the first retry."""
    factor: float = 2.0
    max_delay: float = 60.0
    jitter: bool = True

    def delay_for_attempt(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to sleep after failed attempt ``attempt``; jitter scales by U(0.5, 1.5)."""
        delay = min(self.initial_delay * (self.factor ** max(attempt - 1, 0)), self.max_delay)
        if self.jitter:
            delay *= (rng or random.Random()).uniform(0.5, 1.5)
        return delay


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` executions of a node (at least 1) with ``backoff`` between them."""

    max_attempts: int = 1
    backoff: BackoffConfig = field(default_factory=BackoffConfig)

    @property
    def max_retries(self) -> int:
        return self.max_attempts - 1


def max_retries_for(node: Node, graph: Graph) -> int:
    """The node's ``max_retries``, else the graph default (``default_max_retries``), else 0."""
    own = node.max_retries
    if own is not None:
        return max(own, 0)
    return graph.default_max_retries


def build_retry_policy(
    node: Node, graph: Graph, backoff: BackoffConfig | None = None
) -> RetryPolicy:
    """The retry policy of ``node`` in ``graph``."""
    return RetryPolicy(max_retries_for(node, graph) + 1, backoff or BackoffConfig())
