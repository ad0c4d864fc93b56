"""The normalised form of a Python AST that the hub's symbol hashes cover, built in one pass.

A node's tokens, in pre-order: a negative type code per node, the length of every list, names
and other primitives as they are, and constants after a marker. Positions, ``ctx``, type
comments and the docstrings of nested definitions are left out, so formatting, comments and
moving code never change the tokens. Given each class's fields the sequence decodes to exactly
one tree, so equal hashes mean equal trees. The same pass records what the hub's rules need:
called and mentioned names, imports, and the branch count (complexity).

The walk is the hub's hottest code (every node of every file), so each node class gets its own
emitter, generated once at import from the class's ``_fields`` (as :mod:`dataclasses` generates
``__init__``): it reads its fields as attributes, in order, and dispatches each value inline;
names and constants (half of all nodes) cost no call. There are two tables, with and without
collecting mentioned names (only test files' mentions are used). No text is built per node:
the tokens of a symbol are serialised once (``marshal`` version 2).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType

BRANCHES: tuple[type[ast.AST], ...] = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.IfExp,
    ast.ExceptHandler,
    ast.Assert,
    ast.match_case,
)


DEFS = frozenset((ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
INNER = frozenset((*DEFS, ast.Lambda))
"""Nodes whose body is a nested scope (its branches do not count for the enclosing symbol)."""


class Acc:
    """What one pass over a symbol's nodes collects.

    ``mentions`` is None when they are not wanted: only test files' mentions are used (related
    tests), and collecting them is an eighth of the pass.
    """

    __slots__ = ("branches", "calls", "imports", "mentions")

    def __init__(self, mentions: bool = True) -> None:
        self.branches = 0
        self.calls: set[str] = set()
        self.mentions: set[str] | None = set() if mentions else None
        self.imports: list[ast.Import | ast.ImportFrom] = []


Append = Callable[[object], None]
Emitter = Callable[[ast.AST, Append, Acc, bool], None]
"""``emitter(node, append, acc, nested)``: append the node's tokens, record into ``acc``.

``nested`` is true inside a function or lambda nested in the symbol: its branches do not count
toward the symbol's complexity (McCabe counts functions separately), its names still do.
"""


def strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[1:]
    return body


def _node_classes() -> tuple[type[ast.AST], ...]:
    return tuple(
        cls
        for _, cls in sorted(vars(ast).items())
        if isinstance(cls, type) and issubclass(cls, ast.AST) and cls.__module__ == "ast"
    )


FIELDS: Mapping[type, tuple[str, ...]] = MappingProxyType(
    {
        cls: tuple(f for f in cls._fields if f not in ("ctx", "type_comment"))
        for cls in _node_classes()
    }
)
"""Each node class's fields that count for the normalised form (positions and ``ctx`` do not)."""

CODE: Mapping[type, int] = MappingProxyType({cls: -1 - n for n, cls in enumerate(FIELDS)})
"""A negative token per node class (list lengths and constants are never negative)."""

MARSHAL_VERSION = 2
"""Version 2 writes every string by value (3+ mark interned ones and share references, which
would make the bytes depend on object identity); so equal tokens always give equal bytes."""

CONSTANT = -1000
"""Token before a constant's value: tells ``'x'`` (a string) from ``x`` (a name)."""
NESTED = -1001
"""Token of a definition nested in a class body, followed by its type code and name."""


# -- generated emitters -----------------------------------------------------------------------
#
# Each field is read as an attribute and its value dispatched by the field's ASDL type, which
# the class docstring states (``Call(expr func, expr* args, keyword* keywords)``):
#
# * ``expr``: a name is its identifier (a mention unless it is a dunder), a constant is the
#   marker and its value, another node goes to its class's emitter; ``None`` (an absent
#   optional, a ``**`` key in a dict) is a token.
# * other node types: their emitter, called by name when the type has one class (``keyword``,
#   ``arguments``), through the table otherwise (``stmt``); classes without fields (operators)
#   are just their type code.
# * identifiers, ints, strings: the value is the token.
#
# ``*`` fields are a list: its length, then each item. A class whose docstring does not read as
# that (none in 3.11-3.13) gets the generic dispatch, which tests each value's type.

_NAME = """\
{v} = {v}.id
{mention}append({v})
"""
_MENTION_NAME = "if {v}[:2] != '__':\n    mentions.add({v})\n"

_EXPR = """\
kind = type({v})
if kind is Name:
{name}elif kind is Constant:
    append(CONSTANT)
    append({v}.value)
else:
    emitter = table_get(kind)
    if emitter is None:
        append({v})
    else:
        emitter({v}, append, acc, {nested})
"""

_GENERIC = """\
if type({v}) is list:
    append(len({v}))
    for item in {v}:
{item}else:
{value}"""

_RECORD: Mapping[type, str] = MappingProxyType(
    {
        ast.Call: """\
func = node.func
if type(func) is Name:
    if func.id[:2] != '__':
        acc.calls.add(func.id)
elif type(func) is Attribute and func.attr[:2] != '__':
    acc.calls.add(func.attr)
""",
        ast.Import: "acc.imports.append(node)\n",
        ast.ImportFrom: "acc.imports.append(node)\n",
        ast.BoolOp: "if not nested:\n    acc.branches += len(node.values) - 1\n",
        ast.comprehension: "if not nested:\n    acc.branches += 1 + len(node.ifs)\n",
        **{cls: "if not nested:\n    acc.branches += 1\n" for cls in BRANCHES},
    }
)
"""What the pass records for a node class, before its tokens."""

