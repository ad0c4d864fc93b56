"""The cycle collector's pause around bulk work: state restored, results promoted, cycles found."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from freshness_magic.gcpause import PROMOTE_AT, cyclic_gc_paused


class Node:
    """A tracked object that can take part in a cycle and be watched through a weak reference."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    gc.unfreeze()  # whatever an earlier test froze: these tests start from an unfrozen heap
    yield
    if not was:
        gc.disable()


def in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation=generation))


@pytest.mark.usefixtures("collector_on")
def test_the_pause_restores_the_collector_as_it_found_it() -> None:
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.usefixtures("collector_on")
def test_what_a_big_pause_built_goes_to_the_oldest_generation() -> None:
    with cyclic_gc_paused():
        built = [Node() for _ in range(PROMOTE_AT)]
    assert in_generation(built[-1], 2) and not in_generation(built[-1], 0)
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("collector_on")
def test_a_small_pause_leaves_its_objects_young() -> None:
    gc.collect()
    with cyclic_gc_paused():
        built = [Node() for _ in range(100)]
    assert in_generation(built[-1], 0)


@pytest.mark.usefixtures("collector_on")
def test_a_cycle_built_in_the_pause_is_still_collected() -> None:
    with cyclic_gc_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        watch = weakref.ref(a)
    del a, b
    gc.collect()
    assert watch() is None


@pytest.mark.usefixtures("collector_on")
def test_objects_someone_froze_stay_frozen() -> None:
    kept = Node()
    gc.freeze()
    try:
        with cyclic_gc_paused():
            built = [Node() for _ in range(PROMOTE_AT)]
        assert gc.get_freeze_count() > 0
        assert not any(in_generation(kept, g) for g in range(3))  # still frozen
        assert not in_generation(built[-1], 2)
    finally:
        gc.unfreeze()
