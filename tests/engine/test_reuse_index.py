"""The reuse index on disk: one file per key, verified reads, kept outputs, bounded, torn lines."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from freshness_magic.engine.handlers.llm import ResponseSink
from freshness_magic.engine.model import Node
from freshness_magic.engine.reuse import (
    ABSENT,
    KEEP_PER_KEY,
    IndexEntry,
    ReuseIndex,
    reusable,
    reuse_key,
)
from freshness_magic.errors import ReuseError


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


def restored(index: ReuseIndex, outputs: dict[str, str], folder: Path) -> Path:
    """``folder`` made and holding the outputs of an execution recorded with ``outputs``, as
    the index finds and restores them."""
    key = reuse_key("p", "b", "d", "")
    index.add(key, entry(1, {}, outputs))
    found = index.find(key, lambda k: ABSENT)
    assert found is not None
    folder.mkdir()
    index.restore_outputs(found, folder)
    return folder


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
    target = restored(index, outputs, tmp_path / "copy")
    assert (target / "response.md").read_text() == "the answer"
    key = reuse_key("p", "b", "d", "")
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


def test_an_engine_file_is_linked_and_a_new_pass_writing_it_keeps_the_blob(
    tmp_path: Path,
) -> None:
    """The response file is written as a new file each pass, so its blob (a hard link to the
    first pass's file) keeps the first pass's bytes when a loop writes it again."""
    index = ReuseIndex(tmp_path)
    node_dir = tmp_path / "nodes" / "b"
    node_dir.mkdir(parents=True)
    first = ResponseSink(node_dir / "response.md", lambda kind, data: None)
    first("first pass")
    first.close()
    outputs = index.keep_outputs(node_dir, ["response.md"])
    assert outputs is not None
    blob = tmp_path / ".freshness" / "reuse" / "blobs" / outputs["response.md"]
    assert blob.stat().st_ino == (node_dir / "response.md").stat().st_ino  # a link, no copy
    second = ResponseSink(node_dir / "response.md", lambda kind, data: None)
    second("second")
    second.close()
    assert (node_dir / "response.md").read_text() == "second"
    assert blob.read_text() == "first pass"
    target = restored(index, outputs, tmp_path / "restored")
    assert (target / "response.md").read_bytes() == b"first pass"


def test_a_file_a_user_tool_rewrites_in_place_never_restores_wrong_bytes(
    tmp_path: Path,
) -> None:
    """A file the engine did not write is copied into the store: rewriting it in place (as a
    shell's ``>`` does) leaves the blob, and reuse restores the bytes recorded."""
    index = ReuseIndex(tmp_path)
    node_dir = tmp_path / "nodes" / "b"
    node_dir.mkdir(parents=True)
    made = node_dir / "report.json"
    made.write_text('{"pass": 1}')
    outputs = index.keep_outputs(node_dir, ["report.json"])
    assert outputs is not None
    blob = tmp_path / ".freshness" / "reuse" / "blobs" / outputs["report.json"]
    assert blob.stat().st_ino != made.stat().st_ino
    with made.open("r+") as handle:  # same inode, new bytes
        handle.write('{"pass": 2}')
    target = restored(index, outputs, tmp_path / "restored")
    assert (target / "report.json").read_text() == '{"pass": 1}'


def test_a_blob_changed_through_its_link_is_removed_and_never_reused(tmp_path: Path) -> None:
    """A linked file someone edits in place changes its blob too: the blob no longer hashes to
    its name, so the execution is not reused (the node runs) and the blob is made again later."""
    index = ReuseIndex(tmp_path)
    node_dir = tmp_path / "nodes" / "b"
    node_dir.mkdir(parents=True)
    response = node_dir / "response.md"
    response.write_text("the answer")
    outputs = index.keep_outputs(node_dir, ["response.md"])
    assert outputs is not None
    key = reuse_key("p", "b", "d", "")
    index.add(key, entry(1, {}, outputs))
    found = index.find(key, lambda k: ABSENT)
    assert found is not None
    with response.open("r+") as handle:  # an edit in place, through the link
        handle.write("THE")
    target = tmp_path / "restored"
    target.mkdir()
    with pytest.raises(ReuseError, match="gone or changed"):
        index.restore_outputs(found, target)
    assert list(target.iterdir()) == []  # nothing half restored
    assert index.find(key, lambda k: ABSENT) is None
    blob = tmp_path / ".freshness" / "reuse" / "blobs" / outputs["response.md"]
    assert not blob.exists()
    response.unlink()
    response.write_text("the answer")
    assert index.keep_outputs(node_dir, ["response.md"]) == outputs
    assert blob.read_text() == "the answer"
    assert index.find(key, lambda k: ABSENT) is not None


def test_a_link_the_file_system_refuses_becomes_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across devices (EXDEV) or where links are not allowed, the blob is a copy."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    index = ReuseIndex(tmp_path)
    node_dir = tmp_path / "nodes" / "b"
    node_dir.mkdir(parents=True)
    (node_dir / "prompt.md").write_text("the prompt")
    monkeypatch.setattr(os, "link", refuse)
    outputs = index.keep_outputs(node_dir, ["prompt.md"])
    assert outputs is not None
    blob = tmp_path / ".freshness" / "reuse" / "blobs" / outputs["prompt.md"]
    assert blob.read_text() == "the prompt"
    assert blob.stat().st_ino != (node_dir / "prompt.md").stat().st_ino
