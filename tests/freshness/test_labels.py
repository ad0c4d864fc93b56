"""Labels and the worst-case aggregation (deleted > changed > added > unknown > fresh)."""

from __future__ import annotations

import itertools

from freshness_magic.freshness.labels import FileLabel, NodeLabel, aggregate

ORDER = [
    FileLabel.FRESH,
    FileLabel.UNKNOWN,
    FileLabel.STALE_ADDED,
    FileLabel.STALE_CHANGED,
    FileLabel.STALE_DELETED,
]


def test_label_values_are_the_documented_words() -> None:
    assert [label.value for label in FileLabel] == [
        "fresh",
        "stale_changed",
        "stale_deleted",
        "stale_added",
        "unknown",
    ]
    assert NodeLabel.NO_REFS.value == "no_refs"


def test_only_the_three_stale_labels_are_stale() -> None:
    assert {label for label in FileLabel if label.is_stale} == {
        FileLabel.STALE_CHANGED,
        FileLabel.STALE_DELETED,
        FileLabel.STALE_ADDED,
    }


def test_node_with_no_files_is_no_refs() -> None:
    assert aggregate([]) is NodeLabel.NO_REFS


def test_aggregation_picks_the_worst_in_every_order() -> None:
    for size in range(1, len(ORDER) + 1):
        for combo in itertools.permutations(ORDER, size):
            worst = max(combo, key=ORDER.index)
            assert aggregate(combo) is NodeLabel(worst.value), combo


def test_deleted_beats_changed_beats_added_beats_unknown_beats_fresh() -> None:
    assert aggregate([FileLabel.STALE_CHANGED, FileLabel.STALE_DELETED]) is NodeLabel.STALE_DELETED
    assert aggregate([FileLabel.STALE_ADDED, FileLabel.STALE_CHANGED]) is NodeLabel.STALE_CHANGED
    assert aggregate([FileLabel.UNKNOWN, FileLabel.STALE_ADDED]) is NodeLabel.STALE_ADDED
    assert aggregate([FileLabel.FRESH, FileLabel.UNKNOWN]) is NodeLabel.UNKNOWN
    assert aggregate([FileLabel.FRESH, FileLabel.FRESH]) is NodeLabel.FRESH
