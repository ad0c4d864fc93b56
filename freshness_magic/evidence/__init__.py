"""Evidence records for every step and the work-evidence validator."""
