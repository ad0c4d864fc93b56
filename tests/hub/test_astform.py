"""The generated AST emitters against a plain reading of the token form, on real stdlib code."""

from __future__ import annotations

import ast
import codecs
from pathlib import Path

from freshness_magic.hub.astform import (
    BRANCHES,
    CODE,
    CONSTANT,
    DEFS,
    FIELDS,
    INNER,
    Acc,
    emitters,
    strip_docstring,
)
from freshness_magic.hub.symbols import ModuleInfo, parse_python

from .conftest import STDLIB


def reference_tokens(node: object, out: list[object], acc: Acc, nested: bool) -> None:
    """The token form as the astform module doc states it, one field at a time with getattr."""
    if isinstance(node, list):
        out.append(len(node))
        for item in node:
            reference_tokens(item, out, acc, nested)
        return
    if isinstance(node, ast.Name):
        if acc.mentions is not None and not node.id.startswith("__"):
            acc.mentions.add(node.id)
        out.append(node.id)
        return
    if isinstance(node, ast.Constant):
        out += [CONSTANT, node.value]
        return
    if not isinstance(node, ast.AST):
        out.append(node)
        return
    cls = type(node)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "__")
        if not name.startswith("__"):
            acc.calls.add(name)
    elif isinstance(node, ast.Attribute):
        if acc.mentions is not None and not node.attr.startswith("__"):
            acc.mentions.add(node.attr)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        acc.imports.append(node)
    elif not nested and isinstance(node, ast.BoolOp):
        acc.branches += len(node.values) - 1
    elif not nested and isinstance(node, ast.comprehension):
        acc.branches += 1 + len(node.ifs)
    elif not nested and isinstance(node, BRANCHES):
        acc.branches += 1
    out.append(CODE[cls])
    for name in FIELDS[cls]:
        value = getattr(node, name)
        if cls in DEFS and name == "body":
            value = strip_docstring(value)
        reference_tokens(value, out, acc, nested or cls in INNER)


def test_generated_emitters_give_the_documented_tokens_on_the_stdlib() -> None:
    names = ("argparse.py", "dataclasses.py", "ast.py", "typing.py", "json/decoder.py")
    sources = [STDLIB / name for name in names] + [STDLIB / "test" / "test_grammar.py"]
    checked = 0
    for path in sources:
        if not path.exists():  # a Python installed without its test suite
            continue
        tree = ast.parse(path.read_bytes())
        for mentions in (False, True):
            ours, theirs = Acc(mentions), Acc(mentions)
            got: list[object] = []
            expected: list[object] = []
            table = emitters(ours)
            for stmt in tree.body:
                table[type(stmt)](stmt, got.append, ours, False)
                reference_tokens(stmt, expected, theirs, False)
            assert got == expected, path
            assert (ours.branches, ours.calls, ours.mentions) == (
                theirs.branches,
                theirs.calls,
                theirs.mentions,
            )
            assert ours.imports == theirs.imports
            checked += 1
    assert checked >= 10


def test_optional_and_list_fields_with_none_and_operators() -> None:
    source = (
        "def f(a, /, b=1, *args, c, d=None, **kw) -> int:\n"
        "    x = {**kw, 'k': a if b else -c}\n"
        "    try:\n        pass\n    except:\n        raise\n"
        "    match x:\n        case {'k': [1, *rest]} if rest: return 1\n"
        "        case Point(x=0) | None: return 2\n"
        "        case _: return a < b <= c is not d\n"
        "    global g\n    return lambda: (yield from g)\n"
    )
    tree = ast.parse(source)
    acc, ref = Acc(True), Acc(True)
    got: list[object] = []
    expected: list[object] = []
    emitters(acc)[ast.FunctionDef](tree.body[0], got.append, acc, False)
    reference_tokens(tree.body[0], expected, ref, False)
    assert got == expected
    assert None in got


def test_header_fast_path_and_scanned_headers_agree() -> None:
    source = (
        "class A(B, metaclass=M):\n    pass\n"
        "def one(a, b=(1, 2)):\n    pass\n"
        "def two(a: int, b: 'x:y' = {}) -> dict[str, int]:\n    pass\n"
        "def three(a,  # comment: with a colon\n          b):\n    pass\n"
        "def four(a=lambda: 1):\n    pass\n"
        "def five(a): return a\n"
        "async def six(\n    a,\n) -> None:\n    pass\n"
    )
    info = parse_python(source.encode())
    assert isinstance(info, ModuleInfo)
    assert [s.signature for s in info.symbols] == [
        "class A(B, metaclass=M):",
        "def one(a, b=(1, 2)):",
        "def two(a: int, b: 'x:y' = {}) -> dict[str, int]:",
        "def three(a,  # comment: with a colon\n          b):",
        "def four(a=lambda: 1):",
        "def five(a):",
        "async def six(\n    a,\n) -> None:",
    ]


def test_signatures_of_files_in_other_encodings_and_with_a_bom(tmp_path: Path) -> None:
    latin = (
        "# -*- coding: latin-1 -*-\nx = 'é'\ndef café(é='ü'): \n    return é\ndef ö(ü):\n  pass\n"
    )
    utf8 = "def naïve(ä: 'ö' = 1):\n    return ä\nclass Ü(Ä):\n    pass\n"
    for data, expected in (
        (latin.encode("latin-1"), ["def café(é='ü'):", "def ö(ü):"]),
        (codecs.BOM_UTF8 + utf8.encode(), ["def naïve(ä: 'ö' = 1):", "class Ü(Ä):"]),
        (utf8.encode(), ["def naïve(ä: 'ö' = 1):", "class Ü(Ä):"]),
    ):
        path = tmp_path / "mod.py"
        path.write_bytes(data)
        info = parse_python(path.read_bytes())
        assert isinstance(info, ModuleInfo)
        assert [s.signature for s in info.symbols] == expected
