"""Batch matrices in flight: a byte pool that makes their memory follow the budget, not the worst case.

An extractor *reserves* a batch's matrix (``rows x row_bytes``, its real unique rows) before it
allocates it; the :class:`MatrixLease` travels with the batch and is released once the consumer has
the next batch in hand (its loop variable holds the previous matrix until then), by the consumer
itself (``batch.release()``), or by a shutdown path.  The pool's capacity is the memory plan's
``batches`` part, so matrices being extracted, queued on the ready channel and held by the consumer
never add up to more than the plan says, whatever size the batches turn out to be.  Reservations are
served first come, first served (a large batch is not starved by smaller ones behind it).

When waiting could never end: a reservation that does not fit while the only bytes reserved are the
consumer's own batch (which goes only when the next batch arrives) or that is larger than the whole
pool.  With a memory budget that is a :class:`ConfigError` naming the bytes and the budget that would
hold them; without one (the capacity is then only the default's estimate) the reservation is granted
over capacity.  So the least pool that never fails is two batches' matrices: the one being trained on
and the next.

Matrices are allocated by :meth:`BatchMemory.matrix` in their own anonymous memory map, so their bytes
go back to the system when a batch dies, or serve the next batch (:meth:`BatchMemory.matrix`).  With
``np.empty``, glibc raises its mmap threshold after the
first large block is freed and serves later matrices from its heap, which it keeps: the peak RSS then
passed the budget, and stays well within it with mapped matrices (``benchmarks/bench_memory_budget.py``).

Only the event loop thread touches this object.  Cancellation rule: a cancelled :meth:`reserve`
takes nothing (a grant that raced with the cancellation is given back); a lease released twice
counts once.
"""

from __future__ import annotations

import asyncio
import mmap
import weakref
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError
from .._units import format_bytes
from ..store._row_format import FLOAT32

if TYPE_CHECKING:
    from ._device_copy import HostRegistry


def new_matrix(rows: int, dim: int, dtype: np.dtype = FLOAT32) -> np.ndarray:
    """A writable ``[rows, dim]`` matrix of ``dtype`` (the rows' held words) in its own anonymous
    map (see the module and :func:`_new_map`)."""
    if rows * dim == 0:
        return np.empty((rows, dim), dtype=dtype)
    return _as_matrix(_new_map(rows * dim * dtype.itemsize), rows, dim, dtype)


def _new_map(nbytes: int) -> mmap.mmap:
    """A private anonymous map, backed by transparent huge pages where the kernel offers them.

    Why huge pages: each 4 KiB page of a fresh map faults once, so a large matrix took thousands of
    faults and milliseconds of system CPU, 2 MiB pages a handful of faults and a fraction of the CPU (THP in ``madvise``
    mode; ``benchmarks/bench_loader_cpu.py`` reports the system CPU).  Python's
    ``mmap(-1, n)`` is a *shared* map, which gets no THP: hence the flags.  The map is not grown to a
    2 MiB multiple (its head and tail keep small pages), so it never holds more than the bytes asked
    for."""
    block = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if nbytes >= _HUGE_PAGE and _MADV_HUGEPAGE is not None:
        try:
            block.madvise(_MADV_HUGEPAGE)
        except OSError:  # THP compiled out or disabled: small pages
            pass
    return block


def _as_matrix(block: mmap.mmap, rows: int, dim: int, dtype: np.dtype) -> np.ndarray:
    """The matrix at the start of ``block``, a view of the whole map as flat bytes (its ``base``): what
    the host decode finds its room in (``features._decode.room_of``)."""
    flat = np.frombuffer(block, dtype=np.uint8)
    return flat[: rows * dim * dtype.itemsize].view(dtype).reshape(rows, dim)


def _unmap(block: mmap.mmap) -> None:
    """Unmap a dead matrix's map; one some view still exports (a numpy view of a slice that outlived
    its matrix) is left to the garbage collector, which unmaps it when the last view dies."""
    try:
        block.close()
    except BufferError:
        pass


_HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)
_LEASE_BYTES = 33  # per row of a batch besides its features (``BatchMemory.row_bookkeeping_bytes``)
_REUSE_SLACK = 1.25  # a spare map serves a matrix of at least 1 / 1.25 of its size


