"""Context fidelity (spec §5.4): how much of the run a codergen node passes to its model.

**Resolution.** The mode of one execution is the ``fidelity`` of the edge the run took to reach
the node, else the node's ``fidelity``, else the graph's ``default_fidelity``, else ``compact``
(:func:`resolve`). The edge taken is the edge from the execution before it on its path (the one
that wrote the context's ``outcome``) to the node: of several such edges, the first whose
condition holds, else the first; a branch's first node is reached by the edge from its parallel
node. Reached otherwise (a retry target, a person's retry, a fan-in after its branches) it has
none. The resolved mode is part of the node's definition fingerprint, so editing it makes the
node stale; the trace names the edge (``edge``) and the mode it ran with (``fidelity``).

**What each mode carries** (:func:`carry`), built only from context values read through the
recording context, so the trace holds every value the model was given, each with its writer, and
reuse can verify it; the text is a pure function of those values (same values, same text):

- ``truncate``: the graph goal (``graph.goal``).
- ``compact``: a bullet list of the shared values (the ``context.*`` keys, which spec §5.1
  reserves for state shared between nodes), each clipped to 200 characters, at most 20 of them.
  Not the goal: a prompt names it with ``$goal``, and with no shared value the model gets the
  prompt alone, byte for byte.
- ``summary:low``: a few sentences: the goal, the last stage and its outcome, the names of the
  shared values (at most 2,400 characters, about 600 tokens).
- ``summary:medium``: that, with the shared values (300 characters each), the last response and
  the last tool output (at most 6,000 characters, about 1,500 tokens).
- ``summary:high``: that, with every value that is not the engine's bookkeeping (1,000 characters
  each, at most 40; at most 12,000 characters, about 3,000 tokens).
- ``full``: the earlier prompts and responses of the thread the node shares (``thread.<key>``
  in the context) as prior messages. A node that ran with ``full`` adds its
  own exchange to its thread (:func:`thread_value`; each text at most 8,000 characters, the
  newest 20 exchanges and 64,000 characters kept).

The run id is not carried (the spec names it for ``truncate``): it differs in every run, so a
response that saw it could never be reused, and the run's folder already records it.

**Threads** (``full`` only): the node's ``thread_id``, else the edge's, else the graph's
``thread_id``, else the class derived from its enclosing subgraph, else the thread of the
previous node (the one it came from: its thread when it ran with ``full``, else its id), so that
consecutive ``full`` nodes continue one conversation.

**Resume.** The first node a resumed run executes runs ``summary:high`` where it resolves to
``full`` (spec §5.3: a model's session does not survive the process), once.

The engine never imports IPython; backends get the carried context as its own part of the
request (``BackendRequest.carried``) and send it their own way.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from freshness_magic.engine.context import Context
from freshness_magic.engine.model import Edge, Graph, Node
from freshness_magic.engine.outcome import Outcome, StageStatus


class FidelityMode(StrEnum):
    """The six modes of spec §5.4."""

    FULL = "full"
    TRUNCATE = "truncate"
    COMPACT = "compact"
    SUMMARY_LOW = "summary:low"
    SUMMARY_MEDIUM = "summary:medium"
    SUMMARY_HIGH = "summary:high"


DEFAULT_MODE = FidelityMode.COMPACT
SHARED_PREFIX = "context."
"""The keys of shared state (spec §5.1) that ``compact`` and the summaries carry."""
THREAD_PREFIX = "thread."
"""``thread.<key>``: the exchanges of a ``full`` thread, oldest first."""
KEY_SET_MARK = "*"
"""A read of ``<prefix>*`` is a read of which keys under ``<prefix>`` are set (their names in
the carried text): reuse verifies the set, and it makes no mark (no execution wrote it)."""
ALL_VALUES = ""
"""The prefix of ``summary:high``'s key set: every value that is not bookkeeping."""

BOOKKEEPING_PREFIXES = ("internal.", "graph.", "llm.", THREAD_PREFIX, "freshness.")
BOOKKEEPING_KEYS = frozenset(
    {"current_node", "outcome", "preferred_label", "last_stage", "last_response"}
)

