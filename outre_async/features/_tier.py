"""The tier contract: feature memory as a hierarchy, each level wrapping the one below it.

    gpu (device rows) ─▶ static (the profile's hot rows) ─▶ buffer (slots, evicted) ─▶ source (disk)

GraphBolt's ``CPUCachedFeature(fallback, cache)`` is the model: a tier answers the rows it holds and
passes the rest down to its *fallback* (another tier; the :class:`SourceTier` at the bottom wraps the
:class:`FeatureSource`).  The extract stage asks only the top tier (:meth:`FeatureTier.read_batch`);
which tiers there are, and their order, is decided once where the chain is built (the loader's
resources, :func:`make_tier` by name from :data:`TIERS`).

What every tier offers:

* ``read_rows(ids, out, pin=)``: ``out[i] = features[ids[i]]`` (validated; duplicates, any order and
  empty ids allowed); ``pin`` is the batch's look-ahead hold on the feature buffer, handed down to the
  tier that uses it;
* ``read_batch(ids, out, pin=)``: what the extract stage calls: the same, except that a tier whose
  rows live on the training device (:class:`~outre_async.features._gpu_tier.GpuTier`) fills only the
  *misses* into a prefix of ``out`` and returns a :class:`DeviceRows` that assembles the batch on the
  device at delivery; host tiers return ``None`` (``out`` is complete);
* ``read_rows_into(ids, buffer, slots)``: rows straight into slots of a buffer, what a buffer tier above
  calls to land its reads (ids already checked by the top tier);
* ``stats()``: ``tier``, ``hits`` (rows served from this tier's own memory), ``misses`` (rows passed down
  to the fallback), ``bytes_held`` (its memory) and ``hit_rate``, plus the tier's own figures.

Dynamic tiers name their eviction policy from ``_policies.EVICTION_POLICIES``: today the feature
buffer's ``"lru-lookahead"``; ``PLANNED_POLICIES`` names the next-use (Belady within the window of planned
batches) policy the I/O issue plans, refused until it exists.

Tiers run on the event loop thread only (no locks), like the source and the buffer below them.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import numpy as np

from ..errors import ConfigError
from ._feature_buffer import FeatureBuffer, Pin, int64_ids
from ._source import FeatureSource

if TYPE_CHECKING:
    from ._device_rows import DeviceRows

TierName = Literal["gpu", "static", "buffer", "source"]
TIERS: tuple[TierName, ...] = get_args(TierName)  # top to bottom, the order the loader stacks them in


class FeatureTier(abc.ABC):
    """One level of the feature hierarchy over ``fallback`` (see the module); subclasses implement
    :meth:`_read` and :meth:`stats`, and may override :meth:`_read_batch` / :meth:`read_rows_into`."""

    name: ClassVar[str] = "abstract"

    def __init__(self, fallback: FeatureTier | None, num_rows: int, dim: int, held: np.dtype | None = None) -> None:
        self.fallback, self.num_rows, self.dim = fallback, int(num_rows), int(dim)
        # the words rows are held and moved in (``RowFormat.held``): every tier of a chain the same
        self.held = np.dtype(held) if held is not None else fallback.held if fallback is not None else np.dtype(np.float32)

    # -- the public calls, validated once at the top --------------------------------------------------
    async def read_rows(self, ids: np.ndarray, out: np.ndarray, *, pin: Pin | None = None) -> None:
        """``out[i] = features[ids[i]]`` on the host, whatever this tier is (a device tier copies its
        hits back: the loader uses :meth:`read_batch` instead)."""
        ids = self._check(ids, out)
        if len(ids):
            await self._read(ids, out, pin)

    async def read_batch(self, ids: np.ndarray, out: np.ndarray, *, pin: Pin | None = None) -> DeviceRows | None:
        """Fill a batch matrix: ``None`` when ``out`` holds every row; a :class:`DeviceRows` when only
        its prefix holds the misses and the rest is assembled on the device (see the module)."""
        ids = self._check(ids, out)
        return await self._read_batch(ids, out, pin)

    async def read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray) -> None:
        """``buffer[slots[i]] = features[ids[i]]``: correct for every tier (a temporary, then a scatter);
        the :class:`SourceTier` lands reads in the slots directly."""
        rows = np.empty((len(ids), self.dim), dtype=buffer.dtype)
        if len(ids):
            await self._read(int64_ids(ids), rows, None)
        buffer[slots] = rows

    # -- what a tier implements -------------------------------------------------------------------------
    @abc.abstractmethod
    async def _read(self, ids: np.ndarray, out: np.ndarray, pin: Pin | None) -> None:
        """Fill ``out`` (``[len(ids), dim]``, ``ids`` int64 in range, maybe empty)."""

    async def _read_batch(self, ids: np.ndarray, out: np.ndarray, pin: Pin | None) -> DeviceRows | None:
        await self._read(ids, out, pin)
        return None

    @abc.abstractmethod
    def stats(self) -> dict[str, Any]:
        """This tier's figures (``tier``, ``hits``, ``misses``, ``bytes_held``, ``hit_rate``, ...)."""

    def passed_down(self, ids: np.ndarray) -> np.ndarray:
        """The ids of a batch this tier would pass down, in order (a tier holding rows drops those; the
        default holds none).  What the sampler pins in the buffer (look-ahead), so that the buffer's
        pins, eviction and read-ahead never count rows a tier above it serves.  Counts nothing."""
        return ids if self.fallback is None else self.fallback.passed_down(ids)

    # -- the chain ----------------------------------------------------------------------------------------
    def chain(self) -> list[FeatureTier]:
        """This tier and every fallback below it, top to bottom."""
        tiers: list[FeatureTier] = []
        tier: FeatureTier | None = self
        while tier is not None:
            tiers.append(tier)
            tier = tier.fallback
        return tiers

    def chain_stats(self) -> dict[str, dict[str, Any]]:
        """``{tier name: stats}``, top to bottom (what ``loader.stats()["tiers"]`` reports); a name met
        again lower down gets ``#2``, ``#3``, ... so no tier's figures hide another's."""
        out: dict[str, dict[str, Any]] = {}
        for t in self.chain():
            key, n = t.name, 1
            while key in out:
                n += 1
                key = f"{t.name}#{n}"
            out[key] = t.stats()
        return out

    def _check(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        arr = np.asarray(ids)
        if arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
            raise ConfigError(f"ids must be a 1-D integer array, got shape {arr.shape} dtype {arr.dtype}")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.num_rows):
            raise ConfigError(f"ids must lie in [0, {self.num_rows}), got min {int(arr.min())} max {int(arr.max())}")
        if not isinstance(out, np.ndarray) or out.shape != (len(arr), self.dim) or out.dtype != self.held:
            found = f"{getattr(out, 'shape', type(out).__name__)} {getattr(out, 'dtype', '')}"
            raise ConfigError(f"out must be a {self.held} ndarray of shape ({len(arr)}, {self.dim}) (the rows' held "
                              f"words), got {found}")
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise ConfigError("out must be C-contiguous and writeable")
        return int64_ids(arr)


