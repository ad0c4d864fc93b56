"""A loaded pipeline's live side, without IPython: the run opened, stepped and reopened
(:class:`~freshness_magic.live.run.LiveRun`, :func:`~freshness_magic.live.stepping.step_loop`),
the ``%%node`` cells' handler and the input watcher. The notebook's ``Pipeline`` composes it
with a read-only view; a plain script drives a pipeline through it the same way."""
