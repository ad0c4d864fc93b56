"""Parser for the Attractor DOT subset (spec §2, DESIGN.md §4 item 8) into the typed model.

``parse_dot(text, path)`` returns a :class:`~freshness_magic.engine.model.Graph` or raises
:class:`~freshness_magic.errors.ParseError`; nothing else escapes, nothing is printed, and the
work is linear in the size of the text (one tokenizer pass, one iterative pass over the tokens,
so deeply nested subgraphs cannot exhaust the Python stack).

Semantics decided here:

- Strict where the spec is: exactly one ``digraph``; ``graph`` (undirected), ``strict``, a second
  graph, ``--``, HTML-like ``<...>`` values, ports ``a:b``, quoted or non-identifier node ids and
  subgraphs as edge endpoints are rejected, each with its own message.
- Lenient where real files are: commas and semicolons between attributes and statements are
  optional, keywords are case-insensitive (as in Graphviz), several ``[...]`` lists may follow
  one statement, adjacent quoted strings may be joined with ``+``, attribute names may be quoted
  (``"human.default_choice"="Y"``, as Graphviz needs for dotted names) as long as the name
  itself is an identifier or dotted identifiers, and ``#`` starts a line comment anywhere
  outside a string.
- Values are kept as text: quoted strings unescaped (see ``dot_lexer.unescape``), bare words
  (numbers, booleans, durations, identifiers, ``gpt-5.2``, ``summary:high``) exactly as written.
- Errors are reported in text order: a token the lexer cannot read (``--``, ``<``, an unclosed
  string) is reported when the parser reaches it, so an earlier structural mistake wins.
- ``node [...]`` / ``edge [...]`` defaults apply to later statements of their (sub)graph only; a
  subgraph starts with a copy of its parent's defaults at the point where it opens.
- A node is created at its first mention (a node statement or an edge) with the node defaults in
  effect there. A later node statement for an existing node merges: its explicit attributes
  override, and defaults in effect at the later statement fill only keys the node does not have
  yet (so a node first seen in an edge and declared later inside a subgraph still picks up that
  subgraph's defaults, but an earlier value is never replaced by a default).
- ``Node.explicit`` is the union of keys written on the node's own statements; ``attr_positions``
  point at the key that supplied each value (a default block's key for defaulted values).
- Nodes declared, or first mentioned in an edge, inside subgraphs receive the classes derived
  from the labels of all enclosing subgraphs (outermost first, §2.10), whenever in the subgraph
  its label is set.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import pairwise

from freshness_magic.engine.dot_lexer import (
    ARROW,
    EOF,
    STRING,
    WORD,
    SourceMap,
    string_value,
    tokenize,
)
from freshness_magic.engine.model import NODE_ID_RE, Edge, Graph, Node, Position, Subgraph
from freshness_magic.errors import ParseError
from freshness_magic.gcpause import cyclic_gc_paused

__all__ = ["KEY_RE", "parse_dot", "subgraph_class"]

KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
"""Attribute names: identifiers, optionally qualified with dots (``human.default_choice``)."""

_KEYWORDS = frozenset({"digraph", "graph", "subgraph", "node", "edge", "strict"})
_CLASS_STRIP_RE = re.compile(r"[^a-z0-9-]+")
_NOT_ID_CHARS_RE = re.compile(r"[^A-Za-z0-9_]+")
_ID_HINT = "node ids must match [A-Za-z_][A-Za-z0-9_]*"

_Attr = tuple[str, str, Position]
"""(key, value, position of the key) as written in an attribute list."""


def subgraph_class(label: str) -> str:
    """The class a subgraph label derives (§2.10): lowercase, spaces to hyphens, [a-z0-9-] kept."""
    return _CLASS_STRIP_RE.sub("", label.lower().replace(" ", "-"))


def parse_dot(text: str, path: str | None = None) -> Graph:
    """Parse one Attractor DOT digraph; raises ParseError (with line, column and caret) only."""
    source = SourceMap(text, path)
    with cyclic_gc_paused():
        return _Parser(text, source).parse()


def _suggest_id(text: str) -> str:
    """An identifier close to ``text`` for the 'use an identifier' hint."""
    candidate = _NOT_ID_CHARS_RE.sub("_", text).strip("_") or "node"
    if candidate[0].isdigit():
        candidate = f"n_{candidate}"
    return candidate


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Scope:
    """The root graph or one subgraph: its defaults (copied from the parent) and its attributes."""

    __slots__ = (
        "attr_positions",
        "attrs",
        "edge_positions",
        "edge_values",
        "name",
        "node_positions",
        "node_values",
        "number",
        "open_offset",
        "parent",
    )

    def __init__(
        self, number: int, open_offset: int, parent: _Scope | None, name: str = ""
    ) -> None:
        self.number = number
        self.open_offset = open_offset
        self.parent = parent
        self.name = name
        self.attrs: dict[str, str] = {}
        self.attr_positions: dict[str, Position] = {}
        if parent is None:
            self.node_values: dict[str, str] = {}
            self.node_positions: dict[str, Position] = {}
            self.edge_values: dict[str, str] = {}
            self.edge_positions: dict[str, Position] = {}
        else:
            self.node_values = dict(parent.node_values)
            self.node_positions = dict(parent.node_positions)
            self.edge_values = dict(parent.edge_values)
            self.edge_positions = dict(parent.edge_positions)


class _Parser:
    """One pass over the token lists; ``self.i`` is the index of the current token."""

    def __init__(self, text: str, source: SourceMap) -> None:
        self.text = text
        self.source = source
        tokens = tokenize(text, source)
        self.kinds = tokens.kinds
        self.values = tokens.values
        self.offsets = tokens.offsets
        self.bad_index = len(self.kinds) - 2 if tokens.error is not None else -1
        self.lex_error = tokens.error
        self.i = 0
        self.graph = Graph(name="", path=source.path, source=text)
        self.scopes: list[_Scope] = []
        self.subgraphs: list[_Scope] = []
        self.memberships: dict[str, dict[int, None]] = {}
        self.explicit_sets: dict[frozenset[str], frozenset[str]] = {}
        """One shared frozenset per distinct ``Node.explicit`` (most nodes repeat a few shapes)."""
        self.known_keys: set[str] = set()
        """Attribute names already checked against KEY_RE (names repeat on every node)."""

    # -- helpers -------------------------------------------------------------------------------

    def _error(
        self, message: str, index: int | None = None, offset: int | None = None
    ) -> ParseError:
        index = self.i if index is None else index
        if self.lex_error is not None and index >= self.bad_index:
            return self.lex_error
        if offset is None:
            offset = self.offsets[index]
        return self.source.error(message, offset)

    def _check_bad(self, index: int) -> None:
        """Raise the tokenizer's error when the parser has reached the token it is about."""
        if index == self.bad_index and self.lex_error is not None:
            raise self.lex_error

    def _describe(self, index: int) -> str:
        self._check_bad(index)
        kind = self.kinds[index]
        if kind == EOF:
            return "the end of the file"
        text = self.values[index]
        if kind == STRING:
            return f"the quoted string {text[:40]}{'...' if len(text) > 40 else ''}"
        return f"'{text[:40]}{'...' if len(text) > 40 else ''}'"

    def _pos(self, offset: int) -> Position:
        return self.source.position(offset)

    # -- structure -----------------------------------------------------------------------------

    def parse(self) -> Graph:
        self._header()
        kinds = self.kinds
        while True:
            kind = kinds[self.i]
            if kind == WORD:
                self._word_statement()
            elif kind == ";" or kind == ",":
                self.i += 1
            elif kind == "}":
                self.scopes.pop()
                self.i += 1
                if not self.scopes:
                    break
            elif kind == "{":
                self._open_subgraph(self.offsets[self.i])
                self.i += 1
            else:
                self._bad_statement_start(kind)
        self._trailer(self.i - 1)
        self._finish()
        return self.graph

    def _header(self) -> None:
        kinds, values = self.kinds, self.values
        kind = kinds[0]
        word = values[0].lower() if kind == WORD else ""
        if kind == EOF:
            raise self._error("empty pipeline: expected 'digraph NAME { ... }'", 0)
        if word == "strict":
            raise self._error(
                "'strict' graphs are not supported: remove 'strict' "
                "and write 'digraph NAME { ... }'",
                0,
            )
        if word == "graph":
            raise self._error(
                "undirected graphs are not supported: write 'digraph' instead of 'graph'", 0
            )
        if word != "digraph":
            raise self._error(
                f"expected 'digraph' at the start of the pipeline, found {self._describe(0)}", 0
            )
        self.i = 1
        if kinds[1] == WORD or kinds[1] == STRING:
            if kinds[1] == WORD and values[1].lower() in _KEYWORDS:
                raise self._error(
                    f"'{values[1]}' is a DOT keyword and cannot name the graph; pick another name",
                    1,
                )
            self.graph.name = values[1] if kinds[1] == WORD else string_value(values[1])
            self.i = 2
        if kinds[self.i] != "{":
            raise self._error(
                f"expected '{{' after 'digraph {self.graph.name}', found {self._describe(self.i)}"
            )
        root = _Scope(0, self.offsets[self.i], None)
        root.attrs = self.graph.attrs
        root.attr_positions = self.graph.attr_positions
        self.scopes.append(root)
        self.i += 1

    def _trailer(self, close_index: int) -> None:
        kind = self.kinds[self.i]
        if kind == EOF:
            return
        closed = self._pos(self.offsets[close_index])
        where = f"line {closed.line}, column {closed.column}"
        if kind == WORD and self.values[self.i].lower() in ("digraph", "graph", "strict"):
            raise self._error(
                "a second graph: a pipeline file must contain exactly one digraph "
                f"(the first one ends with the '}}' at {where})"
            )
        if kind == "}":
            raise self._error(
                "unbalanced braces: this '}' has no matching '{' "
                f"(the graph already ended with the '}}' at {where})"
            )
        raise self._error(
            f"unexpected {self._describe(self.i)} after the end of the graph (closed by the '}}' "
            f"at {where}): everything must be inside 'digraph NAME {{ ... }}'; check for an extra "
            "'}'"
        )

    def _bad_statement_start(self, kind: str) -> None:
        if kind == EOF:
            scope = self.scopes[-1]
            opened = self._pos(scope.open_offset)
            what = "the graph" if scope.number == 0 else "a subgraph"
            raise self._error(
                f"unbalanced braces: the '{{' of {what} opened at line {opened.line}, column "
                f"{opened.column} is never closed; add the missing '}}'",
                offset=scope.open_offset,
            )
        if kind == STRING:
            if self.kinds[self.i + 1] == "=":
                self._attr_declaration()
                return
            raise self._quoted_id_error(self.i)
        if kind == "[":
            raise self._error(
                "an attribute list needs a statement before it: write 'node [...]', 'edge [...]', "
                "'graph [...]' or 'node_id [...]'"
            )
        if kind == "]":
            raise self._error("unbalanced brackets: this ']' has no matching '['")
        if kind == ARROW:
            if self.kinds[self.i - 1] == "}":
                raise self._error(
                    "subgraphs as edge endpoints are not supported: write one edge per source, "
                    "e.g. 'a -> c' and 'b -> c'"
                )
            raise self._error("an edge needs a source node before '->': write 'a -> b'")
        if kind == "=":
            raise self._error("'=' needs an attribute name before it: write key=value")
        raise self._error(f"unexpected {self._describe(self.i)} at the start of a statement")

    def _open_subgraph(self, offset: int, name: str = "") -> None:
        scope = _Scope(len(self.subgraphs) + 1, offset, self.scopes[-1], name)
        self.subgraphs.append(scope)
        self.scopes.append(scope)

    # -- statements ----------------------------------------------------------------------------

    def _word_statement(self) -> None:
        i = self.i
        word = self.values[i]
        lowered = word.lower()
        if lowered in _KEYWORDS:
            self._keyword_statement(lowered)
            return
        following = self.kinds[i + 1]
        if following == "=":
            self._attr_declaration()
        elif following == ARROW:
            self._edge_statement()
        else:
            self._node_statement()

    def _keyword_statement(self, keyword: str) -> None:
        i = self.i
        scope = self.scopes[-1]
        if keyword in ("node", "edge", "graph"):
            self._check_bad(i + 1)
            if self.kinds[i + 1] != "[":
                target = "the (sub)graph" if keyword == "graph" else f"later {keyword}s"
                raise self._error(
                    f"'{self.values[i]}' is a DOT keyword: it must be followed by '[...]' "
                    f"(attributes of {target}); "
                    "to name a node like this, use another id and put the text in label"
                )
            self.i = i + 1
            items = self._attr_lists()
            if keyword == "node":
                values, positions = scope.node_values, scope.node_positions
            elif keyword == "edge":
                values, positions = scope.edge_values, scope.edge_positions
            else:
                values, positions = scope.attrs, scope.attr_positions
            for key, value, position in items:
                values[key] = value
                positions[key] = position
            return
        if keyword == "subgraph":
            j = i + 1
            name = ""
            if self.kinds[j] == WORD or self.kinds[j] == STRING:
                name = self.values[j]
                j += 1
            if self.kinds[j] != "{":
                raise self._error(
                    f"expected '{{' to open the subgraph, found {self._describe(j)}", j
                )
            self._open_subgraph(self.offsets[j], name)
            self.i = j + 1
            return
        raise self._error(
            f"'{self.values[i]}' cannot appear inside the graph: a pipeline file contains exactly "
            "one 'digraph NAME { ... }'"
        )

    def _attr_declaration(self) -> None:
        """``key = value`` at statement level: an attribute of the enclosing (sub)graph."""
        i = self.i
        key = self._key(i)
        value, self.i = self._value(i + 2, key)
        scope = self.scopes[-1]
        scope.attrs[key] = value
        scope.attr_positions[key] = self._pos(self.offsets[i])

    def _node_statement(self) -> None:
        i = self.i
        node_id = self._node_id(i)
        self.i = i + 1
        items = self._attr_lists() if self.kinds[self.i] == "[" else []
        self._declare_node(node_id, self.offsets[i], items)

    def _edge_statement(self) -> None:
        kinds = self.kinds
        i = self.i
        chain = [(self._node_id(i), self.offsets[i])]
        while kinds[i + 1] == ARROW:
            arrow = i + 1
            i += 2
            kind = kinds[i]
            if kind == WORD and self.values[i].lower() != "subgraph":
                chain.append((self._node_id(i), self.offsets[i]))
            elif kind == "{" or kind == WORD:
                raise self._error(
                    "subgraphs as edge endpoints are not supported: write one edge per target, "
                    "e.g. 'a -> b' and 'a -> c'",
                    i,
                )
            elif kind == STRING:
                raise self._quoted_id_error(i)
            else:
                raise self._error(
                    f"'->' must be followed by a node id, found {self._describe(i)}", arrow
                )
        self.i = i + 1
        items = self._attr_lists() if kinds[self.i] == "[" else []
        for node_id, offset in chain:
            if node_id not in self.graph.nodes:
                self._create_node(node_id, offset)
        scope = self.scopes[-1]
        pos = self._pos
        explicit_values = {key: value for key, value, _ in items}
        explicit_positions = {key: position for key, _, position in items}
        edges = self.graph.edges
        for (source, offset), (target, _) in pairwise(chain):
            attrs = dict(scope.edge_values)
            attrs.update(explicit_values)
            positions = dict(scope.edge_positions)
            positions.update(explicit_positions)
            edges.append(Edge(source, target, attrs, pos(offset), positions, len(edges)))

    # -- pieces --------------------------------------------------------------------------------

    def _node_id(self, i: int) -> str:
        """The node id at token ``i`` (a WORD), checked against the identifier rule."""
        word = self.values[i]
        if self.kinds[i + 1] == ":":
            raise self._error(
                f"ports are not supported ('{word}:...'): refer to the node as '{word}' alone",
                i + 1,
            )
        if NODE_ID_RE.match(word):
            if word.lower() in _KEYWORDS:
                raise self._error(
                    f"'{word}' is a DOT keyword and cannot be a node id: use another identifier "
                    f'and put the text in label, e.g. {word}_ [label="{word}"]',
                    i,
                )
            return word
        if ":" in word:
            base = word.split(":", 1)[0]
            raise self._error(
                f"ports are not supported ('{word}'): refer to the node as '{base}' alone", i
            )
        raise self._error(
            f"invalid node id '{word}': {_ID_HINT}; use an identifier and put the text in label, "
            f"e.g. {_suggest_id(word)} [label={_dot_quote(word)}]",
            i,
        )

    def _quoted_id_error(self, i: int) -> ParseError:
        text = string_value(self.values[i])
        return self._error(
            f"quoted node id {_dot_quote(text)} is not supported: {_ID_HINT}; use an identifier "
            f"and put the text in label, e.g. {_suggest_id(text)} [label={_dot_quote(text)}]",
            i,
        )

    def _key(self, i: int) -> str:
        """The attribute name at token ``i``: a word, or a quoted string holding a valid name."""
        key = self.values[i] if self.kinds[i] == WORD else string_value(self.values[i])
        if key not in self.known_keys:
            if not KEY_RE.match(key):
                raise self._error(
                    f"invalid attribute name '{key}': names are identifiers, optionally dotted "
                    "(e.g. timeout, human.default_choice)",
                    i,
                )
            self.known_keys.add(key)
        return key

    def _value(self, j: int, key: str) -> tuple[str, int]:
        """The value at token ``j`` (after ``key =``); returns it and the next token index."""
        kinds, values = self.kinds, self.values
        kind = kinds[j]
        if kind == WORD:
            return values[j], j + 1
        if kind == STRING:
            if kinds[j + 1] != "+":
                return string_value(values[j]), j + 1
            parts = [string_value(values[j])]
            while kinds[j + 1] == "+":
                if kinds[j + 2] != STRING:
                    raise self._error(
                        f"'+' joins quoted strings only: found {self._describe(j + 2)} after it",
                        j + 1,
                    )
                parts.append(string_value(values[j + 2]))
                j += 2
            return "".join(parts), j + 1
        if kind == "<":
            raise self._error("HTML-like values are not supported", j)
        raise self._error(
            f"'=' without a value for '{key}' (found {self._describe(j)}): write {key}=value, "
            f'or {key}="" for an empty value',
            j - 1,
        )

    def _attr_lists(self) -> list[_Attr]:
        """One or more ``[...]`` lists starting at the current '['; commas/semicolons optional."""
        kinds, values, offsets = self.kinds, self.values, self.offsets
        starts = self.source.line_starts
        known_keys = self.known_keys
        items: list[_Attr] = []
        i = self.i
        while kinds[i] == "[":
            open_index = i
            i += 1
            while True:
                kind = kinds[i]
                if kind == "]":
                    i += 1
                    break
                if kind == "," or kind == ";":
                    i += 1
                    continue
                if kind == WORD or (kind == STRING and kinds[i + 1] == "="):
                    if kinds[i + 1] != "=":
                        self._missing_equals(i, open_index)
                    key = values[i]
                    if kind != WORD or key not in known_keys:
                        key = self._key(i)
                    value_kind = kinds[i + 2]
                    if value_kind == WORD:  # fast paths of _value for the common cases
                        value, next_i = values[i + 2], i + 3
                    elif value_kind == STRING and kinds[i + 3] != "+" and "\\" not in values[i + 2]:
                        value, next_i = values[i + 2][1:-1], i + 3
                    else:
                        value, next_i = self._value(i + 2, key)
                    offset = offsets[i]
                    line = bisect_right(starts, offset)
                    items.append((key, value, Position(line, offset - starts[line - 1] + 1)))
                    i = next_i
                    continue
                if kind in (EOF, "[", "{", "}", ARROW):
                    raise self._unclosed_bracket(open_index, i)
                if kind == STRING:
                    raise self._error(
                        'a quoted string without a name: write key="value" (join adjacent '
                        "strings with '+')",
                        i,
                    )
                raise self._error(
                    f"expected an attribute name, found {self._describe(i)}: write key=value", i
                )
        self.i = i
        return items

    def _missing_equals(self, i: int, open_index: int) -> None:
        self._check_bad(i + 1)
        following = self.kinds[i + 1]
        if following in (EOF, "[", "{", "}", ARROW):
            raise self._unclosed_bracket(open_index, i)
        key = self.values[i]
        hint = f"write {key}=value"
        previous = self.kinds[i - 1]
        if previous in (WORD, STRING):
            hint += "; if it belongs to the previous value, quote the whole value"
        raise self._error(f"attribute '{key}' has no value: {hint}", i)

    def _unclosed_bracket(self, open_index: int, found: int) -> ParseError:
        at = self._pos(self.offsets[found])
        return self._error(
            f"unbalanced brackets: this '[' is never closed (found {self._describe(found)} at "
            f"line {at.line}, column {at.column}); add the missing ']'",
            open_index,
        )

    # -- nodes ---------------------------------------------------------------------------------

    def _create_node(self, node_id: str, offset: int) -> Node:
        scope = self.scopes[-1]
        node = Node(
            node_id,
            dict(scope.node_values),
            self._pos(offset),
            dict(scope.node_positions),
        )
        self.graph.nodes[node_id] = node
        self._add_membership(node_id)
        return node

    def _declare_node(self, node_id: str, offset: int, items: list[_Attr]) -> None:
        node = self.graph.nodes.get(node_id)
        if node is None:
            node = self._create_node(node_id, offset)
        else:
            scope = self.scopes[-1]
            for key, value in scope.node_values.items():
                if key not in node.attrs:
                    node.attrs[key] = value
                    node.attr_positions[key] = scope.node_positions[key]
            self._add_membership(node_id)
        if items:
            attrs, positions = node.attrs, node.attr_positions
            for key, value, position in items:
                attrs[key] = value
                positions[key] = position
            keys = frozenset([key for key, _, _ in items])
            if node.explicit:
                keys |= node.explicit
            node.explicit = self.explicit_sets.setdefault(keys, keys)

    def _add_membership(self, node_id: str) -> None:
        if len(self.scopes) > 1:
            member_of = self.memberships.setdefault(node_id, {})
            for scope in self.scopes[1:]:
                member_of[scope.number] = None

    def _finish(self) -> None:
        nodes = self.graph.nodes
        if not self.memberships:
            return
        members: dict[int, list[str]] = {}
        for node_id, numbers in self.memberships.items():
            for number in numbers:
                members.setdefault(number, []).append(node_id)
        self.graph.subgraphs = [
            Subgraph(
                name=scope.name,
                label=scope.attrs.get("label", ""),
                parent=None if scope.parent is None or scope.parent.number == 0
                else scope.parent.number - 1,
                nodes=tuple(members.get(scope.number, ())),
            )
            for scope in self.subgraphs
        ]  # fmt: skip
        classes_of = {
            scope.number: subgraph_class(scope.attrs.get("label", "")) for scope in self.subgraphs
        }
        shared: dict[tuple[str, ...], tuple[str, ...]] = {}
        for node_id, numbers in self.memberships.items():
            derived = tuple(dict.fromkeys(classes_of[n] for n in numbers if classes_of[n]))
            nodes[node_id].subgraph_classes = shared.setdefault(derived, derived)
