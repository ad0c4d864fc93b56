"""Parser for the Attractor DOT subset (spec §2, docs/ARCHITECTURE.md) into the typed model.

``parse_dot(text, path)`` returns a :class:`~freshness_magic.engine.model.Graph` or raises
:class:`~freshness_magic.errors.ParseError`; nothing else escapes, nothing is printed, and the
work is linear in the size of the text (one tokenizer pass, one iterative pass over the tokens,
so deeply nested subgraphs cannot exhaust the Python stack).

The parser reads statements; the pieces live beside it: :mod:`.dot_lexer` (tokens),
:mod:`.dot_cursor` (the place in the tokens, errors in text order), :mod:`.dot_attrs`
(attribute lists and values) and :mod:`.dot_graph` (defaults, node merging, subgraph classes).

Semantics decided here:

- Strict where the spec is: exactly one ``digraph``; ``graph`` (undirected), ``strict``, a second
  graph, ``--``, ports ``a:b``, quoted or non-identifier node ids and subgraphs as edge endpoints
  are rejected, each with its own message.
- Lenient where real files are: semicolons and commas between statements are optional, keywords
  are case-insensitive (as in Graphviz), and ``#`` starts a line comment anywhere outside a
  string.
- Errors are reported in text order: a token the lexer cannot read (``--``, ``<``, an unclosed
  string) is reported when the parser reaches it, so an earlier structural mistake wins.
"""

from __future__ import annotations

import re

from freshness_magic.engine.dot_attrs import AttrReader
from freshness_magic.engine.dot_graph import GraphBuilder
from freshness_magic.engine.dot_lexer import ARROW, EOF, STRING, WORD, SourceMap, string_value
from freshness_magic.engine.model import MAX_NODE_ID, NODE_ID_RE, Graph
from freshness_magic.errors import ParseError

__all__ = ["parse_dot"]

_KEYWORDS = frozenset({"digraph", "graph", "subgraph", "node", "edge", "strict"})
_NOT_ID_CHARS_RE = re.compile(r"[^A-Za-z0-9_]+")
_ID_HINT = "node ids must match [A-Za-z_][A-Za-z0-9_]*"
_KEYWORDS = frozenset(("node", "edge", "graph", "digraph", "subgraph", "strict"))


def parse_dot(text: str, path: str | None = None) -> Graph:
    """Parse one Attractor DOT digraph; raises ParseError (with line, column and caret) only."""
    source = SourceMap(text, path)
    parser = _Parser(text, source)
    try:
        return parser.parse()
    except ParseError as exc:
        raise parser.with_quote_hint(exc) from None


def _suggest_id(text: str) -> str:
    """An identifier close to ``text`` for the 'use an identifier' hint."""
    candidate = _NOT_ID_CHARS_RE.sub("_", text).strip("_") or "stage_1"
    if candidate[0].isdigit():
        candidate = f"n_{candidate}"
    if candidate.lower() in _KEYWORDS:  # `node [label=...]` would set every node's label
        candidate += "_1"
    return candidate


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Parser(AttrReader):
    """One pass over the token lists: the statements, in order, into a :class:`GraphBuilder`."""

    def __init__(self, text: str, source: SourceMap) -> None:
        super().__init__(text, source)
        self.graph = Graph(name="", path=source.path, source=text)
        self.build = GraphBuilder(self.graph, source)

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
                self.i += 1
                if not self.build.close():
                    break
            elif kind == "{":
                self.build.open_subgraph(self.offsets[self.i])
                self.i += 1
            else:
                self._bad_statement_start(kind)
        self._trailer(self.i - 1)
        self.graph.repeated = self.repeated
        return self.build.finish()

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
        self.build.open_root(self.offsets[self.i])
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
            scope = self.build.scope
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
        scope = self.build.scope
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
            if self.kinds[j] == WORD or self.kinds[j] == STRING:  # a quoted name as the graph's
                name = self.values[j] if self.kinds[j] == WORD else string_value(self.values[j])
                j += 1
            if self.kinds[j] != "{":
                raise self._error(
                    f"expected '{{' to open the subgraph, found {self._describe(j)}", j
                )
            self.build.open_subgraph(self.offsets[j], name)
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
        scope = self.build.scope
        scope.attrs[key] = value
        scope.attr_positions[key] = self._pos(self.offsets[i])

    def _node_statement(self) -> None:
        i = self.i
        node_id = self._node_id(i)
        self.i = i + 1
        items = self._attr_lists() if self.kinds[self.i] == "[" else []
        self.build.declare_node(node_id, self.offsets[i], items)

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
        self.build.add_edges(chain, items)

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
            if len(word) > MAX_NODE_ID:
                raise self._error(
                    f"node id '{word[:20]}…' has {len(word)} characters, at most {MAX_NODE_ID}: "
                    "node ids name files of the run; use a shorter id and put the text in label",
                    i,
                )
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
