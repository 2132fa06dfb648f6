"""A node id -> int32 values map sized by what it holds (``_id_map_kernels``), for Python owners and
tests; kernels that keep such a table take its ``keys`` and ``vals`` arrays directly."""

from __future__ import annotations

import numpy as np

from . import _id_map_kernels as K


class IdMap:
    """``width`` int32 values per node id; absent ids read as ``fill``.  Grows (rehashing into twice
    the buckets) before an insert would take it past half full; never shrinks by itself
    (:meth:`reserve` sizes it up front)."""

    def __init__(self, width: int = 1, *, entries: int = 0, fill: int = -1) -> None:
        self.width, self.fill = int(width), int(fill)
        self.keys, self.vals = K.new_table(K.capacity_for(entries), self.width, self.fill)
        self._size = 0

    @staticmethod
    def planned_bytes(entries: int, width: int = 1) -> int:
        """What a table holding ``entries`` keys takes at most (its capacity: ``capacity_for``)."""
        return K.capacity_for(entries) * (8 + 4 * width)

    @property
    def capacity(self) -> int:
        return len(self.keys)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.vals.nbytes

    def __len__(self) -> int:
        return self._size

    def reserve(self, entries: int) -> None:
        """Room for ``entries`` keys at most half full, rehashing into a larger table if needed."""
        cap = K.capacity_for(entries)
        if cap > self.capacity:
            keys, vals = K.new_table(cap, self.width, self.fill)
            K.rehash(self.keys, self.vals, keys, vals)
            self.keys, self.vals = keys, vals

    def get(self, ids: np.ndarray) -> np.ndarray:
        """``[len(ids), width]`` int32: each id's values, ``fill`` where absent."""
        ids = np.ascontiguousarray(ids, np.int64)
        out = np.empty((len(ids), self.width), np.int32)
        K.lookup_many(self.keys, self.vals, ids, self.fill, out)
        return out

    def put(self, ids: np.ndarray, values: np.ndarray) -> None:
        """Map ``ids[i]`` (>= 0) to ``values[i]`` (a row of ``width``, or a scalar per id)."""
        ids = np.ascontiguousarray(ids, np.int64)
        if not len(ids):
            return
        if ids.min() < 0:
            raise ValueError(f"node ids must be >= 0, found {int(ids.min())}")
        values = np.ascontiguousarray(np.broadcast_to(
            np.asarray(values, np.int32).reshape(len(ids), -1), (len(ids), self.width)))
        self.reserve(self._size + len(ids))
        added = int(K.insert_many(self.keys, self.vals, ids, values))
        self._size += added

    def delete(self, ids: np.ndarray) -> None:
        """Unmap ``ids`` (absent ones are ignored)."""
        self._size -= int(K.remove_many(self.keys, self.vals, np.ascontiguousarray(ids, np.int64)))

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, values)`` of every entry, in bucket order."""
        held = self.keys != K.EMPTY
        return self.keys[held].copy(), self.vals[held].copy()
