"""One chunk of io_uring reads as the numba kernels see it: arrays of addresses, lengths, offsets and
tags, plus where the chunk stands (submitted, in flight, done, resubmitted short reads).  The
:class:`~._uring_source.UringSource` owns every job on the event loop; a job is either *staged*
(reads land back to back in a page-aligned arena) or *into slots* (vectored reads whose segments are
the feature buffer's slots, one copy per row)."""

from __future__ import annotations

import asyncio

import numpy as np

from ..errors import OutreError
from ._read_priority import URGENT
from ._staging import Arena, ReadPlan


class UringJob:
    """The reads of one staged chunk, as arrays the kernels take, and where they stand.  Owned by
    the event loop.  ``done[k]``: bytes of read ``k`` already in place before its current submission
    (non-zero only for a resubmitted short read)."""

    __slots__ = ("token", "addrs", "lengths", "offsets", "tags", "needs", "done", "iov", "iov_first",
                 "iov_addrs", "iov_counts", "kept", "next", "inflight", "left", "stopped", "error",
                 "waiter", "resume", "queued", "settled", "priority", "bounce_want", "bpages", "biov", "bcount",
                 "dest", "dest_base", "retries")

    def __init__(self, token: int, plan: ReadPlan) -> None:
        n = plan.num_reads
        self.token = token
        self.lengths = plan.lengths.astype(np.uint32)
        self.offsets = plan.offsets.astype(np.uint64)
        self.tags = np.arange(n, dtype=np.uint64) | np.uint64(token << 32)
        self.needs = plan.needs
        self.done = np.zeros(n, dtype=np.int64)
        self.retries = np.zeros(n, dtype=np.uint8)  # transient errors of each read retried so far (``_faults``)
        self.addrs: np.ndarray | None = None        # staged reads: where each read lands
        self.iov: np.ndarray | None = None          # reads into slots: [addr, len] segments ...
        self.iov_first = self.iov_addrs = self.iov_counts = np.empty(0, dtype=np.uint64)  # ... per read
        self.kept: list[np.ndarray] = []            # segment tables of resubmitted reads
        self.next = 0                       # first read not yet submitted
        self.inflight = 0                   # submitted, not completed
        self.left = n                       # not yet completed in full
        self.stopped = False                # submit nothing more (cancelled, failed, closed)
        self.error: OutreError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.resume: list[int] = []         # reads to resubmit (short reads)
        self.queued = False
        self.settled = False
        self.priority = URGENT              # submitted before jobs of larger priority (``_read_priority``)
        # reads into slots through bounce pages (``_bounce``): which reads want them, the pages each holds
        # (-1: none), their segments and how many (0: none), and the slot memory as bytes with its address
        self.bounce_want: np.ndarray | None = None
        self.bpages = self.biov = self.bcount = self.dest = np.empty(0, dtype=np.int64)
        self.dest_base = 0

    @classmethod
    def staged(cls, token: int, plan: ReadPlan, arena: Arena) -> UringJob:
        """Reads into a staging arena, back to back (``plan.stage``)."""
        if plan.nbytes > arena.nbytes:  # the kernel writes by address: never past the arena
            raise ValueError(f"plan of {plan.nbytes} bytes does not fit an arena of {arena.nbytes}")
        job = cls(token, plan)
        job.addrs = (plan.stage + arena.address).astype(np.uint64)
        return job

    @classmethod
    def into_slots(cls, token: int, plan: ReadPlan, iov: np.ndarray, first: np.ndarray,
                   counts: np.ndarray) -> UringJob:
        """Vectored reads whose segments are buffer slots (and a sink for holes): no staging."""
        job = cls(token, plan)
        job.iov, job.iov_first = iov, first
        job.iov_addrs = (iov.ctypes.data + first * iov.strides[0]).astype(np.uint64)
        job.iov_counts = counts
        return job

    def bounce_through(self, want: np.ndarray, buffer: np.ndarray, width: int) -> None:
        """Read ``want``'s reads through bounce pages (at most ``width`` a read) when free (the rest
        vectored); ``buffer``: the slots."""
        n = len(self.offsets)
        self.bounce_want = want
        self.bpages = np.full((n, width), -1, dtype=np.int64)
        self.biov = np.zeros((n, width, 2), dtype=np.int64)
        self.bcount = np.zeros(n, dtype=np.uint32)
        self.dest = buffer.reshape(-1).view(np.uint8)
        self.dest_base = int(buffer.ctypes.data)

    def rest_of(self, k: int) -> np.ndarray:
        """The segments of read ``k`` past its first ``done[k]`` bytes (a resubmitted short read): its bounce
        pages' if it has some, else its slots'."""
        if len(self.bcount) and self.bcount[k]:
            segs = self.biov[k, : self.bcount[k]]
        else:
            assert self.iov is not None
            segs = self.iov[self.iov_first[k] : self.iov_first[k] + self.iov_counts[k]]
        ends = np.cumsum(segs[:, 1])
        done = int(self.done[k])
        j = int(np.searchsorted(ends, done, side="right"))
        rest = segs[j:].copy()
        skip = done - (int(ends[j - 1]) if j else 0)
        rest[0, 0] += skip
        rest[0, 1] -= skip
        self.kept.append(rest)  # alive until the job settles: the kernel reads it at submission
        return rest

    def has_work(self) -> bool:
        return not self.stopped and (self.next < len(self.offsets) or bool(self.resume))

    def fail(self, error: OutreError) -> None:
        if self.error is None:
            self.error = error
        self.stopped = True

    def settle_if_done(self) -> bool:
        """Wake the waiter once nothing is in flight and the job is complete or stopped."""
        if self.settled or self.inflight or not (self.left == 0 or self.stopped):
            return False
        self.settled = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)
        return True
