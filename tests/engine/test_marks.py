"""The mark derivation on traces built by hand: long loops, retries, parallel branches."""

from __future__ import annotations

from freshness_magic.engine.marks import MarkKind, derive_marks, node_marks
from freshness_magic.engine.runread import reads_within_run
from freshness_magic.engine.trace import Part, Read, Trace, Write


def loop(passes: int) -> list[Trace]:
    """``work`` reads the count its previous pass wrote; ``check`` reads it; round again."""
    traces: list[Trace] = []
    step = 0
    for k in range(passes):
        step += 1
        reads = [Read("i", f"fp{k - 1}", step - 2)] if k else []
        traces.append(
            Trace("work", "r", "d", step=step, cause=step - 1 or None, reads=reads,
                  writes={"i": Write(f"fp{k}")})
        )  # fmt: skip
        step += 1
        traces.append(
            Trace(
                "check", "r", "d", step=step, cause=step - 1, reads=[Read("i", f"fp{k}", step - 1)]
            )
        )
    return traces


def kinds(marks: dict[str, object]) -> dict[str, str]:
    return {n: m.kind.value for n, m in marks.items()}  # type: ignore[attr-defined]


def test_a_long_loop_marks_nothing_and_one_change_marks_its_readers() -> None:
    traces = loop(3000)  # judged in step order: no chain of 3000 nested judgements
    assert node_marks(traces, {}) == {}
    assert kinds(node_marks(traces, {"work": ["in.txt"]})) == {
        "work": "stale",
        "check": "outdated",
    }


def test_a_retry_a_person_asked_for_supersedes_what_others_read() -> None:
    a1 = Trace("a", "r", "d", step=1, writes={"v": Write("one")})
    b1 = Trace("b", "r", "d", step=2, cause=1, reads=[Read("v", "one", 1)])
    a2 = Trace("a", "r", "d", step=3, cause=None, writes={"v": Write("two")})  # retry(a)
    marks = derive_marks([a1, b1, a2], {})
    assert set(marks) == {2} and marks[2].kind is MarkKind.OUTDATED
    assert marks[2].links[0].superseded_by == 3
    same = Trace("a", "r", "d", step=3, cause=None, writes={"v": Write("one")})
    assert derive_marks([a1, b1, same], {}) == {}  # the same value: early cutoff
    stale_same = derive_marks([a1, b1, same], {"a": ["in.txt"]})  # judged by the newer run
    assert {s: m.kind for s, m in stale_same.items()} == {
        1: MarkKind.STALE,
        2: MarkKind.OUTDATED,
        3: MarkKind.STALE,
    }
    assert stale_same[2].links[0].source is stale_same[3]


def test_a_sibling_branch_never_descends_from_another() -> None:
    """Two branches of one parallel execution, then the fan-in; the parallel node is run
    again by a retry with the left branch's result unchanged and the right one changed."""
    start = Trace("start", "r", "d", step=1)
    left = Trace("left", "r", "d", step=2, cause=1, branch_of="par", within=4)
    right = Trace("right", "r", "d", step=3, cause=1, branch_of="par", within=4)
    parts = {"left": Part(2, "L"), "right": Part(3, "R")}
    par = Trace(
        "par", "r", "d", step=4, cause=1, writes={"parallel.results": Write("x", parts=parts)}
    )
    join = Trace(
        "join", "r", "d", step=5, cause=4,
        reads=[Read("parallel.results", "L", 2, part="left", via=4),
               Read("parallel.results", "R", 3, part="right", via=4)],
    )  # fmt: skip
    assert derive_marks([start, left, right, par, join], {}) == {}
    assert kinds(node_marks([start, left, right, par, join], {"right": ["r.md"]})) == {
        "right": "stale",
        "join": "outdated",
    }
    left2 = Trace("left", "r", "d", step=6, cause=None, branch_of="par", within=8)
    right2 = Trace("right", "r", "d", step=7, cause=None, branch_of="par", within=8)
    parts2 = {"left": Part(6, "L"), "right": Part(7, "R2")}
    par2 = Trace(
        "par", "r", "d", step=8, cause=None, writes={"parallel.results": Write("y", parts=parts2)}
    )
    marks = node_marks([start, left, right, par, join, left2, right2, par2], {})
    assert kinds(marks) == {"join": "outdated"}
    (link,) = marks["join"].links
    assert link.read.part == "right" and link.superseded_by == 8


def test_only_a_read_of_a_value_this_run_wrote_makes_an_execution_outdated() -> None:
    """What a read-only command asks of the trace records before it builds traces and loads
    the marks (:func:`~freshness_magic.engine.runread.reads_within_run`): without such a read
    nothing is outdated, however much changed."""
    wrote = Trace("a", "r", "d", step=1, writes={"v": Write("one")})
    cases = {
        "nothing read": [],
        "a value no execution wrote": [Read("goal", "fp", None)],
        "a value carried from another run": [Read("v", "one", 1, writer_run="earlier")],
        "a value this run wrote": [Read("v", "one", 1)],
    }
    for name, reads in cases.items():
        traces = [wrote, Trace("b", "r", "d", step=2, cause=1, reads=reads)]
        marks = node_marks(traces, {"a": ["in.txt"]})
        outdated = {n for n, m in marks.items() if m.kind is MarkKind.OUTDATED}
        linked = name == "a value this run wrote"
        assert reads_within_run([t.to_dict() for t in traces]) is linked, name
        assert outdated == ({"b"} if linked else set()), name