_MENTION_ATTRIBUTE = "if node.attr[:2] != '__':\n    mentions.add(node.attr)\n"

_SIGNATURE = re.compile(r"(\w+)\((.*)\)")
_FIELD = re.compile(r"(\w+)([*?]?) (\w+)")


def _field_types(cls: type) -> dict[str, tuple[str, str]] | None:
    """Field name -> (ASDL type, ``""``/``"?"``/``"*"``) from the class docstring, or None."""
    match = _SIGNATURE.fullmatch((cls.__doc__ or "").split("\n", 1)[0])
    if match is None or match[1] != cls.__name__:
        return None
    fields = [_FIELD.fullmatch(part.strip()) for part in match[2].split(",")]
    found = {f[3]: (f[1], f[2]) for f in fields if f is not None}
    return found if tuple(found) == getattr(cls, "_fields", ()) else None


def _indent(text: str, depth: int) -> str:
    return "".join(" " * depth + line + "\n" for line in text.splitlines())


def _visit(type_name: str, v: str, nested: str, mention: str) -> tuple[str, bool]:
    """The source that appends the tokens of variable ``v``, a value of ASDL type ``type_name``;
    and whether that source needs ``v`` to be a node (an optional one is tested for None first).
    """
    base = getattr(ast, type_name, None)
    if not (isinstance(base, type) and issubclass(base, ast.AST)):
        return f"append({v})\n", False  # identifier, int, string, constant
    members = base.__subclasses__()
    if base in FIELDS and not members:
        return f"emit_{type_name}({v}, append, acc, {nested})\n", True
    if members and not any(FIELDS.get(m) for m in members):
        return f"append(CODE_OF[type({v})])\n", True
    if issubclass(ast.Name, base):
        name = _NAME.format(v=v, mention=mention.format(v=v))
        return _EXPR.format(v=v, nested=nested, name=_indent(name, 4)), False
    return f"table[type({v})]({v}, append, acc, {nested})\n", True


def _emitter_source(cls: type, mentions: bool) -> str:
    """The source of ``cls``'s emitter (see the comment above and :data:`Emitter`)."""
    nested = "True" if cls in INNER else "nested"
    mention = _MENTION_NAME if mentions else ""
    types = _field_types(cls)
    body = _RECORD.get(cls, "")
    if mentions:
        body = "mentions = acc.mentions\n" + body
        if cls is ast.Attribute:
            body += _MENTION_ATTRIBUTE
    body += f"append({CODE[cls]})\n"
    for name in FIELDS[cls]:
        body += f"value = node.{name}\n"
        if cls in DEFS and name == "body":
            body += "value = strip_docstring(value)\n"
        if types is None:
            body += _GENERIC.format(
                v="value",
                item=_indent(_visit("expr", "item", nested, mention)[0], 8),
                value=_indent(_visit("expr", "value", nested, mention)[0], 4),
            )
            continue
        type_name, quantifier = types[name]
        if quantifier == "*":
            item, _ = _visit(type_name, "item", nested, mention)
            body += f"append(len(value))\nfor item in value:\n{_indent(item, 4)}"
            continue
        visit, node_only = _visit(type_name, "value", nested, mention)
        if quantifier == "?" and node_only:
            visit = f"if value is None:\n    append(None)\nelse:\n{_indent(visit, 4)}"
        body += visit
    return f"def emit_{cls.__name__}(node, append, acc, nested):\n{_indent(body, 4)}"


def _emitters(mentions: bool) -> Mapping[type, Emitter]:
    table: dict[type, Emitter] = {}
    scope = {
        "Name": ast.Name,
        "Constant": ast.Constant,
        "Attribute": ast.Attribute,
        "CONSTANT": CONSTANT,
        "strip_docstring": strip_docstring,
        "table": table,
        "table_get": table.get,
        "CODE_OF": dict(CODE),
    }
    for cls in FIELDS:
        exec(_emitter_source(cls, mentions), scope)
        table[cls] = scope[f"emit_{cls.__name__}"]  # type: ignore[assignment]
    return MappingProxyType(table)


@functools.cache
def emitter_table(mentions: bool) -> Mapping[type, Emitter]:
    """Every node class's emitter, collecting mentioned names and attributes into
    ``acc.mentions`` or not; generated on first use (about 13 ms each), so importing the hub's
    client or daemon modules does not pay for it.
    """
    return _emitters(mentions)


def emitters(acc: Acc) -> Mapping[type, Emitter]:
    """The table for ``acc``: with mention collection exactly when it wants mentions."""
    return emitter_table(acc.mentions is not None)


def emit_value(value: object, append: Append, acc: Acc) -> None:
    """Append the tokens of a field value: a node, a list of values, ``None`` or a primitive.

    For the few values a symbol's header has (its arguments, bases, decorators, its body as a
    list), not per node; the nodes inside go through the emitters.
    """
    kind = type(value)
    if kind is list:
        append(len(value))  # type: ignore[arg-type]
        for item in value:  # type: ignore[attr-defined]
            emit_value(item, append, acc)
    elif kind is ast.Name:
        name = value.id  # type: ignore[attr-defined]
        if acc.mentions is not None and name[:2] != "__":
            acc.mentions.add(name)
        append(name)
    elif kind is ast.Constant:
        append(CONSTANT)
        append(value.value)  # type: ignore[attr-defined]
    elif kind in FIELDS:
        emitters(acc)[kind](value, append, acc, False)  # type: ignore[arg-type]
    else:
        append(value)
