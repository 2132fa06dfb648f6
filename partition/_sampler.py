"""Partition-aware neighbour sampling: the global neighbour cache, then the macro batch's partition
adjacency, then the memory-mapped ``indices`` (OUTRE §4.2).  The kernel is the plain sampler's
(``outre_async.sampling._sampler_kernels.sample_multihop``), given the tiers to look in first.

:class:`MacroStore` loads a macro batch's partition adjacency once, with one sequential read per
partition, when the first of its micro-batches is sampled, and shares it among the sampler threads;
it keeps the ``capacity`` most recently used macro batches that no sampler is using (the plan
visits macro batches one after another, so with ``capacity >= num_samplers`` each is read once per
epoch).  It also keeps idle blocks of the latest two epochs only (each block is tagged with the epoch
that last acquired it): an epoch's macro batches are disjoint sets of partitions, and epochs run one
after another, so the blocks it holds hold each partition at most twice, whatever the number of macro
batches per epoch, DDP sharding or an epoch left early; the memory plan's bound rests on that
(``_budget.macro_adjacency_bytes``).  It is the one object sampler threads share, so it has a lock;
the lock is held only for bookkeeping and while a block is read, never while sampling.

Bad ids never reach the kernel from the macro tier: :meth:`PartitionSet.read_adjacency` range-checks
each block as it reads it and names ``adj_indices`` and the position in it; the cache tier holds
copies of ``indices``' lists, so the kernel's ``indices`` position is right for it and the disk tier.

Samples are identical to :class:`outre_async.NeighborSampler`'s for the same ``(seed, stream, seeds)``:
each tier holds the same lists (see the kernel's docstring); the tests check this bit for bit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from outre_async._rng import stream_state
from outre_async.sampling._items import BatchItem
from outre_async.sampling._sampler import NeighborSampler, SampledSubgraph, _as_seeds
from outre_async.sampling._sampler_kernels import OK, HistoryPrune, NeighborTiers, sample_multihop

from ._reader import AdjacencyBlock, PartitionSet


@dataclass(frozen=True, slots=True)
class _Macro:
    of_part: np.ndarray   # int32 [K]: index of the partition inside the macro batch, or -1
    base: np.ndarray      # int64 [P]: first block slot of each of its partitions
    block: AdjacencyBlock

    @property
    def nbytes(self) -> int:
        return int(self.of_part.nbytes + self.base.nbytes) + self.block.nbytes


class MacroStore:
    """Macro-batch adjacency blocks, loaded once and shared by the samplers (see the module docstring)."""

    def __init__(self, parts: PartitionSet, capacity: int) -> None:
        self.parts = parts
        self.capacity = max(1, int(capacity))
        self._lock = threading.Lock()
        self._blocks: OrderedDict[tuple[int, ...], _Macro] = OrderedDict()
        self._users: dict[tuple[int, ...], int] = {}
        self._loading: dict[tuple[int, ...], threading.Event] = {}
        self._epoch_of: dict[tuple[int, ...], int] = {}  # the epoch that last acquired each block
        self._epochs: tuple[int | None, int | None] = (None, None)  # the latest two epochs, the newest last
        self.loads = 0
        self.bytes_read = 0
        self.none = _Macro(np.full(parts.num_parts, -1, np.int32), np.zeros(0, np.int64),
                           AdjacencyBlock(np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, parts.adj_dtype)))

    def acquire(self, key: tuple[int, ...], epoch: int = 0) -> _Macro:
        """The block of macro batch ``key`` (its partitions), for a micro-batch of ``epoch``."""
        while True:
            with self._lock:
                if epoch != self._epochs[1]:  # a new epoch: the one before the previous is done with
                    self._epochs = (self._epochs[1], epoch)
                    self._evict()
                macro = self._blocks.get(key)
                if macro is not None:
                    self._blocks.move_to_end(key)
                    self._users[key] = self._users.get(key, 0) + 1
                    self._epoch_of[key] = epoch
                    return macro
                event = self._loading.get(key)
                if event is None:
                    event = self._loading[key] = threading.Event()
                    break
            event.wait()  # another sampler is reading this block
        try:
            macro = self._load(key)
        finally:
            with self._lock:
                del self._loading[key]
            event.set()
        with self._lock:
            self._blocks[key] = macro
            self._users[key] = self._users.get(key, 0) + 1
            self._epoch_of[key] = epoch
            self.loads += 1
            self.bytes_read += macro.block.indices.nbytes
            self._evict()
        return macro

    def release(self, key: tuple[int, ...]) -> None:
        with self._lock:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key]
            self._evict()

    def drop_idle(self) -> None:
        """Forget every block no sampler uses: the loader's opening that made this store closed (its
        counters stay for ``stats()``; a later opening makes its own store)."""
        with self._lock:
            for k in [k for k in self._blocks if k not in self._users]:
                del self._blocks[k], self._epoch_of[k]

    @property
    def held_bytes(self) -> int:
        """Bytes of the blocks held now (in use and idle; a block being read is not counted yet)."""
        with self._lock:
            return sum(m.nbytes for m in self._blocks.values())

    def _evict(self) -> None:
        idle = [k for k in self._blocks if k not in self._users]
        old = [k for k in idle if self._epoch_of[k] not in self._epochs]
        idle = [k for k in idle if self._epoch_of[k] in self._epochs]
        for k in old + idle[: max(0, len(idle) - self.capacity)]:
            del self._blocks[k], self._epoch_of[k]

    def _load(self, key: tuple[int, ...]) -> _Macro:
        block = self.parts.read_adjacency(key)
        of_part = np.full(self.parts.num_parts, -1, np.int32)
        of_part[list(key)] = np.arange(len(key), dtype=np.int32)
        sizes = np.array([self.parts.part_ptr[p + 1] - self.parts.part_ptr[p] for p in key], np.int64)
        base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        return _Macro(of_part, base, block)


class PartitionSampler:
    """A :class:`~outre_async.NeighborSampler` that reads lists from the caches first.

    ``sample(item, stream)`` takes a :class:`~outre_async.sampling.BatchItem`: of a macro batch, its
    adjacency block is used; of plain seeds (``macro`` None), the global cache, then disk.  One
    instance per sampler thread (its relabel scratch and tier counters are its own); the
    :class:`MacroStore` and the cache are shared, read-only.
    """

    def __init__(self, ds: Any, parts: PartitionSet, fanouts: Sequence[int], *, seed: int, cache: Any,
                 store: MacroStore) -> None:
        self.plain = NeighborSampler(ds, fanouts, seed=seed)  # validation, errors, reference semantics
        self.parts, self.cache, self.store = parts, cache, store
        self.slot_of_node = parts.slot_of_node
        self.tiers = np.zeros(3, np.int64)
        self.foresight_tiers = np.zeros(3, np.int64)  # the same, for :meth:`sample_nodes` (not the batches' own)
        self._fanouts = self.plain._fanouts  # clamped to the graph's maximum in-degree

    @property
    def fanouts(self) -> tuple[int, ...]:
        return self.plain.fanouts

    def tiers_of(self, macro: _Macro, counts: np.ndarray | None = None) -> NeighborTiers:
        """The kernel's tiers with ``macro``'s block, counting lists per tier into ``counts`` (default
        :attr:`tiers`).  Every block (``store.none`` included) has the same dtypes, so the kernel is
        compiled once for a partition set, whichever item is sampled."""
        p, c = self.parts, self.cache
        return NeighborTiers(c.slot, c.indptr, c.indices, p.assignment, self.slot_of_node, p.part_ptr,
                             macro.of_part, macro.base, macro.block.indptr, macro.block.indices,
                             self.tiers if counts is None else counts)

    def sample(self, item: BatchItem, stream: int = 0, prune: HistoryPrune | None = None) -> SampledSubgraph:
        if item.macro is not None:
            key = item.macro.parts
            macro = self.store.acquire(key, item.macro.epoch)
            try:
                return self._sample(_as_seeds(item.seeds), stream, macro, prune)
            finally:
                self.store.release(key)
        return self._sample(_as_seeds(item.seeds), stream, self.store.none, prune)

    def sample_nodes(self, item: BatchItem, stream: int = 0) -> np.ndarray:
        """The ``n_id`` that :meth:`sample` gives for ``(item, stream)``, sampled without the macro batch's
        block (the neighbour cache, then ``indices``: the same lists), so a batch far ahead of its
        turn loads no block (the loader's foresight, ``loader._foresight``); lists counted apart, in
        :attr:`foresight_tiers`."""
        return self._sample(_as_seeds(item.seeds), stream, self.store.none, None, self.foresight_tiers).n_id

    def _sample(self, seeds: np.ndarray, stream: int, macro: _Macro, prune: HistoryPrune | None,
                counts: np.ndarray | None = None) -> SampledSubgraph:
        self.plain.check_mapped()  # tier 3 reads the dataset's indices (mapped when it did not fit RAM)
        tiers = self.tiers_of(macro, counts)
        state = stream_state(self.plain.seed, stream)
        scratch = self.plain._take_scratch(len(seeds))  # the plain sampler's rule: array or hash table
        status, where, n_id, edge_index, e_id, nodes, edges = sample_multihop(
            self.plain.indptr, self.plain.indices, seeds, self._fanouts, state, scratch, tiers, prune)
        self.plain._pool.append(scratch)  # left empty on every path
        if status != OK:
            self.plain._raise(int(status), int(where), seeds)
        return SampledSubgraph(n_id, edge_index, tuple(int(x) for x in nodes), tuple(int(x) for x in edges),
                               len(seeds), e_id)
