"""The one path-safety module: every rule on real folders and real symbolic links in tmp dirs.

State: no write through a link anywhere under ``.freshness/`` or ``.orchestrator/``; verified
folders are remembered per run and confirmed with one ``lstat``. Inputs: real paths inside the
work tree only, no walk out through a linked folder nor around a loop, ``**`` runs counted once,
unreadable folders reported with their reason.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from freshness_magic import atomicio, pathsafety
from freshness_magic.errors import UnsafePathError
from freshness_magic.pathsafety import Listing, Refused, StateDirs, Walker, WorkTree
from freshness_magic.session import open_run
from tests.pipelines import ECHO_HI
from tests.unprivileged import unprivileged


def write(root: Path, rel: str, text: str = "x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def glob(root: Path, pattern: str, listing: Listing | None = None) -> tuple[list[str], list]:
    """(files, problems) of one glob walked by the module, both sorted."""
    walker = Walker(listing or Listing(), str(root), pattern.split("/"), WorkTree(root))
    return sorted(walker.files()), sorted(walker.problems.items())


# -- state: no write through a link ---------------------------------------------------------

LINKED = [".freshness", ".freshness/runs", ".freshness/runs/r1", ".freshness/runs/r1/nodes"]


@pytest.fixture
def work(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    yield work, outside
    assert [p for p in outside.rglob("*")] == [], "something was written outside"


@pytest.mark.parametrize("linked", LINKED)
@pytest.mark.parametrize(
    "writer",
    [
        lambda p: atomicio.write_json_atomic(p, {"a": 1}),
        lambda p: atomicio.append_jsonl(p, {"a": 1}),
        lambda p: os.close(pathsafety.open_for_write(p, os.O_WRONLY | os.O_CREAT)),
        lambda p: pathsafety.make_state_dir(p.parent / "sub"),
    ],
    ids=["write_atomic", "append_jsonl", "open_for_write", "make_state_dir"],
)
def test_no_writer_goes_through_a_linked_component(
    work: tuple[Path, Path], linked: str, writer: Callable[[Path], object]
) -> None:
    root, outside = work
    (root / linked).parent.mkdir(parents=True, exist_ok=True)
    (root / linked).symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError, match=re.escape(f"{linked} is a symbolic link")):
        writer(root / ".freshness/runs/r1/nodes/n/status.json")


def test_a_linked_state_file_is_neither_written_through_nor_read(
    work: tuple[Path, Path],
) -> None:
    root, outside = work
    folder = pathsafety.make_state_dir(root / ".orchestrator/evidence")
    (folder / "n.json").symlink_to(outside / "n.json")
    with pytest.raises(UnsafePathError):
        pathsafety.open_for_write(folder / "n.json", os.O_WRONLY | os.O_CREAT)
    with pytest.raises(UnsafePathError):
        atomicio.write_json_atomic(folder / "n.json", {})
    with pytest.raises(UnsafePathError):
        pathsafety.open_for_read(folder / "n.json")
    assert (folder / "n.json").is_symlink()


def test_a_folder_outside_any_state_folder_has_its_own_name_checked(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tmp_path / "runs").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="runs is a symbolic link"):
        pathsafety.make_state_dir(tmp_path / "runs")
    assert pathsafety.make_state_dir(tmp_path / "custom" / "runs").is_dir()


def test_node_ids_that_would_leave_their_folder_are_refused() -> None:
    for bad in ("../../x", "a/b", "..", ".", "", "a.b"):
        with pytest.raises(UnsafePathError, match="cannot name a file or folder"):
            pathsafety.check_component(bad)
    assert pathsafety.check_component("node_1") == "node_1"


def test_a_linked_driver_lock_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", write(tmp_path, "precious.txt", "keep me\n")
    run_dir = work / ".freshness/runs/r1"
    run_dir.mkdir(parents=True)
    (run_dir / "driver.lock").symlink_to(outside)
    with pytest.raises(UnsafePathError, match=r"driver\.lock is a symbolic link"):
        open_run(ECHO_HI, workdir=work, run_id="r1").step()
    assert outside.read_text() == "keep me\n"


# -- state: verified folders are remembered ---------------------------------------------------


def counting_lstat(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the path of every real ``os.lstat`` call (the call itself still happens)."""
    seen: list[str] = []
    real = os.lstat

    def lstat(path: str | os.PathLike[str], *args: object, **kwargs: object) -> os.stat_result:
        seen.append(os.fsdecode(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat)
    return seen


def test_remembered_folders_cost_one_lstat_per_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / ".freshness/runs/r1"
    seen = counting_lstat(monkeypatch)
    dirs = StateDirs()
    with pathsafety.remembering(dirs):
        for i in range(3):
            atomicio.write_json_atomic(run_dir / f"nodes/n{i}/status.json", {"i": i})
        # Each folder walked once: .freshness, runs, r1, nodes, n0, n1, n2.
        assert dirs.walked == 7
        seen.clear()
        for i in range(3, 60):
            atomicio.write_json_atomic(run_dir / f"nodes/n{i % 3}/status.json", {"i": i})
    assert dirs.walked == 7
    # Per write: one lstat confirms the remembered folder, one sees the old file is no link.
    assert sorted(set(seen)) == sorted(
        {str(run_dir / f"nodes/n{i}") for i in range(3)}
        | {str(run_dir / f"nodes/n{i}/status.json") for i in range(3)}
    )
    assert len(seen) == 57 * 2

    seen.clear()
    for i in range(60):  # without a cache every write walks every component again
        atomicio.write_json_atomic(run_dir / f"nodes/n{i % 3}/status.json", {"i": i})
    assert seen.count(str(tmp_path / ".freshness")) == 60


def test_a_remembered_folder_whose_path_now_leads_elsewhere_is_walked_again(
    work: tuple[Path, Path],
) -> None:
    root, outside = work
    dirs = StateDirs()
    with pathsafety.remembering(dirs):
        atomicio.write_json_atomic(root / ".freshness/runs/r1/a.json", {})
        moved = root.parent / "moved"
        (root / ".freshness/runs").rename(moved)
        (root / ".freshness/runs").symlink_to(outside, target_is_directory=True)
        (outside / "r1").mkdir()  # same path, another folder: refuted by its inode
        with pytest.raises(UnsafePathError, match="runs is a symbolic link"):
            atomicio.write_json_atomic(root / ".freshness/runs/r1/b.json", {})
    assert [p.name for p in (moved / "r1").iterdir()] == ["a.json"]
    (outside / "r1").rmdir()


def test_a_run_never_rewalks_the_state_folders_after_its_first_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 4 ]"
    pipeline = f"""digraph loop {{
      start [shape=Mdiamond]
      a [shape=parallelogram, tool_command="{count}"]
      done [shape=Msquare]
      start -> a
      a -> a [condition="outcome=fail"]
      a -> done [condition="outcome=success"]
    }}"""
    run = open_run(pipeline, workdir=tmp_path)
    run.step()
    seen = counting_lstat(monkeypatch)
    steps = 0
    while not run.state.finished and steps < 12:
        run.step()
        steps += 1
    top = {str(tmp_path / ".freshness"), str(tmp_path / ".freshness/runs")}
    assert steps == 5 and run.state.finished
    assert [p for p in seen if p in top] == []
    assert any(p.startswith(str(run.run_dir)) for p in seen)  # checked, by one lstat


