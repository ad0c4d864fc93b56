"""Control characters in what a tool prints are shown, not acted on, wherever its text is shown.

A trial's tool printed an OSC title sequence, a screen clear and colours: the command line's
progress line, `why` and `status` sent them raw to the terminal. A failure reason with stderr
also put the stderr's lines inside the sentence's parentheses.
"""

from __future__ import annotations

from pathlib import Path

from freshness_magic.engine.visible import visible
from tests.processes import cli

NOISY = r"""digraph e {
  start [shape=Mdiamond]
  e [shape=parallelogram,
     tool_command="printf '\\033]0;T\\007\\033[31mred\\r\\n'; \
printf '\\033[41merr\\033[0m' >&2; exit 1"]
  done [shape=Msquare]
  start -> e -> done
}
"""
COMMAND = r"printf '\033]0;T\007\033[31mred\r\n'; printf '\033[41merr\033[0m' >&2; exit 1"
TERMINAL_ACTS_ON = ("\x1b", "\x07", "\x9b")


def test_visible_keeps_lines_and_tabs_and_pictures_the_rest() -> None:
    assert visible("a\tb\r\nc\x1b[2J\x07\x00\x7f\x9b") == "a\tb\nc\u241b[2J\u2407\u2400\u2421\ufffd"


def test_the_command_line_shows_a_tools_escape_sequences_without_sending_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "e.dot").write_text(NOISY)
    ran = cli("run", "e.dot", cwd=tmp_path)
    assert ran.returncode == 1
    (run_dir,) = (tmp_path / ".freshness" / "runs").iterdir()
    why = cli("why", str(run_dir), "e", cwd=tmp_path)
    status = cli("status", str(run_dir), cwd=tmp_path)
    for said in (ran.stdout, ran.stderr, why.stdout, status.stdout):
        assert not any(char in said for char in TERMINAL_ACTS_ON), said
    assert "output: \u241b]0;T\u2407\u241b[31mred" in why.stdout
    assert "\u241b[41merr\u241b[0m" in ran.stdout
    failed = [line for line in ran.stdout.splitlines() if line.startswith("failed at 'e'")]
    assert failed == [
        "failed at 'e': node 'e' failed (exit code 1: "
        + COMMAND
        + "); no edge condition matched the failure and no retry_target/fallback_retry_target "
        "is set on the node or the graph"
    ]
    after = ran.stdout.split(failed[0], 1)[1].splitlines()
    assert after[1:3] == ["stderr (last 20 lines):", "\u241b[41merr\u241b[0m"]
    assert (run_dir / "nodes" / "e" / "stderr.txt").read_bytes() == b"\x1b[41merr\x1b[0m"
