"""The ``model_stylesheet`` graph attribute (spec §8): parse it and apply it to nodes.

Grammar (a superset of §8.2 that also covers §11.10)::

    Stylesheet  ::= Rule*
    Rule        ::= Selector (',' Selector)* '{' Declaration? (';' Declaration?)* '}'
    Selector    ::= '*' | ShapeName | '.' ClassName | '#' NodeId
    Declaration ::= Property (':' | '=') Value
    Property    ::= [A-Za-z_][A-Za-z0-9_.]*
    Value       ::= quoted string | bare text up to ';', '}' or the end of the line

``/* ... */`` comments are allowed. Specificity is universal (0) < shape (1) < class (2) < id (3);
among rules of equal specificity the later one wins.

Precedence when applying (decision): an attribute written on the node statement itself
(``node.explicit``) always wins; a stylesheet value beats a value the node only inherited from a
``node [...]`` default block, because the stylesheet is the more specific, deliberate statement
of per-node configuration (§8.5 ranks it above graph-level defaults). An empty value written on
the node (``llm_model=""``, often left by a template) sets nothing, so the stylesheet's applies:
no style property has a meaning when empty.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from freshness_magic.engine.model import Graph, Node
from freshness_magic.engine.quoted import read_quoted
from freshness_magic.errors import StylesheetError

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CLASS_RE = re.compile(r"[A-Za-z0-9_-]+")
_PROPERTY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")

STYLE_PROPERTIES = frozenset({"llm_model", "llm_provider", "reasoning_effort"})
"""The only properties a stylesheet sets (§8.2); others are a validation warning, no effect."""
REASONING_EFFORTS = ("low", "medium", "high")
"""The values of ``reasoning_effort`` (§2.6), on a node or in a stylesheet."""


class SelectorKind(enum.IntEnum):
    """Selector kinds; the value is the specificity."""

    UNIVERSAL = 0
    SHAPE = 1
    CLASS = 2
    ID = 3


@dataclass(frozen=True, slots=True)
class Selector:
    """One selector: ``*``, a shape name, ``.class`` or ``#id``."""

    kind: SelectorKind
    value: str = ""

    def matches(self, node: Node) -> bool:
        if self.kind is SelectorKind.UNIVERSAL:
            return True
        if self.kind is SelectorKind.SHAPE:
            return node.shape == self.value
        if self.kind is SelectorKind.CLASS:
            return self.value in node.classes
        return node.id == self.value

    def __str__(self) -> str:
        prefix = {SelectorKind.UNIVERSAL: "*", SelectorKind.CLASS: ".", SelectorKind.ID: "#"}
        return prefix.get(self.kind, "") + self.value


@dataclass(frozen=True, slots=True)
class Declaration:
    """One ``property: value;`` and where it was written."""

    property: str
    value: str
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Rule:
    """Selectors and declarations of one ``{ }`` block; ``order`` breaks specificity ties."""

    selectors: tuple[Selector, ...]
    declarations: tuple[Declaration, ...]
    order: int


@dataclass(frozen=True, slots=True)
class Stylesheet:
    """The parsed ``model_stylesheet`` of a graph: its rules in source order."""

    rules: tuple[Rule, ...] = ()

    def properties_for(self, node: Node) -> dict[str, str]:
        """Every property the stylesheet gives ``node``, by specificity then rule order."""
        ranked: dict[str, tuple[int, int, str]] = {}
        for rule in self.rules:
            matching = [s.kind for s in rule.selectors if s.matches(node)]
            if not matching:
                continue
            rank = (int(max(matching)), rule.order)
            for decl in rule.declarations:
                held = ranked.get(decl.property)
                if held is None or (held[0], held[1]) <= rank:
                    ranked[decl.property] = (rank[0], rank[1], decl.value)
        return {key: value for key, (_, _, value) in ranked.items()}


