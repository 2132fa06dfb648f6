"""The loader's feature tiers: which rows the GPU and static tiers hold, and the chain built on open.

Rows held, chosen once when the loader is made:

* GPU tier (``gpu_cache_budget`` bytes of device memory, ``min(budget // held_row_bytes, N)`` rows): the rows
  met most often in the first :data:`RANK_BATCHES` batches of epoch 0's plan (sampled with the epoch's
  own streams, so those batches are counted exactly), with or without a profile.  Not the profile's
  ranking (``row_hot``, the reads the feature buffer would miss): the GPU tier is asked first, so every
  access of a row it holds spares a PCIe copy, buffer hit or not, while ``row_hot`` leaves out the
  rows the buffer would hit anyway, which are often the most frequent (the tier's hit rate is in
  ``stats()["tiers"]``; ``tests/loader/test_gpu_tier.py``).  A profile made with the same ``gpu_cache_budget`` ranks the same
  rows (``_profiling.host_counts``) and buys other static rows;
* static tier (``profile=``): the plan's static rows, less any the GPU tier holds (a row is looked up
  in the GPU tier first, so a static copy of it would never be hit).

On open, the chain is stacked by name, bottom to top: ``source`` -> ``buffer`` -> ``static`` (if any)
-> ``gpu`` (if any) (:func:`build_tiers`); the extract stage asks its top.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch

from ..features import FeatureBuffer, FeatureSource
from ..features._gpu_tier import DeviceFeatureCache, gpu_tier_rows, rank_rows
from ..features._make_tier import make_tier
from ..features._static_cache import StaticFeatureCache
from ..features._tier import FeatureTier
from ..sampling._items import BatchItem
from ..sampling._sampler import NeighborSampler
from ..store._dataset import Dataset
from ._config import LoaderConfig
from ._setup import LoaderSetup

RANK_BATCHES = 32  # planned batches counted to rank rows for the GPU tier when no profile is applied


class TierRows(Protocol):
    """What the tiers take from an applied profile (``_profiling.AppliedPlan``, which imports this module)."""

    @property
    def static_rows(self) -> np.ndarray: ...  # the static tier's node ids

    @property
    def neighbor_nodes(self) -> np.ndarray: ...  # node ids whose lists the neighbour cache holds


def gpu_rows(ds: Dataset, cfg: LoaderConfig, plan: Sequence[BatchItem], *, stream_base: int = 0,
             stream_stride: int = 1) -> np.ndarray | None:
    """The GPU tier's node ids, ascending (module docstring); None when ``gpu_cache_budget`` is off."""
    budget = cfg.gpu_cache_budget
    if not budget:
        return None
    capacity = gpu_tier_rows(int(budget), row_bytes=ds.row_format.held_row_bytes, num_nodes=ds.num_nodes)
    counts = plan_row_counts(ds, cfg.fanouts, plan, seed=cfg.seed, stream_base=stream_base,
                             stream_stride=stream_stride)
    return np.sort(rank_rows(counts)[:capacity])


def gpu_cache(ds: Dataset, cfg: LoaderConfig, plan: Sequence[BatchItem], *, device: torch.device, stream_base: int = 0,
              stream_stride: int = 1) -> DeviceFeatureCache | None:
    """The GPU tier's cache (not loaded yet), or None when it is off or no row was met."""
    nodes = gpu_rows(ds, cfg, plan, stream_base=stream_base, stream_stride=stream_stride)
    if nodes is None or not len(nodes):
        return None
    return DeviceFeatureCache(nodes, ds.num_nodes, ds.feature_dim, device=device, held=ds.row_format.held)


def plan_row_counts(ds: Dataset, fanouts: Sequence[int], plan: Sequence[BatchItem], *, seed: int, stream_base: int = 0,
                    stream_stride: int = 1, batches: int = RANK_BATCHES) -> np.ndarray:
    """How often each node's row is in the first ``batches`` batches of ``plan`` (float64 [N])."""
    sampler = NeighborSampler(ds, list(fanouts), seed=seed)
    counts = np.zeros(ds.num_nodes, np.float64)
    for seq in range(min(batches, len(plan))):
        counts[sampler.sample(plan[seq].seeds, stream_base + seq * stream_stride).n_id] += 1
    return counts


def static_cache(ds: Dataset, static_rows: np.ndarray, gpu: DeviceFeatureCache | None,
                 device: torch.device) -> StaticFeatureCache | None:
    """The static tier's cache: the plan's rows less the GPU tier's (None when nothing is left); pinned
    for the copies to a GPU ``device``."""
    rows = np.asarray(static_rows, dtype=np.int64)
    if gpu is not None:
        rows = rows[~np.isin(rows, gpu.nodes)]
    if not len(rows):
        return None
    return StaticFeatureCache(rows, ds.num_nodes, ds.feature_dim, held=ds.row_format.held, pin=device.type == "cuda")


def build_tiers(source: FeatureSource, buffer: FeatureBuffer, *, num_extractors: int,
                static: StaticFeatureCache | None, gpu: DeviceFeatureCache | None) -> FeatureTier:
    """Stack the chain by name, bottom to top, and return its top.  A buffer piece holds at most
    ``slots / extractors`` rows, so every extractor finds slots and a batch larger than the buffer
    still goes through."""
    top = make_tier("source", source)
    top = make_tier("buffer", top, buffer=buffer, piece_rows=max(1, buffer.num_slots // num_extractors))
    if static is not None:
        top = make_tier("static", top, cache=static)
    if gpu is not None:
        top = make_tier("gpu", top, cache=gpu)
    return top


def tier_caches(setup: LoaderSetup, run_cfg: LoaderConfig,
                applied: TierRows | None) -> tuple[DeviceFeatureCache | None, StaticFeatureCache | None]:
    """The rows the GPU tier (``gpu_cache_budget``) and the static tier (``profile=``, the applied plan's
    hot rows, less the GPU tier's) hold; the ranking samples epoch 0's first batches with that epoch's own
    streams.  With a plan, its neighbour lists go to the partition batching first."""
    place, partitioned = setup.place, setup.partitioned
    if applied is not None and partitioned is not None:
        partitioned.use_neighbor_cache(applied.neighbor_nodes, int(run_cfg.neighbor_cache))
    base = partitioned.stream_base(0) if partitioned is not None else place.rank
    gpu = gpu_cache(setup.dataset, run_cfg, setup.first_plan, device=setup.device, stream_base=base,
                    stream_stride=place.world_size)
    static = None if applied is None else static_cache(setup.dataset, applied.static_rows, gpu, setup.device)
    return gpu, static
