"""The pipeline engine: DOT loading, validation, conditions, stylesheet, runs, handlers, events.

Nothing in this package imports IPython or ipywidgets; a run is drivable from a plain script.
"""