COMPACT_VALUE_CHARS, COMPACT_MAX_VALUES = 200, 20
LOW_BUDGET = 2400
MEDIUM_VALUE_CHARS, MEDIUM_BUDGET = 300, 6000
HIGH_VALUE_CHARS, HIGH_MAX_VALUES, HIGH_BUDGET = 1000, 40, 12000
THREAD_TEXT_CHARS, THREAD_MAX_EXCHANGES, THREAD_MAX_CHARS = 8000, 20, 64000


@dataclass(frozen=True, slots=True)
class Resolved:
    """The mode an execution resolves to, and where it came from."""

    mode: FidelityMode
    source: str
    """``edge a->b``, ``node``, ``graph`` or ``default``."""
    edge: Edge | None = None
    """The edge the run took to reach the node (None: it came by none)."""
    previous: str | None = None
    """The node of the execution before it on its path (None: none)."""
    degraded: bool = False
    """It resolved to ``full`` but is the first node of a resumed run: it runs ``summary:high``."""

    @property
    def effective(self) -> FidelityMode:
        return FidelityMode.SUMMARY_HIGH if self.degraded else self.mode


@dataclass(frozen=True, slots=True)
class Message:
    """One earlier message of a ``full`` thread."""

    role: str
    """``user`` or ``assistant``."""
    text: str
    node: str = ""


@dataclass(frozen=True, slots=True)
class Carried:
    """What one execution passes to the model besides its prompt."""

    mode: FidelityMode
    preamble: str = ""
    """The carried summary, sent before the prompt (a system text where the API has one)."""
    history: tuple[Message, ...] = ()
    """Earlier messages of the thread (``full``), oldest first."""
    thread: str | None = None
    degraded: bool = False
    source: str = "default"

    @property
    def empty(self) -> bool:
        return not self.preamble and not self.history

    def transcript(self) -> str:
        """Everything carried as one text, with a comment saying which mode and where it
        came from (``context.md``)."""
        said = f"how much was carried: {self.mode.value} (from {self.source})"
        if self.degraded:
            said += "; full degraded on resume"
        return self._text(f"<!-- {said} -->")

    def _text(self, comment: str = "") -> str:
        parts = ["# Carried context" + (f"\n\n{comment}" if comment else "")]
        if self.preamble:
            parts.append(self.preamble)
        if self.history:
            parts.append(f"## Earlier in thread `{self.thread}`")
            for message in self.history:
                parts.append(f"### {message.node} ({message.role})\n\n{message.text}")
        return "\n\n".join(parts) + "\n"

    def with_prompt(self, prompt: str) -> str:
        """The carried context then the prompt, for a backend that takes one text: only what
        the node read (not where its mode came from), so equal reads give equal text."""
        if self.empty:
            return prompt
        return f"{self._text()}\n# Prompt\n\n{prompt}"


def parse_mode(value: str) -> FidelityMode | None:
    try:
        return FidelityMode(value.strip())
    except ValueError:
        return None


def incoming_edge(
    graph: Graph,
    node: Node,
    previous: str | None,
    context: Mapping[str, Any],
    branch_of: str | None,
) -> Edge | None:
    """The edge the run took from ``previous`` to ``node`` (see the module docstring); reads
    the context as routing did, outside any recording."""
    from freshness_magic.engine.edges import condition_holds

    for source in (previous, branch_of):
        if source is None:
            continue
        edges = [e for e in graph.outgoing(source) if e.target == node.id]
        if not edges:
            continue
        if len(edges) > 1:
            status = StageStatus.SUCCESS
            with contextlib.suppress(ValueError):
                status = StageStatus.parse(str(context.get("outcome", "success")))
            outcome = Outcome(
                status=status, preferred_label=str(context.get("preferred_label", ""))
            )
            for edge in edges:
                if condition_holds(edge, outcome, context):
                    return edge
        return edges[0]
    return None


