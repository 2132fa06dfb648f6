"""Random reads of one size as vectored reads of more and more segments: what a segment costs the device.

    python -P benchmarks/readv_segments.py PATH [--size 45056] [--depth 256] [--reads 60000] [--segments 1,2,4,12,24]

Why (issue 26, ``features/_bounce.py``): a merged read straight into the feature buffer's slots is a
vectored read with a segment per row and per hole.  Each run reads ``--reads`` random 512 B-aligned offsets
of ``PATH`` (O_DIRECT, io_uring, ``--depth`` in flight) with ``--size`` bytes per read, split into ``s``
segments: ``s = 1`` one contiguous buffer; else ``k`` rows of 512 B at scattered 512 B-aligned addresses
with ``k - 1`` holes into one sink, ``s = 2k`` segments in all.  It prints reads/s and GB/s per segment
count; on the virtio disk here (45 KiB reads, depth 256), one run: 1 segment 23.5 k/s, 2: 22.6 k, 4: 20.5 k,
12: 16.2 k, 24: 12.8 k, 48: 7.0 k; another: 1: 24.5 k, 2: 29.4 k, 4: 24.4 k, 12: 16.2 k (2 and 4 segments
vary from run to run; 12 and more are always far slower).  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import mmap
import os
import time

import numpy as np
from numba import njit

from outre_async.features import _uring_kernels as K
from outre_async.features._uring_kernels import (
    _cq_advance,
    _get_sqe,
    _load_i32,
    _peek_batch,
    _prep_readv,
    _set_data64,
    _submit_and_wait,
)


@njit(nogil=True)
def readv_loop(ring, fd, iov_base, iov_count, nsets, offsets, depth, cqe_ptrs):  # noqa: ANN001, ANN201
    """Read every offset with the ``iov_count`` segments of iovec set ``k % nsets``, ``depth`` in flight."""
    n = len(offsets)
    issued = completed = inflight = 0
    nbytes = 0
    while completed < n:
        while inflight < depth and issued < n:
            sqe = _get_sqe(ring)
            if sqe == 0:
                break
            _prep_readv(sqe, fd, iov_base + (issued % nsets) * iov_count * 16, iov_count, offsets[issued])
            _set_data64(sqe, issued)
            issued += 1
            inflight += 1
        _submit_and_wait(ring, 1)
        m = _peek_batch(ring, cqe_ptrs.ctypes.data, len(cqe_ptrs))
        for i in range(m):
            res = _load_i32(cqe_ptrs[i] + 8)
            if res < 0:
                return -1, res
            nbytes += res
        if m:
            _cq_advance(ring, m)
        completed += m
        inflight -= m
    return completed, nbytes


def segments_of(count: int, size: int, rows: int, sink: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """One read's ``(address, length)`` segments: one buffer, or rows of 512 B and holes into ``sink``."""
    if count == 1:
        return [(rows, size)]
    k = count // 2
    hole = (size - 512 * k) // k // 512 * 512
    segs, pos = [], 0
    for r in range(k):
        segs.append((rows + int(rng.integers(0, 60_000)) * 512, 512))
        pos += 512
        if r < k - 1:
            segs.append((sink, hole))
            pos += hole
    segs.append((sink, size - pos))
    return segs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--size", type=int, default=45056)
    p.add_argument("--depth", type=int, default=256)
    p.add_argument("--reads", type=int, default=60_000)
    p.add_argument("--segments", default="1,2,4,12,24")
    args = p.parse_args()
    fd = os.open(args.path, os.O_RDONLY | os.O_DIRECT)
    size = os.fstat(fd).st_size
    ring = K.new_ring()
    if K.clib().io_uring_queue_init(512, ring.ctypes.data, 0) < 0:
        raise SystemExit("io_uring_queue_init failed")
    mem = mmap.mmap(-1, 64 << 20)
    base = int(np.frombuffer(mem, np.uint8).ctypes.data)
    sink, rows = base, base + (1 << 20)  # holes land in the first MiB; rows in the rest
    cqes = np.zeros(256, np.uint64)
    rng = np.random.default_rng(0)
    nsets = 256
    try:
        for count in (int(c) for c in args.segments.split(",")):
            sets = [segments_of(count, args.size, rows + s * args.size * (count == 1), sink, rng) for s in range(nsets)]
            iov = np.array(sets, dtype=np.uint64)
            offsets = (rng.integers(0, (size - args.size) // 512, size=args.reads) * 512).astype(np.uint64)
            readv_loop(ring.ctypes.data, fd, iov.ctypes.data, iov.shape[1], nsets, offsets[:300], args.depth, cqes)
            t = time.perf_counter()
            done, nbytes = readv_loop(ring.ctypes.data, fd, iov.ctypes.data, iov.shape[1], nsets, offsets,
                                      args.depth, cqes)
            dt = time.perf_counter() - t
            print(f"{iov.shape[1]:3d} segments: {done / dt:9,.0f} reads/s, {nbytes / dt / 1e9:.3f} GB/s", flush=True)
    finally:
        K.clib().io_uring_queue_exit(ring.ctypes.data)
        os.close(fd)


if __name__ == "__main__":
    main()
