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
