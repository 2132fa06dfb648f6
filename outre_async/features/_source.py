"""The :class:`FeatureSource` contract: how the loader asks for feature rows, whatever the backend.

PyG ``FeatureStore`` style: the public methods validate their arguments and keep the counters, then
call a private hook that a backend implements.  Two hooks:

* ``_read_rows(ids, out)`` (required): fill ``out[i] = features[ids[i]]``;
* ``_read_rows_into(ids, buffer, slots)`` (optional, PyG ``_multi_get_tensor`` style): "read these
  rows into these slots of this buffer".  The default reads through ``_read_rows`` into a temporary
  and copies it into the slots, which is correct for every backend; a disk backend can override it
  to gather straight from its staging memory into the slots and skip the temporary.

Sources are used from one event loop and hold no locks; ``async with`` closes them.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, PipelineClosed


class FeatureSource(abc.ABC):
    """Reads feature rows by node id; subclasses implement :meth:`_read_rows` (see the module)."""

    backend: str = "abstract"

    def __init__(self, num_rows: int, dim: int, dtype: np.dtype) -> None:
        self.num_rows, self.dim, self.dtype = int(num_rows), int(dim), np.dtype(dtype)
        self._closed = False
        self._counters: dict[str, Any] = {"calls": 0, "rows": 0, "unique_rows": 0, "row_copies": 0}

    @property
    def merge_rows(self) -> int:
        """Rows at most this many ids apart share one read (0: reads never merge, e.g. in memory);
        the feature buffer's window plan reads ahead only rows that merge (``_window_plan``)."""
        return 0

    @property
    def files(self) -> tuple[Path, ...]:
        """The files this source reads on every call (none when it holds its rows in memory): what a
        loader watches for changes (``store._watch``)."""
        return ()

    async def read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        """Fill ``out[i, :] = features[ids[i]]``.

        ``ids``: 1-D integers in ``[0, num_rows)``, duplicates allowed.  ``out``: C-contiguous,
        writeable, shape ``[len(ids), dim]``, float32 or the stored dtype.  Raises
        :class:`ConfigError` on bad arguments, :class:`ExtractorError` when a read fails,
        :class:`PipelineClosed` after :meth:`aclose`.
        """
        ids = self._check_call(ids)
        self._check_rows("out", out, len(ids))
        self._count_call(ids)
        if len(ids):
            await self._read_rows(ids, out)

    async def read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray) -> None:
        """Fill ``buffer[slots[i], :] = features[ids[i]]``: rows straight into slots of a buffer.

        ``ids`` as in :meth:`read_rows`; ``buffer``: C-contiguous, writeable, ``[num_slots, dim]``,
        float32 or the stored dtype; ``slots``: 1-D integers in ``[0, num_slots)``, one per id, each
        slot at most once.  Same errors as :meth:`read_rows`; slots of a failed call hold garbage.
        """
        ids = self._check_call(ids)
        self._check_rows("buffer", buffer, len(buffer))
        slots = np.asarray(slots)
        if slots.shape != ids.shape or not (slots.dtype.kind in "iu" or slots.size == 0):
            raise ConfigError(f"slots must be 1-D integers, one per id ({len(ids)}), "
                              f"got shape {slots.shape} dtype {slots.dtype}")
        if slots.size and (int(slots.min()) < 0 or int(slots.max()) >= len(buffer)):
            raise ConfigError(f"slots must lie in [0, {len(buffer)}), got min {int(slots.min())} "
                              f"max {int(slots.max())}")
        self._count_call(ids)
        if len(ids):
            await self._read_rows_into(ids, buffer, slots)

    def _check_call(self, ids: np.ndarray) -> np.ndarray:
        if self._closed:
            raise PipelineClosed(f"{type(self).__name__} is closed; open a new source to read rows")
        arr = np.asarray(ids)
        if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
            raise ConfigError(
                f"ids must be a 1-D integer array, got shape {arr.shape} dtype {arr.dtype}")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.num_rows):
            lo, hi = int(arr.min()), int(arr.max())
            raise ConfigError(f"ids must lie in [0, {self.num_rows}), got min {lo} max {hi}")
        return arr.astype(np.int64, copy=False)

    def _check_rows(self, name: str, rows: np.ndarray, n: int) -> None:
        if not isinstance(rows, np.ndarray) or rows.shape != (n, self.dim):
            shape = getattr(rows, "shape", type(rows).__name__)
            raise ConfigError(f"{name} must be an ndarray of shape ({n}, {self.dim}), got {shape}")
        if rows.dtype not in (np.dtype(np.float32), self.dtype):
            raise ConfigError(f"{name} dtype must be float32 or {self.dtype}, got {rows.dtype}")
        if not (rows.flags.c_contiguous and rows.flags.writeable):
            raise ConfigError(f"{name} must be C-contiguous and writeable")

    def _count_call(self, ids: np.ndarray) -> None:
        self._counters["calls"] += 1
        self._counters["rows"] += len(ids)

    @abc.abstractmethod
    async def _read_rows(self, ids: np.ndarray, out: np.ndarray) -> None:
        """Fill ``out`` (validated, ``len(ids) > 0``); ``ids`` are int64 in range."""

    async def _read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray) -> None:
        """Correct for every backend: read into a temporary, then copy it into the slots."""
        rows = np.empty((len(ids), self.dim), dtype=buffer.dtype)
        await self._read_rows(ids, rows)
        buffer[slots] = rows
        self._counters["row_copies"] += len(ids)

    def stats(self) -> dict[str, Any]:
        """Counters since construction (what ``loader.stats()`` reports for I/O).  ``row_copies``:
        rows copied in memory on their way to ``out``/the slots (``copies_per_row`` per row asked)."""
        c = self._counters
        return {"backend": self.backend, **c,
                "copies_per_row": round(c["row_copies"] / c["rows"], 3) if c["rows"] else 0.0}

    async def aclose(self) -> None:
        """Stop accepting work and release resources; idempotent."""
        self._closed = True

    async def __aenter__(self) -> FeatureSource:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
