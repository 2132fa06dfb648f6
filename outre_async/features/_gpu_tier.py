"""The GPU tier: hot feature rows held in the training device's memory, so they never cross PCIe.

:class:`DeviceFeatureCache` holds ``rows`` node rows as one tensor of their held words (``RowFormat.held``:
the stored dtype, bfloat16 words as torch's bfloat16; ``features._decode``) on the loader's ``device``
(a CUDA device, or the CPU: the same code, which is how CI runs it; only the batch assembly takes a
numpy path on a CPU device, and the tests run its torch path on CPU tensors too), chosen once (the
rows met most often in the first planned batches: ``loader._tiers``), read once through the loader's
source, never evicted.  Its node -> slot table stays on the host (the split of a
batch is decided where its ids are, before any copy).

:class:`GpuTier` is the top tier (``_tier``).  For a batch (:meth:`GpuTier.read_batch`) it looks the ids
up, has the tiers below fill only the *misses*, as a compact prefix of the batch matrix, and returns a
:class:`DeviceRows`; where the batch is moved to the device (``loader._batch.to_batch``, after the
copy of that prefix) :func:`assemble_x` builds the device matrix, then decodes it once::

    x = empty(n, dim, device);  x[miss_pos] = misses (the copied prefix);  x[hit_pos] = rows[hit_slots]
    x = decode(x)   # held words -> x_dtype

so the rows it holds are gathered on the device and only misses (plus 8 bytes of index per row and per hit)
cross PCIe.  On ``device="cpu"`` the same function assembles on the CPU, bit-identical to a batch
read without the tier.  Its generic :meth:`GpuTier.read_rows` fills a host matrix instead (hits copied
back from the device): the contract's reference path, not the loader's.

Memory: device ``rows x row_bytes`` bytes, rows in their held dtype (:func:`gpu_cache_bytes`;
``rows = min(gpu_cache_budget // row_bytes, N)``, ``row_bytes`` the format's ``held_row_bytes``),
outside ``memory_budget``; host ``4 N`` bytes for the node -> slot table (:func:`gpu_index_bytes`), a
part of the host memory plan.  A budget below one row is a
:class:`ConfigError` (pass 0 or None to turn the tier off).
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import ConfigError
from ..store._row_format import FLOAT32, held_dtype
from ._decode import as_tensor, as_words, torch_dtype
from ._device_rows import DeviceRows
from ._feature_buffer import Pin
from ._source import FeatureSource
from ._tier import CachedTier, FeatureTier, tier_counts

LOAD_CHUNK = 1 << 14  # rows per read while loading the device rows


def gpu_tier_rows(budget: int, *, row_bytes: int, num_nodes: int) -> int:
    """Rows a ``budget`` of device bytes holds (at most every node), rows of ``row_bytes`` held bytes
    (``RowFormat.held_row_bytes``); a :class:`ConfigError` below one row."""
    if budget < row_bytes:
        raise ConfigError(f"gpu_cache_budget={budget} bytes holds no feature row ({row_bytes} bytes each); "
                          f"raise it to at least {row_bytes} or pass 0 to turn the GPU tier off")
    return min(budget // row_bytes, num_nodes)


def gpu_cache_bytes(rows: int, *, row_bytes: int) -> int:
    """Device bytes of a GPU tier of ``rows`` rows of ``row_bytes`` held bytes each."""
    return rows * row_bytes


def gpu_index_bytes(num_nodes: int) -> int:
    """Host bytes of its node -> slot table (int32)."""
    return 4 * num_nodes


def rank_rows(counts: np.ndarray) -> np.ndarray:
    """Node ids by falling count, ties by id; only nodes counted at least once."""
    counts = np.asarray(counts)
    order = np.lexsort((np.arange(len(counts)), -counts))
    return order[counts[order] > 0]


class DeviceFeatureCache:
    """``nodes`` (ascending, unique) rows on ``device``; :meth:`load` reads them once."""

    def __init__(self, nodes: np.ndarray, num_nodes: int, dim: int, device: str | torch.device = "cpu", *,
                 held: np.dtype = FLOAT32) -> None:
        nodes = np.asarray(nodes, dtype=np.int64)
        if nodes.ndim != 1 or (len(nodes) and (nodes[0] < 0 or nodes[-1] >= num_nodes or (np.diff(nodes) <= 0).any())):
            raise ConfigError(f"GPU tier nodes must be ascending unique ids in [0, {num_nodes})")
        self.nodes, self.num_nodes, self.dim = nodes, int(num_nodes), int(dim)
        self.device = torch.device(device)
        self._slot_of = np.full(num_nodes, -1, np.int32)
        self._slot_of[nodes] = np.arange(len(nodes), dtype=np.int32)
        self.held = held_dtype(held)  # the rows' dtype here and in the host staging that loads them
        self.rows = torch.zeros((0, dim), dtype=torch_dtype(self.held))  # on the device once loaded
        self.loaded = False
        self.counters = {"rows": 0, "hits": 0, "batch_hits": 0}

    @property
    def nbytes(self) -> int:
        """Device bytes (the rows)."""
        return gpu_cache_bytes(len(self.nodes), row_bytes=self.dim * self.held.itemsize)

    @property
    def index_bytes(self) -> int:
        """Host bytes (the node -> slot table)."""
        return gpu_index_bytes(self.num_nodes)

    async def load(self, source: FeatureSource | FeatureTier) -> None:
        """Read every held row through ``source`` into the device tensor (once; later calls return)."""
        if self.loaded:
            return
        rows = torch.empty((len(self.nodes), self.dim), dtype=torch_dtype(self.held), device=self.device)
        staging = np.empty((min(LOAD_CHUNK, len(self.nodes)), self.dim), self.held)
        for start in range(0, len(self.nodes), LOAD_CHUNK):
            stop = min(start + LOAD_CHUNK, len(self.nodes))
            await source.read_rows(self.nodes[start:stop], staging[: stop - start])
            rows[start:stop].copy_(as_tensor(staging[: stop - start]))  # synchronous from pageable memory
        self.rows, self.loaded = rows, True

    def slots_of(self, ids: np.ndarray) -> np.ndarray:
        """Row of each id on the device, -1 where not held, counting nothing (:meth:`split` counts)."""
        return self._slot_of[ids]

    def split(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(hit_pos, hit_slots, miss_pos)``: positions of ``ids`` held here, their slots, the rest."""
        slots = self._slot_of[ids]
        held = slots >= 0
        hit_pos = np.flatnonzero(held)
        self.counters["rows"] += len(ids)
        self.counters["hits"] += len(hit_pos)
        return hit_pos, slots[hit_pos].astype(np.int64), np.flatnonzero(~held)


