"""A full disk under every writer (issue 34): a real ENOSPC from a small tmpfs mounted for the test (as
root; skipped where the kernel or the sandbox refuses the mount).  Each writer ends with one line that
says what to do, the previous version of what it replaces is byte for byte as it was, and nothing
half-written is left (an ``outre train`` that wrote nothing leaves no empty ``--out`` either)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from outre_async.cli import main as cli

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "cora.npz"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) for a small tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _fill(disk: Path, leave: int = 8 << 10) -> None:
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as f:
        f.write(b"\0" * max(free - leave, 0))


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
