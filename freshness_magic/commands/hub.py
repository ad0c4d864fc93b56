"""``python -m freshness_magic hub start|stop|status|query``: control and read the hub."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.choices import path_arg

if TYPE_CHECKING:
    from freshness_magic.hub.client import NodeState


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "hub",
        help="run or query the Node State Hub (background file/symbol indexer)",
        description=(
            "The Node State Hub keeps per-file and per-function state of the working directory "
            "in .freshness/hub.sqlite, updated by a background process as files change."
        ),
    )
    actions = parser.add_subparsers(dest="hub_action", metavar="ACTION", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workdir",
        default=".",
        type=path_arg,
        help="working directory the hub serves (default: .)",
    )
    start = actions.add_parser(
        "start", parents=[common], help="start the hub in the background and wait until ready"
    )
    start.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for the first sweep"
    )
    start.add_argument("--json", action="store_true", help="print the status as JSON")
    start.set_defaults(handler=_start)
    stop = actions.add_parser("stop", parents=[common], help="stop this workdir's hub")
    stop.set_defaults(handler=_stop)
    status = actions.add_parser("status", parents=[common], help="is a hub running; its state")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(handler=_status)
    query = actions.add_parser(
        "query", parents=[common], help="print the stored state of files or symbols"
    )
    query.add_argument(
        "targets",
        nargs="+",
        type=path_arg,
        metavar="PATH[:QUALNAME]",
        help="e.g. src/auth.py or src/auth.py:login",
    )
    query.add_argument("--json", action="store_true", help="print JSON instead of text")
    query.set_defaults(handler=_query)


def _start(args: argparse.Namespace) -> int:
    from freshness_magic.hub import daemon

    result = daemon.start(args.workdir, timeout=args.timeout)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.render())
    return 0


def _stop(args: argparse.Namespace) -> int:
    from freshness_magic.hub import daemon

    before = daemon.status(args.workdir)
    daemon.stop(args.workdir)
    if before.running:
        print(f"hub stopped for {before.workdir} (pid {before.pid})")
    else:
        print(f"no hub running for {before.workdir}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from freshness_magic.hub import daemon

    result = daemon.status(args.workdir)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.render())
    return 0 if result.running else 1


def _query(args: argparse.Namespace) -> int:
    import shlex

    from freshness_magic.commands import invoked_as
    from freshness_magic.hub.client import HubClient, HubNotRunning

    try:
        with HubClient(args.workdir) as client:
            states = client.get_context(args.targets)
    except HubNotRunning as exc:  # say the start command the way this one was called
        where = "" if args.workdir == "." else f" --workdir {shlex.quote(args.workdir)}"
        also = ""
        if (above := _hub_above(Path(args.workdir))) is not None:
            here = Path(args.workdir).resolve()
            targets = []
            for target in args.targets:
                path, sep, qualname = target.partition(":")
                targets.append(os.path.relpath(here / path, above) + sep + qualname)
            query = " ".join(shlex.quote(t) for t in targets)
            also = (
                f", or ask the hub running for {above}: `{invoked_as()} hub query --workdir "
                f"{shlex.quote(str(above))} {query}`"
            )
        raise exc.start_with(f"{invoked_as()} hub start{where}", also) from None
    if args.json:
        print(json.dumps([s.to_dict() for s in states], indent=2, default=str))
    else:
        root = Path(args.workdir)
        print("\n".join(_rendered(state, root) for state in states))
    return 0 if all(s.exists for s in states) else 1


def _rendered(state: NodeState, root: Path) -> str:
    """``hub query``'s text for one target: a folder is named as one."""
    if not state.exists and not state.qualname and (root / state.path).is_dir():
        return f"{state.node_id}: {state.path} is a folder; name a file in it"
    return state.render()


def _hub_above(folder: Path) -> Path | None:
    """The nearest folder above ``folder`` that a running hub serves (a query run from a
    subfolder of the project), if any."""
    from freshness_magic.hub import daemon

    for parent in folder.resolve().parents:
        if (parent / ".freshness").is_dir() and daemon.status(parent).running:
            return parent
    return None
