"""The reuse index on disk: one file per key, verified reads, kept outputs, bounded, torn lines."""

from __future__ import annotations

from pathlib import Path

from freshness_magic.engine.model import Node
from freshness_magic.engine.reuse import (
    ABSENT,
    KEEP_PER_KEY,
    IndexEntry,
    ReuseIndex,
    reusable,
    reuse_key,
)


def entry(step: int, reads: dict[str, str], outputs: dict[str, str] | None = None) -> IndexEntry:
    return IndexEntry(
        run_id=f"run{step}",
        run_dir=f"/runs/run{step}",
        node="b",
        step=step,
        reads=reads,
        outcome={"outcome": "success", "notes": f"step {step}"},
        outputs=outputs or {},
    )


def test_a_lookup_verifies_the_reads_of_each_candidate_newest_first(tmp_path: Path) -> None:
    index = ReuseIndex(tmp_path)
    key = reuse_key("p", "b", "def", "inputs")
    index.add(key, entry(1, {"x": "1"}))
    index.add(key, entry(2, {"x": "2"}))
    index.add(key, entry(3, {"x": "1", "y": ABSENT}))
    now = {"x": "1"}
    found = index.find(key, lambda k: now.get(k, ABSENT))
    assert found is not None and found.step == 3  # the newest whose reads all match
    now = {"x": "1", "y": "7"}
    found = index.find(key, lambda k: now.get(k, ABSENT))
    assert found is not None and found.step == 1
    assert index.find(key, lambda k: "other") is None
    assert index.find(reuse_key("p", "b", "def", "changed"), lambda k: "1") is None


def test_outputs_are_kept_by_content_and_a_missing_blob_passes_the_candidate_over(
    tmp_path: Path,
) -> None:
    index = ReuseIndex(tmp_path)
    node_dir = tmp_path / "node"
    node_dir.mkdir()
    (node_dir / "response.md").write_text("the answer")
    outputs = index.keep_outputs(node_dir, ["response.md"])
    assert outputs is not None
    key = reuse_key("p", "b", "d", "")
    index.add(key, entry(1, {}, outputs))
    target = tmp_path / "copy"
    target.mkdir()
    found = index.find(key, lambda k: ABSENT)
    assert found is not None
    index.restore_outputs(found, target)
    assert (target / "response.md").read_text() == "the answer"
    for blob in (tmp_path / ".freshness" / "reuse" / "blobs").rglob("*"):
        if blob.is_file():
            blob.unlink()
    assert index.find(key, lambda k: ABSENT) is None


def test_a_key_keeps_its_newest_executions_and_skips_a_torn_line(tmp_path: Path) -> None:
    index = ReuseIndex(tmp_path)
    key = reuse_key("p", "b", "d", "")
    for step in range(1, KEEP_PER_KEY + 4):
        index.add(key, entry(step, {"x": str(step)}))
    steps = [e.step for e in index.candidates(key)]
    assert steps == list(range(KEEP_PER_KEY + 3, 3, -1))
    path = next((tmp_path / ".freshness" / "reuse" / "index").rglob("*.jsonl"))
    with path.open("ab") as handle:
        handle.write(b'{"v": 1, "run_id": "torn')  # a kill in the middle of a write
    assert index.candidates(key)[0].step == KEEP_PER_KEY + 3
    index.add(key, entry(99, {}))
    assert index.candidates(key)[0].step == 99


def test_only_nodes_whose_inputs_are_known_are_reusable() -> None:
    def node(**attrs: str) -> Node:
        return Node("n", attrs=attrs)

    assert reusable(node(prompt="hi"), declares_inputs=False)  # codergen
    assert not reusable(node(shape="parallelogram", tool_command="git status"), False)
    assert reusable(node(shape="parallelogram", tool_command="make"), True)
    assert reusable(node(shape="parallelogram", tool_command="date", reuse="true"), False)
    assert not reusable(node(prompt="hi", reuse="false"), False)
    assert not reusable(node(shape="hexagon", reuse="true"), False)  # gates never
    assert not reusable(node(shape="component", reuse="true"), False)
