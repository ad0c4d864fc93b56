"""Version control: the one git runner (:mod:`freshness_magic.vcs.git`) and the reader of its
status (:mod:`freshness_magic.vcs.porcelain`)."""
