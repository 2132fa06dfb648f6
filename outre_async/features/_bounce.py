"""Bounce pages: a merged read into buffer slots lands in a few bounce pages first and its rows are copied to
their slots when it completes.

Why: a merged read straight into slots is a vectored read with a segment per row and per hole
(``_uring_kernels.slot_iovecs``), and every segment costs the device time: reads of a dozen segments
(papers-like's: a few small rows a read) run far slower than one contiguous read of the same size
(``benchmarks/readv_segments.py`` measures it per segment count), so a loader-bound epoch got less than
the probe's random reads of that size.  A read into ``ceil(length / PAGE_BYTES)`` bounce pages (one
to four segments) plus a copy of its rows is cheaper than the segments, so a read of
``BOUNCE_SEGMENTS`` segments or more (three rows, or two with a hole between) goes through pages when enough
are free (else it is read vectored, as before: the pool never makes a read wait); shorter ones go straight
to their slots.  Why not from two segments: igb-like's 4 KiB rows make reads of mostly 2-3 segments, where
the copy (on the event loop, as reads complete) cost more than the device saved
(``benchmarks/disk_idle_epoch.py --bounce-bytes 0`` compares the epochs).

Why pages, not one slot a read: the reads are up to ``max_read_bytes`` long but much shorter on average,
so a slot of the longest read for every read in flight took budget from the feature buffer (which then
read more rows), and half-size slots fitted too few reads to help; pages of ``PAGE_BYTES`` hold the reads
in flight in about half, for one or two extra segments a read (``benchmarks/disk_idle_epoch.py``).

:class:`BouncePool` holds ``pages`` pages of ``page_bytes`` in one anonymous mmap, touched only as used;
the io_uring source (``_uring_source``) takes pages for the reads it submits (:meth:`BouncePool.take`) and
gives them back when each read completes or fails; :func:`scatter` is the copy.  Only the event loop
touches the pool.
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    from ._uring_job import UringJob

_INDEX_MASK = np.uint64((1 << 32) - 1)
BOUNCE_SEGMENTS = 4  # reads of at least this many segments go through pages (fewer: vectored, no copy)
PAGE_BYTES = 32 << 10  # a bounce page (the module says why)
PAGES_PER_READ = 2  # the default pool: this many pages per read in flight (a merged read averages under two pages)


class BouncePool:
    """``pages`` page-aligned pages of ``page_bytes``; a stack of free page numbers."""

    @staticmethod
    def planned_bytes(reads: int, cap: int | None = None) -> int:
        """The default pool for ``reads`` in flight (``PAGES_PER_READ`` pages each), at most ``cap``
        in whole pages (0 where not one fits)."""
        want = reads * PAGES_PER_READ * PAGE_BYTES
        return want if cap is None else min(want, cap // PAGE_BYTES * PAGE_BYTES)

    def __init__(self, pages: int, page_bytes: int = PAGE_BYTES) -> None:
        self.pages, self.page_bytes = max(0, int(pages)), int(page_bytes)
        self._mm = mmap.mmap(-1, max(1, self.pages * self.page_bytes), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.memory = np.frombuffer(self._mm, dtype=np.uint8)
        self.base = int(self.memory.ctypes.data)
        self._free = np.arange(self.pages - 1, -1, -1, dtype=np.int64)  # a stack: page 0 on top
        self._top = self.pages
        self.peak = 0     # pages in use at most

    @property
    def in_use(self) -> int:
        return self.pages - self._top

    def take(self, lengths: np.ndarray, want: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Pages for the reads where ``want`` is set, in order, while enough are free (the first read that
        does not fit and every read after it get none): ``(pages, iov)``, ``pages[i, j]`` the ``j``-th page
        of read ``i`` (-1: none; ``width`` columns) and ``iov[i, j]`` its ``(address, bytes)`` segment."""
        need = np.where(want, -(-lengths.astype(np.int64) // self.page_bytes), 0)
        ends = np.cumsum(need)
        got = want & (ends <= self._top)
        pages = np.full((len(want), width), -1, dtype=np.int64)
        iov = np.zeros((len(want), width, 2), dtype=np.int64)
        total = int(ends[got][-1]) if got.any() else 0
        if not total:
            return pages, iov
        flat = self._free[self._top - total : self._top][::-1]
        self._top -= total
        self.peak = max(self.peak, self.in_use)
        col = np.arange(width)
        valid = got[:, None] & (col[None, :] < need[:, None])
        at = np.minimum((ends - need)[:, None] + col[None, :], total - 1)
        pages[valid] = flat[at[valid]]
        iov[..., 0] = np.where(valid, self.base + pages * self.page_bytes, 0)
        left = lengths.astype(np.int64)[:, None] - col[None, :] * self.page_bytes
        iov[..., 1] = np.where(valid, np.minimum(left, self.page_bytes), 0)
        return pages, iov

    def give(self, pages: np.ndarray) -> None:
        """Give back ``pages`` (those >= 0; any shape)."""
        back = pages[pages >= 0]
        if len(back):
            self._free[self._top : self._top + len(back)] = back
            self._top += len(back)

    def close(self) -> None:
        self.memory = np.zeros(0, np.uint8)
        try:
            self._mm.close()
        except BufferError:  # a view still exports it: the mapping goes with the last view
            pass


@njit(cache=True, nogil=True)
def scatter(reads: np.ndarray, pages: np.ndarray, bounce: np.ndarray, page_bytes: int, iov: np.ndarray,
            iov_first: np.ndarray, iov_counts: np.ndarray, sink: int, dest: np.ndarray, dest_base: int) -> int:
    """Copy each read ``reads[i]``'s bytes from its bounce pages ``pages[k]`` (the read's byte ``p`` is byte
    ``p % page_bytes`` of page ``p // page_bytes``) to the segments ``iov[iov_first[k] : iov_first[k] +
    iov_counts[k]]`` it would have filled as a vectored read, skipping the holes (segments at ``sink``);
    ``dest`` is the slot memory as bytes, starting at address ``dest_base``.  A segment outside ``dest``
    or past the read's pages is not copied; returns how many were (none should be)."""
    bad = 0
    width = pages.shape[1]
    for i in range(len(reads)):
        k = reads[i]
        pos = 0
        for j in range(iov_first[k], iov_first[k] + iov_counts[k]):
            addr, length = iov[j, 0], iov[j, 1]
            if addr != sink:
                at = addr - dest_base
                if at < 0 or at + length > len(dest) or pos + length > width * page_bytes:
                    bad += 1
                else:
                    done = 0
                    while done < length:
                        p = pos + done
                        page = pages[k, p // page_bytes]
                        if page < 0:
                            bad += 1
                            break
                        off = p % page_bytes
                        n = min(length - done, page_bytes - off)
                        src = page * page_bytes + off
                        dest[at + done : at + done + n] = bounce[src : src + n]
                        done += n
            pos += length
    return bad


def finish_bounced(pool: BouncePool, job: UringJob, tags: np.ndarray, res: np.ndarray, sink: int) -> int:
    """Of one reaped slice (``tags``, ``res``), the reads of ``job`` that went through bounce pages and are
    complete now: copy their rows to their slots (:func:`scatter`) and give their pages back.  Called
    before short reads are resubmitted (their ``done`` is still the one the completion test uses).
    Returns the segments that could not be copied (none should be)."""
    mine = (tags >> np.uint64(32)) == job.token
    ks = (tags[mine] & _INDEX_MASK).astype(np.int64)
    r = res[mine].astype(np.int64)
    bounced = job.bcount[ks] > 0
    ks, r = ks[bounced], r[bounced]
    full = ks[(r >= 0) & (job.done[ks] + r >= job.needs[ks])]
    if not len(full) or job.iov is None:
        return 0
    bad = scatter(full, job.bpages, pool.memory, pool.page_bytes, job.iov, job.iov_first, job.iov_counts, sink,
                  job.dest, job.dest_base)
    give_back(pool, job, full)
    return int(bad)


def give_back(pool: BouncePool | None, job: UringJob, ks: np.ndarray) -> None:
    """Reads ``ks`` of ``job`` are done with their bounce pages."""
    if pool is not None:
        pool.give(job.bpages[ks])
    job.bpages[ks], job.bcount[ks] = -1, 0
