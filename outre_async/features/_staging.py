"""Read planning and staging memory for the disk feature sources (pure numpy, no I/O).

A request for rows ``ids`` becomes a :class:`ReadPlan`: the sorted unique rows (duplicates are read
once), grouped into *runs* whose aligned spans touch or lie within ``max_gap`` bytes of each other,
each run one read of at most about ``max_read`` bytes.  The reads land back to back in one staging
arena, so every read's memory position is aligned like its file offset (O_DIRECT needs both), and
every row sits at a known element offset in the arena.  Copying out is then one vectorised numpy
gather over a sliding-window view of the arena, whatever the layout (padded or packed rows).

Staging memory comes from a :class:`StagingPool` of anonymous ``mmap`` arenas: page aligned (enough
for any O_DIRECT alignment), zero-copy through ``memoryview`` / ``np.frombuffer``, and reused so a
steady stream of batches does not pay page faults for fresh memory on every call.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

MIN_ARENA = 1 << 16
GATHER_BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """Reads that fetch sorted unique rows, and where each row lands in the staging arena.

    ``offsets``/``lengths`` are the aligned file ranges, ``needs`` the bytes of each that must
    arrive (up to the end of its last row: the aligned read of the last row of a packed file asks
    for more than the file holds, and the short read at EOF is then complete), ``stage`` each
    read's byte position in the arena and ``row_elems`` each unique row's element offset in it.
    """

    offsets: np.ndarray
    lengths: np.ndarray
    needs: np.ndarray
    stage: np.ndarray
    row_elems: np.ndarray
    nbytes: int

    @property
    def num_reads(self) -> int:
        return len(self.offsets)


def row_spans(unique: np.ndarray, *, stride: int, row_bytes: int,
              align: int) -> tuple[np.ndarray, np.ndarray]:
    """Aligned ``[lo, hi)`` byte ranges covering each row (``RowLayout.span`` for many rows)."""
    start = unique.astype(np.int64) * stride
    lo = start - start % align
    hi = -(-(start + row_bytes) // align) * align
    return lo, hi


def plan_reads(unique: np.ndarray, *, stride: int, row_bytes: int, itemsize: int, align: int,
               max_read: int, max_gap: int) -> ReadPlan:
    """Coalesce the sorted unique rows ``unique`` into aligned reads; see the module docstring.

    A read is cut when the next row's span starts more than ``max_gap`` bytes after the current
    read's end, or when it would pass a ``max_read`` boundary counted from its run's start (so a
    read never exceeds ``max_read`` plus one row span).
    """
    lo, hi = row_spans(unique, stride=stride, row_bytes=row_bytes, align=align)
    n = len(unique)
    cut = np.ones(n, dtype=bool)
    cut[1:] = lo[1:] > hi[:-1] + max_gap
    run_lo = lo[cut][np.cumsum(cut) - 1]
    piece = (hi - 1 - run_lo) // max_read
    cut[1:] |= piece[1:] != piece[:-1]
    first = np.flatnonzero(cut)
    last = np.append(first[1:], n) - 1
    read_of_row = np.cumsum(cut) - 1
    offsets, ends = lo[first], hi[last]
    lengths = ends - offsets
    stage = np.zeros(len(first), dtype=np.int64)
    np.cumsum(lengths[:-1], out=stage[1:])
    start = unique.astype(np.int64) * stride
    in_stage = stage[read_of_row] + start - offsets[read_of_row]
    return ReadPlan(offsets=offsets, lengths=lengths,
                    needs=start[last] + row_bytes - offsets, stage=stage,
                    row_elems=in_stage // itemsize, nbytes=int(lengths.sum()))


def split_by_bytes(unique: np.ndarray, *, stride: int, row_bytes: int, align: int,
                   max_bytes: int) -> list[tuple[int, int]]:
    """Cut ``unique`` into ``[a, b)`` index ranges whose staged spans stay near ``max_bytes``.

    Bounds the staging memory of one huge request; every range holds at least one row.
    """
    if len(unique) == 0:
        return []
    lo, hi = row_spans(unique, stride=stride, row_bytes=row_bytes, align=align)
    chunk = np.cumsum(hi - lo) // max_bytes
    bounds = np.flatnonzero(np.diff(chunk)) + 1
    edges = [0, *bounds.tolist(), len(unique)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def resume_at(off: int, need: int, cur: int, res: int, align: int) -> int | None:
    """After a read of ``[off, ...)`` issued at ``cur`` returned ``res`` bytes: ``None`` if the read
    is complete, else the aligned offset to read the rest from.

    Raises :class:`EOFError` when no progress is possible (end of file before ``need`` bytes, or a
    partial sector that re-reading would return again): a short read is resubmitted, never forever.
    """
    done = cur - off + res
    if done >= need:
        return None
    nxt = off + done - done % align
    if res <= 0 or nxt <= cur:
        raise EOFError(f"got {done} of {need} bytes")
    return nxt


def gather_blocks(arena: mmap.mmap, plan: ReadPlan, *, dtype: np.dtype, dim: int, rows: np.ndarray,
                  out: np.ndarray) -> Iterator[None]:
    """``out[i] =`` the plan's ``rows[i]``-th unique row, read from the staged bytes: a numpy gather
    in blocks of about ``GATHER_BLOCK`` bytes, yielding after each block so an event loop can reap
    completions between blocks (a 40 MB gather would otherwise hold the loop for milliseconds while
    the device queue drains)."""
    flat = np.frombuffer(arena, dtype=dtype, count=plan.nbytes // dtype.itemsize)
    window = np.lib.stride_tricks.sliding_window_view(flat, dim)
    elems = plan.row_elems[rows]
    # fancy indexing, not np.take (take copies the overlapping window into a contiguous array), in
    # blocks of about GATHER_BLOCK bytes so the temporary stays small, cached and reused by malloc
    step = max(1, GATHER_BLOCK // (dim * dtype.itemsize))
    for a in range(0, len(elems), step):
        out[a : a + step] = window[elems[a : a + step]]
        yield


class StagingPool:
    """Reusable page-aligned staging arenas (anonymous ``mmap``), sized in powers of two.

    ``release`` keeps at most ``max_cached`` bytes of free arenas; the rest are dropped (unmapped by
    the garbage collector once no view into them is left, so memory the kernel may still be writing
    into is never unmapped under it: the owner keeps a view until its reads complete).
    """

    def __init__(self, max_cached: int) -> None:
        self.max_cached = max_cached
        self._free: dict[int, list[mmap.mmap]] = {}
        self._cached = 0
        self.allocated = 0

    def acquire(self, nbytes: int) -> mmap.mmap:
        cap = max(MIN_ARENA, 1 << max(0, nbytes - 1).bit_length())
        free = self._free.get(cap)
        if free:
            self._cached -= cap
            return free.pop()
        self.allocated += 1
        return mmap.mmap(-1, cap)

    def release(self, arena: mmap.mmap) -> None:
        cap = len(arena)
        if self._cached + cap <= self.max_cached:
            self._free.setdefault(cap, []).append(arena)
            self._cached += cap

    def clear(self) -> None:
        self._free.clear()
        self._cached = 0