class CachedTier(FeatureTier):
    """A tier holding some rows itself over ``fallback`` (the static and GPU tiers): ``cache`` has
    ``num_nodes``, ``dim`` and ``slots_of(ids)`` (< 0 where it holds no row), must cover the same rows
    as its fallback, and passes down exactly the ids it does not hold."""

    def __init__(self, fallback: FeatureTier, cache: Any, label: str) -> None:
        super().__init__(fallback, fallback.num_rows, fallback.dim)
        if (cache.num_nodes, cache.dim) != (fallback.num_rows, fallback.dim):
            raise ConfigError(f"{label} over {cache.num_nodes} rows of dim {cache.dim}, its fallback has "
                              f"{fallback.num_rows} of dim {fallback.dim}")
        if cache.held != fallback.held:
            raise ConfigError(f"{label} holds {cache.held} rows, its fallback {fallback.held}; build it with "
                              "held=the dataset's row_format.held")
        self.cache, self._below = cache, fallback

    def passed_down(self, ids: np.ndarray) -> np.ndarray:
        return self._below.passed_down(ids[self.cache.slots_of(ids) < 0])


def tier_counts(hits: int, misses: int) -> dict[str, int | float]:
    """The contract's three counters with the hit rate (over rows asked)."""
    rows = hits + misses
    return {"hits": hits, "misses": misses, "hit_rate": hits / rows if rows else 0.0}


class SourceTier(FeatureTier):
    """The bottom tier: every row asked is read through the :class:`FeatureSource` (its hits are its
    rows served; it has no fallback, so no misses).  The source keeps its own I/O figures (``io``)."""

    name = "source"

    def __init__(self, source: FeatureSource) -> None:
        super().__init__(None, source.num_rows, source.dim, source.dtype)  # held as the source stores them
        self.source = source
        self.row_bytes = source.dim * source.dtype.itemsize
        self.rows = 0

    async def _read(self, ids: np.ndarray, out: np.ndarray, pin: Pin | None) -> None:
        self.rows += len(ids)
        await self.source.read_rows(ids, out)

    async def read_rows_into(self, ids: np.ndarray, buffer: np.ndarray, slots: np.ndarray) -> None:
        self.rows += len(ids)
        await self.source.read_rows_into(ids, buffer, slots)

    def stats(self) -> dict[str, Any]:
        return {"tier": self.name, "backend": self.source.backend, **tier_counts(self.rows, 0), "bytes_held": 0,
                "bytes_read": self.rows * self.row_bytes}


class BufferTier(FeatureTier):
    """The feature buffer as a tier: a batch streams through its slots in pieces of at most
    ``piece_rows`` rows (:meth:`FeatureBuffer.extract`); the rows it lacks are read through the
    fallback's :meth:`read_rows_into` straight into its slots.  Dynamic: its ``policy`` names how slots
    are evicted (the buffer's own, ``_policies.EVICTION_POLICIES``)."""

    name = "buffer"

    def __init__(self, fallback: FeatureTier, buffer: FeatureBuffer, *, piece_rows: int | None = None) -> None:
        super().__init__(fallback, fallback.num_rows, fallback.dim)
        if buffer.data.shape[1] != fallback.dim:
            raise ConfigError(f"feature buffer rows have dim {buffer.data.shape[1]}, its fallback {fallback.dim}")
        if buffer.data.dtype != fallback.held:
            raise ConfigError(f"feature buffer holds {buffer.data.dtype} rows, its fallback {fallback.held}; build it "
                              "with held=the dataset's row_format.held")
        self.buffer, self.piece_rows, self.policy = buffer, piece_rows, buffer.policy
        self._reader = fallback

    async def _read(self, ids: np.ndarray, out: np.ndarray, pin: Pin | None) -> None:
        await self.buffer.extract(ids, out, self._reader, piece_rows=self.piece_rows, pin=pin)

    def stats(self) -> dict[str, Any]:
        b = self.buffer.stats()
        # rows awaited from another batch's read were not passed down by this batch: served here
        return {"tier": self.name, "policy": self.policy, **tier_counts(int(b["hits"]) + int(b["waits"]), int(b["reads"])),
                "waits": b["waits"], "slots": b["slots"], "bytes_held": int(self.buffer.data.nbytes),
                "pinned_rows": b["pinned_rows"]}
