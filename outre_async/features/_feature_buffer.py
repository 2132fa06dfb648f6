"""The feature buffer: a fixed pool of row slots shared by every extractor (GNNDrive §4.2).

A batch *acquires* one slot per row.  Rows already valid in the buffer are hits (no I/O); rows being
read for another batch are awaited, never read twice; the rest take the least recently released
standby slot and are read from the :class:`FeatureSource`.  When the consumer is done with a batch it
*releases* the slots: they go to the standby list with their rows intact, so a later batch needing
the same node takes it back without I/O until the slot is evicted.

Acquisition is all-or-nothing: when the standby list cannot cover a whole batch, the partial work is
undone and the batch waits for a release.  With ``num_slots`` ≥ (batches that may hold slots at once) ×
(max rows per batch) it never waits for long; a buffer smaller than one batch is refused at
construction (:class:`ConfigError`), because that batch could never be served.

Only the event loop thread touches this object (no locks).  Cancellation rule: a cancelled
:meth:`fill` still lets the reads it submitted finish inside the source, marks its unread rows
invalid so nobody waits on them forever, and leaves releasing to the caller's ``finally``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConfigError
from . import _buffer_kernels as K

if TYPE_CHECKING:
    from ._source import FeatureSource


SLOT_ALIGN = 4096  # slots of sector-multiple rows can take O_DIRECT reads straight from the file


def page_aligned_zeros(rows: int, dim: int) -> np.ndarray:
    """A zeroed ``[rows, dim]`` float32 array whose first byte is page aligned, so that where a row
    is a whole number of sectors every slot is sector aligned and a disk source can read straight
    into it (one copy per row: slot -> batch matrix)."""
    raw = np.zeros(rows * dim * 4 + SLOT_ALIGN, dtype=np.uint8)
    shift = -raw.ctypes.data % SLOT_ALIGN
    return raw[shift : shift + rows * dim * 4].view(np.float32).reshape(rows, dim)


@dataclass(eq=False, slots=True)
class Acquisition:
    """One batch's hold on the buffer: ``slots[i]`` holds row ``ids[i]``."""

    ids: np.ndarray
    slots: np.ndarray
    actions: np.ndarray
    reader: int = -1  # this batch's reader id when it reads rows (their waiters await its future)
    released: bool = False
    waits: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def read_mask(self) -> np.ndarray:
        return self.actions == K.READ


