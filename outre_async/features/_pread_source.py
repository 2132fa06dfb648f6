"""The pread feature source: the fallback where io_uring is unavailable (design §5).

``os.preadv`` (O_DIRECT when possible) in an owned thread pool of ``max_in_flight`` workers.  The
event loop plans, hands slices of a chunk's reads to the threads and gathers; threads only fill
staging memory and report their counts to the loop (``call_soon_threadsafe``, never touching shared
state).  Short reads and transient errors are read again in the thread (``_faults``).
The cancellation rule is :mod:`._disk_source`'s: a stopped chunk's threads finish the read they are
in and take no more; the chunk's staging memory is released once every thread has returned.
"""

from __future__ import annotations

import asyncio
import errno as errno_mod
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..store._dataset import Dataset
from ._disk_source import FeatureFile, IOConfig, _DiskSource, uncancellable
from ._faults import READ_RETRIES, TRANSIENT_READ_ERRNOS, retry_note
from ._staging import Arena, ReadPlan, resume_at


class _PreadChunk:
    """One chunk's reads, split into slices handed to worker threads; ``stop`` ends them early."""

    __slots__ = ("futures", "stop", "counted")

    def __init__(self) -> None:
        self.futures: list[asyncio.Future[None]] = []
        self.stop = False
        self.counted = 0  # futures whose counts were taken (in order)


class PreadSource(_DiskSource):
    """Fallback backend: ``os.preadv`` (O_DIRECT when possible) in an owned thread pool of
    ``max_in_flight`` workers.  The loop plans, hands slices of reads to the threads and gathers;
    threads only fill staging memory and report counts to the loop."""

    backend = "pread"
    DEFAULT_DEPTH = 32

    @classmethod
    def default_depth(cls) -> int:
        """One thread per read in flight: 32 up to 4 cores, then 8 per core, at most 128 (``_cores``)."""
        from ..machine._cores import default_pread_threads, usable_cores

        return default_pread_threads(usable_cores())

    def __init__(self, source: Dataset | FeatureFile, config: IOConfig | None = None,
                 **opts: Any) -> None:
        file = source if isinstance(source, FeatureFile) else FeatureFile.of(source)
        super().__init__(file, config or IOConfig(**opts))
        self._executor = ThreadPoolExecutor(self.depth,
                                            thread_name_prefix="outre-pread")
        self._pending: set[asyncio.Future[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _start(self, plan: ReadPlan, arena: Arena) -> _PreadChunk:
        self._loop = loop = asyncio.get_running_loop()
        chunk = _PreadChunk()
        n = plan.num_reads
        step = -(-n // self.depth)  # one slice per worker: few executor round trips
        for a in range(0, n, step):
            fut = loop.run_in_executor(self._executor, self._read_slice, chunk, plan, arena,
                                       a, min(n, a + step))
            fut.add_done_callback(self._slice_done)
            chunk.futures.append(fut)
            self._pending.add(fut)
        self._counters["runs"] += n
        return chunk

    def _slice_done(self, fut: asyncio.Future[None]) -> None:
        self._pending.discard(fut)

    async def _wait(self, chunk: _PreadChunk) -> None:
        # shield: cancelling the caller must not mark a still-running thread's future as done
        while chunk.counted < len(chunk.futures):
            fut = chunk.futures[chunk.counted]
            await asyncio.shield(fut)
            self._count(fut)
            chunk.counted += 1

    def _stop(self, chunk: _PreadChunk) -> None:
        chunk.stop = True

    async def _drain(self, chunk: _PreadChunk) -> None:
        for fut in chunk.futures[chunk.counted :]:
            await uncancellable(fut)
            self._count(fut)
        chunk.counted = len(chunk.futures)

    def _count(self, fut: asyncio.Future[None]) -> None:
        """Count a failed slice (once per slice, in the loop; its reads were counted by ``_add``)."""
        if fut.exception() is not None:
            self._counters["errors"] += 1

    def _add(self, reads: int, nbytes: int, short: int, retried: int, cpu: float) -> None:
        """A slice's counts, on the loop (a thread only reports them, failed or not)."""
        c = self._counters
        c["io_cpu_seconds"] += cpu
        c["reads_retried"] += retried
        c["reads_submitted"] += reads
        c["bytes_read"] += nbytes
        c["short_reads_resubmitted"] += short

    def _read_slice(self, chunk: _PreadChunk, plan: ReadPlan, arena: Arena, a: int, b: int) -> None:
        """Worker thread: plan reads ``[a, b)`` into the arena; reports (reads, bytes, shorts, retries,
        thread CPU seconds) to the loop, before its future is done (FIFO), even when a read failed."""
        report = self._loop.call_soon_threadsafe  # type: ignore[union-attr]
        report(self._flight.change, 1)  # FIFO per thread: this +1 precedes the thread's -1
        total = [0, 0, 0, 0]
        t = time.thread_time()
        try:
            with memoryview(arena.mm) as view:
                for k in range(a, b):
                    if chunk.stop:
                        break
                    self._read_one(view, int(plan.offsets[k]), int(plan.lengths[k]),
                                   int(plan.needs[k]), int(plan.stage[k]), total)
        finally:
            report(self._add, *total, time.thread_time() - t)
            report(self._flight.change, -1)

    def _read_one(self, view: memoryview, off: int, length: int, need: int, stage: int,
                  total: list[int]) -> None:
        """Read ``[off, off + length)`` into the arena; short reads go on where data stopped, transient
        errors are tried again up to ``READ_RETRIES`` times (``_faults``)."""
        cur, retries, cause = off, 0, None
        while True:
            try:
                with view[stage + cur - off : stage + length] as dst:
                    res = os.preadv(self._fd, [dst], cur)
            except OSError as exc:
                res, cause = -(exc.errno or errno_mod.EIO), exc
            if self.faults is not None:  # the test seam: what this completion reports
                res = self.faults.result(off, length, res)
            total[0] += 1
            if res < 0:
                if -res in TRANSIENT_READ_ERRNOS and retries < READ_RETRIES:
                    retries += 1
                    total[3] += 1
                    continue
                what = f"read of {length} bytes failed: {os.strerror(-res)}{retry_note(-res, retries)}"
                raise self._error(what, off, -res) from cause
            total[1] += res
            try:
                nxt = resume_at(off, need, cur, res, self.align)
            except EOFError as exc:
                raise self._error(f"read ended early, {exc} (file truncated?)", off, None) from None
            if nxt is None:
                return
            total[2] += 1
            cur = nxt

    async def aclose(self) -> None:
        """Refuse new work, wait for the worker threads' reads, stop the pool, close the file."""
        if self._closed:
            return
        self._closed = True
        for fut in list(self._pending):
            await uncancellable(fut)
        self._executor.shutdown(wait=True)
        self._close_fd()
