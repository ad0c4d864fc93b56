"""The "Work evidence" section appended to a codergen prompt under ``evidence="require"``."""

from __future__ import annotations

import json

from freshness_magic.evidence.record import EVIDENCE_TYPES, EVIDENCE_VERSION, relative_evidence_path


def work_evidence_prompt(node_id: str, run_id: str | None = None) -> str:
    """Tell an agent how to satisfy the work-evidence requirement for ``node_id``.

    With ``run_id`` the example carries ``runId``, which binds the file to this run when other
    runs share the work directory.
    """
    doc: dict[str, object] = {
        "version": EVIDENCE_VERSION,
        "nodeId": node_id,
        "timestamp": "2026-01-02T03:04:05Z",
        "summary": "One line saying what you did",
        "type": EVIDENCE_TYPES[2],
        "outcome": {"result": "what you found or produced"},
    }
    if run_id is not None:
        doc["runId"] = run_id
    example = json.dumps(doc)
    return (
        "## Work evidence\n"
        "This step must leave evidence of its work. Do at least one of:\n"
        "1. Change files in the work tree (the changes are the evidence).\n"
        f"2. Write the JSON file `{relative_evidence_path(node_id)}` (relative to the working "
        "directory) with the fields version (1), nodeId, timestamp (ISO 8601, UTC) and summary "
        f"(one line); type (one of {', '.join(EVIDENCE_TYPES)}), outcome (an object saying "
        "what you found or produced) and runId are optional. For example:\n"
        f"   {example}\n"
        "A step that is not supposed to change anything must be declared with "
        "expects_no_changes=true on the node."
    )
