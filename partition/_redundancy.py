"""Redundancy ratio (OUTRE eq. 2): ``RR = sum_b |sampled L-hop neighbourhood of b| / sum_b |seeds of b|``.

Computed for one epoch of random batches (``outre_async.sampling._plan.plan_epoch``) and, given partitions,
one epoch of partition-based batches (:func:`plan_partition_epoch`; ``parts_per_batch=None``: the
loader's default), with the same sampler, fanouts,
batch size and seed.  ``max_batches`` samples only the first batches of each plan (an estimate; the
plans are shuffled, so a prefix is a random subset of batches).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from outre_async.sampling._plan import plan_epoch, seed_ids
from outre_async.sampling._sampler import NeighborSampler
from outre_async.store._dataset import Dataset

from ._batches import default_parts_per_batch, group_seeds, plan_partition_epoch
from ._reader import PartitionSet


def redundancy_ratio(ds: Dataset, *, fanouts: Sequence[int], batch_size: int, partitions: PartitionSet | None = None,
                     parts_per_batch: int | None = None, split: str | np.ndarray = "train", seed: int = 0,
                     max_batches: int | None = None) -> dict[str, Any]:
    """RR of random batches and (with ``partitions``) of partition-based batches, and the reduction."""
    sampler = NeighborSampler(ds, fanouts, seed=seed)
    seeds = seed_ids(ds, split)
    random_plan = plan_epoch(seeds, batch_size, shuffle=True, seed=seed, epoch=0)
    out: dict[str, Any] = {"fanouts": list(sampler.fanouts), "batch_size": batch_size,
                           "split": split if isinstance(split, str) else f"{len(seeds)} given ids",
                           "random": _rr(sampler, random_plan, max_batches)}
    if partitions is not None:
        groups = group_seeds(partitions.assignment, seeds, partitions.num_parts)
        if parts_per_batch is None:
            parts_per_batch = default_parts_per_batch(partitions.num_parts, len(seeds), batch_size)
        plan = plan_partition_epoch(groups, parts_per_batch=parts_per_batch, batch_size=batch_size,
                                    shuffle=True, seed=seed, epoch=0)
        out["partition"] = _rr(sampler, [b.seeds for b in plan], max_batches)
        out["partitions"] = partitions.name
        out["parts_per_batch"] = parts_per_batch
        out["reduction"] = 1.0 - out["partition"]["rr"] / out["random"]["rr"]
    return out


def _rr(sampler: NeighborSampler, plan: list[np.ndarray], max_batches: int | None) -> dict[str, Any]:
    batches = plan if max_batches is None else plan[:max_batches]
    sampled = seeds = 0
    for stream, b in enumerate(batches):
        sampled += sampler.sample(b, stream).num_nodes
        seeds += len(b)
    return {"rr": sampled / max(seeds, 1), "batches": len(batches), "of_batches": len(plan), "seeds": seeds,
            "sampled_nodes": sampled}
