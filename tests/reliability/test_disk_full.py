"""A full disk under every writer (issue 34): a real ENOSPC from a small tmpfs mounted for the test (as
root; skipped where the kernel or the sandbox refuses the mount).  Each writer ends with one line that
says what to do, the previous version of what it replaces is byte for byte as it was, and nothing
half-written is left (an ``outre train`` that wrote nothing leaves no empty ``--out`` either).

Two kinds of full: no bytes left (a writer with an up-front room check, ``outre reorder``, refuses
there), and no inodes left on a disk with bytes to spare (``nr_inodes``), which gets past every room
check and fails in the middle of the write, at a different file for each number of inodes left."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from outre_async.cli import main as cli

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "cora.npz"


def _tmpfs(mount: Path, options: str) -> Iterator[Path]:
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) for a small tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from _tmpfs(tmp_path / "disk", "size=4m")


@pytest.fixture
def few_inodes_disk(tmp_path: Path) -> Iterator[Path]:
    """Room in bytes but few inodes: ``statvfs`` shows plenty free, so a writer's up-front room check
    passes and the ENOSPC comes from the middle of the write (creating a file)."""
    yield from _tmpfs(tmp_path / "disk", "size=16m,nr_inodes=400")


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _fill(disk: Path, leave: int = 8 << 10) -> None:
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as f:
        f.write(b"\0" * max(free - leave, 0))


def _fill_inodes(disk: Path, leave: int) -> None:
    """Take every free inode of ``disk`` but ``leave`` (empty files under ``disk/fill``)."""
    (disk / "fill").mkdir()
    made = 0
    try:
        while True:
            (disk / "fill" / str(made)).touch()
            made += 1
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    for i in range(made - leave, made):
        (disk / "fill" / str(i)).unlink()


def _says_full(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "No space left on device" in err[-1] and "nothing was replaced" in err[-1], (argv, err)


def test_every_writer_on_a_full_disk_replaces_nothing_and_says_so(small_disk: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ds = small_disk / "ds"
    assert cli(["generate", "--preset", "tiny", str(ds)]) == 0
    assert cli(["partition", str(ds), "--parts", "8", "--name", "p8"]) == 0
    before = _snapshot(ds)
    _fill(small_disk)
    capsys.readouterr()
    runs = [["partition", str(ds), "--parts", "8", "--name", "p8", "--overwrite"],
            ["partition", str(ds), "--parts", "4", "--name", "p4"],
            ["train", str(ds), "--epochs", "1", "--out", str(small_disk / "run")]]
    if DATA.exists():
        runs.append(["convert", str(DATA), str(small_disk / "cora")])
    for argv in runs:
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert err and "No space left on device" in err[-1] and "nothing was replaced" in err[-1], (argv, err)
    assert _snapshot(ds) == before  # the dataset and its partition p8 as they were
    assert sorted(p.name for p in small_disk.iterdir()) == ["ds", "filler"]  # no output, temp or empty --out
    assert sorted(p.name for p in (ds / "partitions").iterdir()) == ["p8"]


def test_reorder_on_a_full_disk_keeps_the_previous_copy(small_disk: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """No room in bytes: ``outre reorder`` refuses before writing (its room check), replacing nothing."""
    ds, ordered = small_disk / "ds", small_disk / "ordered"
    assert cli(["generate", "--preset", "tiny", str(ds)]) == 0
    assert cli(["partition", str(ds), "--parts", "8", "--name", "p8"]) == 0
    assert cli(["reorder", str(ds), str(ordered), "--partitions", "p8"]) == 0
    before, before_copy = _snapshot(ds), _snapshot(ordered)
    _fill(small_disk)
    capsys.readouterr()
    for argv in (["reorder", str(ds), str(ordered), "--partitions", "p8", "--overwrite"],
                 ["reorder", str(ds), str(small_disk / "ordered2"), "--partitions", "p8"]):
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert err and "the output needs at least" in err[-1] and "is free there" in err[-1], (argv, err)
    assert _snapshot(ds) == before
    assert _snapshot(ordered) == before_copy
    assert sorted(p.name for p in small_disk.iterdir()) == ["ds", "filler", "ordered"]


def test_reorder_out_of_inodes_midway_keeps_the_previous_copy(few_inodes_disk: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The room check passes (bytes are free) and the write itself hits ENOSPC: the earlier ordered copy
    stands byte for byte, and no temp folder is left."""
    disk = few_inodes_disk
    ds, ordered = disk / "ds", disk / "ordered"
    assert cli(["generate", "--preset", "tiny", str(ds)]) == 0
    assert cli(["partition", str(ds), "--parts", "8", "--name", "p8"]) == 0
    assert cli(["reorder", str(ds), str(ordered), "--partitions", "p8"]) == 0
    before, before_copy = _snapshot(ds), _snapshot(ordered)
    for leave in range(0, 24, 3):  # fails at a different file of the copy each time (22 files)
        _fill_inodes(disk, leave)
        capsys.readouterr()
        _says_full(["reorder", str(ds), str(ordered), "--partitions", "p8", "--overwrite"], capsys)
        _says_full(["reorder", str(ds), str(disk / "ordered2"), "--partitions", "p8"], capsys)
        assert _snapshot(ds) == before
        assert _snapshot(ordered) == before_copy
        assert sorted(p.name for p in disk.iterdir()) == ["ds", "fill", "ordered"], leave
        shutil.rmtree(disk / "fill")


