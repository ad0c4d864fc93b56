"""One module per command-line subcommand; each exposes ``register(subparsers)``."""
