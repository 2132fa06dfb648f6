"""The static feature cache: the profile's hottest rows, held in RAM for the loader's life.

GNNLab's and DUCATI's feature cache: rows chosen once from pre-sampling (the plan's ``static_rows``),
read once through the loader's own :class:`FeatureSource`, never evicted and never written again, so
lookups need no lock or reference count.  As a tier (:class:`StaticTier`, ``_tier``) it sits above the
feature buffer: a batch's ids are looked up here first, only the misses go down (into a prefix of the
batch matrix: they acquire buffer slots and I/O), then the cached rows are merged in place.  With
``pin=True`` (the loader's device is CUDA) the rows live in pinned memory.

Bytes: ``rows x (row_bytes + 8)`` (the rows in their held dtype, ``RowFormat.held_row_bytes``, and
their node ids) ``+ 4 N`` (node -> row table, int32): :func:`static_cache_bytes`, the price the plan
pays for it.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..store._row_format import FLOAT32, held_dtype
from ._buffer_holds import row_words
from ._feature_buffer import Pin
from ._source import FeatureSource
from ._static_kernels import merge_static_rows
from ._tier import CachedTier, FeatureTier, tier_counts

LOAD_CHUNK = 1 << 14  # rows per read while loading (the source stages them within its own budget)


def static_cache_bytes(num_nodes: int, rows: int, *, row_bytes: int) -> int:
    """Bytes of a static cache of ``rows`` rows of ``row_bytes`` held bytes each (module docstring)."""
    return rows * (row_bytes + 8) + 4 * num_nodes if rows else 0


class StaticFeatureCache:
    def __init__(self, nodes: np.ndarray, num_nodes: int, dim: int, *, held: np.dtype = FLOAT32,
                 pin: bool = False) -> None:
        nodes = np.asarray(nodes, dtype=np.int64)
        if nodes.ndim != 1 or (len(nodes) and (nodes[0] < 0 or nodes[-1] >= num_nodes or (np.diff(nodes) <= 0).any())):
            raise ConfigError(f"static cache nodes must be ascending unique ids in [0, {num_nodes})")
        self.nodes, self.num_nodes, self.dim = nodes, num_nodes, dim
        self._slot_of = np.full(num_nodes, -1, np.int32)
        self._slot_of[nodes] = np.arange(len(nodes), dtype=np.int32)
        self.held = held_dtype(held)
        self.rows, self._pinned = _rows(len(nodes), dim, self.held, pin)  # _pinned keeps the pinned storage alive
        self.loaded = False
        self.counters = {"rows": 0, "hits": 0}

    @property
    def nbytes(self) -> int:
        return static_cache_bytes(self.num_nodes, len(self.nodes), row_bytes=self.dim * self.rows.dtype.itemsize)

    async def load(self, source: FeatureSource) -> None:
        """Read every cached row through ``source`` (once; later calls return at once)."""
        if self.loaded:
            return
        for start in range(0, len(self.nodes), LOAD_CHUNK):
            stop = min(start + LOAD_CHUNK, len(self.nodes))
            await source.read_rows(self.nodes[start:stop], self.rows[start:stop])
        self.loaded = True

    def slots_of(self, ids: np.ndarray) -> np.ndarray:
        """Row of each id in the cache, -1 for a miss, counting nothing (:meth:`lookup` counts)."""
        return self._slot_of[ids]

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Row of each id in the cache, -1 for a miss (ids are the sampler's, already in range)."""
        slots = self._slot_of[ids]
        self.counters["rows"] += len(ids)
        self.counters["hits"] += int((slots >= 0).sum())
        return slots

    def merge(self, slots: np.ndarray, missed: np.ndarray) -> np.ndarray:
        """The batch matrix: cached rows where ``slots >= 0``, ``missed`` (in order) elsewhere."""
        out = np.empty((len(slots), self.dim), self.rows.dtype)
        out[: len(missed)] = missed
        self.merge_into(slots, out)
        return out

    def merge_into(self, slots: np.ndarray, out: np.ndarray) -> None:
        """In place: ``out`` holds the batch's missed rows (in order) as a prefix; spread them to their
        positions and copy the cached rows in, so a batch matrix is written once, with no temporary."""
        merge_static_rows(row_words(out), slots, row_words(self.rows))

    def stats(self) -> dict[str, int | float]:
        c = self.counters
        return {"rows_cached": len(self.nodes), "bytes": self.nbytes, "lookups": c["rows"], "hits": c["hits"],
                "hit_rate": c["hits"] / c["rows"] if c["rows"] else 0.0}


class StaticTier(CachedTier):
    """The static cache over ``fallback``: hits merged from :class:`StaticFeatureCache`, misses read
    by the fallback into the prefix of ``out`` (GraphBolt's ``CPUCachedFeature(fallback, cache)``).
    The batch's look-ahead ``pin`` goes down with the misses (the buffer below advances it)."""

    name = "static"

    def __init__(self, fallback: FeatureTier, cache: StaticFeatureCache) -> None:
        super().__init__(fallback, cache, "static cache")
        self.cache: StaticFeatureCache = cache

    async def _read(self, ids: np.ndarray, out: np.ndarray, pin: Pin | None) -> None:
        slots = self.cache.lookup(ids)
        missed = ids[slots < 0]
        await self._below._read(missed, out[: len(missed)], pin)
        self.cache.merge_into(slots, out)

    def stats(self) -> dict[str, int | float | str]:
        c = self.cache.counters
        return {"tier": self.name, **tier_counts(c["hits"], c["rows"] - c["hits"]), "bytes_held": self.cache.nbytes,
                "rows_held": len(self.cache.nodes)}


def _rows(count: int, dim: int, dtype: np.dtype, pin: bool) -> tuple[np.ndarray, object]:
    if not pin:
        return np.zeros((count, dim), dtype), None
    import torch

    pinned = torch.zeros(count, dim, dtype=torch.from_numpy(np.empty(0, dtype)).dtype).pin_memory()  # numpy's words
    return pinned.numpy(), pinned