class GpuTier(CachedTier):
    """The :class:`DeviceFeatureCache` over ``fallback`` (see the module)."""

    name = "gpu"

    def __init__(self, fallback: FeatureTier, cache: DeviceFeatureCache) -> None:
        super().__init__(fallback, cache, "GPU tier")
        self.cache: DeviceFeatureCache = cache

    def _check_loaded(self) -> None:
        if not self.cache.loaded and len(self.cache.nodes):
            raise ConfigError("the GPU tier's rows are not loaded; await cache.load(source) first")

    async def _read_batch(self, ids: np.ndarray, out: np.ndarray, pin: Pin | None) -> DeviceRows | None:
        self._check_loaded()
        hit_pos, hit_slots, miss_pos = self.cache.split(ids)
        if not len(hit_pos):  # nothing held: the host matrix is the batch
            await self._below._read(ids, out, pin)
            return None
        await self._below._read(ids[miss_pos], out[: len(miss_pos)], pin)
        self.cache.counters["batch_hits"] += len(hit_pos)
        return DeviceRows(self.cache.rows, len(ids), miss_pos, hit_pos, hit_slots)

    async def _read(self, ids: np.ndarray, out: np.ndarray, pin: Pin | None) -> None:
        self._check_loaded()
        hit_pos, hit_slots, miss_pos = self.cache.split(ids)
        await self._below._read(ids[miss_pos], out[: len(miss_pos)], pin)
        if len(hit_pos):
            out[miss_pos] = out[: len(miss_pos)].copy()  # spread the prefix (it may overlap its targets)
            index = torch.from_numpy(hit_slots).to(self.cache.rows.device)
            out[hit_pos] = as_words(self.cache.rows.index_select(0, index).cpu())

    def stats(self) -> dict[str, int | float | str]:
        c = self.cache.counters
        return {"tier": self.name, "device": str(self.cache.device), **tier_counts(c["hits"], c["rows"] - c["hits"]),
                "rows_held": len(self.cache.nodes), "bytes_held": self.cache.nbytes,
                "host_index_bytes": self.cache.index_bytes,
                "pcie_bytes_saved": c["batch_hits"] * self.cache.dim * self.cache.held.itemsize}
