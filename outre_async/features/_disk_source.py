"""What every disk feature source shares: the file, its tuning, O_DIRECT, and plan → stage → read → gather.

    FeatureSource            the contract (``_source``)
    └── _DiskSource          plan → stage → read → gather (``_staging``); O_DIRECT when possible
        ├── PreadSource      ``os.preadv`` in an owned, bounded thread pool (``_pread_source``)
        └── UringSource      one io_uring per event loop, eventfd-driven (``_uring_source``)

How a disk read goes: ids → sorted unique rows → aligned spans coalesced into reads of at most
``max_read_bytes`` (``_staging.plan_reads``) → reads into one page-aligned staging arena → each row
copied once into ``out`` (``_staging_kernels.scatter_rows``).  ``UringSource`` reads whole-sector
rows straight into a feature buffer's slots instead (``read_rows_into``; no staging, no copy).
Requests that would stage more than ``max_stage_bytes`` are cut into chunks;
two chunks of a request are in flight at once so the device queue stays fed between them.

Cancellation rule (every disk backend): when a ``read_rows`` task is cancelled (or one of its reads
fails), the source stops submitting that request's remaining reads, waits for the reads already
submitted (the kernel or a worker thread is writing into its staging memory), then releases the
staging memory, then re-raises (``CancelledError`` or the :class:`ExtractorError`).  Further
cancellations during that wait are absorbed and re-raised at the end, so staging memory is never
reused while a read may still write into it.

O_DIRECT: the file is opened with ``O_DIRECT`` and probed with one aligned read (512 B, then 4 KiB
alignment); a filesystem that refuses it (tmpfs, some overlays) gets buffered reads instead,
recorded as ``stats()["direct"] == False`` rather than failing.
"""

from __future__ import annotations

import abc
import asyncio
import errno as errno_mod
import functools
import itertools
import mmap
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DatasetCorruptError, ExtractorError, PipelineClosed
from ..store._feature_file import FeatureFile
from ..store._safe_read import check_regular
from ._faults import FaultPlan
from ._source import FeatureSource
from ._staging import DEFAULT_MERGE_GAP, GATHER_BLOCK, Arena, ReadPlan, StagingPool, gather_blocks, plan_reads, split_by_bytes

_ALIGNMENTS = (512, 4096)


def extract_work_bytes(max_rows: int) -> int:
    """What one extractor holds besides the rows it reads, for a batch of ``max_rows``: its ids'
    unique values, inverse, slots and actions (32 a row, ``_DiskSource._read_to``) and one gather
    block (``gather_blocks``)."""
    return 32 * max_rows + GATHER_BLOCK


@dataclass(frozen=True, kw_only=True, slots=True)
class IOConfig:
    """Tuning of the disk sources; every value is checked here, errors name the offending value.

    ``max_in_flight``: reads outstanding at once (io_uring queue depth; pread worker threads);
    ``None`` takes the backend's measured default (``DEFAULT_DEPTH``, ``benchmarks/bench_extract.py``):
    for io_uring about twice the depth at which ``fio`` saturates the device, because the loop reaps
    completions in bursts and needs that to keep the device itself as deep as fio does; for pread a
    thread count past which more threads cost more CPU than they add IOPS.
    ``max_read_bytes``: cap of one coalesced read.  ``max_gap_bytes``: rows whose spans are at most
    this far apart are read together, the hole read and dropped (it costs less than another I/O:
    ``_staging.merge_gap_bytes``; the loader takes it from ``disk_probe`` when it has one, else
    this default, ``DEFAULT_MERGE_GAP``, just above what the probe gives on the virtio disk here at
    the default depth.  Why not more: on small rows, past the break-even an epoch's bytes grow faster
    than its reads shrink (``benchmarks/simulate_cache_policies.py`` counts both by gap).
    ``max_stage_bytes``: staging memory of one request chunk (a chunk's reads never need more: a
    request is cut until each chunk fits, down to one row).  ``max_staging_bytes``: what the
    source's staging pool holds at most, in use plus cached (``None``: 4 x ``max_stage_bytes``); a
    source serving ``c`` concurrent requests has at most ``2 c`` chunks in use, each in an arena of
    the power of two at or above ``max_stage_bytes``.  ``direct``: try O_DIRECT.  ``bounce_bytes``: where
    io_uring reads rows straight into buffer slots, a merged read (a segment per row and per hole) goes
    through bounce pages while enough are free (``_bounce``: segments cost the device); ``None``: two
    32 KiB pages per read in flight, 0: none.
    """

    max_in_flight: int | None = None
    max_read_bytes: int = 128 << 10
    max_gap_bytes: int = DEFAULT_MERGE_GAP
    max_stage_bytes: int = 64 << 20
    max_staging_bytes: int | None = None
    direct: bool = True
    bounce_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.max_in_flight is not None and not 1 <= self.max_in_flight <= 4096:
            raise ConfigError(f"max_in_flight must be in [1, 4096], got {self.max_in_flight=}")
        if self.max_read_bytes < 4096 or self.max_read_bytes % 4096:
            raise ConfigError(
                f"max_read_bytes must be a positive multiple of 4096, got {self.max_read_bytes=}")
        if self.max_gap_bytes < 0:
            raise ConfigError(f"max_gap_bytes must be >= 0, got {self.max_gap_bytes=}")
        if self.max_stage_bytes < self.max_read_bytes:
            raise ConfigError(f"{self.max_stage_bytes=} should be >= {self.max_read_bytes=}")
        if self.bounce_bytes is not None and self.bounce_bytes < 0:
            raise ConfigError(f"bounce_bytes must be >= 0 (0: merged reads go vectored), got {self.bounce_bytes=}")
        if self.max_staging_bytes is not None and self.max_staging_bytes < self.max_stage_bytes:
            raise ConfigError(f"{self.max_staging_bytes=} should be >= {self.max_stage_bytes=} (or None)")

    @property
    def staging_cap(self) -> int:
        """Bytes the staging pool holds at most (``max_staging_bytes`` or its default)."""
        return 4 * self.max_stage_bytes if self.max_staging_bytes is None else self.max_staging_bytes


