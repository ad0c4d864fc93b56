"""The §10 condition language: parsing, evaluation, explanation and rejected syntax."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_magic.engine.condition_explain import explain_condition
from freshness_magic.engine.condition_syntax import Operator, split_fix
from freshness_magic.engine.conditions import (
    Condition,
    check_condition,
    evaluate_condition,
    parse_condition,
    stringify,
)
from freshness_magic.engine.context import Context
from freshness_magic.errors import ConditionError


def ev(text: str, outcome: str = "success", label: str = "", **context: object) -> bool:
    return evaluate_condition(text, outcome=outcome, preferred_label=label, context=context)


# -- parsing -------------------------------------------------------------------------------


def test_parses_spec_examples() -> None:
    cond = parse_condition("outcome=success && context.tests_passed=true")
    assert [(c.key, c.operator, c.value) for c in cond.clauses] == [
        ("outcome", Operator.EQ, "success"),
        ("context.tests_passed", Operator.EQ, "true"),
    ]
    assert parse_condition("context.loop_state!=exhausted").clauses[0].operator is Operator.NE
    assert parse_condition("preferred_label=Fix").clauses[0].value == "Fix"


def test_clause_columns_and_text() -> None:
    cond = parse_condition("  outcome = success &&  flag")
    assert [(c.text, c.column) for c in cond.clauses] == [
        ("outcome = success", 3),
        ("flag", 25),
    ]
    assert cond.clauses[1].operator is Operator.TRUTHY


def test_quoted_values_keep_spaces_and_ampersands() -> None:
    cond = parse_condition("preferred_label=\"Ship it\" && context.note='a && b'")
    assert [c.value for c in cond.clauses] == ["Ship it", "a && b"]
    assert parse_condition(r'x="say \"hi\""').clauses[0].value == 'say "hi"'


def test_bare_value_is_trimmed_text_up_to_and() -> None:
    cond = parse_condition("preferred_label = Ship it  && outcome=success")
    assert cond.clauses[0].value == "Ship it"


def test_empty_value_is_allowed() -> None:
    assert parse_condition("context.x=").clauses[0].value == ""


def test_blank_condition_has_no_clauses() -> None:
    assert parse_condition("").clauses == ()
    assert parse_condition("   ").clauses == ()


def test_parse_is_cached_by_text() -> None:
    assert parse_condition("outcome=fail") is parse_condition("outcome=fail")


@pytest.mark.parametrize(
    ("text", "token", "column", "advice"),
    [
        ("outcome==success", "==", 8, "write `outcome=success`"),
        ("outcome=success || outcome=fail", "||", 17, "use two edges, one per alternative"),
        ("a||b", "||", 2, "use two edges"),
        ("x < 3", "<", 3, "`=` and `!=` only"),
        ("x>3", ">", 2, "`=` and `!=` only"),
        ("x<=3", "<=", 2, "`=` and `!=` only"),
        ("x >= 3", ">=", 3, "`=` and `!=` only"),
        ("outcome=success and context.x=1", "and", 17, "join clauses with `&&`"),
        ("outcome=success or outcome=fail", "or", 17, "use two edges"),
        ("not outcome=success", "not", 1, "write `outcome!=success`"),
        ("!context.done", "!", 1, "write `context.done!=true`"),
        ("(outcome=success)", "(", 1, "parentheses"),
        ("outcome=(success)", "(", 9, "parentheses"),
        ("a && && b", "&&", 6, "remove one of them"),
        ("&& a", "&&", 1, "nothing before `&&`"),
        ("a &&", "&&", 3, "nothing after the final `&&`"),
        ("=x", "=", 1, "write `key=value`"),
        ("!=x", "!=", 1, "write `key!=value`"),
        ("outcome success", "success", 9, "write `outcome=value`"),
        ("a & b", "&", 3, "join clauses with `&&`"),
        ("a=b=c", "=", 4, "quote the value"),
        ('x="abc', '"', 3, 'close it with `"`'),
        ('x="a" b', "b", 7, "clauses are joined with `&&`"),
        ("context.", ".", 8, "full dotted key"),
        ('x=a"b', '"', 4, "quote the whole value"),
        ("$x=1", "$", 1, "keys are `outcome`"),
    ],
)
def test_rejected_syntax_names_token_column_and_alternative(
    text: str, token: str, column: int, advice: str
) -> None:
    with pytest.raises(ConditionError) as info:
        parse_condition(text)
    error = info.value
    assert error.token == token
    assert error.column == column
    assert f"`{token}`" in error.message or token in error.message
    assert advice in error.message
    assert error.text == text
    assert str(error).startswith(f"column {column}: ")


def test_check_condition_returns_error_or_none() -> None:
    assert check_condition("outcome=success") is None
    error = check_condition("outcome==success")
    assert isinstance(error, ConditionError)
    assert error.column == 8


def test_split_fix_separates_problem_and_advice() -> None:
    assert split_fix("`==` is not supported; write `outcome=success`") == (
        "`==` is not supported",
        "write `outcome=success`",
    )
    assert split_fix("`||` is not supported: use two edges, one per alternative") == (
        "`||` is not supported",
        "use two edges, one per alternative",
    )
    assert split_fix("no advice here") == ("no advice here", "")


# -- evaluation ----------------------------------------------------------------------------


def test_empty_condition_is_true() -> None:
    assert ev("", outcome="fail")
    assert ev("  ")


def test_outcome_and_preferred_label() -> None:
    assert ev("outcome=success")
    assert not ev("outcome=success", outcome="fail")
    assert ev("outcome!=success", outcome="fail")
    assert ev("preferred_label=Fix", label="Fix")
    assert not ev("preferred_label=fix", label="Fix")  # case-sensitive


def test_context_lookup_with_and_without_prefix() -> None:
    assert ev("context.tests_passed=true", **{"context.tests_passed": "true"})
    assert ev("context.tests_passed=true", tests_passed=True)
    assert ev("context.lint.errors=0", **{"lint.errors": 0})
    prefixed_wins = {"context.k": "a", "k": "b"}
    assert ev("context.k=a", **prefixed_wins)


def test_bare_dotted_key_is_a_context_lookup() -> None:
    assert ev("human.gate.selected=Y", **{"human.gate.selected": "Y"})
    assert not ev("human.gate.selected=Y")


def test_missing_key_compares_as_empty() -> None:
    assert not ev("context.missing=x")
    assert ev("context.missing!=x")
    assert ev("context.missing=")


@pytest.mark.parametrize(
    ("value", "truthy"),
    [
        ("yes", True),
        ("", False),
        ("false", True),
        ("FALSE", True),
        ("0", True),
        (True, True),
        (False, True),
        (0, True),
        (1, True),
        ([], False),
        (["a"], True),
        (None, False),
    ],
)
def test_bare_key_truthiness(value: object, truthy: bool) -> None:
    """Spec §10.5: a bare key is `bool(string(value))`, so "false" and "0" are true."""
    assert ev("context.flag", flag=value) is truthy


def test_values_are_stringified() -> None:
    assert stringify(True) == "true"
    assert stringify(None) == ""
    assert stringify(["a", "b"]) == "a,b"
    assert stringify(3) == "3"
    assert ev("context.files=a.py,b.py", files=["a.py", "b.py"])
    assert ev("context.n=3", n=3)


def test_all_clauses_must_hold() -> None:
    text = "outcome=success && context.a=1 && context.b"
    assert ev(text, a="1", b="x")
    assert not ev(text, a="1", b="")
    assert not ev(text, outcome="fail", a="1", b="x")


def test_evaluate_accepts_a_parsed_condition_and_a_real_context() -> None:
    context = Context({"context.ready": "true"})
    cond = parse_condition("context.ready=true")
    assert isinstance(cond, Condition)
    assert evaluate_condition(cond, outcome="success", context=context)
    assert cond.evaluate(outcome="success", context=context)


def test_evaluate_raises_on_bad_syntax() -> None:
    with pytest.raises(ConditionError):
        ev("outcome==success")


# -- explanation ---------------------------------------------------------------------------


def test_explain_reports_each_clause() -> None:
    result = explain_condition(
        "outcome=success && context.lint.errors=0 && context.flag",
        outcome="success",
        context={"lint.errors": 2},
    )
    assert result.result is False
    assert result.error is None
    first, second, third = result.clauses
    assert (first.key, first.resolved_key, first.operator, first.expected, first.actual) == (
        "outcome",
        "outcome",
        "=",
        "success",
        "success",
    )
    assert first.held
    assert second.resolved_key == "lint.errors"
    assert (second.expected, second.actual, second.held) == ("0", "2", False)
    assert (third.operator, third.expected, third.resolved_key, third.held) == (
        "truthy",
        None,
        None,
        False,
    )
    data = result.to_dict()
    assert data["clauses"][1]["actual"] == "2"
    assert "lint.errors = '2'" in str(result)


def test_explain_returns_syntax_error_instead_of_raising() -> None:
    result = explain_condition("outcome=success || x", outcome="success", context={})
    assert result.result is False
    assert result.clauses == ()
    assert result.error is not None
    assert (result.error.column, result.error.token) == (17, "||")
    assert "use two edges" in result.error.message
    assert result.to_dict()["error"]["column"] == 17
    assert "column 17" in str(result)


def test_explain_empty_condition_is_true() -> None:
    result = explain_condition("", outcome="fail", context={})
    assert result.result is True
    assert result.clauses == ()


# -- robustness ----------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab.=!&|()<> \"'\\cx_0-no")), max_size=40))
def test_operator_heavy_text_parses_or_raises_condition_error(text: str) -> None:
    try:
        cond = parse_condition(text)
    except ConditionError as error:
        assert 1 <= error.column <= max(len(text), 1)
        assert error.message
        return
    assert evaluate_condition(cond, outcome="success", context={}) in (True, False)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_text_parses_or_raises_condition_error(text: str) -> None:
    try:
        parse_condition(text)
    except ConditionError as error:
        assert 1 <= error.column <= max(len(text), 1)
    explained = explain_condition(text, outcome="success", context={})
    assert explained.result in (True, False)
