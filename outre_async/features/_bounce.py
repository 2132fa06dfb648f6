"""Bounce slots: a merged read into buffer slots lands in one contiguous buffer first and its rows are copied
to their slots when it completes (issue 26).

Why: a merged read straight into slots is a vectored read with a segment per row and per hole
(``_uring_kernels.slot_iovecs``), and on the virtio disk here every segment costs the device about 2 µs:
45 KiB random reads at depth 256 ran 23.5 k/s as one segment, 22.6 k/s with 2, 20.5 k/s with 4, 16.2 k/s
with 12 (papers-like's reads: 6 rows of 512 B a read), 12.8 k/s with 24 and 7.0 k/s with 48
(``benchmarks/readv_segments.py``; 512 B or 4 KiB segment alignment made no difference).  papers-like's
loader-bound epoch kept 226 reads on the device and got 0.74 GB/s where the probe's random reads of the
same size get 1.05.  One plain read into a bounce slot plus a copy of the rows (512 B each, ~0.1 µs) is
cheaper than the segments, so a read of ``BOUNCE_SEGMENTS`` segments or more (three rows, or two with a hole
between) goes through a slot when one is free (else it is read vectored, as before: the pool never makes a
read wait); shorter ones go straight to their slots.  Why not from two segments: igb-like's 4 KiB rows make
reads of mostly 2-3 segments, where the copy (on the event loop, as reads complete) cost more than the
device saved: its loader-bound epoch took 14.5-16.3 s bouncing those against 14.0 s without
(``benchmarks/disk_idle_epoch.py --bounce-bytes 0``).

:class:`BouncePool` holds ``slots`` slots of ``slot_bytes`` (``SLOT_BYTES``, or ``max_read_bytes`` if smaller;
longer reads go vectored.  Why not 64 KiB: papers-like's merged reads average 55 KB, but with 64 KiB slots
only 40 % of them fitted one and its loader-bound epoch took 48-54 s against 37-42 s with 128 KiB) in one
anonymous mmap, touched only as used; the io_uring source (``_uring_source``) takes slots for the reads it
submits and gives them back when each read completes or fails; :func:`scatter` is the copy.  Only the
event loop touches the pool.
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    from ._uring_job import UringJob

_INDEX_MASK = np.uint64((1 << 32) - 1)
BOUNCE_SEGMENTS = 4  # reads of at least this many segments go through a slot (fewer: vectored, no copy)
SLOT_BYTES = 128 << 10  # a bounce slot's bytes (at most the source's max_read_bytes; the module says why)


class BouncePool:
    """``slots`` page-aligned slots of ``slot_bytes``; a stack of free slot numbers."""

    def __init__(self, slots: int, slot_bytes: int) -> None:
        self.slots, self.slot_bytes = max(0, int(slots)), int(slot_bytes)
        self._mm = mmap.mmap(-1, max(1, self.slots * self.slot_bytes), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.memory = np.frombuffer(self._mm, dtype=np.uint8)
        self.base = int(self.memory.ctypes.data)
        self._free = np.arange(self.slots - 1, -1, -1, dtype=np.int64)  # a stack: slot 0 on top
        self._top = self.slots
        self.peak = 0     # slots in use at most
        self.reads = 0    # reads that went through a slot

    @property
    def in_use(self) -> int:
        return self.slots - self._top

    def take(self, want: np.ndarray) -> np.ndarray:
        """A slot for each read where ``want`` is set, in order, while slots are free; -1 for the rest."""
        out = np.full(len(want), -1, dtype=np.int64)
        asked = np.flatnonzero(want)[: self._top]
        if len(asked):
            out[asked] = self._free[self._top - len(asked) : self._top][::-1]
            self._top -= len(asked)
            self.peak = max(self.peak, self.in_use)
            self.reads += len(asked)
        return out

    def give(self, slots: np.ndarray) -> None:
        """Give back ``slots`` (those >= 0)."""
        back = slots[slots >= 0]
        if len(back):
            self._free[self._top : self._top + len(back)] = back
            self._top += len(back)

    def addresses(self, slots: np.ndarray) -> np.ndarray:
        """Each slot's address (0 for -1: no slot)."""
        return np.where(slots >= 0, self.base + slots * self.slot_bytes, 0).astype(np.uint64)

    def close(self) -> None:
        self.memory = np.zeros(0, np.uint8)
        try:
            self._mm.close()
        except BufferError:  # a view still exports it: the mapping goes with the last view
            pass


@njit(cache=True, nogil=True)
def scatter(reads: np.ndarray, slots: np.ndarray, bounce: np.ndarray, slot_bytes: int, iov: np.ndarray,
            iov_first: np.ndarray, iov_counts: np.ndarray, sink: int, dest: np.ndarray, dest_base: int) -> int:
    """Copy each read ``reads[i]``'s bytes from its bounce slot ``slots[reads[i]]`` to the segments
    ``iov[iov_first[k] : iov_first[k] + iov_counts[k]]`` it would have filled as a vectored read,
    skipping the holes (segments at ``sink``); ``dest`` is the slot memory as bytes, starting at
    address ``dest_base``.  A segment outside ``dest`` is not copied; returns how many were (none
    should be: the segments are the job's own slots)."""
    bad = 0
    for i in range(len(reads)):
        k = reads[i]
        src = slots[k] * slot_bytes
        pos = 0
        for j in range(iov_first[k], iov_first[k] + iov_counts[k]):
            addr, length = iov[j, 0], iov[j, 1]
            if addr != sink:
                at = addr - dest_base
                if at < 0 or at + length > len(dest) or pos + length > slot_bytes:
                    bad += 1
                else:
                    dest[at : at + length] = bounce[src + pos : src + pos + length]
            pos += length
    return bad


def finish_bounced(pool: BouncePool, job: UringJob, tags: np.ndarray, res: np.ndarray, sink: int) -> int:
    """Of one reaped slice (``tags``, ``res``), the reads of ``job`` that went through a bounce slot and are
    complete now: copy their rows to their slots (:func:`scatter`) and give their slots back.  Called
    before short reads are resubmitted (their ``done`` is still the one the completion test uses).
    Returns the segments that could not be copied (none should be)."""
    mine = (tags >> np.uint64(32)) == job.token
    ks = (tags[mine] & _INDEX_MASK).astype(np.int64)
    r = res[mine].astype(np.int64)
    bounced = job.bslot[ks] >= 0
    ks, r = ks[bounced], r[bounced]
    full = ks[(r >= 0) & (job.done[ks] + r >= job.needs[ks])]
    if not len(full) or job.iov is None:
        return 0
    bad = scatter(full, job.bslot, pool.memory, pool.slot_bytes, job.iov, job.iov_first, job.iov_counts, sink,
                  job.dest, job.dest_base)
    give_back(pool, job, full)
    return int(bad)


def give_back(pool: BouncePool | None, job: UringJob, ks: np.ndarray) -> None:
    """Reads ``ks`` of ``job`` are done with their bounce slots."""
    if pool is not None:
        pool.give(job.bslot[ks])
    job.bslot[ks], job.baddr[ks] = -1, 0
