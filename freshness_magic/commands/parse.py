"""``freshness-magic parse PIPELINE.dot``: print the loaded pipeline model as JSON.

The model is what the engine runs: graph attributes, nodes in order of first appearance with
their resolved handler type, classes and every attribute after node defaults, the stylesheet
and ``$goal`` expansion, and edges in declaration order. Exit 2 for an unreadable file or a
parse error (the error with a caret under the column goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from freshness_magic.choices import path_arg

if TYPE_CHECKING:
    from freshness_magic.engine.model import Graph


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "parse",
        help="print a pipeline's loaded model as JSON",
        description=(
            "Load a DOT pipeline (defaults, stylesheet and $goal applied) and print the model "
            "as JSON: graph attributes, nodes with their handler type, and edges in order."
        ),
    )
    parser.add_argument(
        "pipeline",
        metavar="PIPELINE.dot",
        type=path_arg,
        help="the pipeline file (-: standard input)",
    )
    parser.add_argument(
        "--compact", action="store_true", help="print the JSON on one line instead of indented"
    )
    parser.add_argument(
        "--json", action="store_true", help="report errors as a JSON object on stdout too"
    )
    parser.set_defaults(handler=run)


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """The JSON form of a loaded graph (what ``parse`` prints)."""
    return {
        "name": graph.name,
        "path": graph.path,
        "attributes": dict(graph.attrs),
        "nodes": [
            {
                "id": node.id,
                "type": node.handler_type,
                "classes": list(node.classes),
                "line": node.position.line,
                "column": node.position.column,
                "attributes": dict(node.attrs),
            }
            for node in graph.nodes.values()
        ],
        "edges": [
            {
                "source": edge.source,
                "target": edge.target,
                "line": edge.position.line,
                "column": edge.position.column,
                "attributes": dict(edge.attrs),
            }
            for edge in graph.edges
        ],
    }


STDIN = "-"
STDIN_NAME = "<stdin>"
"""How a pipeline read from standard input is named in messages (``path:line:col``)."""


def shown_name(path: str) -> str:
    """``path`` as messages name it (``<stdin>`` for ``-``)."""
    return STDIN_NAME if path == STDIN else path


def load_for_command(path: str, *, stdin: bool = False) -> Graph:
    """Load the pipeline file ``path`` (errors propagate; the CLI reports them). With ``stdin``,
    ``-`` reads the pipeline from standard input (as much as a file may hold)."""
    from freshness_magic.engine.pipeline import load_pipeline, read_pipeline_text

    if stdin and path == STDIN:
        return load_pipeline(_read_stdin(), path=STDIN_NAME)
    return load_pipeline(read_pipeline_text(path), path=path)


def _read_stdin() -> str:
    from freshness_magic.engine.pipeline import MAX_PIPELINE_BYTES
    from freshness_magic.errors import PipelineFileError

    data = sys.stdin.buffer.read(MAX_PIPELINE_BYTES + 1)
    if len(data) > MAX_PIPELINE_BYTES:
        raise PipelineFileError(
            f"{STDIN_NAME}: larger than {MAX_PIPELINE_BYTES} bytes, the most a pipeline may have"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        from freshness_magic.engine.utf8 import not_utf8, where_not_utf8

        line, column = where_not_utf8(data, exc)
        raise PipelineFileError(
            f"{STDIN_NAME}: {not_utf8(data, exc)}; give the pipeline as UTF-8",
            line=line,
            column=column,
        ) from None


def run(args: argparse.Namespace) -> int:
    graph = load_for_command(args.pipeline, stdin=True)
    indent = None if args.compact else 2
    print(json.dumps(graph_to_dict(graph), indent=indent, ensure_ascii=False))
    return 0
