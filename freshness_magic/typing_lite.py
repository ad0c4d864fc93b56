"""``NamedTuple``, ``Protocol`` and ``runtime_checkable`` without importing :mod:`typing`.

Every CLI command loads the model, the parser and the lint rules, and importing :mod:`typing`
costs about 4 ms of the 35 ms a ``validate`` may take in all (``bench_cli.py``). The
modules on that path take these three names from here: type checkers see :mod:`typing`'s own (the
``TYPE_CHECKING`` branch), and at run time

- a ``NamedTuple`` class is the :func:`collections.namedtuple` of its annotated fields, with the
  class body's docstring, methods and properties, as :mod:`typing` builds it;
- a ``Protocol`` is a plain base class, and ``isinstance`` against a ``runtime_checkable`` one
  checks that every member it declares is there, which is what :mod:`typing` checks.

Keep to what :mod:`typing` does: these are stand-ins for it, not a dialect of our own.
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
    from typing import Protocol as Protocol
    from typing import runtime_checkable as runtime_checkable
else:
    import collections

    _NOT_MEMBERS = frozenset(
        (
            "__module__",
            "__qualname__",
            "__doc__",
            "__annotations__",
            "__dict__",
            "__weakref__",
            "__init__",
            "__slots__",
            "_is_protocol",
            "_is_runtime_protocol",
        )
    )

    class _NamedTupleMeta(type):
        def __new__(mcls, name, bases, namespace):
            if not bases:
                return super().__new__(mcls, name, bases, namespace)
            if bases != (NamedTuple,):
                raise TypeError(f"{name}: a NamedTuple class cannot have other bases")
            if "__classcell__" in namespace:
                raise TypeError(f"{name}: a NamedTuple class cannot use super()")
            annotations = dict(namespace.get("__annotations__", {}))
            fields = tuple(annotations)
            defaults = []
            for field in fields:
                if field in namespace:
                    defaults.append(namespace[field])
                elif defaults:
                    raise TypeError(
                        f"{name}: field {field!r} without a default follows fields with one"
                    )
            record = collections.namedtuple(
                name, fields, defaults=defaults, module=namespace.get("__module__")
            )
            record.__annotations__ = annotations
            record.__qualname__ = namespace.get("__qualname__", name)
            for key, value in namespace.items():
                if key not in fields and key not in ("__annotations__", "__qualname__"):
                    setattr(record, key, value)
            return record

    class NamedTuple(metaclass=_NamedTupleMeta):
        """Base of typed named tuples (see the module's docstring)."""

    class _ProtocolMeta(type):
        def __instancecheck__(cls, instance):
            if not cls.__dict__.get("_is_protocol", False):
                return super().__instancecheck__(instance)
            if not cls.__dict__.get("_is_runtime_protocol", False):
                raise TypeError(
                    f"isinstance() with {cls.__name__} needs it to be @runtime_checkable"
                )
            if super().__instancecheck__(instance):
                return True
            return all(hasattr(instance, member) for member in _members(cls))

    def _members(cls):
        members = set()
        for base in cls.__mro__:
            if base.__dict__.get("_is_protocol", False):
                members.update(base.__dict__)
                annotations = base.__dict__.get("__annotations__", {})  # noqa: RUF063 (no inspect)
                members.update(annotations)
        return members - _NOT_MEMBERS

    class Protocol(metaclass=_ProtocolMeta):
        """Base of protocols (see the module's docstring)."""

        __slots__ = ()

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            cls._is_protocol = Protocol in cls.__bases__

    def runtime_checkable(cls):
        """Let ``isinstance`` check ``cls``'s members (protocols only, as :mod:`typing` has it)."""
        if not cls.__dict__.get("_is_protocol", False):
            raise TypeError(f"@runtime_checkable applies to protocols, not to {cls.__name__}")
        cls._is_runtime_protocol = True
        return cls
