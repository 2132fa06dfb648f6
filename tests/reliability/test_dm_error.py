"""A disk whose middle sectors fail (issue 34.3): a device-mapper ``error`` target over a loop device,
with an ext2 file system whose ``features.bin`` has one 4 KiB block on those sectors.  A loader epoch
reading it ends with an :class:`ExtractorError` naming the file, the read's byte offset and ``EIO``,
after :data:`READ_RETRIES` retries, and nothing hangs (the timeout).

Needs root, ``losetup``, ``dmsetup``, ``mkfs.ext2``, ``filefrag`` and a kernel with device-mapper;
skipped, saying which is missing, elsewhere (containers often lack ``/dev/mapper/control``).  The
completion-boundary tests (``tests/features/test_read_faults.py``) run the same handling everywhere."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import labelled_store

import outre_async as oa
from outre_async.features import detect_io_uring
from outre_async.features._faults import READ_RETRIES

pytestmark = pytest.mark.timeout(120)
BLOCK = 4096  # the file system's block: the unit that goes bad
N, DIM = 1000, 128  # 512 B rows, 125 blocks; the middle block holds nodes 496..503 (496..499 are seeds)
TOOLS = ("losetup", "dmsetup", "mkfs.ext2", "filefrag", "mount", "umount")


def _sh(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)


def _need(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        pytest.skip(f"{what}: {(done.stderr or done.stdout).strip().splitlines()[0]}")


def _physical_block(path: Path, logical: int) -> int:
    """The file system block holding ``path``'s block ``logical`` (``filefrag -v``'s extent table)."""
    text = _sh("filefrag", "-v", "-b%d" % BLOCK, str(path)).stdout
    for lo, hi, phys in re.findall(r"^\s*\d+:\s*(\d+)\.\.\s*(\d+):\s*(\d+)\.\.", text, re.M):
        if int(lo) <= logical <= int(hi):
            return int(phys) + logical - int(lo)
    raise AssertionError(f"no extent of {path} holds block {logical}: {text}")


def _table(loop: str, sectors: int, bad: int) -> str:
    """Linear over ``loop`` but for the 8 sectors of file system block ``bad``, which fail."""
    s, n = bad * BLOCK // 512, BLOCK // 512
    return f"0 {s} linear {loop} 0\n{s} {n} error\n{s + n} {sectors - s - n} linear {loop} {s + n}\n"


@pytest.fixture
def failing_disk(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A dataset on a disk with one bad block in the middle of ``features.bin``; yields the dataset's
    path and the byte offset of the bad block in the file."""
    if os.geteuid() != 0:
        pytest.skip("needs root for losetup, dmsetup and mount")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    _need(_sh("dmsetup", "version"), "no device-mapper in this kernel")
    image, mnt, name = tmp_path / "disk.img", tmp_path / "mnt", f"outre-test-{os.getpid()}"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(16 << 20)
    _need(_sh("mkfs.ext2", "-q", "-F", "-b", str(BLOCK), str(image)), "mkfs.ext2 refused")
    attach = _sh("losetup", "-f", "--show", str(image))
    _need(attach, "no loop device")
    loop = attach.stdout.strip()
    try:
        _need(_sh("mount", loop, str(mnt)), "cannot mount the loop device")
        labelled_store(mnt / "ds", num_nodes=N, dim=DIM)
        logical = (N * DIM * 4 // BLOCK) // 2
        bad = _physical_block(mnt / "ds" / "features.bin", logical)
        _sh("umount", str(mnt))  # drops the file's page cache: every read below goes to the device
        _need(_sh("dmsetup", "create", name, stdin=_table(loop, (16 << 20) // 512, bad)), "dmsetup create refused")
        try:
            _sh("dmsetup", "mknodes", name)
            _need(_sh("mount", "-o", "ro", f"/dev/mapper/{name}", str(mnt)), "cannot mount the mapped device")
            try:
                yield mnt / "ds", logical * BLOCK
            finally:
                _sh("umount", "-l", str(mnt))
        finally:
            _sh("dmsetup", "remove", "--force", name)
    finally:
        _sh("umount", "-l", str(mnt))
        _sh("losetup", "-d", loop)


@pytest.mark.filterwarnings("ignore::outre_async.SmallBufferWarning")
@pytest.mark.parametrize("backend", [pytest.param("io_uring", marks=pytest.mark.skipif(
    not detect_io_uring(), reason="io_uring unavailable here")), "pread"])
def test_an_eio_block_mid_file_ends_the_epoch_naming_file_and_offset(failing_disk: tuple[Path, int],
                                                                   backend: str) -> None:
    path, bad = failing_disk
    ds = oa.open_dataset(path)
    with oa.OutreLoader(ds, fanouts=[4, 4], batch_size=50, 
                        io=oa.IOOptions(backend=backend, source_options={"max_read_bytes": 16384}), cache=oa.CacheOptions(buffer_rows=200)) as loader:
        with pytest.raises(oa.errors.ExtractorError, match=rf"Input/output error \({READ_RETRIES} retries, all failed\)") as info:
            for _ in loader:
                pass
    assert (info.value.path, info.value.errno) == (ds.features_path, errno.EIO)
    assert str(ds.features_path) in str(info.value) and f"at byte {info.value.offset}" in str(info.value)
    assert info.value.offset < bad + BLOCK and bad < info.value.offset + 16384  # the failed read covers the bad block
