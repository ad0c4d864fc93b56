"""The quickstart notebook shipped in the package is the one in ``notebooks/``, without outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat

from freshness_magic.notebook.demo import packaged_quickstart

REPO = Path(__file__).resolve().parents[2]


def test_the_packaged_quickstart_has_the_cells_of_the_checkout_one() -> None:
    packaged = nbformat.reads(packaged_quickstart(), as_version=4)
    checkout = nbformat.read(REPO / "notebooks" / "quickstart.ipynb", as_version=4)
    assert [(c.cell_type, c.source) for c in packaged.cells] == [
        (c.cell_type, c.source) for c in checkout.cells
    ], "run `python -m freshness_magic.notebook.demo --refresh-all` to copy the notebook again"
    assert all(not c.get("outputs") for c in packaged.cells)
