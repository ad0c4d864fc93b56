"""Version control: the one git runner (:mod:`freshness_magic.vcs.git`)."""
