"""The io_uring feature source: the fast path of feature extraction (design §5).

* **One ring, one eventfd, no threads, no polling.**  The ring is created lazily inside the running
  event loop; its registered eventfd is watched with ``loop.add_reader``, and each completion the
  kernel posts makes the loop call :meth:`UringSource._reap`, which drains the completion queue.
* **A shared in-flight budget.**  Every ``read_rows`` chunk is a :class:`_Job` in one queue, ordered by
  the priority of the batch it serves, then by arrival (``_read_priority``); :meth:`UringSource._pump`
  prepares SQEs from its head while fewer than ``max_in_flight`` reads are outstanding and submits them
  with ONE ``io_uring_submit``, when work arrives and after every reap: the device queue stays fed
  across batch boundaries and concurrent callers share it.
* **Per-read work in numba** (:mod:`._uring_kernels`): a job's reads are arrays (address, length,
  offset, tag), filled into SQEs and drained from CQEs by one kernel call per slice; no Python object
  per read (``benchmarks/bench_extract.py`` measures the CPU per read).
* **Staging.**  Reads are ``IORING_OP_READ`` into the job's page-aligned mmap arena, so a coalesced run
  lands in place and each row is copied once; arenas are not registered (``READ_FIXED``): they come and go.
* **Short reads** are resubmitted from the aligned offset where data stopped (end of file before a
  row's bytes is an :class:`ExtractorError`); transient errors (EIO, EAGAIN, EINTR) up to
  ``READ_RETRIES`` times (``_faults``); other results, or the last retry's, are an
  :class:`ExtractorError` with the path, offset and errno, raised once the job's other reads are done.

Cancellation rule: a cancelled ``read_rows`` stops submitting its remaining reads, waits (absorbing
further cancellations) until its submitted reads complete, since the kernel writes into its staging
memory, then releases the staging memory and re-raises ``CancelledError``.  :meth:`aclose` stops
accepting work, fails queued requests with :class:`PipelineClosed`, drains the reads in flight,
removes the reader, closes the eventfd, the ring and the file and gives back every staging arena.
"""

from __future__ import annotations

import asyncio
import errno as errno_mod
import heapq
import os
import time
from typing import Any

import numpy as np

from ..errors import ConfigError, OutreError, PipelineClosed
from ..store._dataset import Dataset
from . import _uring_kernels as K
from ._bounce import BOUNCE_SEGMENTS, PAGE_BYTES, PAGES_PER_READ, BouncePool, finish_bounced, give_back
from ._disk_source import FeatureFile, IOConfig, _DiskSource, uncancellable
from ._faults import READ_RETRIES, TRANSIENT_READ_ERRNOS, FaultPlan, retry_note
from ._read_priority import READ_PRIORITY
from ._staging import Arena, ReadPlan, resume_at
from ._uring_job import UringJob as _Job

_INDEX_MASK = (1 << 32) - 1
_TRANSIENT = (errno_mod.EAGAIN, errno_mod.EBUSY, errno_mod.EINTR)
IOV_MAX = 1024  # segments of one vectored read (Linux UIO_MAXIOV)