def resolve(graph: Graph, node: Node, edge: Edge | None) -> Resolved:
    """Edge ``fidelity`` > node ``fidelity`` > graph ``default_fidelity`` > ``compact``; a
    value that is no mode (``validate`` warns) is passed over."""
    if edge is not None:
        mode = parse_mode(edge.attrs.get("fidelity", ""))
        if mode is not None:
            return Resolved(mode, f"edge {edge.source}->{edge.target}", edge)
    mode = parse_mode(node.attrs.get("fidelity", ""))
    if mode is not None:
        return Resolved(mode, "node", edge)
    mode = parse_mode(graph.default_fidelity)
    if mode is not None:
        return Resolved(mode, "graph", edge)
    return Resolved(DEFAULT_MODE, "default", edge)


def uses_fidelity(node: Node) -> bool:
    """Whether the node's model gets carried context (codergen nodes)."""
    return node.handler_type == "codergen"


def definition_part(graph: Graph, node: Node, edge: Edge | None) -> dict[str, str] | None:
    """What of the fidelity belongs to the node's definition: the resolved mode and the
    thread named by an attribute (None: the node carries nothing)."""
    if not uses_fidelity(node):
        return None
    resolved = resolve(graph, node, edge)
    part = {"mode": resolved.mode.value}
    if resolved.mode is FidelityMode.FULL:
        part["thread"] = _named_thread(graph, node, edge) or ""
    return part


def _named_thread(graph: Graph, node: Node, edge: Edge | None) -> str | None:
    for value in (
        node.attrs.get("thread_id", ""),
        edge.attrs.get("thread_id", "") if edge is not None else "",
        graph.attrs.get("thread_id", ""),
        node.subgraph_classes[0] if node.subgraph_classes else "",
    ):
        if value.strip():
            return value.strip()
    return None


def thread_key(graph: Graph, node: Node, resolved: Resolved, context: Context) -> str:
    """The thread of a ``full`` execution (module docstring); reads the previous node's
    ``llm.<id>`` facts through ``context`` when the thread follows it."""
    named = _named_thread(graph, node, resolved.edge)
    if named is not None:
        return named
    previous = resolved.previous
    if previous is None:
        return node.id
    facts = context.get(f"llm.{previous}")
    if isinstance(facts, Mapping) and isinstance(facts.get("thread"), str):
        return str(facts["thread"])
    return previous


def selected_keys(keys: Any, prefix: str) -> list[str]:
    """The keys a key-set read of ``prefix`` names, sorted: those under ``prefix`` (every one
    that is not bookkeeping for :data:`ALL_VALUES`)."""
    return sorted(
        k
        for k in keys
        if isinstance(k, str)
        and k.startswith(prefix)
        and (prefix or (k not in BOOKKEEPING_KEYS and not k.startswith(BOOKKEEPING_PREFIXES)))
    )


def key_set_prefix(key: str) -> str | None:
    """``prefix`` for a key-set read ``<prefix>*``; None for a plain key."""
    return key[: -len(KEY_SET_MARK)] if key.endswith(KEY_SET_MARK) else None


def _read_keys(context: Context, prefix: str) -> list[str]:
    """The keys under ``prefix``, noted as one key-set read (not their values)."""
    keys = selected_keys(list(context), prefix)
    context.note_key_set(prefix + KEY_SET_MARK, keys)
    return keys