class FeatureBuffer:
    """``num_slots`` rows of ``dim`` float32 values plus GNNDrive's mapping table and standby LRU."""

    def __init__(self, num_nodes: int, num_slots: int, dim: int, *, min_slots: int = 1) -> None:
        if num_slots < max(min_slots, 1):
            raise ConfigError(
                f"feature buffer of {num_slots=} rows is smaller than the {min_slots} rows one round of "
                "batches needs; raise buffer_rows / memory_budget or lower batch_size, fanouts or extractors"
            )
        self.num_slots = num_slots
        self.data = page_aligned_zeros(num_slots, dim)
        self._slot_of = np.full(num_nodes, -1, dtype=np.int64)
        self._node_of = np.full(num_slots, -1, dtype=np.int64)
        self._refs = np.zeros(num_slots, dtype=np.int32)
        self._valid = np.zeros(num_slots, dtype=np.uint8)
        self._prev = np.empty(num_slots + 1, dtype=np.int64)
        self._next = np.empty(num_slots + 1, dtype=np.int64)
        K.lru_init(self._prev, self._next)
        # one future per batch that reads rows, not one per row (a future per row cost ~1 µs each):
        # _reader[slot] is the reader id of a slot being read, _reads[id] its future
        self._reader = np.full(num_slots, -1, dtype=np.int64)
        self._reads: dict[int, asyncio.Future[None]] = {}
        self._next_reader = 0
        self._released = asyncio.Event()
        self.counters = {"rows": 0, "hits": 0, "reads": 0, "waits": 0, "acquire_waits": 0}

    async def acquire(self, ids: np.ndarray) -> Acquisition:
        """Hold a slot for every row of ``ids``, waiting for releases if the buffer is full."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if len(ids) > self.num_slots:
            raise ConfigError(f"a batch of {len(ids)} rows cannot fit a feature buffer of {self.num_slots} rows")
        while (acq := self._try_acquire(ids)) is None:
            self.counters["acquire_waits"] += 1
            self._released.clear()
            await self._released.wait()
        return acq

    def _try_acquire(self, ids: np.ndarray) -> Acquisition | None:
        slots = np.empty(len(ids), dtype=np.int64)
        actions = np.empty(len(ids), dtype=np.int8)
        taken = K.acquire(ids, self._slot_of, self._node_of, self._refs, self._valid,
                          self._prev, self._next, slots, actions)
        if taken < len(ids):
            fresh = slots[:taken][actions[:taken] == K.READ]
            K.invalidate(fresh, self._slot_of, self._node_of, self._valid)
            K.release(slots[:taken], self._refs, self._prev, self._next)
            return None
        acq = Acquisition(ids=ids, slots=slots, actions=actions)
        read = slots[actions == K.READ]
        if len(read):
            acq.reader = self._next_reader
            self._next_reader += 1
            self._reader[read] = acq.reader
            self._reads[acq.reader] = asyncio.get_running_loop().create_future()
        waiting = slots[actions == K.WAIT]
        if len(waiting):  # a WAIT row's reader has not settled yet
            acq.waits = [self._reads[r] for r in np.unique(self._reader[waiting]).tolist()]
        self._count(actions)
        return acq

    def _count(self, actions: np.ndarray) -> None:
        c = self.counters
        c["rows"] += len(actions)
        c["hits"] += int((actions == K.HIT).sum())
        c["reads"] += int((actions == K.READ).sum())
        c["waits"] += int((actions == K.WAIT).sum())

    async def fill(self, acq: Acquisition, source: FeatureSource) -> None:
        """Read this batch's missing rows into their slots through ``source`` (its batched
        ``read_rows_into`` hook), then await rows others are reading."""
        read_slots = acq.slots[acq.read_mask]
        try:
            if len(read_slots):
                await source.read_rows_into(acq.ids[acq.read_mask], self.data, read_slots)
                self._valid[read_slots] = 1
        except BaseException as exc:
            K.invalidate(read_slots, self._slot_of, self._node_of, self._valid)
            self._settle(acq, exc)
            raise
        self._settle(acq, None)
        for fut in acq.waits:
            await fut

    def _settle(self, acq: Acquisition, exc: BaseException | None) -> None:
        fut = self._reads.pop(acq.reader, None)
        if fut is None or fut.done():
            return
        if exc is None:
            fut.set_result(None)
        else:
            fut.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            fut.exception()  # retrieved here: a batch nobody waits for must not warn

    def gather(self, acq: Acquisition) -> np.ndarray:
        """The batch's feature matrix ``[len(ids), dim]``, copied out of the slots."""
        out = np.empty((len(acq.slots), self.data.shape[1]), dtype=np.float32)
        K.gather_rows(self.data, acq.slots, out)
        return out

    def release(self, acq: Acquisition) -> None:
        """Give the batch's slots back (idempotent); they keep their rows on the standby list."""
        if acq.released:
            return
        acq.released = True
        K.release(acq.slots, self._refs, self._prev, self._next)
        self._released.set()

    def free_slots(self) -> int:
        """Slots nobody holds (the standby list's length)."""
        return int((self._refs == 0).sum())

    def stats(self) -> dict[str, int | float]:
        c: dict[str, int | float] = dict(self.counters)
        c["hit_rate"] = c["hits"] / c["rows"] if c["rows"] else 0.0
        c["slots"] = self.num_slots
        c["free_slots"] = self.free_slots()
        return c
