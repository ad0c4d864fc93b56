"""Input freshness: baselines, stat cache, content hashes, git tier, labels and reports."""
