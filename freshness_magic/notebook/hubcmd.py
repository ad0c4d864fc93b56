"""The hub in the notebook: ``%pipeline hub ...`` and live stale highlights while a hub runs.

:class:`NotebookHub` is the ``hub_handler`` of :class:`~freshness_magic.notebook.magics.
PipelineMagics` (the hub package itself has no notebook code). Besides answering
``start|stop|status|query``, it keeps one change subscription per working directory while a
hub runs there: after every committed hub update it re-checks the freshness of the loaded
pipelines in that folder (skipping a pipeline that is busy with an action), and their widgets
restyle through their usual change notification. No cell has to run,
so highlights move while a human gate waits.

"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from freshness_magic.errors import HubError
from freshness_magic.hub.client import Change, HubNotRunning, Subscription
from freshness_magic.hub.integration import hub_command, live_refresh
from freshness_magic.views.text import TextResult


class NotebookHub:
    """``%pipeline hub start|stop|status|query TARGET [--workdir DIR]`` plus live refresh."""

    def __init__(self, poll: float = 0.1) -> None:
        self.poll = poll
        self.subscriptions: dict[Path, Subscription] = {}
        self._magics: Any = None
        self._lock = threading.Lock()

    def __call__(self, magics: Any, argv: Sequence[str]) -> Any:
        from IPython.core.error import UsageError

        self._magics = magics
        args = list(argv)
        workdir = None
        if "--workdir" in args:
            at = args.index("--workdir")
            if at + 1 >= len(args):
                raise UsageError("%pipeline hub: --workdir needs a folder")
            workdir = Path(args[at + 1]).expanduser().resolve()
            del args[at : at + 2]
        root = workdir or self.default_workdir(magics)
        try:
            text = hub_command(root, args, stop_with_this_process=True)
        except HubNotRunning as exc:  # the magic that starts it, not the command line's
            where = f" --workdir {workdir}" if workdir is not None else ""
            raise UsageError(str(exc.start_with(f"%pipeline hub start{where}"))) from None
        except HubError as exc:
            raise UsageError(str(exc)) from None
        if args and args[0] == "stop":
            self.unwatch(root)
        else:
            self.watch(root)
        return TextResult(text)

    @staticmethod
    def default_workdir(magics: Any) -> Path:
        """The current pipeline's working directory, else the magics' default (or cwd)."""
        current = getattr(magics, "current", None)
        pipeline = magics.pipelines().get(current) if current else None
        if pipeline is not None:
            return Path(pipeline.workdir).resolve()
        return Path(magics._workdir(None)).resolve()

    def watch(self, root: Path) -> bool:
        """Subscribe to the hub of ``root`` (no-op when subscribed or no hub runs)."""
        with self._lock:
            existing = self.subscriptions.get(root)
            if existing is not None and existing.is_alive():
                return True
            sub = live_refresh(
                root, lambda seq, changes: self.on_change(root, changes), poll=self.poll
            )
            if sub is None:
                self.subscriptions.pop(root, None)
                return False
            self.subscriptions[root] = sub
            return True

    def unwatch(self, root: Path) -> None:
        with self._lock:
            sub = self.subscriptions.pop(root, None)
        if sub is not None:
            sub.stop()

    def close(self) -> None:
        for root in list(self.subscriptions):
            self.unwatch(root)

    def on_change(self, root: Path, changes: list[Change]) -> None:
        """Re-check the loaded pipelines of ``root`` (called from the subscription thread)."""
        magics = self._magics
        if magics is None:
            return
        for pipeline in list(magics.pipelines().values()):
            if Path(pipeline.workdir).resolve() != root:
                continue
            pipeline.live.refresh_freshness()