_PROFILE = ["--fanouts", "3,3", "--batch-size", "64", "--memory-budget", "8MiB", "--no-probe", "--device", "cpu",
            "--step-ms", "1", "--batches", "4"]


def test_profile_on_a_full_disk_keeps_the_previous_profile(small_disk: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A re-profile into the same name, and a new one, on a full disk: profile ``p`` stands as it was."""
    ds = small_disk / "ds"
    assert cli(["generate", "--preset", "tiny", str(ds)]) == 0
    assert cli(["profile", str(ds), *_PROFILE, "--name", "p"]) == 0
    before = _snapshot(ds)
    _fill(small_disk)
    capsys.readouterr()
    for name in ("p", "q"):
        _says_full(["profile", str(ds), *_PROFILE, "--name", name], capsys)
    assert _snapshot(ds) == before  # the dataset and the profile p as they were
    assert sorted(p.name for p in small_disk.iterdir()) == ["ds", "filler"]
    assert sorted(p.name for p in (ds / "profile").iterdir()) == ["p"]


def test_profile_out_of_inodes_midway_keeps_the_previous_profile(few_inodes_disk: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The ENOSPC comes while the profile's files are written (its temp folder, then each of its six
    files): profile ``p`` stands byte for byte, and no temp folder is left beside it."""
    disk = few_inodes_disk
    ds = disk / "ds"
    assert cli(["generate", "--preset", "tiny", str(ds)]) == 0
    assert cli(["profile", str(ds), *_PROFILE, "--name", "p"]) == 0
    before = _snapshot(ds)
    assert len(list((ds / "profile" / "p").iterdir())) == 6
    for leave in (0, 3, 6):
        _fill_inodes(disk, leave)
        capsys.readouterr()
        _says_full(["profile", str(ds), *_PROFILE, "--name", "p"], capsys)
        assert _snapshot(ds) == before, leave
        assert sorted(p.name for p in disk.iterdir()) == ["ds", "fill"], leave
        assert sorted(p.name for p in (ds / "profile").iterdir()) == ["p"], leave
        shutil.rmtree(disk / "fill")


def test_partition_and_generate_out_of_inodes_midway_replace_nothing(few_inodes_disk: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    disk = few_inodes_disk
    ds, other = disk / "ds", disk / "other"
    assert cli(["generate", "--preset", "tiny", str(ds)]) == 0
    assert cli(["generate", "--preset", "tiny", str(other), "--seed", "1"]) == 0
    assert cli(["partition", str(ds), "--parts", "8", "--name", "p8"]) == 0
    before, before_other = _snapshot(ds), _snapshot(other)
    for leave in (0, 3, 6):  # partitions/p8 has 9 files, a dataset 8 (each write needs a temp folder too)
        _fill_inodes(disk, leave)
        capsys.readouterr()
        _says_full(["partition", str(ds), "--parts", "8", "--name", "p8", "--overwrite"], capsys)
        _says_full(["partition", str(ds), "--parts", "4", "--name", "p4"], capsys)
        _says_full(["generate", "--preset", "tiny", str(other), "--overwrite"], capsys)
        _says_full(["generate", "--preset", "tiny", str(disk / "new")], capsys)
        assert (_snapshot(ds), _snapshot(other)) == (before, before_other), leave
        assert sorted(p.name for p in disk.iterdir()) == ["ds", "fill", "other"], leave
        assert sorted(p.name for p in (ds / "partitions").iterdir()) == ["p8"], leave
        shutil.rmtree(disk / "fill")