# -- inputs: real paths inside the work tree --------------------------------------------------


def test_a_link_out_and_the_same_path_written_out_get_the_same_answer(tmp_path: Path) -> None:
    work = tmp_path / "work"
    write(tmp_path, "outside/secret.txt", "s")
    write(work, "inside.txt")
    (work / "notes.txt").symlink_to("../outside/secret.txt")
    (work / "near.txt").symlink_to("inside.txt")
    tree = WorkTree(work)
    for entry in ("notes.txt", "../outside/secret.txt", str(tmp_path / "outside/secret.txt")):
        located = tree.locate(entry)
        refused = located if isinstance(located, Refused) else tree.check_path(entry, located)
        assert isinstance(refused, Refused), entry
        assert "outside" in refused.reason
    located = tree.locate("near.txt")
    assert not isinstance(located, Refused) and tree.check_path("near.txt", located) is None
    assert tree.locate("~/x") == Refused("~/x", pathsafety.TILDE)
    allowed = WorkTree(work, allow_outside=[str(tmp_path / "outside")])
    assert allowed.locate("../outside/secret.txt") == pathsafety.Located(
        "/", str(tmp_path / "outside/secret.txt").lstrip("/"), True
    )


def test_a_link_to_the_root_is_reported_not_walked(tmp_path: Path) -> None:
    work = tmp_path / "work"
    write(work, "src/a.py")
    write(tmp_path, "secret.py")
    (work / "src/r").symlink_to("/", target_is_directory=True)
    (work / "src/s.py").symlink_to(tmp_path / "secret.py")
    listing = Listing()
    listing.track = set()
    files, problems = glob(work, "src/**", listing)
    assert files == ["src/a.py"]
    assert problems == [("src/r", pathsafety.OUTSIDE_LINK), ("src/s.py", pathsafety.OUTSIDE_LINK)]
    assert listing.track == {str(work), str(work / "src")}  # not one folder listed outside


