"""DOT pipelines that several test modules run."""

TWO_BRANCHES = """
digraph p {
  start [shape=Mdiamond]
  fan   [shape=component]
  b1    [shape=parallelogram, tool_command="echo b1 >> b1.txt"]
  b2    [shape=parallelogram, tool_command="echo b2 >> b2.txt"]
  join  [shape=tripleoctagon]
  done  [shape=Msquare]
  start -> fan
  fan -> b1
  fan -> b2
  b1 -> join
  b2 -> join
  join -> done
}
"""
"""A parallel node with two tool branches, each appending its name to its own file (so a
branch that ran twice shows it), joined by a fan-in."""

GATED_CHILD = """
digraph child {
  start    [shape=Mdiamond]
  approve  [shape=hexagon, label="Approve the sprint?"]
  approved [shape=parallelogram, tool_command="echo approved > verdict.txt"]
  rejected [shape=parallelogram, tool_command="echo rejected > verdict.txt"]
  done     [shape=Msquare]
  start -> approve
  approve -> approved [label="[A] Approve"]
  approve -> rejected [label="[R] Reject"]
  approved -> done
  rejected -> done
}
"""
"""A child pipeline for a manager node: its gate ``approve`` decides what ``verdict.txt`` says."""


def managing(child_file: str) -> str:
    """A parent pipeline whose manager node ``manage`` supervises ``child_file``."""
    return f"""digraph parent {{
  start  [shape=Mdiamond]
  manage [shape=house, "stack.child_dotfile"="{child_file}"]
  done   [shape=Msquare]
  start -> manage -> done
}}
"""


SLOW_TOOL = """digraph slow {
  start [shape=Mdiamond]
  work  [shape=parallelogram, tool_command="echo $$ > pgid.txt; sleep 30; echo work >> work.log"]
  done  [shape=Msquare]
  start -> work -> done
}
"""
"""A tool that writes its process group id to ``pgid.txt`` at once and its work to ``work.log``
after 30 s: a test stops it, or sees that it outlived what should have stopped it."""

ONE_ENDS_ONE_WAITS = """
digraph p {
  start [shape=Mdiamond]
  fan   [shape=component]
  quick [shape=parallelogram, tool_command="echo quick >> quick.txt"]
  slow  [shape=parallelogram, tool_command="echo slow >> slow.txt; test -f go || exec sleep 60"]
  join  [shape=tripleoctagon]
  done  [shape=Msquare]
  start -> fan
  fan -> quick
  fan -> slow
  quick -> join
  slow -> join
  join -> done
}
"""
"""``quick`` ends at once; ``slow`` sleeps until the file ``go`` exists, so a test stops the
parallel node with one branch ended and one running. Each appends to its file per run."""
