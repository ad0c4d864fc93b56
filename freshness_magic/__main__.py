"""``python -m freshness_magic``: the command line."""

from freshness_magic.cli import program

raise SystemExit(program())
