"""The ``executor`` attribute's rule: a graph's spec must be one the cluster layer knows and name
no scheduler's address (hosts belong to the user, as model endpoints do), and a node's may only
be ``local`` (keep it on the driver). Registered by the session validator."""

from __future__ import annotations

from freshness_magic.cluster import LOCAL_SPECS, parse_executor
from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.validation import (
    ERROR,
    WARNING,
    LintRule,
    Out,
    ScanRule,
    graph_diag,
    node_diag,
)
from freshness_magic.errors import ClusterError

ADDRESS_FIX = (
    'write executor="dask" (a cluster on this machine) or remove it, and give the address '
    "when you run: --executor dask://HOST:PORT, open_run(..., executor=...), or "
    "%config PipelineMagics.executor"
)
"""What to do instead of naming a scheduler in a pipeline."""


def _graph(graph: Graph, out: Out) -> None:
    value = graph.attrs.get("executor")
    if value is None:
        return
    try:
        spec = parse_executor(value)
    except ClusterError as exc:
        out.append(
            graph_diag(
                "executor_valid",
                ERROR,
                graph,
                f"graph executor={value!r} is not known",
                str(exc).split("; ", 1)[-1],
                "executor",
            )
        )
        return
    if spec.address:
        out.append(
            graph_diag(
                "executor_valid",
                ERROR,
                graph,
                f"graph executor={value!r} names a scheduler's address: where work is sent is "
                "the user's choice, never a pipeline's",
                ADDRESS_FIX,
                "executor",
            )
        )


def _node(graph: Graph, node: Node, out: Out) -> None:
    value = node.attrs.get("executor")
    if value is not None and value.strip() not in LOCAL_SPECS:
        out.append(
            node_diag(
                "executor_valid",
                WARNING,
                node,
                f"node `{node.id}`: executor={value!r} has no effect on a node (the run's "
                "executor sends portable nodes to its cluster)",
                'write executor="local" to keep this node on the driver, or remove it',
                "executor",
            )
        )


def executor_rules() -> list[LintRule]:
    """The ``executor`` attribute's rule, to register with a Validator."""
    executor = frozenset({"executor"})
    return [
        ScanRule(
            "executor_valid", _graph, _node, node_attributes=executor, graph_attributes=executor
        )
    ]
