"""DOT pipelines that several test modules run, and builders for the shapes most tests share.

Module constants rather than ``.dot`` files: a test reads the pipeline it runs one import away,
a builder states in its call the one thing a test varies (the command of a tool node, the
question of a gate), and a test that needs a file writes the text into its own tmp folder, as
before. The builders write the text every test wrote before, laid out alike: what they return
parses to the same graph (name, nodes, attributes, edges) as the literal it replaced.
"""

from collections.abc import Mapping, Sequence


def one_step(attrs: str, *, node: str = "work", name: str = "p") -> str:
    """``start -> NODE -> done``, its one working node ``node`` with the DOT attributes ``attrs``
    (written as in DOT, quotes escaped): what a test about one node's run needs."""
    return f"""digraph {name} {{
  start [shape=Mdiamond]
  {node} [{attrs}]
  done  [shape=Msquare]
  start -> {node} -> done
}}
"""


def one_tool(command: str, *, node: str = "work", name: str = "p", more: str = "") -> str:
    """:func:`one_step` whose node is a tool running ``command`` (DOT-escaped), with the further
    attributes ``more`` (such as ``timeout="1s"``)."""
    extra = f", {more}" if more else ""
    return one_step(f'shape=parallelogram, tool_command="{command}"{extra}', node=node, name=name)


def one_gate(
    label: str, *, node: str = "ask", name: str = "p", choices: Sequence[str] = ("[Y] Yes",)
) -> str:
    """``start -> NODE``, a human gate asking ``label``, each of ``choices`` an edge to ``done``:
    the smallest run that waits for an answer."""
    edges = "".join(f'  {node} -> done [label="{choice}"]\n' for choice in choices)
    return f"""digraph {name} {{
  start [shape=Mdiamond]
  {node} [shape=hexagon, label="{label}"]
  done  [shape=Msquare]
  start -> {node}
{edges}}}
"""


def rework_loop(
    attrs: str,
    *,
    node: str = "draft",
    gate: str = "approve",
    label: str = "Ship it?",
    choices: tuple[str, str] = ("[Y] Yes", "[N] No, redo"),
    name: str = "review",
    goal: str = "",
) -> str:
    """``start -> NODE -> GATE``, a human gate asking ``label``: its first choice ends the run,
    its second sends the work back to ``node`` (DOT attributes ``attrs``), as a reviewer does.
    ``goal``, when given, is the graph's ``$goal``."""
    done_choice, again_choice = choices
    graph = f'  graph [goal="{goal}"]\n' if goal else ""
    return f"""digraph {name} {{
{graph}  start [shape=Mdiamond]
  {node} [{attrs}]
  {gate} [shape=hexagon, label="{label}"]
  done  [shape=Msquare]
  start -> {node} -> {gate}
  {gate} -> done [label="{done_choice}"]
  {gate} -> {node} [label="{again_choice}"]
}}
"""


def gate_to_tools(
    label: str, choices: Mapping[str, tuple[str, str]], *, node: str = "ask", name: str = "g"
) -> str:
    """A human gate asking ``label`` whose each choice (its edge label, such as ``[Y] Yes``)
    leads to its own tool node (id and DOT-escaped command) and then to ``done``: which tool ran
    shows which answer the run took."""
    tools = "".join(
        f'  {tool} [shape=parallelogram, tool_command="{command}"]\n'
        for tool, command in choices.values()
    )
    edges = "".join(
        f'  {node} -> {tool} [label="{choice}"]\n' for choice, (tool, _) in choices.items()
    )
    ends = "".join(f"  {tool} -> done\n" for tool, _ in choices.values())
    return f"""digraph {name} {{
  start [shape=Mdiamond]
  {node} [shape=hexagon, label="{label}"]
{tools}  done  [shape=Msquare]
  start -> {node}
{edges}{ends}}}
"""


def fan_out(branches: Mapping[str, str], *, name: str = "p") -> str:
    """A parallel node ``fan`` whose branches (node id to DOT attributes) meet at the fan-in
    ``join`` before ``done``."""
    nodes = "".join(f"  {node} [{attrs}]\n" for node, attrs in branches.items())
    fans = "".join(f"  fan -> {node}\n" for node in branches)
    joins = "".join(f"  {node} -> join\n" for node in branches)
    return f"""digraph {name} {{
  start [shape=Mdiamond]
  fan   [shape=component]
{nodes}  join  [shape=tripleoctagon]
  done  [shape=Msquare]
  start -> fan
{fans}{joins}  join -> done
}}
"""


TWO_BRANCHES = fan_out(
    {
        "b1": 'shape=parallelogram, tool_command="echo b1 >> b1.txt"',
        "b2": 'shape=parallelogram, tool_command="echo b2 >> b2.txt"',
    }
)
"""A parallel node with two tool branches, each appending its name to its own file (so a
branch that ran twice shows it), joined by a fan-in."""

ONE_ENDS_ONE_WAITS = fan_out(
    {
        "quick": 'shape=parallelogram, tool_command="echo quick >> quick.txt"',
        "slow": "shape=parallelogram, "
        'tool_command="echo slow >> slow.txt; test -f go || exec sleep 60"',
    }
)
"""``quick`` ends at once; ``slow`` sleeps until the file ``go`` exists, so a test stops the
parallel node with one branch ended and one running. Each appends to its file per run."""

GATED_CHILD = gate_to_tools(
    "Approve the sprint?",
    {
        "[A] Approve": ("approved", "echo approved > verdict.txt"),
        "[R] Reject": ("rejected", "echo rejected > verdict.txt"),
    },
    node="approve",
    name="child",
)
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


SLOW_TOOL = one_tool("echo $$ > pgid.txt; sleep 30; echo work >> work.log", name="slow")
"""A tool that writes its process group id to ``pgid.txt`` at once and its work to ``work.log``
after 30 s: a test stops it, or sees that it outlived what should have stopped it."""

ECHO_HI = one_tool("echo hi")
"""The smallest pipeline that completes: one tool that prints ``hi``."""

GO_GATE = one_gate("Go?", node="review", name="g", choices=("[Y] Yes", "[N] No"))
"""A run that waits at its gate ``review`` and ends whichever way it is answered."""

BLOCKED_BY_OWN_EDIT = """digraph blk {
  start [shape=Mdiamond]
  edit  [shape=parallelogram, tool_command="echo two > data/input.txt"]
  prep  [shape=parallelogram, tool_command="cat data/input.txt", source_files="data/*.txt",
         freshness="block"]
  done  [shape=Msquare]
  start -> edit -> prep -> done
}
"""
"""``edit`` rewrites ``data/input.txt`` after the run began; ``prep`` reads it with freshness
``block``, so the run stops before ``prep`` (the workdir needs ``data/input.txt``)."""
