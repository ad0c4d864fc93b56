"""Checking a document against a shipped schema, so that readers of a run directory take the
types of what they read from the schema that documents them, not from a second description.

Only the JSON Schema keywords the shipped schemas use are known (a test walks every schema);
a schema with another keyword raises :class:`SchemaError` instead of being half checked. The
answer is the first problem found, as ``where: what`` (``node_outcomes.lint: expected an
object, got null``), or None. ``format`` is an annotation here, as it is by default in JSON
Schema. Readers ignore keys they do not know (docs/FORMATS.md), so ``additionalProperties:
false`` is enforced only when ``strict`` is asked for.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description", "format"})
KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minimum",
        "minLength",
        "pattern",
        "$ref",
        "allOf",
        "oneOf",
        "if",
        "then",
        "else",
    }
)
"""The keywords :func:`first_problem` checks; with :data:`ANNOTATIONS`, all it accepts."""

_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


class SchemaError(Exception):
    """A shipped schema that this checker cannot apply (a keyword or a ``$ref`` it does not
    know): a fault of the package, never of the document."""


Problem = tuple[list[str | int], str]


@functools.cache
def _document(name: str) -> dict[str, Any]:
    from freshness_magic.schemas import load

    return load(name)


def _resolve(ref: str, doc: str) -> tuple[dict[str, Any], str]:
    name, _, pointer = ref.partition("#")
    name = name or doc
    target: Any = _document(name)
    for part in filter(None, pointer.split("/")):
        if not isinstance(target, dict) or part not in target:
            raise SchemaError(f"schema {name} has no {pointer}")
        target = target[part]
    if not isinstance(target, dict):
        raise SchemaError(f"{ref} in {doc} is not a schema")
    return target, name


def first_problem(value: Any, ref: str, *, strict: bool = False) -> str | None:
    """The first way ``value`` breaks the schema ``ref`` (``"checkpoint.schema.json"``, or with
    a pointer: ``"journal-record.schema.json#/$defs/step"``), as ``where: what``; None when it
    fits. Raises :class:`SchemaError` for a schema this checker cannot apply."""
    schema, doc = _resolve(ref, ref.partition("#")[0])
    found = _check(value, schema, doc, strict)
    if found is None:
        return None
    path, what = found
    return f"{_where(path)}: {what}"


def _where(path: list[str | int]) -> str:
    if not path:
        return "the document"
    text = ""
    for part in reversed(path):  # built innermost first
        if isinstance(part, int):
            text += f"[{part}]"
        elif _NAME.match(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part, ensure_ascii=False)}]"
    return text


def describe(value: Any) -> str:
    """A JSON value as a problem names it: ``null``, ``a string ("start")``, ``an array``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(shown, ensure_ascii=False)})"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _is(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, int | float)
    raise SchemaError(f"unknown type {kind!r}")


def _check(value: Any, schema: dict[str, Any], doc: str, strict: bool) -> Problem | None:
    """The first problem of ``value`` under ``schema`` (of document ``doc``); its path is
    innermost first, so nothing is built while the value fits."""
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else kind
        if not any(_is(value, k) for k in kinds):
            return [], "expected " + " or ".join(_TYPE_NAMES[k] for k in kinds) + (
                f", got {describe(value)}"
            )
    for key, rule in schema.items():
        if key == "type" or key in ANNOTATIONS or key in ("then", "else"):
            continue
        check = _KEYWORDS.get(key)
        if check is None:
            raise SchemaError(f"schema {doc} uses {key!r}, which the checker does not know")
        found = check(value, rule, schema, doc, strict)
        if found is not None:
            return found
    return None


def _enum(value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool) -> Problem | None:
    if any(_same(value, option) for option in rule):
        return None
    options = ", ".join(json.dumps(o) for o in rule)
    return [], f"expected one of {options}, got {describe(value)}"


def _const(value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool) -> Problem | None:
    return (
        None if _same(value, rule) else ([], f"expected {json.dumps(rule)}, got {describe(value)}")
    )


def _same(a: Any, b: Any) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _required(
    value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool
) -> Problem | None:
    if isinstance(value, dict):
        for name in rule:
            if name not in value:
                return [name], "missing (a required field)"
    return None


def _properties(
    value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool
) -> Problem | None:
    if isinstance(value, dict):
        for name, sub in rule.items():
            if name in value:
                found = _check(value[name], sub, doc, strict)
                if found is not None:
                    found[0].append(name)
                    return found
    return None


def _additional(
    value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool
) -> Problem | None:
    if not isinstance(value, dict):
        return None
    known = schema.get("properties", {})
    for name, item in value.items():
        if name in known:
            continue
        if rule is False:
            if strict:
                return [name], "a field this format does not have"
            continue
        found = _check(item, rule, doc, strict)
        if found is not None:
            found[0].append(name)
            return found
    return None


def _items(value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool) -> Problem | None:
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _check(item, rule, doc, strict)
            if found is not None:
                found[0].append(index)
                return found
    return None


def _minimum(
    value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool
) -> Problem | None:
    if _is(value, "number") and value < rule:
        return [], f"expected at least {rule}, got {describe(value)}"
    return None


def _min_length(
    value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool
) -> Problem | None:
    if isinstance(value, str) and len(value) < rule:
        return [], f"expected at least {rule} character(s), got {describe(value)}"
    return None


def _pattern(
    value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool
) -> Problem | None:
    if isinstance(value, str) and re.search(rule, value) is None:
        return [], f"expected text matching {rule}, got {describe(value)}"
    return None


def _ref(value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool) -> Problem | None:
    target, target_doc = _resolve(rule, doc)
    return _check(value, target, target_doc, strict)


def _all_of(
    value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool
) -> Problem | None:
    for sub in rule:
        found = _check(value, sub, doc, strict)
        if found is not None:
            return found
    return None


def _one_of(
    value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool
) -> Problem | None:
    misses = [_check(value, sub, doc, strict) for sub in rule]
    fits = misses.count(None)
    if fits == 1:
        return None
    if fits > 1:
        return [], f"fits {fits} of its {len(rule)} forms, not exactly one"
    # The form it came closest to: the one whose problem lies deepest.
    return max((m for m in misses if m is not None), key=lambda m: len(m[0]))


def _if(value: Any, rule: Any, schema: dict[str, Any], doc: str, strict: bool) -> Problem | None:
    branch = schema.get("then" if _check(value, rule, doc, strict) is None else "else")
    return None if branch is None else _check(value, branch, doc, strict)


_KEYWORDS = {
    "enum": _enum,
    "const": _const,
    "required": _required,
    "properties": _properties,
    "additionalProperties": _additional,
    "items": _items,
    "minimum": _minimum,
    "minLength": _min_length,
    "pattern": _pattern,
    "$ref": _ref,
    "allOf": _all_of,
    "oneOf": _one_of,
    "if": _if,
}
assert set(_KEYWORDS) | {"type", "then", "else"} == KEYWORDS
