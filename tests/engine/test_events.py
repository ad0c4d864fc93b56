"""The event bus: order, the JSONL log, listeners that raise, names, rebinding."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from freshness_magic.atomicio import read_jsonl
from freshness_magic.engine.events import Event, EventBus, EventType


def test_emit_numbers_logs_and_delivers_in_subscription_order(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    bus = EventBus("run-1", log)
    order: list[str] = []
    bus.subscribe(lambda e: order.append(f"first:{e.seq}"))
    bus.subscribe(lambda e: order.append(f"second:{e.seq}"))
    first = bus.emit(EventType.STAGE_STARTED, "a", {"index": 0})
    bus.emit("stage_completed", "a", {"status": "success"})
    assert first.seq == 1 and bus.seq == 2
    assert order == ["first:1", "second:1", "first:2", "second:2"]
    records = list(read_jsonl(log))
    assert Event.from_dict(records[0]) == first
    assert records[1]["type"] == "stage_completed"
    assert records[1]["data"] == {"status": "success"}
    assert records[1]["run_id"] == "run-1"


def test_raising_listener_is_logged_and_the_rest_still_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bus = EventBus("r", tmp_path / "e.jsonl")
    got: list[int] = []

    def broken(event: Event) -> None:
        raise KeyError("oops")

    bus.subscribe(broken)
    bus.subscribe(lambda e: got.append(e.seq))
    with caplog.at_level(logging.ERROR):
        bus.emit(EventType.PIPELINE_STARTED)
    assert got == [1]
    assert "raised on pipeline_started" in caplog.text
    bus.unsubscribe(broken)
    bus.unsubscribe(broken)
    bus.emit(EventType.PIPELINE_COMPLETED)
    assert got == [1, 2]


def test_names_by_value_or_name_and_unknown_names_kept() -> None:
    assert EventType.coerce("PARALLEL_BRANCH_STARTED") is EventType.PARALLEL_BRANCH_STARTED
    assert EventType.coerce("stale_input") is EventType.STALE_INPUT
    bus = EventBus("r")
    event = bus.emit("my.custom", "n", {"x": 1})
    assert event.type is EventType.HANDLER_EVENT
    assert event.data == {"x": 1, "name": "my.custom"}


def test_rebind_moves_the_log_and_keeps_listeners(tmp_path: Path) -> None:
    bus = EventBus("old", tmp_path / "old.jsonl")
    seen: list[str] = []
    bus.subscribe(lambda e: seen.append(e.run_id))
    bus.emit(EventType.PIPELINE_STARTED)
    bus.rebind("new", tmp_path / "new.jsonl", seq=41)
    event = bus.emit(EventType.PIPELINE_RESTARTED)
    assert event.seq == 42
    assert seen == ["old", "new"]
    assert [r["run_id"] for r in read_jsonl(tmp_path / "new.jsonl")] == ["new"]
    assert len(list(read_jsonl(tmp_path / "old.jsonl"))) == 1


def test_timestamps_are_iso_utc(tmp_path: Path) -> None:
    event = EventBus("r").emit(EventType.CHECKPOINT_SAVED)
    assert event.timestamp.endswith("Z") and "T" in event.timestamp
