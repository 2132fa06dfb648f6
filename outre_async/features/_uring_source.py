"""The io_uring feature source: the fast path of feature extraction (design §5).

How it works, and why:

* **One ring, one eventfd, no threads, no polling.**  The ring is created lazily inside the running
  event loop; an eventfd is registered with it (``io_uring_register_eventfd``) and watched with
  ``loop.add_reader``.  The kernel bumps the eventfd whenever it posts a completion; the loop then
  calls :meth:`UringSource._reap`, which drains the completion queue and resolves requests.
* **A shared in-flight budget.**  Every ``read_rows`` chunk becomes a :class:`_Job` appended to one
  FIFO queue; :meth:`UringSource._pump` prepares SQEs from the queue while fewer than
  ``max_in_flight`` reads are outstanding, then makes ONE ``io_uring_submit`` for all of them.  The
  pump runs when work arrives and after every reap, so completions of one batch immediately make
  room for the next batch's reads: the device queue stays fed across batch boundaries and
  concurrent callers share it.
* **Staging.**  Reads are ``IORING_OP_READV`` into the job's page-aligned mmap arena, so a
  coalesced run lands in place and the copy to ``out`` is one numpy gather per chunk.  The
  binding's ``Iovec`` never releases the buffer it takes from each memoryview it is given (measured:
  every ``Iovec([view[a:b]])`` leaves its slice alive, ~184 B, and pins the arena forever), so a
  read's ``Iovec`` is built from **pre-made block slices** of the arena (``Arena.blocks``: one
  memoryview per ``block`` bytes, made once per arena and block size): a read of ``[s, s+n)`` is
  ``Iovec(blocks[s/B:(s+n)/B])``, the same contiguous memory as one segment, and nothing new is
  pinned.  Such an arena can't be unmapped, so the pool gives its pages back instead and keeps the
  empty mapping, slices and all, for the next arena of its size (``_staging``): at :meth:`aclose`
  every arena's memory returns to the kernel, and opening and closing sources doesn't grow RSS.
  Buffers are not registered with the ring (``IORING_OP_READV``, not ``READ_FIXED``), so there is
  nothing to unregister.  The job keeps its ``Iovec``s alive until each read's completion.
* **Short reads** are resubmitted from the aligned offset where data stopped; end of file before
  the bytes a row needs is an :class:`ExtractorError`, never a resubmission loop.  Negative
  results (EIO, EBADF, EINVAL...) become :class:`ExtractorError` with the file path, the read's byte
  offset and the errno, raised in the awaiting ``read_rows`` once the job's other reads are done.

Cancellation rule: a cancelled ``read_rows`` stops submitting its remaining reads, waits (absorbing
further cancellations) until its submitted reads complete, since the kernel writes into its staging
memory, then releases the staging memory and re-raises ``CancelledError``.  :meth:`aclose` stops
accepting work, fails queued requests with :class:`PipelineClosed`, drains the reads in flight,
removes the reader, unregisters and closes the eventfd, exits the ring, closes the file and gives
back every staging arena.
"""

from __future__ import annotations

import asyncio
import errno as errno_mod
import os
from collections import deque
from typing import Any

import liburing as L
import numpy as np

from .._errors import ConfigError, OutreError, PipelineClosed
from ..store._dataset import Dataset
from ._disk_source import FeatureFile, IOConfig, _DiskSource, uncancellable
from ._staging import Arena, ReadPlan, resume_at

_INDEX_MASK = (1 << 32) - 1
_MAX_BLOCK = 64 << 10   # largest block slice: fewer segments per read, bounded slice tables
_RESUME_BLOCK = 512     # resubmitted short reads start at any 512-byte-aligned offset
_TRANSIENT = (errno_mod.EAGAIN, errno_mod.EBUSY, errno_mod.EINTR)


def _block_size(plan: ReadPlan) -> int:
    """The largest power of two (<= 64 KiB) dividing every stage offset and read length of ``plan``."""
    if plan.num_reads == 0:
        return _MAX_BLOCK
    bits = int(np.bitwise_or.reduce(plan.stage)) | int(np.bitwise_or.reduce(plan.lengths)) | _MAX_BLOCK
    return bits & -bits


class _Job:
    """The reads of one staged chunk, and where they stand.  Owned by the event loop."""

    __slots__ = ("token", "offsets", "lengths", "needs", "stage", "arena", "block", "blocks", "iovs", "next",
                 "inflight", "left", "stopped", "error", "waiter", "resume", "cur", "queued",
                 "settled")

    def __init__(self, token: int, plan: ReadPlan, arena: Arena) -> None:
        self.token = token
        self.offsets: list[int] = plan.offsets.tolist()
        self.lengths: list[int] = plan.lengths.tolist()
        self.needs: list[int] = plan.needs.tolist()
        self.stage: list[int] = plan.stage.tolist()
        self.arena = arena
        self.block = _block_size(plan)
        self.blocks = arena.blocks(self.block)
        self.iovs: list[Any] = [None] * len(self.offsets)  # keeps each read's memory alive
        self.next = 0                       # first read not yet submitted
        self.inflight = 0                   # submitted, not completed
        self.left = len(self.offsets)       # not yet completed in full
        self.stopped = False                # submit nothing more (cancelled, failed, closed)
        self.error: OutreError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.resume: list[int] = []         # reads to resubmit (short reads)
        self.cur: dict[int, int] = {}       # read index -> offset it was resubmitted at
        self.queued = False
        self.settled = False

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
        self.iovs = []
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)
        return True


