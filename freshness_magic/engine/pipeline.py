"""Loading a pipeline: parse DOT, apply transforms, validate (spec §9.1 ``prepare_pipeline``).

``load_pipeline`` never raises for a bad ``model_stylesheet``: the stylesheet transform leaves
the graph unstyled and validation reports ``stylesheet_syntax`` with its position, so a user
sees every problem of the file at once instead of the first one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from itertools import islice
from typing import TYPE_CHECKING

from freshness_magic.engine.dot_parser import parse_dot
from freshness_magic.engine.model import Graph
from freshness_magic.engine.transforms import Transform, apply_transforms
from freshness_magic.engine.utf8 import not_utf8, where_not_utf8
from freshness_magic.errors import PipelineFileError, PipelineSourceError

if TYPE_CHECKING:
    from freshness_magic.engine.validation import Diagnostic, LintRule

ACCEPTED_SOURCES = "DOT text, a pydot.Dot, or a graphviz.Digraph / graphviz.Source"


def dot_source(source: object) -> tuple[str, str | None]:
    """The DOT text of ``source`` and a name for it in error messages (None for plain text).

    Recognised by duck typing, so the engine never imports pydot or graphviz: a ``pydot`` graph
    has ``to_string()``, a ``graphviz`` graph or ``Source`` has the text in ``.source``.
    """
    if isinstance(source, str):
        return source, None
    kind = type(source)
    library = kind.__module__.partition(".")[0]
    text = getattr(source, "source", None)
    if library == "graphviz" and isinstance(text, str):
        return text, f"<graphviz.{kind.__name__}>"
    to_string = getattr(source, "to_string", None)
    if library == "pydot" and callable(to_string):
        text = to_string()
        if isinstance(text, str):
            return text, f"<pydot.{kind.__name__}>"
    raise PipelineSourceError(
        f"cannot load a pipeline from a {kind.__module__}.{kind.__qualname__}: give "
        f"{ACCEPTED_SOURCES} (or a path to load_pipeline_file)"
    )


def load_pipeline(
    text: str | object, *, path: str | None = None, transforms: Iterable[Transform] = ()
) -> Graph:
    """Parse ``text`` and apply the built-in transforms, then ``transforms`` in order.

    ``text`` is DOT text, a ``pydot.Dot`` or a ``graphviz.Digraph``/``Source``. Raises
    :class:`~freshness_magic.errors.ParseError` when the DOT does not parse (for an object, the
    location names its kind), :class:`PipelineSourceError` for any other object.
    """
    source, name = dot_source(text)
    return apply_transforms(parse_dot(source, path=path or name), transforms)


MAX_PIPELINE_BYTES = 16 * 1024 * 1024
"""Largest pipeline file read (16 MiB); larger input (or ``/dev/zero``) is refused unread."""


def read_pipeline_text(path: str | os.PathLike[str], limit: int = MAX_PIPELINE_BYTES) -> str:
    """The text of a pipeline file; :class:`PipelineFileError` when it cannot be read.

    At most ``limit`` bytes are read, so a huge file or an endless device ends with an error
    instead of exhausting memory.
    """
    file = os.fspath(path)
    try:
        with open(file, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise PipelineFileError(
                f"{file}: larger than {limit} bytes, the most a pipeline file may have; "
                "is this the right file?"
            )
        return data.decode("utf-8")
    except FileNotFoundError:
        near = _near_file(file)
        hint = f"did you mean {near}?" if near else "check the path"
        raise PipelineFileError(f"{file}: no such pipeline file; {hint}") from None
    except IsADirectoryError:
        raise PipelineFileError(f"{file}: is a directory, not a .dot pipeline file") from None
    except PermissionError:
        raise PipelineFileError(f"{file}: permission denied; make the file readable") from None
    except UnicodeDecodeError as exc:
        line, column = where_not_utf8(data, exc)
        raise PipelineFileError(
            f"{file}: {not_utf8(data, exc)}; save the pipeline as UTF-8", line=line, column=column
        ) from None
    except OSError as exc:
        raise PipelineFileError(f"{file}: cannot read the file: {exc.strerror or exc}") from None


def _near_file(name: str) -> str | None:
    """A file next to the missing file ``name`` that was likely meant, written as ``name`` is:
    the same name with another extension (``review.dt`` -> ``review.dot``), else a near miss of
    the name with the same extension (``reveiw.dot``); None when there is none."""
    from pathlib import Path  # on a mistake only: validate starts quickly

    from freshness_magic.engine.validation.attrs import closest

    file = Path(name)
    try:
        names = [entry.name for entry in islice(os.scandir(file.parent), 1000) if entry.is_file()]
    except OSError:
        return None
    same_stem = sorted(n for n in names if Path(n).stem == file.stem)
    if same_stem:
        dot = [n for n in same_stem if n.endswith((".dot", ".gv"))]
        return str(file.with_name((dot or same_stem)[0]))
    stems = {Path(n).stem: n for n in names if Path(n).suffix == file.suffix}
    near = closest(file.stem, stems, cutoff=0.75)
    return str(file.with_name(stems[near])) if near else None


def load_pipeline_file(
    path: str | os.PathLike[str], *, transforms: Iterable[Transform] = ()
) -> Graph:
    """Read and load a ``.dot`` file; errors name the file."""
    return load_pipeline(read_pipeline_text(path), path=str(path), transforms=transforms)


def prepare_pipeline(
    text: str,
    *,
    path: str | None = None,
    transforms: Iterable[Transform] = (),
    extra_rules: Iterable[LintRule] = (),
    known_types: Iterable[str] | None = None,
) -> tuple[Graph, list[Diagnostic]]:
    """Load ``text`` and validate the result; returns the graph and all diagnostics."""
    from freshness_magic.engine.validation import validate  # loading alone (check) needs no rules

    graph = load_pipeline(text, path=path, transforms=transforms)
    return graph, validate(graph, extra_rules=extra_rules, known_types=known_types)
