"""Read planning and staging memory for the disk feature sources (pure numpy, no I/O).

A request for rows ``ids`` becomes a :class:`ReadPlan`: the sorted unique rows (duplicates are read
once), grouped into *runs* whose aligned spans touch or lie within ``max_gap`` bytes of each other,
each run one read of at most about ``max_read`` bytes.  The reads land back to back in one staging
arena, so every read's memory position is aligned like its file offset (O_DIRECT needs both), and
every row sits at a known element offset in the arena.  Copying out is then one copy per row by a
numba kernel (a bit copy; numpy converts where the output dtype differs), whatever the layout.

Staging memory comes from a :class:`StagingPool` of :class:`Arena` objects, anonymous ``mmap`` areas: page
aligned (enough for any O_DIRECT alignment), zero-copy through ``memoryview`` / ``np.frombuffer``,
and reused so a steady stream of batches does not pay page faults for fresh memory on every call.
The pool caps the bytes it holds (in use + cached) and gives everything back at :meth:`close`.

Giving back: an arena is unmapped (``mmap.close``) when nothing exports its memory.  The io_uring
source submits reads by address (``Arena.address``) and keeps no view, so its arenas unmap normally.
The Python binding, by contrast, pins every memoryview it builds an ``Iovec`` from (the export is
never released), so an arena whose block slices went into an ``Iovec`` cannot be unmapped; its pages are returned to the
kernel instead (``madvise(MADV_DONTNEED)``: RSS drops, the empty mapping stays) and the arena, with
its block slices, goes to a process-wide free list that every pool draws from before mapping a new
one.  So the pinned slices are made once per arena ever mapped at once, not once per source, and
opening and closing sources does not grow memory.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..store._row_codec import decode_rows
from ..store._row_format import RowFormat
from ._staging_kernels import scatter_rows

MIN_ARENA = 1 << 16
GATHER_BLOCK = 1 << 20
DEFAULT_MERGE_GAP = 32 << 10  # the hole read through between two needed rows when no probe says better (IOConfig)
SECTOR = 4096
_SPAN_SLACK = 2 * SECTOR  # an aligned row span passes its row by at most two sectors


def merge_gap_bytes(iops: float | None, bytes_per_s: float | None, *, read_bytes: int = SECTOR,
                    max_read: int = 128 << 10, default: int = DEFAULT_MERGE_GAP) -> int:
    """The largest hole between two needed rows worth reading through rather than issuing one more read
    (merged reads): one extra read of ``read_bytes`` costs the device ``1 / iops`` seconds at
    the depth the loader keeps in flight, reading ``g`` more bytes costs ``g / bytes_per_s`` at its
    bandwidth, so holes up to ``bytes_per_s / iops`` bytes are cheaper read (rounded down to whole
    4 KiB sectors, at most ``max_read``: a read never passes that cap anyway).  Without a measure
    (either rate None or not positive): ``default``.  Pure: the caller takes the rates from a probe
    (``_disk_probe.gap_from_probe``)."""
    if not iops or not bytes_per_s or iops <= 0 or bytes_per_s <= 0:
        return min(default, max_read)
    gap = int(bytes_per_s / iops) - read_bytes  # the time of one extra read, in bytes, less the read's own
    return max(0, min(max_read, gap - gap % SECTOR))


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


def gather_blocks(arena: Arena, plan: ReadPlan, *, fmt: RowFormat, rows: np.ndarray,
                  out: np.ndarray, dest: np.ndarray | None = None) -> Iterator[None]:
    """``out[dest[i]] =`` the plan's ``rows[i]``-th unique row (``dest`` None: ``out[i]``), copied
    once from the staged bytes by a numba kernel (:func:`._staging_kernels.scatter_rows`), in blocks
    of about ``GATHER_BLOCK`` bytes, yielding after each block so an event loop can reap completions
    between blocks (a 40 MB gather would otherwise hold the loop for milliseconds while the device
    queue drains).  Rows go straight to their place in ``out`` (a buffer's slots): no temporary.
    Rows stored in another dtype than ``out``'s are decoded by :func:`~outre_async.store._row_codec.decode_rows`."""
    if len(rows) == 0:
        return
    dtype, dim = fmt.stored, fmt.dim
    rows = rows.astype(np.int64, copy=False)
    dest = np.arange(len(rows), dtype=np.int64) if dest is None else dest.astype(np.int64, copy=False)
    step = max(1, GATHER_BLOCK // (dim * dtype.itemsize))
    same = out.dtype == dtype  # copy the bits once; else decode (float16, bfloat16, int8 -> float32)
    bits = np.dtype(f"u{dtype.itemsize}")
    target = out.view(bits) if same else out
    for a in range(0, len(rows), step):
        b = min(len(rows), a + step)
        flat = np.frombuffer(arena.mm, dtype=bits if same else dtype, count=plan.nbytes // dtype.itemsize)
        if same:
            scatter_rows(flat, plan.row_elems, rows, target, dest, a, b)
        else:
            window = np.lib.stride_tricks.sliding_window_view(flat, dim)
            out[dest[a:b]] = decode_rows(window[plan.row_elems[rows[a:b]]], fmt)
            del window
        del flat  # no view of the arena outlives the block: it can be unmapped when given back
        yield


class Arena:
    """One page-aligned anonymous mapping of ``nbytes``, and its block slices (made once per block
    size: see the module docstring for why they must be long-lived)."""

    __slots__ = ("mm", "nbytes", "_view", "_blocks", "_address")

    def __init__(self, nbytes: int) -> None:
        # private: MADV_DONTNEED frees private anonymous pages (a shared mapping would keep them)
        self.mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.nbytes = nbytes
        self._view: memoryview | None = None
        self._blocks: dict[int, list[memoryview]] = {}
        self._address = 0

    @property
    def address(self) -> int:
        """The mapping's address, for reads submitted by address (the io_uring kernels); taken
        through a view that is dropped at once, so the arena can still be unmapped."""
        if not self._address:
            view = np.frombuffer(self.mm, dtype=np.uint8, count=1)
            self._address = view.ctypes.data
            del view
        return self._address

    def blocks(self, block: int) -> list[memoryview]:
        """The arena cut into slices of ``block`` bytes (made on first use, then the same objects)."""
        blocks = self._blocks.get(block)
        if blocks is None:
            if self._view is None:
                self._view = memoryview(self.mm)
            view = self._view
            blocks = self._blocks[block] = [view[i : i + block] for i in range(0, self.nbytes - block + 1, block)]
        return blocks

    def give_back(self) -> bool:
        """Unmap the arena if nothing exports its memory (True); else return its pages to the kernel
        and keep the empty mapping for reuse (False)."""
        if self._view is None:
            try:
                self.mm.close()
                return True
            except BufferError:  # a view made elsewhere still lives; fall back to dropping pages
                pass
        self.mm.madvise(mmap.MADV_DONTNEED)
        return False


_EMPTY: dict[int, list[Arena]] = {}  # process-wide: arenas whose pages were given back (module docstring)


def arena_bytes(nbytes: int) -> int:
    """The arena size that holds ``nbytes``: a power of two, at least ``MIN_ARENA``."""
    return max(MIN_ARENA, 1 << max(0, nbytes - 1).bit_length())


def aligned_span(stride: int) -> int:
    """One row's read at the largest alignment: ``stride`` rounded up to whole sectors."""
    return -(-stride // SECTOR) * SECTOR


def least_arena_bytes(read_bytes: int, row_bytes: int) -> int:
    """The smallest arena that serves a read: ``read_bytes``, or one row's aligned span (which
    passes its row by at most two sectors), whichever is larger."""
    return arena_bytes(max(read_bytes, row_bytes + _SPAN_SLACK))


class StagingPool:
    """Reusable staging arenas (:class:`Arena`), sized in powers of two.

    ``max_bytes`` caps what the pool holds, in use plus cached: a released arena is cached only
    while the total stays within it, and cached arenas of other sizes are given back to make room
    for a new one.  Arenas in use are never taken away (the owner bounds them: see ``_DiskSource``),
    so ``held`` can pass the cap only while more is in use than the cap allows.  ``close`` gives
    back every cached arena (memory the kernel may still be writing into is never released: the
    owner releases an arena only once its reads have completed).
    """

    @staticmethod
    def planned_bytes(extractors: int, arena: int, max_bytes: int | None = None) -> int:
        """What the pools of ``extractors`` hold: two chunks of ``arena`` bytes in flight each, or
        ``max_bytes`` (``IOConfig.max_staging_bytes``) where that is larger."""
        held = 2 * extractors * arena
        return held if max_bytes is None else max(held, max_bytes)

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._free: dict[int, list[Arena]] = {}
        self.held = 0        # bytes in use + cached
        self.peak = 0        # most bytes held at once
        self.allocated = 0   # arenas taken from the kernel or the process-wide empty list

    def acquire(self, nbytes: int) -> Arena:
        cap = arena_bytes(nbytes)
        free = self._free.get(cap)
        if free:
            return free.pop()
        self._make_room(cap)
        self.allocated += 1
        self.held += cap
        self.peak = max(self.peak, self.held)
        try:
            return _EMPTY.get(cap, []).pop()
        except IndexError:
            return Arena(cap)

    def release(self, arena: Arena) -> None:
        if self.held <= self.max_bytes:
            self._free.setdefault(arena.nbytes, []).append(arena)
        else:
            self._give_back(arena)

    def _make_room(self, cap: int) -> None:
        for size in sorted(self._free, reverse=True):
            free = self._free[size]
            while free and self.held + cap > self.max_bytes:
                self._give_back(free.pop())

    def _give_back(self, arena: Arena) -> None:
        self.held -= arena.nbytes
        if not arena.give_back():
            _EMPTY.setdefault(arena.nbytes, []).append(arena)

    def close(self) -> None:
        """Give back every cached arena (unmapped, or pages dropped and kept for reuse)."""
        for free in self._free.values():
            while free:
                self._give_back(free.pop())
