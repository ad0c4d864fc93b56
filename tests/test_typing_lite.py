"""The run-time stand-ins of ``typing_lite`` behave as :mod:`typing`'s for what we use them for.

Each case builds the same class with the stand-in and with :mod:`typing` and compares."""

from __future__ import annotations

import pickle
import typing

import pytest

from freshness_magic import typing_lite


class Spot(typing_lite.NamedTuple):
    """A place in a file."""

    line: int
    column: int = 1

    @property
    def text(self) -> str:
        return f"{self.line}:{self.column}"

    def moved(self, by: int) -> Spot:
        return self._replace(line=self.line + by)


class TypingSpot(typing.NamedTuple):
    """A place in a file."""

    line: int
    column: int = 1


def test_the_stand_in_is_not_typing_s_own_at_run_time() -> None:
    assert typing_lite.NamedTuple is not typing.NamedTuple
    assert typing_lite.Protocol is not typing.Protocol


def test_a_named_tuple_has_typing_s_fields_defaults_and_tuple_behaviour() -> None:
    spot = Spot(3)
    assert spot == (3, 1) == TypingSpot(3)
    assert Spot._fields == TypingSpot._fields == ("line", "column")
    assert Spot._field_defaults == TypingSpot._field_defaults == {"column": 1}
    assert repr(Spot(2, 5)) == "Spot(line=2, column=5)"
    assert spot._asdict() == {"line": 3, "column": 1}
    line, column = Spot(7, 8)
    assert (line, column) == (7, 8)
    assert sorted([Spot(2, 1), Spot(1, 9)]) == [Spot(1, 9), Spot(2, 1)]
    assert hash(Spot(1, 2)) == hash((1, 2))
    with pytest.raises(AttributeError):
        spot.line = 4  # type: ignore[misc]


def test_a_named_tuple_keeps_its_docstring_methods_module_and_pickles() -> None:
    assert Spot.__doc__ == "A place in a file."
    assert Spot.__module__ == __name__ and Spot.__qualname__ == "Spot"
    assert Spot.__annotations__ == {"line": "int", "column": "int"}
    assert Spot(1, 2).text == "1:2"
    assert Spot(1, 2).moved(3) == Spot(4, 2)
    assert pickle.loads(pickle.dumps(Spot(5, 6))) == Spot(5, 6)


def test_a_field_without_a_default_after_one_with_is_refused_as_typing_does() -> None:
    with pytest.raises(TypeError, match="without a default"):

        class Bad(typing_lite.NamedTuple):
            first: int = 0
            second: int

    with pytest.raises(TypeError):

        class TypingBad(typing.NamedTuple):
            first: int = 0
            second: int


@typing_lite.runtime_checkable
class Named(typing_lite.Protocol):
    @property
    def name(self) -> str: ...

    def apply(self, value: int) -> int: ...


@typing.runtime_checkable
class TypingNamed(typing.Protocol):
    @property
    def name(self) -> str: ...

    def apply(self, value: int) -> int: ...


class Both:
    name = "both"

    def apply(self, value: int) -> int:
        return value


class OnlyApply:
    def apply(self, value: int) -> int:
        return value


class Unchecked(typing_lite.Protocol):
    def apply(self, value: int) -> int: ...


def test_isinstance_with_a_runtime_checkable_protocol_checks_its_members() -> None:
    for protocol in (Named, TypingNamed):
        assert isinstance(Both(), protocol)
        assert not isinstance(OnlyApply(), protocol)
        assert not isinstance(3, protocol)


def test_a_protocol_subclass_that_is_not_a_protocol_is_an_ordinary_class() -> None:
    class Concrete(Named):
        name = "concrete"

        def apply(self, value: int) -> int:
            return value + 1

    assert Concrete().apply(1) == 2 and isinstance(Concrete(), Named)
    assert isinstance(Concrete(), Concrete) and not isinstance(Both(), Concrete)


def test_isinstance_needs_runtime_checkable_and_it_applies_to_protocols_only() -> None:
    with pytest.raises(TypeError, match="runtime_checkable"):
        isinstance(Both(), Unchecked)
    with pytest.raises(TypeError, match="protocols"):
        typing_lite.runtime_checkable(Both)
