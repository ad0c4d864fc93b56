"""The quickstart pipeline in a marimo notebook: load it, run it to its gate, show the view.

Open it with ``marimo edit examples/marimo_quickstart.py``; ``marimo export html
examples/marimo_quickstart.py -o quickstart.html`` runs it headless and writes a page that shows
the view offline. It works in a temporary folder and uses the simulated model: no network.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    return (mo,)


@app.cell
def _(mo):
    mo.md(
        """
        # The quickstart pipeline in marimo

        `freshness_magic.Pipeline` is the object the `%%pipeline` magic creates in Jupyter, with
        the same actions as methods. The cell below makes a small project in a temporary folder
        and loads the pipeline into it.
        """
    )
    return


@app.cell
def _():
    import pathlib
    import tempfile

    from freshness_magic import Pipeline

    work = pathlib.Path(tempfile.mkdtemp(prefix="fm-marimo-"))
    (work / "src").mkdir()
    (work / "src" / "login.py").write_text("def login(user):\n    return user is not None\n")
    (work / "docs").mkdir()
    (work / "docs" / "spec.md").write_text("# Login\nUsers with an account can log in.\n")

    review = Pipeline(
        """
        digraph review {
          graph [goal="Ship the login fix"]
          start   [shape=Mdiamond]
          lint    [shape=parallelogram, tool_command="python3 -m py_compile src/login.py",
                   source_files="src/**/*.py", freshness="block"]
          draft   [prompt="Summarise the change for $goal", source_files="docs/spec.md",
                   freshness="warn"]
          approve [shape=hexagon, label="Ship it?"]
          done    [shape=Msquare]
          start -> lint -> draft -> approve
          approve -> done  [label="[Y] Yes"]
          approve -> draft [label="[N] No, redo"]
        }
        """,
        workdir=work,
    )
    return (review,)


@app.cell
def _(mo, review):
    steps = review.run_to("approve")
    mo.md(f"Run to the gate:\n\n```text\n{steps.text}\n```")
    return


@app.cell
def _(mo, review):
    view = mo.ui.anywidget(review.widget)
    view  # noqa: B018 (marimo shows a cell's last expression)
    return


@app.cell
def _(mo, review):
    mo.md(f"```text\n{review.status().text}\n```")
    return


if __name__ == "__main__":
    app.run()
