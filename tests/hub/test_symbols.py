"""Symbol extraction on real standard-library code, normalisation, syntax errors, ignore rules."""

from __future__ import annotations

import shutil
from pathlib import Path

from freshness_magic.hub.ignore import IgnoreRules, parse_gitignore
from freshness_magic.hub.symbols import (
    ModuleInfo,
    SyntaxProblem,
    is_test_file,
    module_suffixes,
    parse_python,
)

from .conftest import STDLIB


def _parse(path: Path, module: str) -> ModuleInfo:
    info = parse_python(path.read_bytes(), module=module)
    assert isinstance(info, ModuleInfo)
    return info


def test_stdlib_json_decoder_symbols(tmp_path: Path) -> None:
    copy = tmp_path / "json"
    shutil.copytree(STDLIB / "json", copy)
    info = _parse(copy / "decoder.py", "json.decoder")
    by_name = {s.qualname: s for s in info.symbols}
    decode = by_name["JSONDecoder.decode"]
    assert decode.kind == "method"
    assert decode.signature == "def decode(self, s, _w=WHITESPACE.match):"
    assert by_name["JSONDecoder"].kind == "class"
    assert by_name["py_scanstring"].kind == "function"
    assert "\n" in by_name["py_scanstring"].signature
    assert by_name["py_scanstring"].signature.endswith("_m=STRINGCHUNK.match):")
    assert by_name["JSONObject"].complexity > 10
    assert decode.line_start < decode.line_end
    assert "raw_decode" in decode.calls
    assert "re" in info.imports and "json.scanner" in info.imports
    init = parse_python((copy / "__init__.py").read_bytes(), module="json", is_package=True)
    assert isinstance(init, ModuleInfo)
    assert "json.decoder.JSONDecoder" in init.imports
    assert "json.encoder" in init.imports


def test_stdlib_textwrap_qualnames_and_complexity() -> None:
    info = _parse(STDLIB / "textwrap.py", "textwrap")
    names = [s.qualname for s in info.symbols]
    assert "TextWrapper._wrap_chunks" in names
    assert "TextWrapper.wrap" in names and "wrap" in names and "dedent" in names
    by_name = {s.qualname: s for s in info.symbols}
    assert by_name["TextWrapper._wrap_chunks"].complexity > by_name["TextWrapper.wrap"].complexity
    cls = by_name["TextWrapper"]
    methods = [s for s in info.symbols if s.qualname.startswith("TextWrapper.")]
    assert cls.complexity == sum(m.complexity for m in methods)


def test_whole_stdlib_sample_parses_consistently() -> None:
    for name in ("argparse.py", "pathlib.py", "dataclasses.py", "ast.py", "shutil.py"):
        source = (STDLIB / name).read_bytes()
        first = parse_python(source, module=name[:-3])
        second = parse_python(source, module=name[:-3])
        assert isinstance(first, ModuleInfo) and first == second
        assert len({s.qualname for s in first.symbols}) == len(first.symbols)


def test_formatting_and_comments_do_not_change_hashes() -> None:
    a = parse_python(b"def f(a, b=1):\n    return a+b\n")
    b = parse_python(
        b"def f(a,\n      b = 1):  # comment\n    # inside\n    return (a +\n            b)\n"
    )
    assert isinstance(a, ModuleInfo) and isinstance(b, ModuleInfo)
    assert a.symbols[0].ast_hash == b.symbols[0].ast_hash
    assert a.symbols[0].signature != b.symbols[0].signature
    assert b.symbols[0].signature == "def f(a,\n      b = 1):"


def test_docstring_is_hashed_apart_from_body() -> None:
    a = parse_python(b'def f():\n    """One."""\n    return 1\n')
    b = parse_python(b'def f():\n    """Two."""\n    return 1\n')
    c = parse_python(b'def f():\n    """Two."""\n    return 2\n')
    assert isinstance(a, ModuleInfo) and isinstance(b, ModuleInfo) and isinstance(c, ModuleInfo)
    sa, sb, sc = a.symbols[0], b.symbols[0], c.symbols[0]
    assert sa.doc_hash != sb.doc_hash
    assert sa.body_hash == sb.body_hash and sa.ast_hash == sb.ast_hash
    assert sb.body_hash != sc.body_hash
    assert sa.sig_hash == sc.sig_hash


def test_method_change_is_not_a_class_body_change() -> None:
    a = parse_python(b"class A:\n    x = 1\n    def m(self):\n        return 1\n")
    b = parse_python(b"class A:\n    x = 1\n    def m(self):\n        return 2\n")
    assert isinstance(a, ModuleInfo) and isinstance(b, ModuleInfo)
    assert a.symbols[0].body_hash == b.symbols[0].body_hash
    assert a.symbols[1].body_hash != b.symbols[1].body_hash


def test_signature_with_strings_and_annotations() -> None:
    info = parse_python(
        b'async def g(x: "a:b" = ":", *, y: dict[str, int] = {}) -> "r:t":  # c: d\n    pass\n'
    )
    assert isinstance(info, ModuleInfo)
    sym = info.symbols[0]
    assert sym.signature == 'async def g(x: "a:b" = ":", *, y: dict[str, int] = {}) -> "r:t":'


def test_syntax_error_reports_line_and_column() -> None:
    problem = parse_python(b"def ok():\n    pass\n\ndef broken(:\n    pass\n")
    assert isinstance(problem, SyntaxProblem)
    assert problem.line == 4 and problem.column == 11
    assert parse_python(b"x = 1\x00") == SyntaxProblem(1, 0, problem_message(b"x = 1\x00"))


def problem_message(source: bytes) -> str:
    result = parse_python(source)
    assert isinstance(result, SyntaxProblem)
    return result.message


def test_module_suffixes_and_test_files() -> None:
    assert module_suffixes("src/pkg/auth.py") == {"auth", "pkg.auth", "src.pkg.auth"}
    assert module_suffixes("pkg/__init__.py") == {"pkg"}
    assert is_test_file("tests/test_auth.py") and is_test_file("auth_test.py")
    assert not is_test_file("tests/conftest.py") and not is_test_file("testing.py")


def test_gitignore_patterns() -> None:
    pats = parse_gitignore("*.log\n/build/\n!keep.log\ndocs/**/draft*.md\n\\#hash\n# comment\n")
    assert len(pats) == 5


def test_ignore_rules(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.log\n!keep.log\n/build/\nsecret\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("local.txt\n")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    rules = IgnoreRules(tmp_path)
    assert rules.skip_path("a/b/x.log")
    assert not rules.skip_path("a/keep.log")
    assert rules.skip_path("build", is_dir=True)
    assert rules.skip_path("build/out.py")
    assert not rules.skip_path("src/build/x.py")
    assert rules.skip_path("deep/secret/file.py")
    assert rules.skip_path("sub/local.txt") and not rules.skip_path("local.txt")
    assert rules.skip_path("env/lib/site.py")
    for folder in (".git", ".venv", "venv", "node_modules", "x/__pycache__", ".ipynb_checkpoints"):
        assert rules.skip_path(f"{folder}/f.py")
    assert not rules.skip_path("src/app.py")


def test_form_feed_does_not_shift_signatures() -> None:
    source = b"def a():\n    return 1\n\x0c\ndef b(x, y):\n    return x\n\x0c\nclass C:\n    pass\n"
    info = parse_python(source)
    assert isinstance(info, ModuleInfo)
    assert [s.signature for s in info.symbols] == ["def a():", "def b(x, y):", "class C:"]
