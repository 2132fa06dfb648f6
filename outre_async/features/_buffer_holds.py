"""What a piece of a batch holds in the feature buffer (:class:`Acquisition`), what a queued batch holds
(:class:`Pin`, its look-ahead count and its place in the read priority), what a batch beyond the queue
holds (:class:`Foresight`, its rows' place in the eviction order), what the buffer reads through
(:class:`SlotReader`) and the page-aligned slot memory; the buffer itself is ``_feature_buffer``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..store._row_format import FLOAT32
from . import _buffer_kernels as K


class SlotReader(Protocol):
    """What the buffer reads its missing rows through: a :class:`FeatureSource` or the tier below
    it (``_tier``): rows straight into slots of the buffer."""

    async def read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray, /) -> None: ...


SLOT_ALIGN = 4096  # slots of sector-multiple rows can take O_DIRECT reads straight from the file


def row_words(rows: np.ndarray) -> np.ndarray:
    """``rows`` viewed as unsigned words of their itemsize: what the numba kernels copy (a bit copy of
    any held dtype; numba has no float16)."""
    return rows.view(np.dtype(f"u{rows.dtype.itemsize}"))


def node_records(node_map: np.ndarray | tuple[np.ndarray, np.ndarray], num_nodes: int) -> np.ndarray:
    """Every node's record ``[N, 2]`` (slot, look-ahead counts) of a buffer's node map: the direct
    array itself, or a copy built from a hash table (for tests and inspection; O(N))."""
    if not isinstance(node_map, tuple):
        return node_map
    keys, vals = node_map
    out = np.zeros((num_nodes, 2), np.int32)
    out[:, K.SLOT] = -1
    held = keys >= 0
    out[keys[held]] = vals[held]
    return out


def page_aligned_zeros(rows: int, dim: int, dtype: np.dtype = FLOAT32) -> np.ndarray:
    """A zeroed ``[rows, dim]`` array of ``dtype`` (the rows' held dtype) whose first byte is page
    aligned, so that where a row is a whole number of sectors every slot is sector aligned and a disk
    source can read straight into it (one copy per row: slot -> batch matrix)."""
    nbytes = rows * dim * dtype.itemsize
    raw = np.zeros(nbytes + SLOT_ALIGN, dtype=np.uint8)
    shift = -raw.ctypes.data % SLOT_ALIGN
    return raw[shift : shift + nbytes].view(dtype).reshape(rows, dim)


@dataclass(eq=False, slots=True)
class Acquisition:
    """One piece's hold on the buffer: ``slots[i]`` holds row ``ids[i]``."""

    ids: np.ndarray
    slots: np.ndarray
    actions: np.ndarray
    reader: int = -1  # this piece's reader id when it reads rows (their waiters await its future)
    released: bool = False
    waits: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def read_mask(self) -> np.ndarray:
        return self.actions == K.READ


def int64_ids(ids: np.ndarray) -> np.ndarray:
    """``ids`` as a C-contiguous int64 array: the same object when it already is one.

    Why not ``np.ascontiguousarray(ids, dtype=np.int64)``: it returns a new view whenever the dtype
    *object* differs from numpy's singleton, and arrays returned by a cached numba kernel (the
    sampler's ``n_id``) carry an equal but distinct int64 dtype.  :meth:`Pin.counts` recognises a
    batch's own ids by identity, so with the new views its fast path (the acquire kernel withdraws
    the look-ahead counts it takes) was never taken and every piece paid a second pass."""
    if isinstance(ids, np.ndarray) and ids.dtype == np.int64 and ids.flags.c_contiguous:
        return ids
    return np.ascontiguousarray(ids, dtype=np.int64)


class PinOwner(Protocol):
    """What a :class:`Pin` updates in the buffer that made it (``_feature_buffer.FeatureBuffer``)."""

    _pinned: int
    _pins: dict[int, Pin]

    def _withdraw(self, ids: np.ndarray, seq: int) -> None: ...


@dataclass(eq=False, slots=True)
class Pin:
    """The look-ahead hold of one queued batch: ``ids[taken:]`` are still counted as wanted."""

    buffer: PinOwner
    ids: np.ndarray
    taken: int = 0
    seq: int = -1  # the queued batch's seq (next-use eviction orders rows by it)
    order: int = -1  # pinned-order number, across epochs too: the priority of the batch's reads (``_read_priority``)
    planned: bool = False  # an earlier batch's window read its missing rows (``_read_ahead``)

    def advance(self, n: int, *, withdrawn: bool = False) -> None:
        """The batch took its next ``n`` rows (they are held now): stop counting them
        (``withdrawn``: :func:`_buffer_kernels.acquire` already did, taking exactly these ids)."""
        n = min(n, len(self.ids) - self.taken)
        if n > 0:
            if withdrawn:
                self.buffer._pinned -= n
            else:
                self.buffer._withdraw(self.ids[self.taken : self.taken + n], self.seq)
            self.taken += n
        if self.taken >= len(self.ids) and self.buffer._pins.get(self.seq) is self:
            del self.buffer._pins[self.seq]  # nothing left to read ahead for
    def counts(self, ids: np.ndarray, pos: int) -> bool:
        """Whether this pin's next rows are ``ids[pos:]`` (the batch's own ids, none taken out of turn)."""
        return self.ids is ids and self.taken == pos

    def release(self) -> None:
        """Stop counting every row not taken yet (idempotent)."""
        self.advance(len(self.ids) - self.taken)


@dataclass(eq=False, slots=True)
class Foresight:
    """The hold of one batch beyond the extract queue (the loader's foresight, ``loader._foresight``):
    its rows are counted as foreseen until :meth:`release` (when its own :class:`Pin` is taken, or the
    epoch ends).  Foreseen rows are evicted after every cold row and before any pinned one; they never
    make anybody wait."""

    buffer: ForesightOwner
    ids: np.ndarray
    released: bool = False

    def release(self) -> None:
        """Stop counting the rows (idempotent)."""
        if not self.released:
            self.released = True
            self.buffer._unforesee(self.ids)


class ForesightOwner(Protocol):
    """What a :class:`Foresight` updates in the buffer that made it."""

    def _unforesee(self, ids: np.ndarray) -> None: ...
