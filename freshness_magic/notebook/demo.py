"""The main job: run the quickstart notebook headless and export it (``build/``).

    python -m freshness_magic.notebook.demo                 # build/quickstart.ipynb + .html
    python -m freshness_magic.notebook.demo --refresh-all   # re-execute notebooks/*.ipynb in place

The quickstart ships inside the package (``notebook/data/quickstart.ipynb``, the cells of
``notebooks/quickstart.ipynb`` without outputs), so the demo runs from an installed wheel too: it
copies that notebook into the output folder and executes it there. ``--refresh-all`` (a checkout
only) also rewrites the packaged copy, and a test keeps the two in step.

Every pipeline output carries a static SVG of the graph with its states as ``text/html``, so the
HTML export shows the graph without a widget runtime or network.
``--refresh-all`` stores fresh, real outputs in the example notebooks (run it after changing what
they print; ``pytest --nbval notebooks/`` then checks them).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import sys
from importlib import resources
from pathlib import Path
from typing import Any

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
NOTEBOOKS = ("quickstart", "human_gates", "freshness", "conditions", "evidence")


DEMO_MODULES = ("nbformat", "nbclient", "nbconvert", "ipykernel")
"""What the demo needs beyond the package (the ``demo`` extra)."""


def packaged_quickstart() -> str:
    """The text of the quickstart notebook shipped as package data."""
    return (resources.files("freshness_magic.notebook") / "data" / "quickstart.ipynb").read_text(
        encoding="utf-8"
    )


def without_outputs(notebook: Any) -> Any:
    """A copy with no outputs, execution counts or widget state (what the package ships)."""
    plain = copy.deepcopy(notebook)
    for cell in plain.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    plain.metadata.pop("widgets", None)
    return plain


def repo_root() -> Path:
    """The checkout this package lives in (notebooks/ is next to the package)."""
    return Path(__file__).resolve().parents[2]


def execute(path: Path, *, widget_state: bool, timeout: int = 300) -> Any:
    """Execute the notebook at ``path`` in a fresh ``python3`` kernel; returns the notebook."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=widget_state,
        # A local, short-lived kernel: its start-up notice about TCP transport is noise here.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    client.execute()
    return notebook


def _without_widget_views(notebook: Any) -> Any:
    """A copy whose outputs fall back to their static HTML (no widget JavaScript needed)."""
    plain = copy.deepcopy(notebook)
    for cell in plain.cells:
        for output in cell.get("outputs", []):
            data = output.get("data")
            if isinstance(data, dict) and WIDGET_MIME in data and "text/html" in data:
                del data[WIDGET_MIME]
    plain.metadata.pop("widgets", None)
    return plain


def build_quickstart(out_dir: Path, source: Path) -> tuple[Path, Path]:
    """Execute ``source`` and write the executed notebook and its HTML export to ``out_dir``."""
    import nbformat
    from nbconvert import HTMLExporter

    notebook = execute(source, widget_state=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    ipynb = out_dir / source.name
    nbformat.write(notebook, ipynb)
    body, _ = HTMLExporter().from_notebook_node(_without_widget_views(notebook))
    html = out_dir / (source.stem + ".html")
    html.write_text(body, encoding="utf-8")
    return ipynb, html


def refresh(paths: list[Path]) -> None:
    """Re-execute notebooks in place so their stored outputs are real and current.

    Widget state is not stored (it would only be a stale picture and a noisy diff); a notebook
    opened in JupyterLab shows the widgets again once its cells run.
    """
    import nbformat

    for path in paths:
        notebook = execute(path, widget_state=False)
        notebook.metadata.pop("widgets", None)
        nbformat.write(notebook, path)
        print(f"refreshed {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m freshness_magic.notebook.demo",
        description="Run the quickstart notebook headless and write build/quickstart.{ipynb,html}.",
    )
    parser.add_argument("--notebook", type=Path, help="notebook to run (default: quickstart)")
    parser.add_argument("--out", type=Path, default=Path("build"), help="output folder")
    parser.add_argument(
        "--refresh-all", action="store_true", help="re-execute notebooks/*.ipynb in place"
    )
    args = parser.parse_args(argv)
    missing = [name for name in DEMO_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        print(
            f"error: the demo needs {', '.join(missing)}: pip install 'freshness_magic[demo]'",
            file=sys.stderr,
        )
        return 2
    import nbformat

    notebooks = repo_root() / "notebooks"
    if args.refresh_all:
        if not notebooks.is_dir():
            print(
                "error: --refresh-all works in a checkout (notebooks/ not found)", file=sys.stderr
            )
            return 2
        refresh([notebooks / f"{name}.ipynb" for name in NOTEBOOKS])
        quickstart = nbformat.read(notebooks / "quickstart.ipynb", as_version=4)
        nbformat.write(
            without_outputs(quickstart), Path(__file__).with_name("data") / "quickstart.ipynb"
        )
        return 0
    if args.notebook is not None:
        if not args.notebook.is_file():
            print(f"error: notebook {args.notebook} not found", file=sys.stderr)
            return 2
        source = args.notebook
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        source = args.out / "quickstart.ipynb"
        source.write_text(packaged_quickstart(), encoding="utf-8")
    ipynb, html = build_quickstart(args.out, source)
    print(f"executed notebook: {ipynb.resolve()}")
    print(f"HTML export:       {html.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