class _Flight:
    """Time-weighted count of reads in flight (for ``stats()``: mean depth while busy)."""

    __slots__ = ("now", "area", "busy", "t", "peak")

    def __init__(self) -> None:
        self.now = self.peak = 0
        self.area = self.busy = 0.0
        self.t = time.perf_counter()

    def change(self, delta: int) -> None:
        t = time.perf_counter()
        if self.now:
            self.area += self.now * (t - self.t)
            self.busy += t - self.t
        self.t = t
        self.now += delta
        self.peak = max(self.peak, self.now)

    def mean(self) -> float:
        return self.area / self.busy if self.busy else 0.0


def open_direct(path: Path, want_direct: bool) -> tuple[int, bool, int]:
    """Open ``path`` read-only; return ``(fd, direct, align)``.  O_DIRECT is kept only if an aligned
    probe read works at 512 B or 4 KiB alignment; otherwise buffered with 512 B planning."""
    if want_direct and hasattr(os, "O_DIRECT"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno != errno_mod.EINVAL:
                raise
        else:
            _regular(fd, path)
            align = _probe_direct(fd)
            if align:
                return fd, True, align
            os.close(fd)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    _regular(fd, path)
    return fd, False, _ALIGNMENTS[0]


def _regular(fd: int, path: Path) -> None:
    """Refuse (and close) a descriptor that is not a regular file: a FIFO swapped in for a feature file
    after the dataset was opened would block a read forever (``store._safe_read``'s rule)."""
    try:
        check_regular(fd, path, error=DatasetCorruptError, fix="re-create the dataset")
    except BaseException:
        os.close(fd)
        raise


def _probe_direct(fd: int) -> int:
    buf = mmap.mmap(-1, mmap.PAGESIZE)
    try:
        for align in _ALIGNMENTS:
            view = memoryview(buf)[:align]
            try:
                os.preadv(fd, [view], 0)
                return align
            except OSError as exc:
                if exc.errno != errno_mod.EINVAL:
                    raise
            finally:
                view.release()
        return 0
    finally:
        buf.close()


class _DiskSource(FeatureSource):
    """Shared plan/stage/gather logic of the disk backends; subclasses move the bytes.

    Subclass hooks: ``_start(plan, arena)`` submits a chunk's reads and returns a handle,
    ``_wait(handle)`` awaits it, ``_stop(handle)`` stops submitting its reads, ``_drain(handle)``
    waits (uncancellably) until none of its reads is in flight.
    """

    DEFAULT_DEPTH = 64

    @classmethod
    def default_depth(cls) -> int:
        """Reads in flight when ``max_in_flight`` is None (a backend may size it from the machine)."""
        return cls.DEFAULT_DEPTH

    def __init__(self, file: FeatureFile, config: IOConfig) -> None:
        super().__init__(file.num_rows, file.dim, file.dtype)
        self.file, self.config = file, config
        self.depth: int = config.max_in_flight or self.default_depth()  # reads outstanding at most
        try:
            self._fd, self.direct, self.align = self._open_file()
        except FileNotFoundError as exc:
            raise DatasetCorruptError(f"{file.path} is missing; re-create the dataset") from exc
        size = os.fstat(self._fd).st_size
        if size != file.nbytes:
            os.close(self._fd)
            raise DatasetCorruptError(
                f"{file.path} has {size} bytes, expected {file.nbytes}; re-create the dataset")
        self._pool = StagingPool(config.staging_cap)
        self._flight = _Flight()
        self._counters.update(reads_submitted=0, runs=0, bytes_read=0, short_reads_resubmitted=0,
                              reads_retried=0, errors=0, io_cpu_seconds=0.0)
        self.faults: FaultPlan | None = None  # tests only: results replaced at the completion boundary (``_faults``)

    @property
    def merge_rows(self) -> int:
        """Ids at most this far apart merge: the hole between their spans is at most ``max_gap_bytes``
        (exact where each row's span is its stride, i.e. strides that are multiples of the alignment;
        a sector shared by smaller rows counted as one alignment more)."""
        gap, stride = self.config.max_gap_bytes, self.file.stride
        return gap // stride + 1 if stride % self.align == 0 else (gap + self.align) // stride

    @property
    def files(self) -> tuple[Path, ...]:
        return (self.file.path,)

    def _open_file(self) -> tuple[int, bool, int]:
        """Open the feature file for reading: ``(fd, direct, align)``, O_DIRECT where it works."""
        return open_direct(self.file.path, self.config.direct)

    def _plan(self, unique: np.ndarray) -> ReadPlan:
        f, c = self.file, self.config
        return plan_reads(unique, stride=f.stride, row_bytes=f.row_bytes, itemsize=f.dtype.itemsize,
                          align=self.align, max_read=c.max_read_bytes,
                          max_gap=c.max_gap_bytes)

    async def _read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        await self._read_to(ids, out, None)

    async def _read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray) -> None:
        await self._read_to(ids, buffer, slots)  # straight from staging into the slots

    async def _read_to(self, ids: np.ndarray, out: np.ndarray, dest: np.ndarray | None) -> None:
        """``out[dest[i]] = features[ids[i]]`` (``dest`` None: ``out[i]``), chunk by chunk."""
        unique, inverse = np.unique(ids, return_inverse=True)
        self._counters["unique_rows"] += len(unique)
        self._counters["row_copies"] += len(ids)  # each copied once, staging arena -> out / slot
        f = self.file
        pieces = self._pieces(unique)
        if len(pieces) == 1:
            deliver: Any = lambda _i, plan, arena: gather_blocks(  # noqa: E731
                arena, plan, fmt=f.format, rows=inverse, out=out, dest=dest)
        else:
            deliver = functools.partial(self._scatter, pieces, inverse, out, dest)
        await self._run_chunks([plan for _, _, plan in pieces], deliver)

    def _pieces(self, unique: np.ndarray) -> list[tuple[int, int, ReadPlan]]:
        """``(a, b, plan)`` chunks of ``unique`` whose plans stage at most ``max_stage_bytes`` (a
        chunk whose holes push it past that is halved, down to one row)."""
        f, limit = self.file, self.config.max_stage_bytes
        out: list[tuple[int, int, ReadPlan]] = []
        todo = split_by_bytes(unique, stride=f.stride, row_bytes=f.row_bytes, align=self.align, max_bytes=limit)
        todo.reverse()
        while todo:
            a, b = todo.pop()
            plan = self._plan(unique[a:b])
            if plan.nbytes <= limit or b - a == 1:
                out.append((a, b, plan))
            else:
                mid = (a + b) // 2
                todo += [(mid, b), (a, mid)]
        return out

    def _scatter(self, pieces: list[tuple[int, int, ReadPlan]], inverse: np.ndarray, out: np.ndarray,
                 dest: np.ndarray | None, i: int, plan: ReadPlan, arena: Arena) -> Iterator[None]:
        a, b, _ = pieces[i]
        sel = np.flatnonzero((inverse >= a) & (inverse < b))
        yield from gather_blocks(arena, plan, fmt=self.file.format, rows=inverse[sel] - a,
                                 out=out, dest=sel if dest is None else dest[sel])

    async def _run_chunks(self, plans: Any, deliver: Any) -> None:
        """Keep two chunks in flight; deliver each in order; follow the cancellation rule."""
        active: list[tuple[ReadPlan, Arena, Any]] = []
        plans = iter(plans)
        try:
            for i in itertools.count():
                while len(active) < 2 and (plan := next(plans, None)) is not None:
                    if self._closed:
                        raise PipelineClosed("the feature source was closed during this read")
                    arena = self._pool.acquire(plan.nbytes)
                    active.append((plan, arena, self._start(plan, arena)))
                if not active:
                    return
                plan, arena, handle = active[0]
                await self._wait(handle)
                await self._copy_out(deliver(i, plan, arena))
                active.pop(0)  # only now: a cancellation during the copy still releases the arena
                self._pool.release(arena)
        except BaseException:
            await self._abandon(active)
            raise

    async def _copy_out(self, blocks: Iterator[None]) -> None:
        """Run a block-wise gather; between blocks, while reads are in flight, let the loop reap
        and resubmit so the device queue stays fed during a large copy."""
        for _ in blocks:
            if self._flight.now:
                await asyncio.sleep(0)

    async def _abandon(self, active: list[tuple[ReadPlan, Arena, Any]]) -> None:
        """Stop, drain, then release every active chunk (the cancellation rule).  A cancellation
        arriving meanwhile does not cut the drain short; it is re-raised once all are drained."""
        cancelled = False
        for _, _, handle in active:
            self._stop(handle)
        for _, arena, handle in active:
            try:
                await self._drain(handle)
            except asyncio.CancelledError:
                cancelled = True
            self._pool.release(arena)
        if cancelled:
            raise asyncio.CancelledError

    @abc.abstractmethod
    def _start(self, plan: ReadPlan, arena: Arena) -> Any:
        """Submit the chunk's reads into ``arena``; return the handle the other hooks take."""

    @abc.abstractmethod
    async def _wait(self, handle: Any) -> None:
        """Until every read of the chunk is complete; raise its :class:`ExtractorError`."""

    @abc.abstractmethod
    def _stop(self, handle: Any) -> None:
        """Submit none of the chunk's remaining reads."""

    @abc.abstractmethod
    async def _drain(self, handle: Any) -> None:
        """Until none of the chunk's reads is in flight, even if cancelled meanwhile."""

    def _error(self, what: str, offset: int, err: int | None) -> ExtractorError:
        return ExtractorError(what, path=self.file.path, offset=offset, errno=err)

    def stats(self) -> dict[str, Any]:
        c = self._counters
        reads = c["reads_submitted"]
        return {**super().stats(), "direct": self.direct, "align": self.align,
                "rows_per_read": round(c["unique_rows"] / reads, 3) if reads else 0.0,
                "bytes_per_read": round(c["bytes_read"] / reads, 1) if reads else 0.0,
                "max_in_flight": self.depth, "in_flight_peak": self._flight.peak,
                "in_flight_mean": round(self._flight.mean(), 2),
                "busy_seconds": round(self._flight.busy, 4),
                "staging_arenas": self._pool.allocated, "staging_bytes_peak": self._pool.peak}

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._pool.close()


async def uncancellable(fut: asyncio.Future[Any]) -> None:
    """Await ``fut`` to the end even if the awaiting task is cancelled meanwhile; re-raise the
    cancellation afterwards.  Used to wait for reads that write into memory we are about to free.

    Whether *we* were cancelled is read off the task's own count of cancellation requests, never off
    ``fut``: a cancellation that lands in the same loop step as ``fut``'s completion finds ``fut``
    done, and inferring "not cancelled" from that swallowed it: the task then went on, un-cancelled,
    into a channel nobody read any more (the deadlock of short-lived loaders,
    ``tests/loader/test_short_lived_loaders.py``)."""
    task = asyncio.current_task()
    requested = task.cancelling() if task is not None else 0
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            if task is None or task.cancelling() == requested:  # ``fut`` itself was cancelled, not us
                break
        except Exception:  # noqa: BLE001 - the caller inspects fut itself
            break
    if task is not None and task.cancelling() > requested:
        raise asyncio.CancelledError