class UringSource(_DiskSource):
    """Feature rows through io_uring (see the module docstring for the design and the rules)."""

    backend = "io_uring"
    REAP_SLICE = 128
    DEFAULT_DEPTH = 256  # measured: see IOConfig

    def __init__(self, source: Dataset | FeatureFile, config: IOConfig | None = None,
                 **opts: Any) -> None:
        file = source if isinstance(source, FeatureFile) else FeatureFile.of(source)
        super().__init__(file, config or IOConfig(**opts))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ring: np.ndarray | None = None   # the struct io_uring (see _uring_kernels.new_ring)
        self._ring_addr = 0
        self._efd = -1
        self._cqe_ptrs = np.zeros(self.REAP_SLICE, dtype=np.uint64)
        self._cqe_tags = np.zeros(self.REAP_SLICE, dtype=np.uint64)
        self._cqe_res = np.zeros(self.REAP_SLICE, dtype=np.int32)
        self._bad = np.zeros((self.REAP_SLICE, 2), dtype=np.int64)  # (read, res) of incomplete reads
        self._jobs: dict[int, _Job] = {}
        self._queue: list[tuple[int, int, _Job]] = []  # a heap: (priority, arrival, job)
        self._arrivals = 0
        self._token = 0
        self._broken: OutreError | None = None
        self._idle: asyncio.Future[None] | None = None
        self._sink: np.ndarray | None = None
        self._bounce: BouncePool | None = None  # merged reads into slots go through its pages (``_bounce``)
        self._counters.update(submit_calls=0, reap_calls=0, rows_into_slots=0, bounced_reads=0, bounce_pages=0)

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
        lib = K.clib()
        entries = max(8, 1 << (self.depth - 1).bit_length())
        ring = K.new_ring()
        addr = ring.ctypes.data
        rc = lib.io_uring_queue_init(entries, addr, 0)
        if rc < 0:
            raise self._error(f"io_uring_queue_init failed: {os.strerror(-rc)}", 0, -rc)
        efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        rc = lib.io_uring_register_eventfd(addr, efd)
        if rc < 0:
            os.close(efd)
            lib.io_uring_queue_exit(addr)
            raise self._error(f"io_uring_register_eventfd failed: {os.strerror(-rc)}", 0, -rc)
        loop.add_reader(efd, self._reap)
        self._loop, self._ring, self._ring_addr, self._efd = loop, ring, addr, efd

    def _teardown(self) -> None:
        """Remove the reader, unregister and close the eventfd, exit the ring (none in flight)."""
        if self._ring is None:
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._efd)
        lib = K.clib()
        lib.io_uring_unregister_eventfd(self._ring_addr)
        lib.io_uring_queue_exit(self._ring_addr)
        os.close(self._efd)
        self._loop, self._ring, self._ring_addr, self._efd = None, None, 0, -1

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
        if self._bounce is not None:  # nothing in flight any more: no read lands in it
            self._bounce.close()
            self._bounce = None

    # -- the _DiskSource hooks ---------------------------------------------------------------------
    def _start(self, plan: ReadPlan, arena: Arena) -> _Job:
        self._next_token()
        return self._launch(_Job.staged(self._token, plan, arena))

    def _launch(self, job: _Job) -> _Job:
        job.priority = READ_PRIORITY.get()
        self._jobs[job.token] = job
        self._counters["runs"] += len(job.offsets)
        self._enqueue(job)
        self._pump()
        return job

    def _next_token(self) -> int:
        self._ensure_ring()
        if self._broken is not None:
            raise self._broken
        self._token = (self._token + 1) & 0x7FFFFFFF
        return self._token

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
            if len(job.bcount) and job.bcount.any():  # none should be left: every read gave its pages back
                give_back(self._bounce, job, np.flatnonzero(job.bcount))

    def _enqueue(self, job: _Job) -> None:
        if not job.queued:
            job.queued = True
            self._arrivals += 1
            heapq.heappush(self._queue, (job.priority, self._arrivals, job))

    # -- submission --------------------------------------------------------------------------------
    def _pump(self) -> None:
        """Prepare SQEs from the queue within the in-flight budget; one submit for all of them."""
        budget = self.depth - self._flight.now
        queue, count, batch = self._queue, 0, []
        while budget > count and queue:
            job = queue[0][2]
            if job.has_work():
                n = self._prepare(job, budget - count)
                batch.append((job, n))
                count += n
            if not job.has_work():
                heapq.heappop(queue)
                job.queued = False
        if count:
            self._flight.change(count)
            self._counters["reads_submitted"] += count
            self._submit(batch)

    def _submit(self, batch: list[tuple[_Job, int]]) -> None:
        self._counters["submit_calls"] += 1
        rc = K.submit(self._ring_addr)
        if rc >= 0:
            return
        if -rc in _TRANSIENT and self._loop is not None:
            self._loop.call_soon(self._submit, batch)  # the SQEs stay in the ring; retry
            return
        self._break(-rc, batch)

    def _break(self, err: int, batch: list[tuple[_Job, int]]) -> None:
        """A failed submit: the batch's SQEs never reach the kernel (nothing submits again); fail
        every job.  Reads submitted earlier still complete through ``_reap`` before jobs settle."""
        self._broken = self._error(f"io_uring_submit failed: {os.strerror(err)}", 0, err)
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
        if job.addrs is not None:
            n = K.prep_reads(self._ring_addr, self._fd, job.addrs, job.lengths, job.offsets, job.tags,
                             start, stop)
        elif job.bounce_want is not None and self._bounce is not None:  # merged reads through bounce pages
            pages, iov = self._bounce.take(job.lengths[start:stop], job.bounce_want[start:stop], job.bpages.shape[-1])
            npages = (pages >= 0).sum(axis=1)
            job.bpages[start:stop], job.biov[start:stop], job.bcount[start:stop] = pages, iov, npages
            paged = npages > 0  # read into its pages' segments (``biov[k]``) instead of its slots'
            addrs = np.where(paged, job.biov.ctypes.data + np.arange(start, stop) * job.biov.strides[0],
                             job.iov_addrs[start:stop]).astype(np.uint64)
            counts = np.where(paged, npages, job.iov_counts[start:stop]).astype(np.uint32)
            n = K.prep_readvs(self._ring_addr, self._fd, addrs, counts, job.offsets[start:stop], job.tags[start:stop],
                              0, stop - start)
            self._counters["bounced_reads"] += int(paged[:n].sum())
            if start + n < stop:  # the submission queue filled up: the reads not prepared give their pages back
                give_back(self._bounce, job, np.arange(start + n, stop))
        else:
            n = K.prep_readvs(self._ring_addr, self._fd, job.iov_addrs, job.iov_counts, job.offsets,
                              job.tags, start, stop)
        job.next = start + n
        job.inflight += count + n
        return count + n

    def _prepare_resume(self, job: _Job, budget: int) -> int:
        """SQEs for short reads: the rest of read ``k`` from the aligned offset where data stopped."""
        count = 0
        while job.resume and count < budget:
            k = job.resume.pop()
            done = int(job.done[k])
            one = np.array([k], dtype=np.int64)
            if job.addrs is not None:
                n = K.prep_reads(self._ring_addr, self._fd, job.addrs[one] + np.uint64(done),
                                 job.lengths[one] - np.uint32(done), job.offsets[one] + np.uint64(done),
                                 job.tags[one], 0, 1)
            else:
                rest = job.rest_of(k)
                n = K.prep_readvs(self._ring_addr, self._fd, np.array([rest.ctypes.data], np.uint64),
                                  np.array([len(rest)], np.uint32), job.offsets[one] + np.uint64(done),
                                  job.tags[one], 0, 1)
            if n == 0:  # the submission queue is full: try again at the next pump
                job.resume.append(k)
                break
            count += 1
        return count

    # -- completion --------------------------------------------------------------------------------
    def _reap(self) -> None:
        """eventfd readable: drain the completion queue in slices of ``REAP_SLICE`` CQEs, and after
        each slice refill the freed budget with one submit.  A virtio/NVMe device completes reads
        in bursts; handing it new reads slice by slice overlaps our per-read work with the
        device's, instead of leaving it idle while the whole burst is processed."""
        t = time.thread_time()
        try:
            os.eventfd_read(self._efd)
        except BlockingIOError:
            pass
        while self._reap_slice():
            if not self._closed and self._broken is None:
                self._pump()
        if self._flight.now == 0 and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)
        self._counters["io_cpu_seconds"] += time.thread_time() - t

    def _reap_slice(self) -> int:
        """Complete up to ``REAP_SLICE`` CQEs (one kernel call); return how many."""
        if self._ring is None:
            return 0
        tags, res = self._cqe_tags, self._cqe_res
        n = K.reap(self._ring_addr, self._cqe_ptrs, tags, res)
        if not n:
            return 0
        self._counters["reap_calls"] += 1
        self._flight.change(-n)
        if self.faults is not None:
            self._inject(self.faults, n)
        first = int(tags[0] >> np.uint64(32))
        matched = self._complete(first, n)
        if matched < n:  # completions of other jobs in this slice (rare: jobs run in FIFO order)
            seen = {first}
            for token in (tags[:n] >> np.uint64(32)).tolist():
                if token not in seen:
                    seen.add(token)
                    matched += self._complete(token, n)
        return n

    def _inject(self, faults: FaultPlan, n: int) -> None:
        """The test seam (``_faults``): the slice's results as the fault plan reports them."""
        for i, tag in enumerate(self._cqe_tags[:n].tolist()):
            job = self._jobs.get(tag >> 32)
            if job is not None:
                k = tag & _INDEX_MASK
                self._cqe_res[i] = faults.result(int(job.offsets[k]), int(job.lengths[k]), int(self._cqe_res[i]))

    def _complete(self, token: int, n: int) -> int:
        """Settle one job's completions among the slice's ``n`` (one kernel call); full reads are
        counted in bulk, the rest retried or failed one by one.  Returns how many were the job's."""
        job = self._jobs.get(token)
        tags, res, bad = self._cqe_tags, self._cqe_res, self._bad
        if job is None:  # unreachable: a job leaves _jobs only once none of its reads is in flight
            return int((tags[:n] >> np.uint64(32) == token).sum())
        matched, complete, nbytes, nbad = K.settle(tags, res, n, token, job.needs, job.done, bad)
        self._counters["bytes_read"] += nbytes
        job.inflight -= matched
        job.left -= complete
        if len(job.bcount):  # before retries move ``done``: the complete bounced reads' rows go to their slots
            self._scatter_bounced(job, n)
        for k, r in bad[:nbad].tolist():
            if not job.stopped:
                self._retry_or_fail(job, k, r)
            if len(job.bcount) and job.bcount[k] and k not in job.resume:  # failed or stopped: pages back
                give_back(self._bounce, job, np.array([k]))
        if job.inflight == 0:
            self._settle(job)
        return matched

    def _scatter_bounced(self, job: _Job, n: int) -> None:
        """Copy the rows of this slice's complete bounced reads of ``job`` to their slots; free their slots."""
        if self._bounce is not None and finish_bounced(self._bounce, job, self._cqe_tags[:n], self._cqe_res[:n],
                                                       self._sink_address()):
            job.fail(self._error("bounced segments fell outside the slot memory", 0, None))  # unreachable

    def _retry_or_fail(self, job: _Job, k: int, res: int) -> None:
        off, length, done = int(job.offsets[k]), int(job.lengths[k]), int(job.done[k])
        counter = "reads_retried"
        if res < 0 and (-res not in TRANSIENT_READ_ERRNOS or job.retries[k] >= READ_RETRIES):
            note = retry_note(-res, int(job.retries[k]))
            job.fail(self._error(f"read of {length} bytes failed: {os.strerror(-res)}{note}", off, -res))
            self._counters["errors"] += 1
            return
        if res < 0:  # transient: issued again, from ``done[k]``
            job.retries[k] += 1
        else:
            try:
                nxt = resume_at(off, int(job.needs[k]), off + done, res, self.align)
            except EOFError as exc:
                job.fail(self._error(f"read ended early, {exc} (file truncated?)", off, None))
                self._counters["errors"] += 1
                return
            if nxt is None:  # unreachable: complete reads are counted in bulk in _complete
                job.left -= 1
                return
            job.done[k], counter = nxt - off, "short_reads_resubmitted"
        job.resume.append(k)
        self._counters[counter] += 1
        self._enqueue(job)

    # -- reads straight into buffer slots ------------------------------------------------------------
    async def _read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray) -> None:
        """Rows straight into their slots where the layout allows (one copy per row: the later
        slot -> batch gather), else through staging (copied once into the slots)."""
        iov = self._slot_reads(ids, buffer, slots)
        if iov is None:
            await super()._read_rows_into(ids, buffer, slots)
            return
        unique, first, inverse, job = iov
        self._counters["unique_rows"] += len(unique)
        self._counters["rows_into_slots"] += len(unique)
        self._launch(job)
        try:
            await self._wait(job)
        except BaseException:
            self._stop(job)
            await self._drain(job)  # the kernel writes into the slots until then (cancellation rule)
            raise
        dup = np.ones(len(ids), dtype=bool)
        dup[first] = False
        if dup.any():  # a repeated id: its row is copied from the slot it was read into
            buffer[slots[dup]] = buffer[slots[first[inverse[dup]]]]
            self._counters["row_copies"] += int(dup.sum())

    def _slot_reads(self, ids: np.ndarray, buffer: np.ndarray,
                    slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, _Job] | None:
        """Plan vectored reads into the slots, or ``None`` where rows must be staged: slots must be
        laid out like the file's rows (same dtype, slot stride = row stride), rows must start and
        end on the I/O alignment (sector-multiple stride) and the buffer must be aligned like them."""
        f, align = self.file, self.align
        if (buffer.dtype != f.dtype or buffer.strides != (f.stride, f.dtype.itemsize)
                or f.stride % align or buffer.ctypes.data % align):
            return None
        unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        plan = self._plan(unique)
        lo = unique * f.stride
        span = -(-f.row_bytes // align) * align
        slot_addrs = buffer.ctypes.data + slots[first].astype(np.int64) * f.stride
        iov = np.empty((2 * len(unique), 2), dtype=np.int64)
        seg_first = np.empty(plan.num_reads, dtype=np.int64)
        counts = np.empty(plan.num_reads, dtype=np.int64)
        K.slot_iovecs(lo, span, slot_addrs, plan.offsets, plan.lengths, self._sink_address(),
                      iov, seg_first, counts)
        most = int(counts.max()) if plan.num_reads else 0
        if most > IOV_MAX:
            return None
        job = _Job.into_slots(self._next_token(), plan, iov, seg_first, counts.astype(np.uint32))
        pool = self._bounce_pool() if most >= BOUNCE_SEGMENTS else None
        if pool is not None:  # a segment per row and per hole: through bounce pages
            width = -(-int(plan.lengths.max()) // pool.page_bytes)
            job.bounce_through(counts >= BOUNCE_SEGMENTS, buffer, width)
        return unique, first, inverse, job

    def _bounce_pool(self) -> BouncePool | None:
        """The bounce pages (``_bounce``), made at first use: ``bounce_bytes`` of them (default:
        ``PAGES_PER_READ`` per read in flight); None where that is not one page."""
        if self._bounce is None:
            want = self.config.bounce_bytes
            pages = self.depth * PAGES_PER_READ if want is None else want // PAGE_BYTES
            if pages < 1:
                return None
            self._bounce = BouncePool(pages)
            self._counters["bounce_pages"] = pages
        return self._bounce

    def _sink_address(self) -> int:
        """Aligned scratch that holes between coalesced rows are read into (never read back)."""
        if self._sink is None:
            size = -(-max(self.config.max_gap_bytes, 1) // 4096) * 4096
            raw = np.zeros(size + 4096, dtype=np.uint8)
            self._sink = raw[-raw.ctypes.data % 4096 :][:size]
        return int(self._sink.ctypes.data)
