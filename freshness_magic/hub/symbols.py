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
import codecs
import io
import marshal
import re
import tokenize
from dataclasses import dataclass, field
from inspect import cleandoc
from typing import NamedTuple

from freshness_magic.freshness.hashing import hash_bytes
from freshness_magic.hub.astform import (
    CODE,
    DEFS,
    MARSHAL_VERSION,
    NESTED,
    Acc,
    emit_value,
    emitter_table,
    emitters,
    strip_docstring,
)

DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    """Where a file stopped parsing (1-based line, 0-based column as Python reports it)."""

    line: int
    column: int
    message: str


class Symbol(NamedTuple):
    """One function, class or method with the fingerprints the rules compare.

    A named tuple: a cold index makes one per definition (57k for the standard library), and
    the indexer takes the stored columns as one slice (:meth:`columns`).
    """

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

    def columns(self) -> tuple[str | int, ...]:
        """The fields the ``symbols`` table stores as they are, ``kind`` to ``complexity``."""
        return self[1:10]


@dataclass(frozen=True, slots=True)
class ModuleInfo:
    """What one Python file defines, imports, calls and mentions."""

    symbols: tuple[Symbol, ...]
    imports: tuple[str, ...]
    module_calls: frozenset[str] = field(default_factory=frozenset)
    module_mentions: frozenset[str] = field(default_factory=frozenset)


