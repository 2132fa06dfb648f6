"""A batch's history arrays cross to the training device in one copy: pack, one transfer, views.

Each delivered batch's record (``loader._history.EpochHistory.record``) needs a few small host arrays
on the trainer's device: the pulled and pushed rows' local indices, the pulled rows' ages and would-be
degrees, and either the pulled slots (a table on the device gathers with them there) or the pulled
rows themselves (a host table gathers on the host).  Sent one by one, that was 4-5 ``.to(device)``
calls per step, each from pageable memory, each waiting on the stream, and a fresh ``pin_memory()``
of the host table's gathered rows.  :class:`RecordTransfer` packs them instead into one host buffer,
page-locked on CUDA, allocated when it must grow (a power of two) and reused for every step, then
issues **one** ``non_blocking`` copy of the packed bytes on the current stream of the loop thread
(the stream the table's gathers and scatters use, ``_device_fence``), and hands back views of the
device copy, one per array (int64 at 8-byte offsets, the float32 rows after them).

Reuse is safe: before the buffer is written again, the host waits on the event recorded after the
previous copy (by then long complete: a batch is trained between two records).  The device copy is
a fresh allocation per step, owned by the record's views.  On a CPU device the same lines run with
an unpinned buffer and a synchronous copy (no event), which is how CI runs them; the values are
the same bytes either way, so the history trains bit for bit as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from ._history_config import RECORD_MIN_BUFFER

if TYPE_CHECKING:
    from ._history import HistoryTable


class RecordTransfer:
    """One reusable host buffer (see the module) for records sent to ``device``."""

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self._cuda = self.device.type == "cuda"
        self._host = torch.empty(0, dtype=torch.uint8)
        self._copied: torch.cuda.Event | None = None  # after the latest copy out of ``_host`` (CUDA)
        self.counters = {"transfers": 0, "bytes": 0, "buffers": 0, "buffer_bytes": 0}  # buffers: allocations

    def send(self, arrays: Sequence[np.ndarray], table: HistoryTable,
             slots: np.ndarray) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``arrays`` (int64) as device tensors, in order, and the rows of ``slots`` of ``table`` on the
        device: a table on the device gathers there with the slots sent along, a table elsewhere (the
        host's) gathers into the buffer, so its rows cross with the rest."""
        ints = [np.ascontiguousarray(a, dtype=np.int64) for a in arrays]
        picked = np.ascontiguousarray(slots, dtype=np.int64)
        host_rows = table.device != self.device
        if not host_rows:
            ints.append(picked)
        offsets = np.cumsum([0] + [8 * len(a) for a in ints]).tolist()
        rows_at, dim = offsets[-1], table.dim
        total = rows_at + (4 * len(picked) * dim if host_rows else 0)
        host = self._buffer(total)
        packed = host.numpy()
        for a, start in zip(ints, offsets, strict=False):
            packed[start: start + 8 * len(a)].view(np.int64)[:] = a
        if host_rows:
            torch.index_select(table.rows, 0, torch.from_numpy(picked),
                               out=host[rows_at: total].view(torch.float32).view(len(picked), dim))
        dev = torch.empty(total, dtype=torch.uint8, device=self.device)
        dev.copy_(host[:total], non_blocking=self._cuda)  # the one host -> device transfer of the step
        if self._cuda:
            self._copied = torch.cuda.Event()
            self._copied.record(torch.cuda.current_stream(self.device))
        self.counters["transfers"] += 1
        self.counters["bytes"] += total
        views = [dev[start: start + 8 * len(a)].view(torch.int64) for a, start in zip(ints, offsets, strict=False)]
        if host_rows:
            return views, dev[rows_at: total].view(torch.float32).view(len(picked), dim)
        return views[:-1], table.gather(views[-1])

    def _buffer(self, nbytes: int) -> torch.Tensor:
        """The host buffer, at least ``nbytes`` (grown to a power of two), once the previous copy out
        of it is complete."""
        if self._copied is not None:
            self._copied.synchronize()
            self._copied = None
        if len(self._host) < nbytes:  # at most ``record_buffer_bytes`` (the memory plan's "history transfer")
            size = max(RECORD_MIN_BUFFER, 1 << max(0, (nbytes - 1).bit_length()))
            self._host = torch.empty(size, dtype=torch.uint8, pin_memory=self._cuda)
            self.counters["buffers"] += 1
            self.counters["buffer_bytes"] = size
        return self._host
