"""The Node State Hub: a background indexer keeping per-file and per-symbol state in SQLite."""