class UringSource(_DiskSource):
    """Feature rows through io_uring (see the module docstring for the design and the rules)."""

    backend = "io_uring"
    REAP_SLICE = 8
    DEFAULT_DEPTH = 256  # measured: see IOConfig

    def __init__(self, source: Dataset | FeatureFile, config: IOConfig | None = None,
                 **opts: Any) -> None:
        file = source if isinstance(source, FeatureFile) else FeatureFile.of(source)
        super().__init__(file, config or IOConfig(**opts))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ring: Any = None
        self._efd = -1
        self._cqe = L.Cqe()
        self._jobs: dict[int, _Job] = {}
        self._queue: deque[_Job] = deque()
        self._token = 0
        self._broken: OutreError | None = None
        self._idle: asyncio.Future[None] | None = None

    # -- ring lifecycle ----------------------------------------------------------------------------
    def _ensure_ring(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None:
            if self._flight.now:
                raise ConfigError("this UringSource has reads in flight on another event loop; "
                                  "use one source per loop")
            self._teardown()
        entries = max(8, 1 << (self.depth - 1).bit_length())
        ring = L.Ring()
        L.io_uring_queue_init(entries, ring)
        efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        L.io_uring_register_eventfd(ring, efd)
        loop.add_reader(efd, self._reap)
        self._loop, self._ring, self._efd = loop, ring, efd

    def _teardown(self) -> None:
        """Remove the reader, unregister and close the eventfd, exit the ring (none in flight)."""
        if self._ring is None:
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._efd)
        L.io_uring_unregister_eventfd(self._ring)
        L.io_uring_queue_exit(self._ring)
        os.close(self._efd)
        self._loop, self._ring, self._efd = None, None, -1

    async def aclose(self) -> None:
        """Stop accepting work, fail queued requests, drain in-flight reads, release everything."""
        if self._closed:
            return
        self._closed = True
        closed = PipelineClosed("the feature source was closed while this read was pending")
        for job in list(self._jobs.values()):
            job.fail(closed)
            self._settle(job)
        if self._flight.now and self._loop is not None:
            self._idle = self._loop.create_future()
            await uncancellable(self._idle)
        self._teardown()
        self._close_fd()

    # -- the _DiskSource hooks ---------------------------------------------------------------------
    def _start(self, plan: ReadPlan, arena: Arena) -> _Job:
        self._ensure_ring()
        if self._broken is not None:
            raise self._broken
        self._token = (self._token + 1) & 0x7FFFFFFF
        job = _Job(self._token, plan, arena)
        self._jobs[job.token] = job
        self._counters["runs"] += plan.num_reads
        self._enqueue(job)
        self._pump()
        return job

    async def _wait(self, job: _Job) -> None:
        if not job.settled:
            job.waiter = self._loop.create_future()  # type: ignore[union-attr]
            await job.waiter
        if job.error is not None:
            raise job.error

    def _stop(self, job: _Job) -> None:
        job.stopped = True
        self._settle(job)

    async def _drain(self, job: _Job) -> None:
        if not job.settled:
            job.waiter = self._loop.create_future()  # type: ignore[union-attr]
            await uncancellable(job.waiter)

    def _settle(self, job: _Job) -> None:
        if job.settle_if_done():
            del self._jobs[job.token]

    def _enqueue(self, job: _Job) -> None:
        if not job.queued:
            job.queued = True
            self._queue.append(job)

    # -- submission --------------------------------------------------------------------------------
    def _pump(self) -> None:
        """Prepare SQEs from the queue within the in-flight budget; one submit for all of them."""
        budget = self.depth - self._flight.now
        queue, count, batch = self._queue, 0, []
        while budget > count and queue:
            job = queue[0]
            if job.has_work():
                n = self._prepare(job, budget - count)
                batch.append((job, n))
                count += n
            if not job.has_work():
                queue.popleft()
                job.queued = False
        if count:
            self._flight.change(count)
            self._counters["reads_submitted"] += count
            self._submit(batch)

    def _submit(self, batch: list[tuple[_Job, int]]) -> None:
        try:
            L.io_uring_submit(self._ring)
        except OSError as exc:
            if exc.errno in _TRANSIENT and self._loop is not None:
                self._loop.call_soon(self._submit, batch)  # the SQEs stay in the ring; retry
                return
            self._break(exc, batch)

    def _break(self, exc: OSError, batch: list[tuple[_Job, int]]) -> None:
        """A failed submit: the batch's SQEs never reach the kernel (nothing submits again); fail
        every job.  Reads submitted earlier still complete through ``_reap`` before jobs settle."""
        self._broken = self._error(f"io_uring_submit failed: {exc.strerror}", 0, exc.errno)
        for job, n in batch:
            job.inflight -= n
            self._flight.change(-n)
        for job in list(self._jobs.values()):
            job.fail(self._broken)
            self._settle(job)

    def _prepare(self, job: _Job, budget: int) -> int:
        """Fill up to ``budget`` SQEs with the job's resubmissions, then its next reads."""
        count = self._prepare_resume(job, budget)
        start = job.next
        stop = min(len(job.offsets), start + budget - count)
        ring, fd, blocks, size, base = self._ring, self._fd, job.blocks, job.block, job.token << 32
        offsets, lengths, stage, iovs = job.offsets, job.lengths, job.stage, job.iovs
        get_sqe, prep, set_data, iovec = (L.io_uring_get_sqe, L.io_uring_prep_readv,
                                          L.io_uring_sqe_set_data64, L.Iovec)
        for k in range(start, stop):
            s = stage[k]
            iov = iovec(blocks[s // size : (s + lengths[k]) // size])
            sqe = get_sqe(ring)
            prep(sqe, fd, iov, offsets[k])
            set_data(sqe, base | k)
            iovs[k] = iov
        job.next = stop
        job.inflight += count + stop - start
        return count + stop - start

    def _prepare_resume(self, job: _Job, budget: int) -> int:
        count = 0
        while job.resume and count < budget:
            k = job.resume.pop()
            off, cur, s = job.offsets[k], job.cur[k], job.stage[k]
            blocks = job.arena.blocks(_RESUME_BLOCK)
            iov = L.Iovec(blocks[(s + cur - off) // _RESUME_BLOCK : (s + job.lengths[k]) // _RESUME_BLOCK])
            sqe = L.io_uring_get_sqe(self._ring)
            L.io_uring_prep_readv(sqe, self._fd, iov, cur)
            L.io_uring_sqe_set_data64(sqe, (job.token << 32) | k)
            job.iovs[k] = iov
            count += 1
        return count

    # -- completion --------------------------------------------------------------------------------
    def _reap(self) -> None:
        """eventfd readable: drain the completion queue in slices of ``REAP_SLICE`` CQEs, and after
        each slice refill the freed budget with one submit.  A virtio/NVMe device completes reads
        in bursts; handing it new reads slice by slice overlaps our per-read Python work with the
        device's, instead of leaving it idle while the whole burst is processed."""
        try:
            os.eventfd_read(self._efd)
        except BlockingIOError:
            pass
        while self._reap_slice():
            if not self._closed and self._broken is None:
                self._pump()
        if self._flight.now == 0 and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def _reap_slice(self) -> int:
        """Complete up to ``REAP_SLICE`` CQEs; return how many."""
        ring, cqe, jobs, complete, n = self._ring, self._cqe, self._jobs, self._complete, 0
        for _ in L.CqeIter(ring, cqe):
            entry = cqe[0]
            data = entry.user_data
            try:
                res = entry.res
            except OSError as exc:  # the binding raises for negative results
                res = -(exc.errno or errno_mod.EIO)
            job = jobs.get(data >> 32)
            if job is not None:
                complete(job, data & _INDEX_MASK, res)
            n += 1
            if n == self.REAP_SLICE:
                break
        if n:
            L.io_uring_cq_advance(ring, n)
            self._flight.change(-n)
        return n

    def _complete(self, job: _Job, k: int, res: int) -> None:
        off = job.offsets[k]
        cur = job.cur.pop(k, off) if job.cur else off
        job.inflight -= 1
        if res >= 0:
            self._counters["bytes_read"] += res
        if res >= 0 and cur - off + res >= job.needs[k]:
            job.iovs[k] = None
            job.left -= 1
        elif not job.stopped:
            self._retry_or_fail(job, k, off, cur, res)
        if job.inflight == 0:
            self._settle(job)

    def _retry_or_fail(self, job: _Job, k: int, off: int, cur: int, res: int) -> None:
        length = job.lengths[k]
        if res < 0:
            job.fail(self._error(f"read of {length} bytes failed: {os.strerror(-res)}", off, -res))
            self._counters["errors"] += 1
            return
        try:
            nxt = resume_at(off, job.needs[k], cur, res, self.align)
        except EOFError as exc:
            job.fail(self._error(f"read ended early, {exc} (file truncated?)", off, None))
            self._counters["errors"] += 1
            return
        if nxt is None:  # unreachable: complete reads take the fast path in _complete
            job.left -= 1
            return
        job.cur[k] = nxt
        job.resume.append(k)
        self._counters["short_reads_resubmitted"] += 1
        self._enqueue(job)

