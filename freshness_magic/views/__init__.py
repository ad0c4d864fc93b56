"""What every surface shows, IPython-free: a run's events folded into one view per step.

``model.py`` folds a run's events and publishes, at each step boundary, one view per node (state,
reason, details) from a :class:`~freshness_magic.views.model.RunSnapshot`; ``marks.py`` is the
one home of the stale and outdated marks; ``explain.py`` the one condition explanation (the
widget's playground, ``%pipeline cond``); ``why.py`` the one node explanation (``%pipeline
why``, ``freshness-magic why``); ``text.py`` the text of the magics; ``runview.py`` a run
directory read the same way without its lock (for the command line); ``render.py`` and
``snapshot.py`` the laid-out graph (DOT -> SVG) with the states drawn on it.

Nothing here imports IPython, ipywidgets or ``freshness_magic.notebook``: the notebook layer and
the command line both build on it.
"""
