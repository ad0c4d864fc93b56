"""Resolving source_files entries: paths, globs, **, hidden names, outside entries, symlinks."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest

from freshness_magic.freshness.resolve import Resolver, is_glob

from .conftest import write


def files(root: Path, *entries: str, **kw: object) -> list[str]:
    return Resolver(root, **kw).resolve(list(entries)).files  # type: ignore[arg-type]


def test_is_glob() -> None:
    assert is_glob("src/*.py") and is_glob("a?.md") and is_glob("[ab].txt")
    assert not is_glob("docs/spec.md")


def test_plain_paths_are_tracked_even_when_missing(tmp_path: Path) -> None:
    write(tmp_path, "docs/spec.md")
    res = Resolver(tmp_path).resolve(["docs/spec.md", "missing.txt"])
    assert res.files == ["docs/spec.md", "missing.txt"]
    assert res.literal == {"docs/spec.md", "missing.txt"}


def test_star_matches_one_level_and_not_hidden(tmp_path: Path) -> None:
    for rel in ("src/a.ts", "src/b.ts", "src/sub/c.ts", "src/.hidden.ts", "src/x.js"):
        write(tmp_path, rel)
    assert files(tmp_path, "src/*.ts") == ["src/a.ts", "src/b.ts"]
    assert files(tmp_path, "src/.*.ts") == ["src/.hidden.ts"]


def test_double_star_matches_any_depth_including_zero(tmp_path: Path) -> None:
    for rel in ("src/a.py", "src/m/b.py", "src/m/n/c.py", "src/m/n/d.txt", "top.py"):
        write(tmp_path, rel)
    assert files(tmp_path, "src/**/*.py") == ["src/a.py", "src/m/b.py", "src/m/n/c.py"]
    assert files(tmp_path, "**/*.py") == ["src/a.py", "src/m/b.py", "src/m/n/c.py", "top.py"]
    assert files(tmp_path, "src/**") == ["src/a.py", "src/m/b.py", "src/m/n/c.py", "src/m/n/d.txt"]


def test_double_star_skips_hidden_folders(tmp_path: Path) -> None:
    write(tmp_path, ".git/config")
    write(tmp_path, ".freshness/runs/x.json")
    write(tmp_path, "a.txt")
    assert files(tmp_path, "**") == ["a.txt"]


def test_glob_without_matches_is_empty_not_an_error(tmp_path: Path) -> None:
    res = Resolver(tmp_path).resolve(["nothing/**/*.c", "*.none"])
    assert res.files == [] and res.unresolved == []


def test_duplicates_across_entries_are_listed_once(tmp_path: Path) -> None:
    write(tmp_path, "a.py")
    assert files(tmp_path, "a.py", "*.py", "**/*.py") == ["a.py"]


def test_entries_outside_the_workdir_are_unresolved_unless_allowed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = write(tmp_path, "outside.txt")
    res = Resolver(work).resolve([str(outside), "../outside.txt", "../*.txt"])
    assert res.files == []
    assert [u.entry for u in res.unresolved] == [str(outside), "../outside.txt", "../*.txt"]
    assert all("outside the working directory" in u.reason for u in res.unresolved)
    allowed = Resolver(work, allow_outside=[str(tmp_path)]).resolve(["../outside.txt"])
    assert allowed.files == [str(outside)] and allowed.unresolved == []


def test_absolute_path_inside_the_workdir_becomes_relative(tmp_path: Path) -> None:
    write(tmp_path, "docs/a.md")
    assert files(tmp_path, str(tmp_path / "docs" / "a.md")) == ["docs/a.md"]


def test_dotdot_that_stays_inside_is_fine(tmp_path: Path) -> None:
    write(tmp_path, "docs/a.md")
    assert files(tmp_path, "src/../docs/a.md") == ["docs/a.md"]


def test_a_folder_named_as_a_path_is_kept_for_the_snapshot_to_report(tmp_path: Path) -> None:
    write(tmp_path, "docs/a.md")
    res = Resolver(tmp_path).resolve(["docs", "."])
    assert res.files == ["docs"]
    assert [u.entry for u in res.unresolved] == ["."]


def test_symlink_to_file_matches_glob(tmp_path: Path) -> None:
    target = write(tmp_path, "real/data.txt")
    (tmp_path / "src").mkdir()
    os.symlink(target, tmp_path / "src" / "link.txt")
    assert files(tmp_path, "src/*.txt") == ["src/link.txt"]


def test_symlink_to_folder_is_followed(tmp_path: Path) -> None:
    write(tmp_path, "real/x/data.txt")
    (tmp_path / "src").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "src" / "linked")
    assert files(tmp_path, "src/**/*.txt") == ["src/linked/x/data.txt"]


def test_symlink_loops_end(tmp_path: Path) -> None:
    write(tmp_path, "a/file.txt")
    os.symlink(tmp_path / "a", tmp_path / "a" / "loop")
    os.symlink(tmp_path, tmp_path / "a" / "up")
    os.symlink("self", tmp_path / "self")  # a link to itself: neither file nor folder
    found = files(tmp_path, "**")
    assert "a/file.txt" in found
    assert not any("loop/loop" in f or "up/a/up" in f for f in found)
    assert "self" not in found


def test_broken_symlink_is_not_a_glob_match(tmp_path: Path) -> None:
    os.symlink(tmp_path / "gone.txt", tmp_path / "dangling.txt")
    assert files(tmp_path, "*.txt") == []


def test_every_resolve_rereads_the_folders(tmp_path: Path) -> None:
    resolver = Resolver(tmp_path)
    write(tmp_path, "a.md")
    assert resolver.resolve(["*.md"]).files == ["a.md"]
    write(tmp_path, "b.md")
    assert resolver.resolve(["*.md"]).files == ["a.md", "b.md"]


def test_folder_listing_reuse_still_sees_added_files(tmp_path: Path) -> None:
    """Listings of unchanged old folders are reused; any entry change re-reads the folder."""
    import time

    write(tmp_path, "src/a.py")
    old = time.time_ns() - 10_000_000_000
    os.utime(tmp_path / "src", ns=(old, old))
    resolver = Resolver(tmp_path)
    now = time.time_ns()
    assert resolver.resolve_many({"n": ["src/*.py"]}, now)["n"].files == ["src/a.py"]
    write(tmp_path, "src/b.py")
    os.utime(tmp_path / "src", ns=(old, old))  # same mtime again; ctime still moves
    assert resolver.resolve_many({"n": ["src/*.py"]}, now)["n"].files == ["src/a.py", "src/b.py"]
    (tmp_path / "src/a.py").unlink()
    assert resolver.resolve_many({"n": ["src/*.py"]}, now)["n"].files == ["src/b.py"]


def test_folder_listing_inside_the_racy_window_is_always_reread(tmp_path: Path) -> None:
    """Forge a remembered key that matches the folder: only the racy rule can save us."""
    import time

    write(tmp_path, "src/a.py")
    resolver = Resolver(tmp_path)
    now = time.time_ns()
    resolver.resolve_many({"n": ["src/*"]}, now)
    folder = str(tmp_path / "src")
    write(tmp_path, "src/c.py")
    st = os.stat(folder)
    key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    forged = resolver._folders[folder]._replace(key=key, listed_at=now)
    resolver._folders[folder] = forged  # mtime inside the window
    assert resolver.resolve_many({"n": ["src/*"]}, now)["n"].files == ["src/a.py", "src/c.py"]
    write(tmp_path, "src/d.py")
    later = time.time_ns() + 10_000_000_000
    for consulted in list(resolver._folders):  # the folder and its parent, forged as old
        st = os.stat(consulted)
        key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
        memo = resolver._folders[consulted]._replace(key=key, listed_at=later)
        resolver._folders[consulted] = memo  # outside the window: what it remembers is trusted
    assert resolver.resolve_many({"n": ["src/*"]}, later)["n"].files == ["src/a.py", "src/c.py"]


def test_a_pass_lists_only_the_folders_that_changed(tmp_path: Path) -> None:
    """A tool adding a file to one folder makes only that folder be listed again; the others
    come from what the previous pass remembered (shown by forging a remembered name)."""
    import time

    write(tmp_path, "a/one.txt")
    write(tmp_path, "b/two.txt")
    old = time.time_ns() - 10_000_000_000
    for folder in ("a", "b", "."):
        os.utime(tmp_path / folder, ns=(old, old))  # outside the racy window: rememberable
    resolver = Resolver(tmp_path)
    assert resolver.resolve_many({"n": ["**"]}, time.time_ns())["n"].files == [
        "a/one.txt",
        "b/two.txt",
    ]
    b = str(tmp_path / "b")
    resolver._folders[b] = resolver._folders[b]._replace(files="two.txt\0forged.txt")
    write(tmp_path, "a/new.txt")  # a changes, b does not
    assert resolver.resolve_many({"n": ["**"]}, time.time_ns())["n"].files == [
        "a/new.txt",
        "a/one.txt",
        "b/forged.txt",
        "b/two.txt",
    ]
    os.utime(tmp_path / "b", ns=(old + 1, old + 1))  # b's key changes: listed again
    assert resolver.resolve_many({"n": ["**"]}, time.time_ns())["n"].files == [
        "a/new.txt",
        "a/one.txt",
        "b/two.txt",
    ]


FOLDERS = ["src", "src/x", "src/x/y", "docs", "docs/old", ".cfg", "lib", "src/.cache"]
NAMES = ["a.py", "b.py", "c.md", "readme.md", ".env", "d.ini", "e.txt"]
ENTRIES = [
    ["**"],
    ["src/**", "docs/readme.md"],
    ["*.md", "src/*.py", ".cfg/*.ini"],
    ["src/**/*.py", "docs/*", "lib/missing.py"],
    ["*/x/*", "lib/?.py", "docs/old/**"],
    [".cfg/**", "**/*.md", "src/x/y/a.py"],
]


def _change(root: Path, rng: random.Random) -> str:
    """One random change to the tree (what a tool or a person does between two checks)."""
    folders = [f for f in FOLDERS if (root / f).is_dir()]
    present = [p for p in root.rglob("*") if p.is_file() and ".freshness" not in p.parts]
    kind = rng.choice(
        ["add", "remove", "rename", "empty folder", "remove folder", "new folder", "top"]
    )
    if kind == "add" or (kind in ("remove", "rename") and not present):
        write(root, f"{rng.choice(folders)}/{rng.choice(NAMES)}")
    elif kind == "remove":
        rng.choice(present).unlink()
    elif kind == "rename":
        path = rng.choice(present)
        path.rename(path.with_name("moved_" + path.name))
    elif kind == "empty folder":
        (root / rng.choice(folders) / "empty").mkdir(exist_ok=True)
    elif kind == "remove folder" and len(folders) > 1:
        shutil.rmtree(root / rng.choice([f for f in folders if f != "src"]))
    elif kind == "new folder":
        write(root, f"{rng.choice(folders)}/fresh/{rng.choice(NAMES)}")
    else:  # a run's own state written in the top folder
        (root / ".freshness" / f"state{rng.randrange(1000)}").mkdir(parents=True)
    return kind


def test_the_folders_holding_the_keys_are_told_by_the_folders_listed(tmp_path: Path) -> None:
    write(tmp_path, "src/a.py")
    write(tmp_path, "src/deep/b.py")
    write(tmp_path, "docs/spec.md")
    resolver = Resolver(tmp_path, allow_outside=True)
    entries = ["src/**/*.py", "docs/spec.md", "notes/missing.txt"]
    resolution = resolver.resolve_many({"n": entries}, time.time_ns())["n"]
    # the walk's folders and the literal paths' (tracked even when missing)
    assert resolver.key_folders(entries, resolution) == {"", "src", "src/deep", "docs", "notes"}
    outside = tmp_path.parent / "elsewhere.txt"
    entries = [str(outside)]
    resolution = resolver.resolve_many({"m": entries}, time.time_ns())["m"]
    assert resolution.files == [str(outside)] and resolver.key_folders(entries, resolution) is None
    fresh = Resolver(tmp_path)
    assert fresh.key_folders(["src/**"], fresh.resolve(["src/**"])) is None  # no pass kept


@pytest.mark.parametrize("seed", range(24))
def test_a_remembered_resolution_after_changes_is_what_a_fresh_one_finds(
    tmp_path: Path, seed: int
) -> None:
    """Another process's resolution (a checkpoint's) with the folders it rests on, then random
    changes: the folders that changed are listed again, the others give what was recorded,
    and the result is the files, literal paths and refusals a resolver listing everything
    finds."""
    rng = random.Random(seed)
    for folder in FOLDERS:
        for name in rng.sample(NAMES, rng.randrange(len(NAMES))):
            write(tmp_path, f"{folder}/{name}")
    old = time.time_ns() - 10_000_000_000
    for path in [tmp_path, *(p for p in tmp_path.rglob("*") if p.is_dir())]:
        os.utime(path, ns=(old, old))  # outside the racy window: rememberable
    entries = ENTRIES[seed % len(ENTRIES)]
    first = Resolver(tmp_path)
    recorded = first.resolve_many({"n": entries}, time.time_ns())["n"]
    folders = first.folder_keys(entries)
    assert folders is not None
    changes = [_change(tmp_path, rng) for _ in range(rng.randrange(1, 4))]
    again = Resolver(tmp_path)
    again.remember(entries, folders, recorded.files, recorded.literal, recorded.unresolved)
    got = again.resolve_many({"n": entries}, time.time_ns())["n"]
    want = Resolver(tmp_path).resolve(entries)
    assert (got.files, got.literal, got.unresolved) == (
        want.files,
        want.literal,
        want.unresolved,
    ), changes
    for resolver, resolution in ((first, recorded), (again, got)):
        holding = resolver.key_folders(entries, resolution)
        assert holding is not None, changes  # no links: the folders are known
        assert {key.rpartition("/")[0] for key in resolution.files} <= holding, changes
