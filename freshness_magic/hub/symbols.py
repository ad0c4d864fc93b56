"""Python symbol extraction for the hub: functions, classes and methods from one source file.

Everything here is a pure function of the file's bytes, so the same content always gives the same
symbols and hashes. Hashes are computed from a normalised AST (no positions, no docstrings), so
comments and formatting never count as a change.

Scope and limits (documented, deliberate):

* Symbols are module-level functions and classes, and the functions and classes nested in classes
  (methods, nested classes), with dotted qualnames (``Outer.Inner.method``). Functions defined
  inside functions are part of their enclosing function's body and are not separate symbols.
* A class's body hash covers its own statements; nested definitions count only by name, so
  editing a method reports that method's change and not also the class's.
* Calls and mentions are recorded by bare name (``f(...)`` and ``obj.f(...)`` both call ``f``);
  resolving them to a definition is name based (see :mod:`freshness_magic.hub.rules`).
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass, field

from freshness_magic.freshness.hashing import hash_bytes

DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef

_BRANCHES = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.IfExp,
    ast.ExceptHandler,
    ast.Assert,
    ast.match_case,
)


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    """Where a file stopped parsing (1-based line, 0-based column as Python reports it)."""

    line: int
    column: int
    message: str


@dataclass(frozen=True, slots=True)
class Symbol:
    """One function, class or method with the fingerprints the rules compare."""

    qualname: str
    kind: str
    signature: str
    sig_hash: str
    body_hash: str
    ast_hash: str
    doc_hash: str
    line_start: int
    line_end: int
    complexity: int
    calls: frozenset[str]
    mentions: frozenset[str]


@dataclass(frozen=True, slots=True)
class ModuleInfo:
    """What one Python file defines, imports, calls and mentions."""

    symbols: tuple[Symbol, ...]
    imports: tuple[str, ...]
    module_calls: frozenset[str] = field(default_factory=frozenset)
    module_mentions: frozenset[str] = field(default_factory=frozenset)


def parse_python(
    source: bytes, *, module: str = "", is_package: bool = False
) -> ModuleInfo | SyntaxProblem:
    """Extract symbols from ``source``; a file that does not parse gives a :class:`SyntaxProblem`.

    ``module`` is the file's dotted module name inside the tree and ``is_package`` says whether
    it is a package's ``__init__``; both resolve relative imports.
    Each AST node is visited once: the same pass builds the normalised text, the branch count,
    the called and mentioned names and the imports.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return SyntaxProblem(exc.lineno or 1, max((exc.offset or 1) - 1, 0), exc.msg)
    except (ValueError, UnicodeDecodeError) as exc:
        return SyntaxProblem(1, 0, str(exc))
    text = _decode(source)
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    extractor = _Extractor(text, offsets)
    top = _Acc()
    for stmt in tree.body:
        if isinstance(stmt, _DEFS):
            extractor.definition(stmt, "")
        else:
            _visit(stmt, top, False)
    imports: set[str] = set()
    for acc_imports in (top.imports, *extractor.imports):
        imports |= _resolve_imports(acc_imports, module if is_package else _parent(module))
    return ModuleInfo(
        symbols=tuple(extractor.symbols),
        imports=tuple(sorted(imports)),
        module_calls=frozenset(top.calls),
        module_mentions=frozenset(top.mentions | top.calls),
    )


