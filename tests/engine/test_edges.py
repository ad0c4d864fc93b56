"""Edge selection: each of the five steps of DESIGN.md §4 item 1 and the FAIL rule of item 2."""

from __future__ import annotations

import pytest

from freshness_magic.engine.context import Context
from freshness_magic.engine.edges import select_edge
from freshness_magic.engine.gates import normalize_label
from freshness_magic.engine.outcome import Outcome, StageStatus
from tests.engine.runkit import graph


def pipeline(edges: str) -> str:
    return f"""digraph g {{
      start [shape=Mdiamond]
      n [shape=box, prompt="x"]
      a [prompt="a"] b [prompt="b"] c [prompt="c"]
      done [shape=Msquare]
      start -> n
      {edges}
      a -> done
      b -> done
      c -> done
    }}"""


def pick(edges: str, outcome: Outcome, context: dict[str, object] | None = None):
    g = graph(pipeline(edges))
    return select_edge(g, "n", outcome, Context(context or {}))


def test_step1_condition_match_wins_over_weight_label_and_suggestion() -> None:
    sel = pick(
        """n -> a [weight=100, label="Go"]
           n -> b [condition="outcome=success"]""",
        Outcome(preferred_label="Go", suggested_next_ids=["a"]),
    )
    assert sel.target == "b"
    assert sel.step == "condition"
    assert sel.reason == "condition `outcome=success` held"


def test_step1_several_matches_best_weight_then_target_id() -> None:
    sel = pick(
        """n -> c [condition="outcome=success", weight=2]
           n -> b [condition="context.flag=yes", weight=2]
           n -> a [condition="outcome=fail", weight=9]""",
        Outcome(),
        {"flag": "yes"},
    )
    assert sel.target == "b"
    assert "best of 2 matching edges" in sel.reason


def test_step2_preferred_label_after_normalisation() -> None:
    sel = pick(
        """n -> a [label="[A] Approve"]
           n -> b [label="R) Reject it", weight=5]
           n -> c [label="X - Skip"]""",
        Outcome(preferred_label="  reject IT "),
    )
    assert sel.target == "b"
    assert sel.step == "preferred_label"
    assert "preferred label '  reject IT ' matched" in sel.reason


def test_step2_ignores_conditional_edges_and_keeps_declaration_order() -> None:
    sel = pick(
        """n -> c [label="Yes", condition="outcome=fail"]
           n -> b [label="Yes"]
           n -> a [label="yes"]""",
        Outcome(preferred_label="yes"),
    )
    assert sel.target == "b"


def test_step3_suggested_next_ids_in_suggestion_order() -> None:
    sel = pick(
        """n -> a [weight=10]
           n -> b
           n -> c""",
        Outcome(preferred_label="nothing matches", suggested_next_ids=["zz", "c", "b"]),
    )
    assert sel.target == "c"
    assert sel.step == "suggested_next_ids"
    assert sel.reason == "suggested next node 'c'"


def test_step4_highest_weight_among_unconditional() -> None:
    sel = pick(
        """n -> a [weight=1]
           n -> b [weight=3]
           n -> c [condition="outcome=fail", weight=50]""",
        Outcome(),
    )
    assert sel.target == "b"
    assert sel.step == "weight"
    assert "highest weight (3)" in sel.reason


def test_step4_lexical_tiebreak_on_equal_weights() -> None:
    sel = pick("n -> c\n n -> a\n n -> b", Outcome())
    assert sel.target == "a"


def test_step5_none_when_no_condition_holds_and_no_unconditional_edge() -> None:
    sel = pick('n -> a [condition="outcome=fail"]\n n -> b [condition="context.x=1"]', Outcome())
    assert sel.edge is None
    assert sel.step == "none"
    assert "no unconditional edge" in sel.reason


def test_fail_takes_only_condition_matched_edges() -> None:
    failed = Outcome(status=StageStatus.FAIL, preferred_label="a", suggested_next_ids=["a"])
    sel = pick('n -> a [label="a"]\n n -> b [condition="outcome=fail"]', failed)
    assert sel.target == "b"
    sel = pick('n -> a [label="a", weight=9]\n n -> c', failed)
    assert sel.edge is None
    assert "unconditional edges are never taken after a failure" in sel.reason
    assert "2 unconditional edge(s) ignored" in sel.reason


def test_context_condition_uses_context_prefix_fallback() -> None:
    sel = pick(
        'n -> a [condition="context.tests_passed=true"]\n n -> b',
        Outcome(),
        {"tests_passed": "true"},
    )
    assert sel.target == "a"


@pytest.mark.parametrize(
    ("label", "normalised"),
    [
        ("[Y] Yes", "yes"),
        ("Y) Yes, deploy", "yes, deploy"),
        ("Y - Yes", "yes"),
        ("  Plain Label ", "plain label"),
        ("[N] No, redo", "no, redo"),
        ("A-B testing", "a-b testing"),
    ],
)
def test_normalize_label(label: str, normalised: str) -> None:
    assert normalize_label(label) == normalised
