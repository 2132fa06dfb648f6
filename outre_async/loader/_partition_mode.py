"""What ``OutreLoader(..., partitions=NAME)`` needs, kept out of the loader module.

:class:`PartitionBatching` (the partition mode's :class:`~outre_async.sampling.Items`) opens the
partitions (validated against the dataset), groups the loader's seeds by partition, resolves the
default ``parts_per_batch`` and ``interleave``, builds the global neighbour cache within its byte
budget, plans each epoch's micro-batches (:func:`plan_partition_epoch`) and makes the tiered samplers.  Its RNG streams are
spaced by an upper bound of the batches per epoch, so two epochs never share a stream.

:meth:`PartitionBatching.of_config` is how the loader builds it from its config, and
:meth:`PartitionBatching.sample_epoch` samples an epoch's planned batches in the calling thread,
outside the async pipeline, exactly as the pipeline's samplers do (same plan, same streams, same
tiers): the bench's ``compute-only-part`` trains on them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..cache import NeighborCache
from ..partition._batches import (
    default_interleave,
    default_parts_per_batch,
    group_seeds,
    max_batches_per_epoch,
    plan_partition_epoch,
    shard_partition_plan,
)
from ..partition._reader import open_partitions
from ..partition._sampler import MacroStore, PartitionSampler
from ..sampling._items import BatchItem
from ..sampling._sampler import SampledSubgraph
from ..store._dataset import Dataset

if TYPE_CHECKING:
    from ._config import LoaderConfig


class PartitionBatching:
    def __init__(self, ds: Dataset, name: str, seeds: np.ndarray, *, parts_per_batch: int | None,
                 interleave: int | None, batch_size: int,
                 shuffle: bool, seed: int, drop_last: bool, neighbor_cache_bytes: int, rank: int = 0,
                 world_size: int = 1) -> None:
        self.parts = open_partitions(ds, name)
        self.groups = group_seeds(self.parts.assignment, seeds, self.parts.num_parts)
        if parts_per_batch is None:
            parts_per_batch = default_parts_per_batch(self.parts.num_parts, len(seeds), batch_size)
        if interleave is None:
            interleave = default_interleave(self.parts.num_parts, parts_per_batch)
        self.interleave = interleave
        self.parts_per_batch, self.batch_size = parts_per_batch, batch_size
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.rank, self.world_size = rank, world_size
        self.ds_indptr, self.ds_indices = ds.indptr, ds.indices
        self.cache = NeighborCache.build(ds.indptr, ds.indices, self.parts.cross, neighbor_cache_bytes)
        # cross ranked the cache and nothing else reads it (a profile's cache is built from its own node
        # list, ``use_neighbor_cache``; stats, DDP ranks and reopenings use the cache built here): 4 N bytes
        self.parts.release_cross()
        self.spacing = max_batches_per_epoch(len(seeds), self.parts.num_parts, parts_per_batch, batch_size)
        self._stores: list[MacroStore] = []  # the stores of openings not closed yet (:meth:`release`)
        self._samplers: list[PartitionSampler] = []  # their samplers
        self._closed = np.zeros(7, np.int64)  # closed openings' counters: 3 tiers, macro loads, bytes read,
        # then the foresight's lists from the cache and from disk (``PartitionSampler.sample_nodes``)

    @classmethod
    def of_config(cls, ds: Dataset, cfg: LoaderConfig, seeds: np.ndarray, *, rank: int = 0,
                  world_size: int = 1) -> PartitionBatching:
        """What ``OutreLoader(config=cfg)`` uses for ``cfg.partitions`` (a profile's plan supplies the
        neighbour cache later, :meth:`use_neighbor_cache`, so none is built here then)."""
        if cfg.partitions is None:
            raise ConfigError("PartitionBatching needs cfg.partitions, the name of the dataset's partitions")
        return cls(ds, cfg.partitions, seeds, parts_per_batch=cfg.parts_per_batch, interleave=cfg.interleave,
                   batch_size=cfg.batch_size, shuffle=cfg.shuffle, seed=cfg.seed, drop_last=cfg.drop_last,
                   neighbor_cache_bytes=int(cfg.neighbor_cache) if cfg.profile is None else 0,
                   rank=rank, world_size=world_size)

    def held_bytes(self) -> int:
        """What partition mode holds in RAM besides the neighbour cache and the macro blocks: the
        partition set's arrays (int32 where they fit, ``cross`` released: ``_reader``), the
        partition-order slot of every node (``slot_of_node``, made by the samplers if not yet) and the
        seeds grouped by partition (a memory plan part, ``_budget``)."""
        return self.parts.held_bytes + self.groups.nbytes

    def macro_block_bytes(self) -> int:
        """The most bytes one macro batch's adjacency block can take (``MacroStore._load``): the
        ``parts_per_batch`` largest partitions' node ids (int64), list offsets (int64) and lists, plus
        the block's per-partition tables."""
        return self.macro_top_bytes()[1]

    def macro_top_bytes(self) -> tuple[int, ...]:
        """Item ``j``: the most bytes ``j`` macro blocks of one epoch can take together.  An epoch's
        macro batches are disjoint sets of at most ``parts_per_batch`` partitions that hold seeds
        (``plan_partition_epoch``, and a rank's share of them in DDP), so ``j`` of them hold at most
        the ``j x parts_per_batch`` largest such partitions; item ``j`` for ``j`` past the epoch's
        macro batches is the last one.  The memory plan's macro adjacency part (``_budget``)."""
        p = self.parts
        nodes = np.diff(p.part_ptr).astype(np.int64)
        edges = (p.adj_ptr[p.part_ptr[1:]] - p.adj_ptr[p.part_ptr[:-1]]).astype(np.int64)
        holding = np.diff(self.groups.ptr) > 0
        per_part = np.sort((16 * nodes + p.adj_itemsize * edges)[holding])[::-1]
        k = self.parts_per_batch
        blocks = max(1, -(-len(per_part) // k))
        top = np.concatenate([[0], np.cumsum(per_part)])[np.minimum(np.arange(blocks + 1) * k, len(per_part))]
        overhead = 8 + 4 * p.num_parts + 16 * k  # indptr's last entry, of_part, base (with slack)
        return tuple(int(t) + j * overhead for j, t in enumerate(top))

    def use_neighbor_cache(self, nodes: np.ndarray, budget_bytes: int) -> None:
        """Hold the lists of ``nodes`` (a profile's plan) instead of the cross-partition ranking."""
        rank = np.zeros(len(self.parts.assignment), np.int64)
        rank[nodes] = 1
        self.cache = NeighborCache.build(self.ds_indptr, self.ds_indices, rank, budget_bytes)

    @property
    def max_seeds(self) -> int:
        """No micro-batch (nor a last step's plain batch) has more seeds than ``batch_size``."""
        return self.batch_size

    def plan(self, epoch: int) -> list[BatchItem]:
        """This rank's share of the epoch's global plan (all of it in one process)."""
        plan = plan_partition_epoch(self.groups, parts_per_batch=self.parts_per_batch,
                                    batch_size=self.batch_size, shuffle=self.shuffle, seed=self.seed, epoch=epoch,
                                    drop_last=self.drop_last, interleave=self.interleave)
        return shard_partition_plan(plan, rank=self.rank, world_size=self.world_size, drop_last=self.drop_last)

    def num_batches(self, epoch: int) -> int:
        """The length of :meth:`plan` (macro batches vary per epoch, so it is planned)."""
        return len(self.plan(epoch))

    def stream_base(self, epoch: int) -> int:
        """Batch ``seq`` samples with stream ``stream_base + seq * world_size``: distinct over ranks and epochs."""
        return epoch * self.spacing * self.world_size + self.rank

    def stream(self, epoch: int, seq: int) -> int:
        """The RNG stream of planned batch ``seq`` of ``epoch`` (the sample stage's ``stream_base + seq * stride``)."""
        return self.stream_base(epoch) + seq * self.world_size

    def sample_epoch(self, ds: Dataset, fanouts: Sequence[int], seed: int, epoch: int,
                     max_batches: int = 0) -> Iterator[SampledSubgraph]:
        """Epoch ``epoch``'s planned batches (the first ``max_batches`` when > 0), sampled one after
        another in this thread, in plan order: the same subgraphs the loader's samplers produce for
        them (same plan, streams and tiers), without its pipeline.  History pruning is not applied."""
        plan = self.plan(epoch)
        plan = plan[:max_batches] if max_batches else plan
        (sampler,) = self.samplers(ds, fanouts, seed, 1)
        try:
            for seq, item in enumerate(plan):
                yield sampler.sample(item, self.stream(epoch, seq))
        finally:
            self.release([sampler])

    def samplers(self, ds: Dataset, fanouts: Sequence[int], seed: int, count: int) -> list[PartitionSampler]:
        # one per opening of the loader; the interleaved macro batches' blocks stay while any is in use
        store = MacroStore(self.parts, capacity=count + self.interleave)
        self._stores.append(store)
        made = [PartitionSampler(ds, self.parts, fanouts, seed=seed, cache=self.cache, store=store)
                for _ in range(count)]
        self._samplers += made
        return made

    def release(self, samplers: Sequence[object]) -> None:
        """An opening's ``samplers`` are done (the loader closed, their threads joined): keep their
        counters for :meth:`stats`, drop them and their store.  Why: a loader opened again makes new
        ones, and keeping every earlier opening's samplers (relabel scratch) and store (its idle
        macro blocks) grew a reopened loader's RSS with every opening
        (``tests/partition/test_partition_batches.py``: a reopened loader keeps none of them)."""
        gone = {id(s) for s in samplers}
        mine = [s for s in self._samplers if id(s) in gone]
        stores = {id(s.store): s.store for s in mine}
        for s in mine:
            self._closed[:3] += s.tiers
            self._closed[5:] += s.foresight_tiers[[0, 2]]
        for store in stores.values():
            store.drop_idle()
            self._closed[3:5] += (store.loads, store.bytes_read)
        self._samplers = [s for s in self._samplers if id(s) not in gone]
        self._stores = [st for st in self._stores if id(st) not in stores]

    def stats(self) -> dict[str, Any]:
        tiers = sum((s.tiers for s in self._samplers), self._closed[:3].copy())
        total = max(int(tiers.sum()), 1)
        out: dict[str, Any] = {
            "partitions": self.parts.name, "num_parts": self.parts.num_parts, "parts_per_batch": self.parts_per_batch,
            "interleave": self.interleave,
            "lists_from_global_cache": int(tiers[0]), "lists_from_macro_batch": int(tiers[1]),
            "lists_from_disk": int(tiers[2]), "global_cache_hit_rate": int(tiers[0]) / total,
            "macro_batch_hit_rate": int(tiers[1]) / total, "global_cache_nodes": self.cache.num_cached,
            "global_cache_bytes": self.cache.nbytes,
        }
        out["macro_loads"] = int(self._closed[3]) + sum(st.loads for st in self._stores)
        out["macro_bytes_read"] = int(self._closed[4]) + sum(st.bytes_read for st in self._stores)
        sight = sum((s.foresight_tiers[[0, 2]] for s in self._samplers), self._closed[5:].copy())
        out["foresight_lists_from_global_cache"], out["foresight_lists_from_disk"] = (int(x) for x in sight)
        return out