@dataclass(eq=False, slots=True)
class MatrixLease:
    """One batch's reservation; :meth:`release` gives its bytes back (idempotent)."""

    pool: BatchMemory | None
    nbytes: int
    handed: bool = False

    def hand_over(self) -> None:
        """The consumer has the batch now: its bytes go only when the consumer lets go of it."""
        if self.pool is not None and not self.handed:
            self.handed = True
            self.pool._consumer += self.nbytes
            self.pool._wake()  # a waiter may now be one that can never fit (see the module)

    def release(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool._give_back(self.nbytes, self.handed)


class BatchMemory:
    """At most ``capacity`` bytes of batch matrices reserved at once (``budget``: the loader's
    ``memory_budget``, for the error message; ``None`` grants what could never fit, see the module).
    ``row_bytes``: what one row of a batch costs (``_budget.batch_row_bytes``); ``dtype``: the matrices'
    (the rows' held words, ``RowFormat.held``); ``room``: bytes a value takes in a matrix's map, at
    least ``dtype``'s (the host decodes a batch in place there: ``features._decode``)."""

    @staticmethod
    def row_bookkeeping_bytes() -> int:
        """Bytes a row of a batch in flight costs besides its features (the memory plan's per-row
        share): labels 8, input_id 8 (per seed), piece ids + slots 16, actions 1."""
        return _LEASE_BYTES

    def __init__(self, capacity: int, row_bytes: int, *, budget: int | None,
                 registry: HostRegistry | None = None, dtype: np.dtype = FLOAT32, room: int | None = None) -> None:
        self.capacity, self.row_bytes, self.budget = int(capacity), int(row_bytes), budget
        self.dtype = np.dtype(dtype)
        self.room = max(self.dtype.itemsize, room or 0)
        self.registry = registry  # a CUDA loader's: each map page-locked once (``_device_copy``)
        self._used = self._peak = self._consumer = 0
        self._waiters: deque[tuple[int, int, asyncio.Future[None]]] = deque()
        self._spare: list[mmap.mmap] = []  # maps of dead matrices, kept for the next ones (see matrix())
        self._spare_bytes = 0
        self._returned: deque[mmap.mmap] = deque()  # appended by finalizers on any thread (atomic append)
        self.counters = {"reserved": 0, "waits": 0, "largest_rows": 0, "over_capacity": 0, "maps_new": 0,
                         "maps_reused": 0, "maps_resized": 0}

    def matrix(self, lease: MatrixLease, rows: int, dim: int) -> np.ndarray:
        """The batch's ``[rows, dim]`` matrix (of ``dtype``, in a map of ``room`` bytes a value) for ``lease``:
        the map of a dead matrix when one fits, else a new map (:func:`_new_map`).  Its content is
        stale; the extractor writes every row.

        Why recycle: a fresh map is zeroed by the kernel page by page, a large share of the loader
        process's CPU samples on igb-like (``clear_page``; ``stats()``'s ``maps_reused``); a dead matrix's map, already
        resident, costs nothing.  Accounting: spare maps count with the reserved bytes against the
        capacity (``used + spare <= capacity`` after every call), a recycled map's extra bytes
        (at most ``_REUSE_SLACK``) are added to the lease, so the plan's ``batches`` part still holds.
        A matrix's map comes back when the array dies (a ``weakref.finalize``, any thread), and is
        taken into the spares at the next call, on the loop thread.

        Order matters: returned maps are offered to this batch *before* the spares are trimmed to
        the capacity.  In steady state the pool is full, so this batch's reservation took exactly
        the bytes the dead batch gave back; checking the capacity first unmapped the dead map (it
        no longer "fit" beside the reservation made for its successor) and mapped a new one.  On
        igb-like nearly every matrix was a new map that way, zeroed by the loop thread (``stats()``'s
        ``maps_new`` against ``maps_reused`` shows it).
        A reservation alone allocates nothing, so until a map is made here physical memory stays
        within what the last call left (``used + spare <= capacity``)."""
        n = rows * dim * self.room
        if n == 0:
            return np.empty((rows, dim), dtype=self.dtype)
        self._drain()
        block = self._best_spare(lease, n)
        if block is None:
            block = self._resized_spare(n)
        self._trim(self.capacity - self._used)  # what is left beyond the capacity goes, before any new map
        if block is None:
            block = _new_map(n)
            self.counters["maps_new"] += 1
        else:
            self.counters["maps_reused"] += 1
        if self.registry is not None:
            self.registry.pin(block)  # once per map: a recycled map is pinned already
        x = _as_matrix(block, rows, dim, self.dtype)
        # on the flat array under x: every numpy view of x (a slice of it too) keeps that one alive,
        # so the map is never recycled under a view that outlived x.  Not at interpreter exit:
        # finalizers run then even for live arrays (a batch the script still holds), and the
        # loader's own close, run there too, would unmap a map still in use.
        weakref.finalize(x.base, self._returned.append, block).atexit = False
        return x

    def _drain(self) -> None:
        """Take every returned map into the spares (the caller trims them to the capacity)."""
        while self._returned:
            block = self._returned.popleft()
            self._spare.append(block)
            self._spare_bytes += len(block)

    def _best_spare(self, lease: MatrixLease, n: int) -> mmap.mmap | None:
        """The smallest spare map of ``n`` to ``n * _REUSE_SLACK`` bytes whose extra bytes still fit."""
        room = self.capacity - self._used
        fits = [b for b in self._spare if n <= len(b) <= n * _REUSE_SLACK and len(b) - n <= room]
        if not fits or lease.pool is not self:
            return None
        block = min(fits, key=len)
        self._spare.remove(block)
        self._spare_bytes -= len(block)
        extra = len(block) - n
        lease.nbytes += extra
        self._used += extra
        self._peak = max(self._peak, self._used)
        return block

    def _resized_spare(self, n: int) -> mmap.mmap | None:
        """A spare map resized to exactly ``n`` bytes (``mremap``), when none fits as it is.

        Why: batch sizes vary, so the spare that comes back is often a little too small, or too large
        to lend its extra bytes; a new map then costs the kernel zeroing every page of it, a second or
        more of the loop thread's CPU per igb-like epoch (``stats()``'s ``maps_resized`` counts the
        maps saved).  Resizing keeps the resident pages: shrinking one that is too large costs
        no fault (the tail goes back), growing the largest one faults only the new tail.  The map is
        then exactly the batch's reservation, so the accounting needs no extra bytes.  Where the
        platform cannot resize an anonymous map, the spare stays and a new map is made."""
        if not self._spare:
            return None
        larger = [b for b in self._spare if len(b) >= n]
        block = min(larger, key=len) if larger else max(self._spare, key=len)
        before = len(block)
        if self.registry is not None:
            self.registry.unpin(block)  # mremap may move it: never resize a locked range
        try:
            block.resize(n)
        except (OSError, ValueError, SystemError, BufferError):  # no mremap here, or a view still exports it
            return None
        self._spare.remove(block)
        self._spare_bytes -= before
        self.counters["maps_resized"] += 1
        return block

    def _trim(self, room: int) -> None:
        """Unmap the largest spares until they take at most ``room`` bytes."""
        self._spare.sort(key=len)
        while self._spare and self._spare_bytes > max(room, 0):
            block = self._spare.pop()
            self._spare_bytes -= len(block)
            if self.registry is not None:
                self.registry.unpin(block)
            _unmap(block)

    def close(self) -> None:
        """Unmap the spare maps (the loader closes; live matrices keep their own maps)."""
        self._drain()
        self._trim(0)
        if self.registry is not None:  # live matrices keep their maps, unlocked
            self.registry.unpin_all()

    async def reserve(self, rows: int, seq: int, extra: int = 0) -> MatrixLease:
        """Hold ``rows`` rows' worth of bytes (plus ``extra``: ordered mode counts the batch's subgraph
        too, ``_out_of_turn``) for batch ``seq``, waiting while the pool is full."""
        n = rows * self.row_bytes + extra
        self.counters["largest_rows"] = max(self.counters["largest_rows"], rows)
        if not self._waiters and self._fits(n):
            self._take(n)
        elif not self._waiters and self._stuck():
            self._grant_stuck(n, seq)
        else:
            self.counters["waits"] += 1
            entry = (n, seq, asyncio.get_running_loop().create_future())
            self._waiters.append(entry)
            try:
                await entry[2]
            except asyncio.CancelledError:
                if entry[2].done() and not entry[2].cancelled():
                    self._give_back(n, False)  # granted just as we were cancelled
                else:
                    self._waiters.remove(entry)
                    self._wake()
                raise
        return MatrixLease(self, n)

    def _fits(self, n: int) -> bool:
        return self._used + n <= self.capacity

    def _stuck(self) -> bool:
        """Nothing reserved would come back without a new batch reaching the consumer."""
        return self._used == self._consumer

    def _grant_stuck(self, n: int, seq: int) -> None:
        """A reservation that cannot fit and cannot wait: refused under a budget, else granted."""
        if self.budget is not None:
            held = f" while the consumer holds a {format_bytes(self._consumer)} batch" if self._consumer else ""
            raise ConfigError(
                f"batch {seq} has {n // self.row_bytes} unique rows, a {format_bytes(n)} matrix{held}, but "
                f"memory_budget={format_bytes(self.budget)} leaves {format_bytes(self.capacity)} for batch matrices; "
                f"raise memory_budget to at least {format_bytes(self.budget + self._used + n - self.capacity)} or "
                "lower batch_size / fanouts")
        self.counters["over_capacity"] += 1
        self._take(n)

    def _take(self, n: int) -> None:
        self._used += n  # no trim here: a spare may be this very batch's matrix (see matrix())
        self._peak = max(self._peak, self._used)
        self.counters["reserved"] += 1

    def _give_back(self, n: int, handed: bool) -> None:
        self._used -= n
        if handed:
            self._consumer -= n
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            n, seq, fut = self._waiters[0]
            if fut.done():  # cancelled while queued: nothing to grant
                self._waiters.popleft()
                continue
            if self._fits(n):
                self._take(n)
            elif self._stuck():
                try:
                    self._grant_stuck(n, seq)
                except ConfigError as exc:
                    self._waiters.popleft()
                    fut.set_exception(exc)
                    continue
            else:
                return
            self._waiters.popleft()
            fut.set_result(None)

    @property
    def used(self) -> int:
        return self._used

    def stats(self) -> dict[str, int]:
        pinned = {} if self.registry is None else {f"pinned_{k}": v for k, v in self.registry.counters.items()}
        return {"capacity": self.capacity, "used": self._used, "peak": self._peak, "spare": self._spare_bytes,
                **self.counters, **pinned}
