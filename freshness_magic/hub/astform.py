"""The normalised form of a Python AST that the hub's symbol hashes cover, built in one pass.

:func:`emit` appends a node's tokens in pre-order: a negative type code per node, the length of
every list, names and other primitives as they are, and constants after a marker. Positions,
``ctx``, type comments and the docstrings of nested definitions are left out, so formatting,
comments and moving code never change the tokens. Given each class's fields the sequence
decodes to exactly one tree, so equal hashes mean equal trees. The same pass records what the
hub's rules need: called and mentioned names, imports, and the branch count (complexity).

Every node costs one call; names and constants (half of all nodes) are handled inline. No text
is built per node: the tokens of a symbol are serialised once (``marshal`` version 2).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

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

SPEC: Mapping[type, tuple[int, tuple[str, ...], bool, bool]] = MappingProxyType(
    {cls: (CODE[cls], FIELDS[cls], cls in DEFS, cls in INNER) for cls in FIELDS}
)
"""Per node class, what :func:`emit` needs in one lookup: code, fields, is a def, opens a scope."""

NOTABLE = frozenset(
    (ast.Call, ast.Attribute, ast.Import, ast.ImportFrom, ast.BoolOp, ast.comprehension, *BRANCHES)
)
"""Node classes the single pass records something for (calls, names, imports, branches)."""
BRANCH_TYPES = frozenset(BRANCHES)


# Module-level names for the classes the walk tests by identity: one lookup instead of two.
_Name, _Constant, _Attribute, _Call = ast.Name, ast.Constant, ast.Attribute, ast.Call
_Import, _ImportFrom, _BoolOp, _comprehension = (
    ast.Import,
    ast.ImportFrom,
    ast.BoolOp,
    ast.comprehension,
)


def emit_value(value: object, out: list[object], acc: Acc, nested: bool) -> None:
    """Append the tokens of a field value: a node, a list of values, ``None`` or a primitive."""
    cls = type(value)
    if cls is list:
        out.append(len(value))  # type: ignore[arg-type]
        for item in value:  # type: ignore[attr-defined]
            emit_value(item, out, acc, nested)
    elif cls is _Name:
        name = value.id  # type: ignore[attr-defined]
        if acc.mentions is not None and name[:2] != "__":
            acc.mentions.add(name)
        out.append(name)
    elif cls is _Constant:
        out += (CONSTANT, value.value)  # type: ignore[attr-defined]
    elif cls in SPEC:
        emit(value, cls, out, acc, nested)  # type: ignore[arg-type]
    else:
        out.append(value)


def emit(node: ast.AST, cls: type, out: list[object], acc: Acc, nested: bool) -> None:
    """Append the tokens of ``node`` in pre-order and record its calls, names and branches.

    The tokens are the normalised form that the hashes cover: a type code per node, the
    length of every list, names and other primitives as they are, constants after a marker;
    no positions, no ``ctx``, no docstrings of nested definitions. Given each class's fields
    the sequence decodes to exactly one tree, so equal hashes mean equal trees.

    ``nested`` is true inside a function or lambda nested in the symbol: its branches do not
    count toward the symbol's complexity (McCabe counts functions separately), its names still
    do. Dunder names are not recorded as calls or mentions (``super().__init__()`` says nothing
    useful). Names and constants are handled inline: they are half of all nodes.
    """
    mentions = acc.mentions
    if cls in NOTABLE:
        if cls is _Call:
            func = node.func  # type: ignore[attr-defined]
            if type(func) is _Name:
                if func.id[:2] != "__":
                    acc.calls.add(func.id)
            elif type(func) is _Attribute and func.attr[:2] != "__":
                acc.calls.add(func.attr)
        elif cls is _Attribute:
            if mentions is not None and node.attr[:2] != "__":  # type: ignore[attr-defined]
                mentions.add(node.attr)  # type: ignore[attr-defined]
        elif cls is _Import or cls is _ImportFrom:
            acc.imports.append(node)  # type: ignore[arg-type]
        elif nested:
            pass
        elif cls is _BoolOp:
            acc.branches += len(node.values) - 1  # type: ignore[attr-defined]
        elif cls is _comprehension:
            acc.branches += 1 + len(node.ifs)  # type: ignore[attr-defined]
        else:
            acc.branches += 1
    code, fields, is_def, inner = SPEC[cls]
    inner = nested or inner
    append = out.append
    append(code)
    for field_name in fields:
        item: Any = getattr(node, field_name, None)
        kind = type(item)
        if kind is list:
            if is_def and field_name == "body":
                item = strip_docstring(item)
            append(len(item))
            for sub in item:
                kind = type(sub)
                if kind is _Name:
                    name = sub.id
                    if mentions is not None and name[:2] != "__":
                        mentions.add(name)
                    append(name)
                elif kind is _Constant:
                    out += (CONSTANT, sub.value)
                elif kind in SPEC:
                    emit(sub, kind, out, acc, inner)
                else:
                    append(sub)
        elif kind is _Name:
            name = item.id
            if mentions is not None and name[:2] != "__":
                mentions.add(name)
            append(name)
        elif kind is _Constant:
            out += (CONSTANT, item.value)
        elif kind in SPEC:
            emit(item, kind, out, acc, inner)
        else:
            append(item)