class _Reader:
    """A cursor over the stylesheet text that knows 1-based line and column."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def where(self, pos: int | None = None) -> tuple[int, int]:
        pos = self.pos if pos is None else pos
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, pos - self._line_starts[lo] + 1

    def error(self, message: str, pos: int | None = None) -> StylesheetError:
        line, column = self.where(pos)
        return StylesheetError(message, line=line, column=column)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self, newlines: bool = True) -> None:
        """Skip blanks and ``/* */`` comments (newlines too unless ``newlines`` is False)."""
        text = self.text
        blanks = " \t\r\n" if newlines else " \t\r"
        while self.pos < len(text):
            if text[self.pos] in blanks:
                self.pos += 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("unterminated comment; close it with `*/`")
                self.pos = end + 2
            else:
                return

    def describe(self) -> str:
        char = self.peek()
        return "the end of the stylesheet" if not char else f"`{char}`"


def _parse_selector(reader: _Reader) -> Selector:
    char = reader.peek()
    if char == "*":
        reader.pos += 1
        return Selector(SelectorKind.UNIVERSAL)
    if char in ".#":
        kind = SelectorKind.CLASS if char == "." else SelectorKind.ID
        pattern = _CLASS_RE if char == "." else _IDENT_RE
        match = pattern.match(reader.text, reader.pos + 1)
        if match is None:
            what = "class name" if char == "." else "node id"
            raise reader.error(f"`{char}` must be followed by a {what}, e.g. `{char}code`")
        reader.pos = match.end()
        return Selector(kind, match.group(0))
    match = _IDENT_RE.match(reader.text, reader.pos)
    if match is None:
        raise reader.error(
            f"expected a selector (`*`, a shape such as `box`, `.class` or `#node_id`), "
            f"found {reader.describe()}"
        )
    reader.pos = match.end()
    return Selector(SelectorKind.SHAPE, match.group(0))


_RUN_ON_RE = re.compile(r"\s([A-Za-z_][\w.-]*)\s*:")
"""A property name and its colon inside a value: the `;` before it is missing."""


def _parse_value(reader: _Reader, prop: str) -> str:
    text = reader.text
    start = reader.pos
    quote = reader.peek()
    if quote in ('"', "'"):
        quoted = read_quoted(text, start)
        if quoted is not None:
            value, reader.pos = quoted
            return value
        raise reader.error(f"unterminated quoted value of `{prop}`; close it with {quote}", start)
    pos = start
    while pos < len(text) and text[pos] not in ";}\n" and not text.startswith("/*", pos):
        if text[pos] == "{":
            raise reader.error(
                f"`{{` in the value of `{prop}`: is the `}}` of this rule missing before the next "
                "one? (quote the value if the brace belongs to it)",
                pos,
            )
        pos += 1
    value = text[start:pos].strip()
    if not value:
        raise reader.error(f"`{prop}` has no value; write `{prop}: value;`", start)
    run_on = _RUN_ON_RE.search(text, start, pos)
    if run_on is not None:
        raise reader.error(
            f"`;` missing after the value of `{prop}`: `{run_on.group(1)}` runs into it; end "
            "each declaration with `;` (quote the value if it holds the `:`)",
            run_on.start(1),
        )
    reader.pos = pos
    return value


def _parse_declarations(reader: _Reader) -> tuple[Declaration, ...]:
    declarations: list[Declaration] = []
    while True:
        reader.skip()
        char = reader.peek()
        if char == "}":
            reader.pos += 1
            return tuple(declarations)
        if char == ";":
            reader.pos += 1
            continue
        if not char:
            raise reader.error("unclosed rule: `}` is missing at the end of the stylesheet")
        start = reader.pos
        match = _PROPERTY_RE.match(reader.text, reader.pos)
        if match is None:
            raise reader.error(
                f"expected a property name such as `llm_model`, found {reader.describe()}"
            )
        prop = match.group(0)
        reader.pos = match.end()
        reader.skip(newlines=False)
        if reader.peek() not in (":", "="):
            raise reader.error(
                f"expected `:` after property `{prop}`, found {reader.describe()}; "
                f"write `{prop}: value;`"
            )
        reader.pos += 1
        reader.skip(newlines=False)
        value = _parse_value(reader, prop)
        line, column = reader.where(start)
        declarations.append(Declaration(prop, value, line, column))
        reader.skip(newlines=False)
        if reader.peek() not in (";", "}", "\n", ""):
            raise reader.error(
                f"expected `;` or `}}` after the value of `{prop}`, found {reader.describe()}"
            )


@lru_cache(maxsize=256)
def parse_stylesheet(text: str) -> Stylesheet:
    """Parse a ``model_stylesheet``; raises :class:`StylesheetError` with line and column."""
    reader = _Reader(text)
    rules: list[Rule] = []
    while True:
        reader.skip()
        if not reader.peek():
            return Stylesheet(tuple(rules))
        selectors = [_parse_selector(reader)]
        reader.skip()
        while reader.peek() == ",":
            reader.pos += 1
            reader.skip()
            selectors.append(_parse_selector(reader))
            reader.skip()
        if reader.peek() != "{":
            raise reader.error(
                f"expected `{{` after selector `{selectors[-1]}`, found {reader.describe()}"
            )
        reader.pos += 1
        rules.append(Rule(tuple(selectors), _parse_declarations(reader), len(rules)))


def apply_stylesheet(graph: Graph, stylesheet: Stylesheet) -> Graph:
    """A new graph whose nodes carry the stylesheet's properties (the input is not changed).

    Only keys the node statement did not write itself are set. Nodes that change are copied;
    unchanged nodes are shared with the input graph.
    """
    if not stylesheet.rules:
        return graph
    nodes: dict[str, Node] = {}
    for node_id, node in graph.nodes.items():
        nodes[node_id] = _styled(node, stylesheet.properties_for(node))
    return dataclasses.replace(graph, nodes=nodes, edges=list(graph.edges))


def _styled(node: Node, props: Mapping[str, str]) -> Node:
    updates = {
        key: value
        for key, value in props.items()
        if key in STYLE_PROPERTIES
        and (key not in node.explicit or not node.attrs.get(key, "").strip())
        and node.attrs.get(key) != value
    }
    if not updates:
        return node
    positions = {k: v for k, v in node.attr_positions.items() if k not in updates}
    return dataclasses.replace(node, attrs={**node.attrs, **updates}, attr_positions=positions)
