"""Partition-based batch plans (OUTRE §4.2): macro batches of whole partitions, cut into micro-batches.

Each epoch shuffles the partitions that hold seeds, groups ``parts_per_batch`` of them into a macro
batch, shuffles the macro batch's seeds and cuts them into micro-batches of ``batch_size`` (the last
of each macro batch may be smaller; ``drop_last`` drops it).  A pure function of
``(grouped seeds, sizes, shuffle, seed, epoch)``, like ``outre_async.sampling._plan.plan_epoch``, so every
loader (and the redundancy-ratio tool) agrees on the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from outre_async._errors import ConfigError

from ._output_kernels import group_by_part


@dataclass(frozen=True, slots=True)
class MicroBatch:
    """One planned batch: its seeds and the macro batch (index, partitions) it was cut from."""

    seeds: np.ndarray
    macro: int
    parts: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.seeds)


def group_seeds(assignment: np.ndarray, seeds: np.ndarray, num_parts: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr [K+1], seeds grouped by partition)``: a stable counting sort, O(len(seeds) + K)."""
    seeds = np.ascontiguousarray(seeds, dtype=np.int64)
    return group_by_part(assignment, seeds, num_parts)


def plan_partition_epoch(ptr: np.ndarray, grouped: np.ndarray, *, parts_per_batch: int, batch_size: int,
                         shuffle: bool, seed: int, epoch: int, drop_last: bool = False) -> list[MicroBatch]:
    """The micro-batches of one epoch, macro batch by macro batch."""
    if parts_per_batch < 1:
        raise ConfigError(f"{parts_per_batch=} must be >= 1")
    if batch_size < 1:
        raise ConfigError(f"{batch_size=} must be >= 1")
    rng = np.random.default_rng([seed, epoch, 0x9A47])
    holding = np.flatnonzero(np.diff(ptr) > 0)
    order = rng.permutation(holding) if shuffle else holding
    plan: list[MicroBatch] = []
    for macro, start in enumerate(range(0, len(order), parts_per_batch)):
        parts = tuple(int(p) for p in order[start : start + parts_per_batch])
        ids = np.concatenate([grouped[ptr[p] : ptr[p + 1]] for p in parts])
        if shuffle:
            ids = rng.permutation(ids)
        stop = len(ids) - len(ids) % batch_size if drop_last else len(ids)
        plan += [MicroBatch(ids[i : i + batch_size], macro, parts) for i in range(0, stop, batch_size)]
    return plan


def max_batches_per_epoch(num_seeds: int, num_parts: int, parts_per_batch: int, batch_size: int) -> int:
    """An upper bound of ``len(plan)`` over all epochs (each macro batch adds at most one partial batch);
    the loader spaces the epochs' RNG streams by it so no two batches ever share a stream."""
    return -(-num_seeds // batch_size) + -(-num_parts // parts_per_batch)
