"""The event bus: order, the JSONL log, listeners that raise, names, vocabularies, rebinding."""

from __future__ import annotations

import logging
from enum import StrEnum
from pathlib import Path

import pytest

from freshness_magic.atomicio import read_jsonl
from freshness_magic.engine.events import ENGINE_EVENTS, Event, EventBus, EventKinds, EventType
from freshness_magic.errors import EventKindError


class Harvest(StrEnum):
    """A vocabulary of a package outside the engine (as freshness and evidence have)."""

    REAPED = "reaped"
    SOWN = "sown"


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
    assert ENGINE_EVENTS.event_from_dict(records[0]) == first
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
    assert EventType.coerce(" Gate_Waiting ") is EventType.GATE_WAITING
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


def test_a_registered_vocabulary_is_emitted_logged_and_read_back_as_its_members(
    tmp_path: Path,
) -> None:
    kinds = EventKinds(Harvest)
    log = tmp_path / "events.jsonl"
    bus = EventBus("r", log, kinds=kinds)
    assert bus.emit(Harvest.REAPED, "field").type is Harvest.REAPED
    assert bus.emit("SOWN").type is Harvest.SOWN
    bus.emit(EventType.PIPELINE_COMPLETED)
    assert [r["type"] for r in read_jsonl(log)] == ["reaped", "sown", "pipeline_completed"]
    back = list(kinds.read(log))
    assert [e.type for e in back] == [Harvest.REAPED, Harvest.SOWN, EventType.PIPELINE_COMPLETED]
    assert back[0].node_id == "field" and back[0].data == {}


def test_a_reader_without_the_vocabulary_keeps_the_stored_name(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    EventBus("r", log, kinds=EventKinds(Harvest)).emit(Harvest.REAPED, None, {"rows": 3})
    (event,) = ENGINE_EVENTS.read(log)
    assert event.type is EventType.HANDLER_EVENT
    assert event.data == {"rows": 3, "name": "reaped"}


def test_a_member_of_an_unregistered_vocabulary_is_refused_before_anything_is_logged(
    tmp_path: Path,
) -> None:
    log = tmp_path / "events.jsonl"
    bus = EventBus("r", log)
    with pytest.raises(EventKindError, match=r"Harvest\.REAPED .*event_kinds\(\)"):
        bus.emit(Harvest.REAPED)
    assert bus.seq == 0 and not log.exists()
    # Its name as a plain string is a handler's report: kept, not refused.
    assert bus.emit("reaped").data == {"name": "reaped"}


def test_vocabularies_that_share_a_stored_name_cannot_be_composed() -> None:
    class Clash(StrEnum):
        DONE = "pipeline_completed"

    with pytest.raises(EventKindError, match="'pipeline_completed' is both EventType"):
        EventKinds(Clash)
    assert EventKinds(Harvest, Harvest) == EventKinds(Harvest)
    assert EventKinds().enums == (EventType,)


def test_a_damaged_line_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(
        '{"v": 1, "type": "dead_end", "seq": "x", "run_id": "r"}\n'
        '{"v": 1, "type": "dead_end", "seq": 2, "run_id": "r"}\n'
    )
    with caplog.at_level(logging.WARNING):
        events = list(ENGINE_EVENTS.read(log))
    assert [(e.type, e.seq) for e in events] == [(EventType.DEAD_END, 2)]
    assert "seq 'x' is not a whole number" in caplog.text
