"""A 40-node pipeline written for the view tests: six clusters (one nested),
a three-way choice, a rework loop through a gate, conditional edges, tool nodes and watched inputs.

Every node runs offline: codergen nodes use the simulated backend, tools are shell built-ins.
``security`` fails while the file ``fail.flag`` exists in the working directory (the failure
banner test writes it).
"""

from __future__ import annotations

from pathlib import Path

from tests.browser.lab import write_notebook

FACTORY_DOT = """digraph factory {
  graph [goal="Ship the search feature", rankdir=LR]
  start [shape=Mdiamond]
  done  [shape=Msquare]

  subgraph cluster_intake {
    label="Intake"
    read_issue [label="Read issue", prompt="Read the issue for $goal"]
    gather     [label="Gather notes", shape=parallelogram, tool_command="echo notes",
                source_files="docs/*.md", freshness="warn"]
    scope_work [label="Scope the work", prompt="Scope $goal from {tool.output}"]
    triage     [label="Triage", prompt="Which area does $goal touch?"]
  }
  subgraph cluster_design {
    label="Design"
    design_api  [label="API design"]
    design_ui   [label="UI design"]
    design_data [label="Data model"]
    merge_design [label="Merge designs"]
    design_ok   [shape=hexagon, label="Design OK?"]
  }
  subgraph cluster_build {
    label="Build"
    subgraph cluster_backend {
      label="Backend"
      be_model [label="Models"]
      be_api   [label="Endpoints"]
      be_tests [label="Backend tests", shape=parallelogram, tool_command="true",
                source_files="src/**/*.py", freshness="warn"]
    }
    subgraph cluster_frontend {
      label="Frontend"
      fe_components [label="Components"]
      fe_state      [label="State store"]
      fe_tests      [label="Frontend tests", shape=parallelogram, tool_command="true"]
    }
    integrate [label="Integrate"]
  }
  subgraph cluster_verify {
    label="Verify"
    lint      [label="Lint", shape=parallelogram, tool_command="true"]
    unit      [label="Unit tests", shape=parallelogram, tool_command="true"]
    e2e       [label="End-to-end", shape=parallelogram, tool_command="true"]
    perf      [label="Performance"]
    security  [label="Security scan", shape=parallelogram, tool_command="test ! -f fail.flag"]
    fix_build [label="Fix the build"]
    verify_ok [shape=hexagon, label="Ready to release?"]
  }
  subgraph cluster_docs {
    label="Docs"
    docs_api  [label="API docs"]
    docs_user [label="User guide"]
    changelog [label="Changelog"]
    docs_review [label="Review docs"]
  }
  subgraph cluster_release {
    label="Release"
    package   [label="Package", shape=parallelogram, tool_command="echo package"]
    staging   [label="Deploy to staging", shape=parallelogram, tool_command="true"]
    smoke     [label="Smoke test", shape=parallelogram, tool_command="true"]
    release_ok [shape=hexagon, label="Release?"]
    deploy    [label="Deploy", shape=parallelogram, tool_command="true"]
    rollback  [label="Roll back"]
    announce  [label="Announce"]
    retro     [label="Retrospective"]
    tag_release [label="Tag release", shape=parallelogram, tool_command="true"]
    release_notes [label="Release notes"]
  }
  archive [label="Archive run"]
  notify  [label="Notify team"]
  cleanup [label="Clean up"]

  start -> read_issue -> gather -> scope_work -> triage
  triage -> design_api
  triage -> design_ui   [condition="context.area=ui"]
  triage -> design_data [condition="context.area=data"]
  design_api -> merge_design
  design_ui -> merge_design
  design_data -> merge_design
  merge_design -> design_ok
  design_ok -> be_model [label="[A] Approve"]
  design_ok -> triage   [label="[R] Rework"]
  be_model -> be_api -> be_tests -> fe_components -> fe_state -> fe_tests -> integrate
  integrate -> lint -> unit
  unit -> e2e       [condition="outcome=success", label="tests pass"]
  unit -> fix_build [condition="outcome=fail"]
  fix_build -> integrate
  e2e -> perf -> security
  security -> verify_ok
  verify_ok -> docs_api  [label="[S] Ship"]
  verify_ok -> fix_build [label="[F] Fix first"]
  docs_api -> docs_user -> changelog -> docs_review -> package
  package -> tag_release -> staging -> smoke -> release_ok
  release_ok -> deploy   [label="[Y] Release"]
  release_ok -> rollback [label="[N] Roll back"]
  deploy -> announce
  deploy -> retro [condition="context.release.rehearsal=true"]
  rollback -> retro
  announce -> release_notes -> archive -> notify -> cleanup -> done
  retro -> done
}
"""
FACTORY_NODES = 42
"""40 stages plus start and exit."""
FACTORY_TB = FACTORY_DOT.replace("rankdir=LR", "rankdir=TB")
"""The same pipeline drawn top to bottom: a graph much taller than wide (as most pipelines
without ``rankdir`` are)."""


def write_factory(
    folder: Path,
    name: str = "factory.ipynb",
    extra: list[str] | None = None,
    dot: str = FACTORY_DOT,
) -> Path:
    """The factory pipeline (or ``dot``) as a notebook in ``folder``, with the files its nodes
    watch."""
    (folder / "docs").mkdir(parents=True, exist_ok=True)
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "docs" / "notes.md").write_text("# Notes\n\nSearch must be fast.\n")
    (folder / "src" / "search.py").write_text("def search(q: str) -> list[str]:\n    return []\n")
    cells = ["%load_ext freshness_magic", "%%pipeline factory\n" + dot, *(extra or [])]
    return write_notebook(folder / name, cells)