def test_symlink_loops_end_and_each_file_is_found_once_per_path(tmp_path: Path) -> None:
    write(tmp_path, "a/one.md")
    write(tmp_path, "b/two.md")
    (tmp_path / "a/self").symlink_to(".", target_is_directory=True)
    (tmp_path / "a/up").symlink_to("..", target_is_directory=True)
    (tmp_path / "a/to_b").symlink_to("../b", target_is_directory=True)
    (tmp_path / "b/to_a").symlink_to("../a", target_is_directory=True)  # a <-> b
    (tmp_path / "knot").symlink_to("knot")  # a link to itself: neither file nor folder
    files, problems = glob(tmp_path, "**/*.md")
    assert problems == []
    assert files == ["a/one.md", "a/to_b/two.md", "b/to_a/one.md", "b/two.md"]


def test_repeated_double_stars_walk_once_and_match_the_same(tmp_path: Path) -> None:
    deep = tmp_path
    for level in range(30):
        deep = deep / f"d{level}"
        write(deep, f"f{level}.py")
    single_listing, many_listing = Listing(), Listing()
    single_listing.track, many_listing.track = set(), set()
    single = glob(tmp_path, "**/*.py", single_listing)
    for pattern in ("**/**/**/**/**/**/*.py", "**/**/**/**/**/**/**/*.py"):
        assert glob(tmp_path, pattern, many_listing) == single
    assert many_listing.track == single_listing.track
    assert len(single[0]) == 30
    assert pathsafety.collapse(["**", "**", "a", "**", "**", "*.py"]) == ["**", "a", "**", "*.py"]


@pytest.fixture
def shared_tree() -> Iterator[Path]:
    """A tree any user may enter (so a scenario run as nobody reaches the locked folder)."""
    root = Path(tempfile.mkdtemp(prefix="fm-paths-"))
    try:
        write(root, "open/a.md")
        write(root, "locked/inner.md")
        for folder, _dirs, files in os.walk(root):
            os.chmod(folder, 0o777)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o666)
        yield root
    finally:
        os.chmod(root / "locked", 0o700)
        shutil.rmtree(root, ignore_errors=True)


def test_an_unreadable_folder_is_reported_with_its_reason(shared_tree: Path) -> None:
    root = os.geteuid() == 0
    # As root: root's folder of mode 700, walked as nobody. Otherwise: mode 000.
    os.chmod(shared_tree / "locked", 0o700 if root else 0o000)

    def scenario() -> tuple[list[str], list]:
        return glob(shared_tree, "**/*.md")

    files, problems = unprivileged(scenario) if root else scenario()
    assert files == ["open/a.md"]
    assert problems == [("locked", f"{pathsafety.UNREADABLE}: Permission denied")]


LINEAR = """digraph l {
  start [shape=Mdiamond]  done [shape=Msquare]
  t [shape=parallelogram, tool_command="true"]
  start -> t -> done
}
"""


@pytest.mark.parametrize(
    "name", ["events.jsonl", "journal.jsonl", "checkpoint.json", "pipeline.dot"]
)
def test_the_run_s_own_files_are_not_read_through_a_link(tmp_path: Path, name: str) -> None:
    """A state file replaced by a link to a file outside is refused when read, never followed."""
    from freshness_magic.atomicio import read_jsonl
    from freshness_magic.engine import Run, load_pipeline
    from freshness_magic.errors import FreshnessMagicError

    work = tmp_path / "work"
    work.mkdir()
    with Run(load_pipeline(LINEAR), workdir=work) as run:
        run.run()
        run_dir = run.run_dir
    outside = tmp_path / "outside.txt"
    outside.write_bytes((run_dir / name).read_bytes())
    (run_dir / name).unlink()
    (run_dir / name).symlink_to(outside)
    if name == "events.jsonl":
        with pytest.raises(UnsafePathError, match="link"):
            list(read_jsonl(run_dir / name))
        return
    with pytest.raises(FreshnessMagicError) as caught:
        Run.resume(run_dir)
    assert "link" in str(caught.value), str(caught.value)


def test_a_node_id_too_long_for_a_file_name_is_refused() -> None:
    """A graph built in Python skips the parser: the state folder's own check refuses it."""
    from freshness_magic.pathsafety import check_component

    assert check_component("n" * 100) == "n" * 100
    with pytest.raises(UnsafePathError, match="it has 101 characters, at most 100; rename it"):
        check_component("n" * 101)