def value_text(value: Any) -> str:
    """A context value as a model reads it, in a prompt's ``{key}`` and in carried context alike:
    text as is, containers as JSON, nothing as nothing."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def _get(context: Context, key: str) -> Any:
    return context.get(key, None)


def carry(resolved: Resolved, graph: Graph, node: Node, context: Context) -> Carried:
    """What an execution with ``resolved`` passes to its model; every value read from
    ``context`` (inside the handler's recording, so its trace holds them)."""
    mode = resolved.effective
    goal = ""
    if mode is not FidelityMode.COMPACT and mode is not FidelityMode.FULL:
        goal = value_text(_get(context, "graph.goal") or "")

    def carried(
        preamble: str, history: tuple[Message, ...] = (), thread: str | None = None
    ) -> Carried:
        return Carried(mode, preamble, history, thread, resolved.degraded, resolved.source)

    if mode is FidelityMode.TRUNCATE:
        return carried(f"Goal: {goal}" if goal else "")
    if mode is FidelityMode.COMPACT:
        lines = []
        keys = _read_keys(context, SHARED_PREFIX)
        for key in keys[:COMPACT_MAX_VALUES]:
            lines.append(f"- {key}: {clip(value_text(context[key]), COMPACT_VALUE_CHARS)}")
        if len(keys) > COMPACT_MAX_VALUES:
            lines.append(f"- ({len(keys) - COMPACT_MAX_VALUES} more shared values not shown)")
        return carried("\n".join(lines))
    if mode is FidelityMode.FULL:
        thread = thread_key(graph, node, resolved, context)
        history: list[Message] = []
        for exchange in _exchanges(_get(context, THREAD_PREFIX + thread)):
            history.append(Message("user", exchange["prompt"], exchange["node"]))
            history.append(Message("assistant", exchange["response"], exchange["node"]))
        return carried("", tuple(history), thread)
    return carried(_summary(mode, goal, context))


def _summary(mode: FidelityMode, goal: str, context: Context) -> str:
    sentences = [f"The pipeline's goal: {goal}."] if goal else []
    last, outcome = _get(context, "last_stage"), _get(context, "outcome")
    if last and outcome:
        sentences.append(f"The last stage, {last}, ended with outcome {outcome}.")
    elif outcome:
        sentences.append(f"The last stage ended with outcome {outcome}.")
    keys = _read_keys(context, SHARED_PREFIX)
    if mode is FidelityMode.SUMMARY_LOW:
        if keys:
            sentences.append(f"Shared values: {', '.join(keys)}.")
        return clip(" ".join(sentences), LOW_BUDGET)
    parts = [" ".join(sentences)]
    if mode is FidelityMode.SUMMARY_MEDIUM:
        values = [(k, MEDIUM_VALUE_CHARS) for k in keys]
        for key in ("tool.output", "last_response"):
            if key in context:
                values.append((key, MEDIUM_VALUE_CHARS))
        budget = MEDIUM_BUDGET
    else:
        values = [(k, HIGH_VALUE_CHARS) for k in _read_keys(context, ALL_VALUES)[:HIGH_MAX_VALUES]]
        if "last_response" in context:
            values.append(("last_response", HIGH_VALUE_CHARS))
        budget = HIGH_BUDGET
    if values:
        parts.append(
            "Values:\n" + "\n".join(f"- {k}: {clip(value_text(context[k]), n)}" for k, n in values)
        )
    text = "\n\n".join(p for p in parts if p)
    return text if len(text) <= budget else clip(text, budget)


def _exchanges(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list):
        return []
    return [
        {
            "node": str(e.get("node", "")),
            "prompt": str(e.get("prompt", "")),
            "response": str(e.get("response", "")),
        }
        for e in value
        if isinstance(e, Mapping)
    ]


def thread_value(
    carried: Carried, node_id: str, prompt: str, response: str
) -> list[dict[str, str]]:
    """The thread after a ``full`` execution: its earlier exchanges and this one, bounded
    (the newest kept)."""
    exchanges = [
        {
            "node": carried.history[i].node,
            "prompt": carried.history[i].text,
            "response": carried.history[i + 1].text,
        }
        for i in range(0, len(carried.history) - 1, 2)
    ]
    exchanges.append(
        {
            "node": node_id,
            "prompt": clip(prompt, THREAD_TEXT_CHARS),
            "response": clip(response, THREAD_TEXT_CHARS),
        }
    )
    kept: list[dict[str, str]] = []
    chars = 0
    for exchange in reversed(exchanges[-THREAD_MAX_EXCHANGES:]):
        size = len(exchange["prompt"]) + len(exchange["response"])
        if kept and chars + size > THREAD_MAX_CHARS:
            break
        chars += size
        kept.append(exchange)
    return kept[::-1]