def _decode(source: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError:
        encoding = "utf-8"
    return source.decode(encoding, errors="replace")


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


class _Acc:
    """What one pass over a symbol's nodes collects."""

    __slots__ = ("branches", "calls", "imports", "mentions")

    def __init__(self) -> None:
        self.branches = 0
        self.calls: set[str] = set()
        self.mentions: set[str] = set()
        self.imports: list[ast.Import | ast.ImportFrom] = []


class _Extractor:
    def __init__(self, text: str, offsets: list[int]) -> None:
        self.text = text
        self.offsets = offsets
        self.symbols: list[Symbol] = []
        self.imports: list[list[ast.Import | ast.ImportFrom]] = []

    def definition(self, node: DefNode, prefix: str) -> Symbol:
        """Add the symbol for ``node`` (and, for a class, its nested ones); returns it.

        ``prefix`` is the enclosing class's qualname plus a dot, empty at module level.
        """
        qualname = prefix + node.name
        acc = _Acc()
        index = len(self.symbols)
        self.symbols.append(_PLACEHOLDER)
        if isinstance(node, ast.ClassDef):
            kind = "class"
            header = [node.bases, node.keywords, node.decorator_list]
            sig_norm = "class " + _visit(header, acc, False)
            parts = []
            complexity = 0
            for stmt in _strip_docstring(node.body):
                if isinstance(stmt, _DEFS):
                    child = self.definition(stmt, qualname + ".")
                    parts.append(f"<{type(stmt).__name__} {stmt.name}>")
                    if child.kind == "method":
                        complexity += child.complexity
                else:
                    parts.append(_visit(stmt, acc, False))
            body_norm = "[" + ",".join(parts) + "]"
            complexity = max(complexity, 1)
        else:
            kind = "method" if prefix else "function"
            sig_norm = f"{type(node).__name__} " + _visit(
                [node.args, node.returns, node.decorator_list], acc, False
            )
            body_norm = _visit(_strip_docstring(node.body), acc, False)
            complexity = 1 + acc.branches
        self.imports.append(acc.imports)
        doc = ast.get_docstring(node, clean=True)
        symbol = Symbol(
            qualname=qualname,
            kind=kind,
            signature=_signature_text(node, self.text, self.offsets),
            sig_hash=hash_bytes(sig_norm.encode()),
            body_hash=hash_bytes(body_norm.encode()),
            ast_hash=hash_bytes((sig_norm + "\n" + body_norm).encode()),
            doc_hash=hash_bytes(doc.encode()) if doc is not None else "",
            line_start=node.lineno,
            line_end=node.end_lineno or node.lineno,
            complexity=complexity,
            calls=frozenset(acc.calls),
            mentions=frozenset(acc.mentions | acc.calls),
        )
        self.symbols[index] = symbol
        return symbol


def _strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[1:]
    return body


_BRANCH_TYPES = frozenset(_BRANCHES)
_PLACEHOLDER = Symbol("", "", "", "", "", "", "", 0, 0, 0, frozenset(), frozenset())


def _visit(value: object, acc: _Acc, nested: bool) -> str:
    """Canonical text of an AST (no positions, ``ctx`` or docstrings), collecting into ``acc``.

    ``nested`` is true inside a function nested in the symbol: its branches do not count toward
    the symbol's complexity (McCabe counts functions separately), its names still do. Dunder
    names are not recorded as calls or mentions (``super().__init__()`` says nothing useful).
    """
    cls = type(value)
    if cls is list:
        if not value:
            return "[]"
        return "[" + ",".join([_visit(item, acc, nested) for item in value]) + "]"  # type: ignore[attr-defined]
    if cls is ast.Name:
        name = value.id  # type: ignore[attr-defined]
        if name[:2] != "__":
            acc.mentions.add(name)
        return "(N " + name + ")"
    if cls is ast.Constant:
        return "(C " + repr(value.value) + ")"  # type: ignore[attr-defined]
    if not isinstance(value, ast.AST):
        return repr(value)
    if cls is ast.Call:
        func = value.func  # type: ignore[attr-defined]
        if type(func) is ast.Name:
            if func.id[:2] != "__":
                acc.calls.add(func.id)
        elif type(func) is ast.Attribute and func.attr[:2] != "__":
            acc.calls.add(func.attr)
    elif cls is ast.Attribute:
        if value.attr[:2] != "__":  # type: ignore[attr-defined]
            acc.mentions.add(value.attr)  # type: ignore[attr-defined]
    elif cls is ast.Import or cls is ast.ImportFrom:
        acc.imports.append(value)  # type: ignore[arg-type]
    elif cls is ast.BoolOp:
        if not nested:
            acc.branches += len(value.values) - 1  # type: ignore[attr-defined]
    elif cls is ast.comprehension:
        if not nested:
            acc.branches += 1 + len(value.ifs)  # type: ignore[attr-defined]
    elif cls in _BRANCH_TYPES and not nested:
        acc.branches += 1
    inner = nested or cls in _DEFS or cls is ast.Lambda
    parts = [cls.__name__]
    for name in value._fields:
        if name == "ctx" or name == "type_comment":
            continue
        item = getattr(value, name, None)
        if item is None:
            parts.append("-")
        elif name == "body" and cls in _DEFS:
            parts.append(_visit(_strip_docstring(item), acc, inner))
        else:
            parts.append(_visit(item, acc, inner))
    return "(" + " ".join(parts) + ")"


def _signature_text(node: DefNode, text: str, offsets: list[int]) -> str:
    """The header as written: from ``def``/``class`` to its colon (decorators excluded)."""
    start = offsets[node.lineno - 1] + _char_col(text, offsets[node.lineno - 1], node.col_offset)
    first = node.body[0]
    end = offsets[first.lineno - 1] + _char_col(text, offsets[first.lineno - 1], first.col_offset)
    segment = text[start:end]
    cut = _header_colon(segment)
    return segment[: cut + 1] if cut >= 0 else segment.rstrip()


def _char_col(text: str, line_start: int, byte_col: int) -> int:
    """Convert a UTF-8 byte column (what ``ast`` reports) to a character column."""
    line_end = text.find("\n", line_start)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    if line.isascii():
        return byte_col
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _header_colon(segment: str) -> int:
    """Index of the first ``:`` at bracket depth 0 outside strings and comments, or -1."""
    depth = 0
    i = 0
    n = len(segment)
    while i < n:
        ch = segment[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "#":
            newline = segment.find("\n", i)
            i = n if newline < 0 else newline
            continue
        elif ch in "'\"":
            quote = segment[i : i + 3] if segment[i : i + 3] in ("'''", '"""') else ch
            i += len(quote)
            while i < n and not segment.startswith(quote, i):
                i += 2 if segment[i] == "\\" else 1
            i += len(quote)
            continue
        elif ch == ":" and depth == 0:
            return i
        i += 1
    return -1


def _parent(module: str) -> str:
    return module.rsplit(".", 1)[0] if "." in module else ""


def _resolve_imports(nodes: list[ast.Import | ast.ImportFrom], package: str) -> set[str]:
    """Dotted names imported: ``import a.b`` -> a.b; ``from a import b`` -> a and a.b.

    Relative imports are resolved against ``package``, the package the importing module is in.
    """
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".") if package else []
            keep = len(parts) - (node.level - 1)
            prefix = ".".join(parts[: max(keep, 0)])
            base = ".".join(p for p in (prefix, base) if p)
        if base:
            found.add(base)
        for alias in node.names:
            if alias.name != "*":
                found.add(f"{base}.{alias.name}" if base else alias.name)
    return found


def module_name(path: str) -> str:
    """Dotted module name of a tree-relative ``.py`` path (``src/pkg/__init__.py`` -> src.pkg)."""
    stem = path[:-3] if path.endswith(".py") else path
    parts = [p for p in stem.split("/") if p]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_suffixes(path: str) -> set[str]:
    """Every dotted tail of a module name: src.pkg.auth -> {auth, pkg.auth, src.pkg.auth}.

    Any of them may be how other files import the module, depending on which folder is on
    ``sys.path``; the hub does not know, so it accepts all of them.
    """
    parts = module_name(path).split(".")
    return {".".join(parts[i:]) for i in range(len(parts)) if parts[i:]}


def is_test_file(path: str) -> bool:
    """``test_*.py`` or ``*_test.py`` (the pytest defaults)."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
