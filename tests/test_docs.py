"""The documentation site: it builds strictly, its reference covers every magic, command and
public name, and its code examples run."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from freshness_magic import cli, engine, session
from freshness_magic.notebook.arguments import build_pipeline_parser
from tests.processes import REPO

DOCS = REPO / "docs"
FENCE = re.compile(r"^```(python|ipython)\n(.*?)^```$", re.S | re.M)


def _subcommands(parser: object) -> list[str]:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built with ``--strict``: a broken link, anchor or reference fails the build."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return out


def page_text(site: Path, page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", (site / page / "index.html").read_text()))


def test_the_cli_reference_has_every_command_with_its_options(site: Path) -> None:
    text = page_text(site, "reference/cli")
    commands = _subcommands(cli.build_parser())
    assert set(commands) == set(cli.COMMAND_MODULES)
    for name in commands:
        assert f"freshness-magic {name}" in text, name
    assert "--answer NODE=CHOICE" in text  # the options come from the parsers themselves


def test_the_magics_reference_has_every_subcommand_and_both_cell_magics(site: Path) -> None:
    text = page_text(site, "reference/magics")
    for name in _subcommands(build_pipeline_parser()):
        assert f"%pipeline {name}" in text, name
    assert "usage: %%pipeline" in text
    assert "usage: %%node" in text


def test_the_api_reference_documents_every_public_name(site: Path) -> None:
    page = (site / "reference" / "api" / "index.html").read_text()
    for module in (engine, session):
        for name in module.__all__:
            assert f'id="{module.__name__}.{name}"' in page, f"{module.__name__}.{name}"


def test_the_formats_page_lists_every_shipped_schema(site: Path) -> None:
    text = page_text(site, "FORMATS")
    schemas = sorted(p.name for p in (REPO / "freshness_magic" / "schemas").glob("*.schema.json"))
    assert schemas
    for name in schemas:
        assert name in text, name


def test_the_pictures_the_pages_show_are_in_the_repository(site: Path) -> None:
    for picture in ("view-light.png", "view-dark.png", "marks-light.png", "marks-dark.png"):
        assert (DOCS / "images" / picture).stat().st_size > 10_000
        assert (site / "images" / picture).exists()


def examples(page: Path) -> list[tuple[str, str]]:
    return [(kind, body) for kind, body in FENCE.findall(page.read_text())]


PAGES_WITH_CODE = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if examples(p))

RUNNER = textwrap.dedent(
    """
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    for kind, body in json.load(sys.stdin):
        result = shell.run_cell(body, store_history=True)
        if not result.success:
            print("FAILED:\\n" + body, file=sys.stderr)
            sys.exit(1)
    """
)


def test_the_pages_with_code_include_the_tutorial_and_the_scripts() -> None:
    assert {"getting-started.md", "how-to/scripts.md"} <= set(PAGES_WITH_CODE)


@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_the_code_examples_of_a_page_run_in_order(page: str, tmp_path: Path) -> None:
    """Each page's ``python`` and ``ipython`` blocks run in order in one real IPython shell,
    from the checkout's folder (examples name ``examples/quickstart.dot``), offline."""
    import json

    blocks = examples(DOCS / page)
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(blocks),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "HOME": str(tmp_path), "MPLBACKEND": "agg"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Error" not in done.stdout, done.stdout[-3000:]


def test_the_api_reference_documents_the_pipeline_and_the_magics_actions(site: Path) -> None:
    page = (site / "reference" / "api" / "index.html").read_text()
    actions = ("step", "run", "run_to", "resume", "retry", "accept", "why", "cond", "status")
    for name in (*actions, "evidence", "stop", "widget"):
        assert f'id="freshness_magic.Pipeline.{name}"' in page, name
