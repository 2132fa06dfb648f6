"""The io_uring and staging kernels: compiled = plain Python (``.py_func``) on small inputs, and a
real read through the ctypes path that ``NUMBA_DISABLE_JIT=1`` takes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from outre_async.features import detect_io_uring
from outre_async.features._staging_kernels import scatter_rows

ROOT = Path(__file__).resolve().parents[2]
NEEDS_URING = pytest.mark.skipif(not detect_io_uring(), reason="io_uring unavailable here")


@NEEDS_URING
@pytest.mark.parametrize("compiled", [True, False])
def test_slot_iovecs_cover_each_read_with_slots_and_holes(compiled: bool) -> None:
    from outre_async.features._uring_kernels import slot_iovecs

    fn = slot_iovecs if compiled else slot_iovecs.py_func
    lo = np.array([0, 512, 2048, 10240], dtype=np.int64)  # rows 0, 1, 4 | 20 (512 B rows)
    offsets, lengths = np.array([0, 10240]), np.array([2560, 512])
    iov = np.zeros((8, 2), dtype=np.int64)
    first, count = np.zeros(2, np.int64), np.zeros(2, np.int64)
    used = fn(lo, 512, np.array([100, 200, 300, 400]), offsets, lengths, 7, iov, first, count)
    assert used == 5 and first.tolist() == [0, 4] and count.tolist() == [4, 1]
    assert iov[:5].tolist() == [[100, 512], [200, 512], [7, 1024], [300, 512], [400, 512]]
    for k in range(2):  # every read's segments add up to its length
        assert iov[first[k] : first[k] + count[k], 1].sum() == lengths[k]


@NEEDS_URING
@pytest.mark.parametrize("compiled", [True, False])
def test_settle_counts_one_jobs_complete_reads_and_returns_the_rest(compiled: bool) -> None:
    from outre_async.features._uring_kernels import settle

    fn = settle if compiled else settle.py_func
    tags = np.array([(5 << 32) | 0, (6 << 32) | 0, (5 << 32) | 1, (5 << 32) | 2], dtype=np.uint64)
    res = np.array([4096, 4096, 100, -5], dtype=np.int32)
    needs, done = np.array([4096, 4096, 4096]), np.array([0, 0, 0])
    bad = np.zeros((4, 2), dtype=np.int64)
    assert fn(tags, res, 4, 5, needs, done, bad) == (3, 1, 4196, 2)
    assert bad[:2].tolist() == [[1, 100], [2, -5]]
    done[1] = 4000  # a resubmitted read: 96 more bytes complete it
    assert fn(tags, res, 4, 5, needs, done, bad)[1] == 2


@pytest.mark.parametrize("compiled", [True, False])
def test_scatter_rows_copies_each_row_once_to_its_destination(compiled: bool) -> None:
    fn = scatter_rows if compiled else scatter_rows.py_func
    staged = np.arange(40, dtype=np.uint32)
    out = np.zeros((5, 3), dtype=np.uint32)
    fn(staged, np.array([0, 10, 33]), np.array([2, 0, 1, 2]), out, np.array([4, 0, 2, 1]), 0, 4)
    assert out.tolist() == [[0, 1, 2], [33, 34, 35], [10, 11, 12], [0, 0, 0], [33, 34, 35]]


@NEEDS_URING
def test_reads_work_without_the_jit(tmp_path: Path) -> None:
    """``NUMBA_DISABLE_JIT=1``: the kernels call liburing through ctypes; the rows are the same."""
    code = textwrap.dedent(f"""
        import asyncio, numpy as np, outre_async as oa
        from outre_async.features import open_source
        from outre_async.features._feature_buffer import page_aligned_zeros
        x = np.random.default_rng(0).standard_normal((300, 128)).astype(np.float32)
        with oa.DatasetWriter({str(tmp_path / "ds")!r}, num_nodes=300, feature_dim=128, num_classes=2) as w:
            w.write_csc(np.arange(301, dtype=np.int64), np.arange(300) % 300)
            w.append_features(x)
        ds = oa.open_dataset({str(tmp_path / "ds")!r})
        async def main():
            async with open_source(ds, "io_uring") as src:
                ids = np.array([5, 3, 3, 299, 0])
                out = np.empty((5, 128), np.float32)
                await src.read_rows(ids, out)
                buf = page_aligned_zeros(8, 128)
                await src.read_rows_into(ids, buf, np.array([7, 1, 2, 0, 4]))
                assert (out == x[ids]).all() and (buf[[7, 1, 2, 0, 4]] == x[ids]).all()
                assert src.stats()["rows_into_slots"] == 4
        asyncio.run(main())
        print("ok")
    """)
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    proc = subprocess.run([sys.executable, "-P", "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
