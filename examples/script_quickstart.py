"""The quickstart pipeline from a plain Python script: run it to its gate, answer, finish.

``python examples/script_quickstart.py`` works in a temporary folder with the simulated model
(no network) and prints what the magics would: each step's line, the answer, the final table.
"""

from __future__ import annotations

import pathlib
import tempfile

from freshness_magic import Pipeline

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    work = pathlib.Path(tempfile.mkdtemp(prefix="fm-script-"))
    (work / "src").mkdir()
    (work / "src" / "login.py").write_text("def login(user):\n    return user is not None\n")
    (work / "docs").mkdir()
    (work / "docs" / "spec.md").write_text("# Login\nUsers with an account can log in.\n")

    review = Pipeline(HERE / "quickstart.dot", workdir=work)
    try:
        print(review.run().text)  # runs to the human gate and waits there
        print(review.why("approve").text)
        print(review.resume("approve", choice="Y", comment="checked by the script").text)
        print(review.status().text)
    finally:
        review.close()


if __name__ == "__main__":
    main()
