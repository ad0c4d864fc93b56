"""The view layer and a pipeline's live side need no IPython: no module of ``views/`` or
``live/`` imports IPython, ipywidgets, anywidget or ``freshness_magic.notebook`` (at any depth,
lazy imports included), importing all of them loads none of those, and the command line's
subcommands reach the views only through ``views/``."""

from __future__ import annotations

from pathlib import Path

import pytest

import freshness_magic.commands
import freshness_magic.live
import freshness_magic.views
from tests.engine.test_boundary import imported_modules, parse
from tests.processes import fresh_python

VIEWS = Path(freshness_magic.views.__file__).parent
LIVE = Path(freshness_magic.live.__file__).parent
COMMANDS = Path(freshness_magic.commands.__file__).parent
NOTEBOOK_ONLY = ("IPython", "ipywidgets", "anywidget", "traitlets", "freshness_magic.notebook")


def _hits(path: Path) -> list[str]:
    below = tuple(f"{name}." for name in NOTEBOOK_ONLY)
    return [m for m in imported_modules(parse(path)) if m in NOTEBOOK_ONLY or m.startswith(below)]


@pytest.mark.parametrize(("folder", "least"), [(VIEWS, 10), (LIVE, 3)], ids=["views", "live"])
def test_no_module_imports_ipython_widgets_or_the_notebook_layer(folder: Path, least: int) -> None:
    modules = sorted(folder.rglob("*.py"))
    assert len(modules) > least
    found = {str(path.relative_to(folder)): _hits(path) for path in modules}
    assert {path: hits for path, hits in found.items() if hits} == {}


def test_no_cli_command_imports_the_notebook_layer() -> None:
    modules = sorted(COMMANDS.rglob("*.py"))
    found = {str(path.relative_to(COMMANDS)): _hits(path) for path in modules}
    assert {path: hits for path, hits in found.items() if hits} == {}


@pytest.mark.parametrize(("package", "least"), [("views", 10), ("live", 3)])
def test_importing_every_module_loads_no_notebook_code(package: str, least: int) -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        f"import freshness_magic.{package} as layer\n"
        f"found = pkgutil.walk_packages(layer.__path__, 'freshness_magic.{package}.')\n"
        "names = [m.name for m in found]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        f"outside = sorted(m for m in sys.modules if m.startswith({NOTEBOOK_ONLY!r}))\n"
        "print(len(names), outside)\n"
    )
    count, outside = fresh_python(code).split(" ", 1)
    assert int(count) > least
    assert outside == "[]"
