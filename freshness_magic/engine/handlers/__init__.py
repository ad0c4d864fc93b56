"""Node handlers (spec §4), registered by type in a :class:`HandlerRegistry`."""