def parse_python(
    source: bytes, *, module: str = "", is_package: bool = False, mentions: bool = True
) -> ModuleInfo | SyntaxProblem:
    """Extract symbols from ``source``; a file that does not parse gives a :class:`SyntaxProblem`.

    ``module`` is the file's dotted module name inside the tree and ``is_package`` says whether
    it is a package's ``__init__``; both resolve relative imports. Without ``mentions`` the
    mentioned names are not collected (``mentions`` and ``module_mentions`` stay empty): the
    hub uses them for test files only.
    Each AST node is visited once: the same pass builds the normalised text, the branch count,
    the called and mentioned names and the imports.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return SyntaxProblem(exc.lineno or 1, max((exc.offset or 1) - 1, 0), exc.msg)
    except (ValueError, UnicodeDecodeError) as exc:
        return SyntaxProblem(1, 0, str(exc))
    extractor = _Extractor(_utf8_lines(source), mentions)
    top = Acc(mentions)
    table = emitters(top)
    scratch: list[object] = []
    append = scratch.append
    for stmt in tree.body:
        cls = type(stmt)
        if cls in DEFS:
            extractor.definition(stmt, "")  # type: ignore[arg-type]
        else:
            table[cls](stmt, append, top, False)
            scratch.clear()
    imports: set[str] = set()
    package = module if is_package else _parent(module)
    for acc_imports in (top.imports, *extractor.imports):
        if acc_imports:
            imports |= _resolve_imports(acc_imports, package)
    return ModuleInfo(
        symbols=tuple(extractor.symbols),
        imports=tuple(sorted(imports)),
        module_calls=frozenset(top.calls),
        module_mentions=_mentioned(top),
    )


def _mentioned(acc: Acc) -> frozenset[str]:
    return frozenset() if acc.mentions is None else frozenset(acc.mentions | acc.calls)


def _utf8_lines(source: bytes) -> list[bytes]:
    """The source's lines as UTF-8 bytes: the byte columns ``ast`` reports index them directly.

    Split at ``\n`` only, as ``ast`` counts lines (``splitlines`` would also split at form
    feeds). A file in another encoding (a PEP 263 cookie in its first two lines) is re-encoded;
    the others, already UTF-8 because they parsed, are only split.
    """
    if source.startswith(codecs.BOM_UTF8):
        source = source[len(codecs.BOM_UTF8) :]
    first = source.find(b"\n")
    second = source.find(b"\n", first + 1) if first >= 0 else -1
    if source.find(b"coding", 0, len(source) if second < 0 else second) >= 0:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        except SyntaxError:
            encoding = "utf-8"
        if codecs.lookup(encoding).name != "utf-8":
            source = source.decode(encoding, errors="replace").encode("utf-8")
    return source.split(b"\n")


class _Extractor:
    def __init__(self, lines: list[bytes], mentions: bool) -> None:
        self.lines = lines
        self.mentions = mentions
        self.table = emitter_table(mentions)
        self.symbols: list[Symbol] = []
        self.imports: list[list[ast.Import | ast.ImportFrom]] = []

    def definition(self, node: DefNode, prefix: str) -> Symbol:
        """Add the symbol for ``node`` (and, for a class, its nested ones); returns it.

        ``prefix`` is the enclosing class's qualname plus a dot, empty at module level. The
        nodes of a class's nested definitions are visited by their own symbols only; a class's
        body tokens name them (``NESTED``, type code, name) without their content.
        """
        qualname = prefix + node.name
        acc = Acc(self.mentions)
        table = self.table
        index = len(self.symbols)
        self.symbols.append(_PLACEHOLDER)
        cls = type(node)
        sig: list[object] = [CODE[cls]]
        put = sig.append
        body: list[object] = []
        add = body.append
        statements = strip_docstring(node.body)
        add(len(statements))
        if cls is ast.ClassDef:
            kind = "class"
            for part in (node.bases, node.keywords, node.decorator_list):  # type: ignore[union-attr]
                emit_value(part, put, acc)
            complexity = 0
            for stmt in statements:
                stmt_cls = type(stmt)
                if stmt_cls in DEFS:
                    child = self.definition(stmt, qualname + ".")  # type: ignore[arg-type]
                    body += (NESTED, CODE[stmt_cls], stmt.name)  # type: ignore[attr-defined]
                    if child.kind == "method":
                        complexity += child.complexity
                else:
                    table[stmt_cls](stmt, add, acc, False)
            complexity = max(complexity, 1)
        else:
            kind = "method" if prefix else "function"
            table[ast.arguments](node.args, put, acc, False)  # type: ignore[union-attr]
            emit_value(node.returns, put, acc)  # type: ignore[union-attr]
            emit_value(node.decorator_list, put, acc)
            for stmt in statements:
                table[type(stmt)](stmt, add, acc, False)
            complexity = 1 + acc.branches
        if acc.imports:
            self.imports.append(acc.imports)
        doc_hash = ""
        if len(statements) < len(node.body):  # the first statement was the docstring
            doc = cleandoc(node.body[0].value.value)  # type: ignore[attr-defined]
            doc_hash = hash_bytes(doc.encode(errors="surrogatepass"))
        sig_hash = hash_bytes(marshal.dumps(sig, MARSHAL_VERSION))
        body_hash = hash_bytes(marshal.dumps(body, MARSHAL_VERSION))
        symbol = Symbol(
            qualname,
            kind,
            _signature_text(node, self.lines),
            sig_hash,
            body_hash,
            hash_bytes(f"{sig_hash} {body_hash}".encode()),
            doc_hash,
            node.lineno,
            node.end_lineno or node.lineno,
            complexity,
            frozenset(acc.calls),
            _mentioned(acc),
        )
        self.symbols[index] = symbol
        return symbol


_PLACEHOLDER = Symbol("", "", "", "", "", "", "", 0, 0, 0, frozenset(), frozenset())


def _signature_text(node: DefNode, lines: list[bytes]) -> str:
    """The header as written: from ``def``/``class`` to its colon (decorators excluded)."""
    first = node.body[0]
    start, end = node.lineno - 1, first.lineno - 1
    if start < end:
        # The usual header, a line ending in its only colon with no strings or comments: the
        # colon ends it when the brackets before it are balanced (what the scan would find).
        text = lines[start][node.col_offset :].rstrip().decode("utf-8", errors="replace")
        if (
            text[-1:] == ":"
            and text.count(":") == 1
            and "'" not in text
            and '"' not in text
            and "#" not in text
            and text.count("(") == text.count(")")
            and text.count("[") == text.count("]")
            and text.count("{") == text.count("}")
        ):
            return text
    if start == end:
        raw = lines[end][node.col_offset : first.col_offset]
    else:
        head, tail = lines[start][node.col_offset :], lines[end][: first.col_offset]
        raw = b"\n".join((head, *lines[start + 1 : end], tail))
    segment = raw.decode("utf-8", errors="replace")
    cut = _header_colon(segment)
    return segment[: cut + 1] if cut >= 0 else segment.rstrip()


_HEADER_STOPS = re.compile(r"""[][(){}:#'"]""")


def _header_colon(segment: str) -> int:
    """Index of the first ``:`` at bracket depth 0 outside strings and comments, or -1.

    A regex jumps to the next bracket, colon, comment or quote, so plain text costs nothing.
    """
    depth = 0
    n = len(segment)
    search = _HEADER_STOPS.search
    found = search(segment)
    while found is not None:
        i = found.start()
        ch = segment[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ":":
            if depth == 0:
                return i
        elif ch == "#":
            newline = segment.find("\n", i)
            if newline < 0:
                return -1
            i = newline - 1
        else:
            quote = segment[i : i + 3] if segment[i : i + 3] in ("'''", '"""') else ch
            i += len(quote)
            while i < n and not segment.startswith(quote, i):
                i += 2 if segment[i] == "\\" else 1
            i += len(quote) - 1
        found = search(segment, i + 1)
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
