"""The rule of node ids, shared by the parser and the state folders (a dependency-free module:
``validate`` imports it at start-up)."""

from __future__ import annotations

import re

NODE_ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
"""A node id: an identifier, so it is one plain file or folder name of the run (never ``..`` or
``/``)."""
MAX_NODE_ID = 100
"""The longest node id: it names files of the run (``<id>.running.<run id>``, temporary files
beside them), and a file name has at most 255 bytes."""
