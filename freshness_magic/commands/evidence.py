"""``freshness-magic evidence RUN_DIR [NODE] [--json]``: print a run's evidence log."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.choices import path_arg
from freshness_magic.errors import EvidenceError

if TYPE_CHECKING:
    from freshness_magic.evidence.record import EvidenceRecord

COLUMNS: tuple[str, ...] = (
    "time",
    "node",
    "status",
    "method",
    "stale files",
    "summary",
    "duration",
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "evidence",
        help="print the evidence records of a run",
        description=(
            "Print the evidence log (evidence.jsonl) of a run directory as a table: one row per "
            "executed step, in order. Give NODE to see only that node's records."
        ),
    )
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", type=path_arg, help="the run directory (.freshness/runs/ID)"
    )
    parser.add_argument("node", metavar="NODE", nargs="?", help="only the records of this node")
    parser.add_argument("--json", action="store_true", help="print the records as a JSON array")
    parser.set_defaults(handler=run)


def _time(stamp: str) -> str:
    from freshness_magic.evidence.record import parse_timestamp

    try:
        return parse_timestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return stamp


def _duration(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:.2f}s"
    return ""


def row(record: EvidenceRecord) -> list[str]:
    """The table cells of one record."""
    from freshness_magic.evidence.record import one_line
    from freshness_magic.freshness.events import some_files

    facts = record.engine
    stale = facts.get("stale_files")
    stale_text = some_files([str(s) for s in stale], 3) if isinstance(stale, list) else ""
    return [
        _time(record.timestamp),
        record.node_id,
        str(facts.get("status") or ""),
        record.method or "-",
        stale_text or "-",
        one_line(record.summary, 60),
        _duration(facts.get("duration_seconds")),
    ]


def render_table(records: list[EvidenceRecord]) -> str:
    """A plain-text table with a header row; columns sized to their content."""
    rows = [list(COLUMNS), *(row(r) for r in records)]
    widths = [max(len(cells[i]) for cells in rows) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip() for cells in rows
    )


def load_records(run_dir: Path, node: str | None) -> tuple[list[EvidenceRecord], list[str]]:
    """The run's valid records (of ``node`` if given) and the problems of invalid lines."""
    from freshness_magic.evidence.record import EVIDENCE_LOG, check_node_id, iter_evidence_log
    from freshness_magic.rundirs import checked_run_dir

    checked_run_dir(run_dir)
    if not run_dir.is_dir():
        raise EvidenceError(f"run directory {run_dir} does not exist")
    log = run_dir / EVIDENCE_LOG
    if not log.is_file():
        raise EvidenceError(
            f"{log} does not exist: no step of this run has been recorded yet "
            "(or RUN_DIR is not a run directory; runs live in .freshness/runs/<run_id>)"
        )
    if node is not None:
        check_node_id(node)
    records: list[EvidenceRecord] = []
    problems: list[str] = []
    for number, result in enumerate(iter_evidence_log(run_dir, node), start=1):
        if result.record is not None:
            records.append(result.record)
        else:
            problems.append(f"{log}: record {number}: {'; '.join(result.problems)}")
    return records, problems


def _unknown_node(run_dir: Path, node: str) -> str | None:
    """Why ``node`` has no records when it is not a node of the run's pipeline; else None."""
    from freshness_magic.engine.persistence import PIPELINE_FILE
    from freshness_magic.engine.pipeline import load_pipeline
    from freshness_magic.engine.validation.attrs import no_node
    from freshness_magic.errors import FreshnessMagicError

    try:
        graph = load_pipeline((run_dir / PIPELINE_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, FreshnessMagicError):
        return None  # no readable pipeline to say more from
    return None if node in graph.nodes else no_node("the run's pipeline", node, graph.nodes)


def damaged_files(run_dir: Path, records: list[EvidenceRecord]) -> list[str]:
    """What is wrong with each node evidence file the records name that is damaged on disk (the
    files are under the run's working directory; nothing when its manifest does not say where)."""
    from freshness_magic.engine.lifecycle import stored_workdir
    from freshness_magic.errors import FreshnessMagicError
    from freshness_magic.evidence.damage import damaged_files

    try:
        workdir = stored_workdir(run_dir)
    except FreshnessMagicError:
        return []
    return [damage.message() for damage in damaged_files(workdir, (r.node_id for r in records))]


def run(args: argparse.Namespace) -> int:
    from freshness_magic.evidence.record import EVIDENCE_LOG

    run_dir = Path(args.run_dir)
    records, problems = load_records(run_dir, args.node)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    if not records and args.node and (unknown := _unknown_node(run_dir, args.node)):
        raise EvidenceError(unknown)  # with --json too: an error, not an empty list
    if args.json:
        print(json.dumps([r.to_dict() for r in records], indent=2, ensure_ascii=False))
    elif not records:
        what = f"node {args.node!r}" if args.node else "this run"
        print(f"no evidence records for {what} in {run_dir / EVIDENCE_LOG}")
    else:
        print(render_table(records))
    sys.stdout.flush()  # the table first, then what is wrong with the files it names
    for damage in damaged_files(run_dir, records):
        print(f"warning: {damage}", file=sys.stderr)
    return 1 if not records and args.node and not args.json else 0
