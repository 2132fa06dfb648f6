"""The batch plan of one epoch: which seeds form batch ``seq``.

A pure function of (seed ids, batch size, shuffle, seed, epoch), so every loader (the synchronous
baseline, the async pipeline, every rank of a data-parallel run) agrees on the plan.
"""

from __future__ import annotations

import numpy as np

from .._errors import ConfigError


def plan_epoch(seeds: np.ndarray, batch_size: int, *, shuffle: bool, seed: int, epoch: int,
               drop_last: bool = False) -> list[np.ndarray]:
    """Cut the (shuffled) seed ids into batches of ``batch_size`` (the last may be smaller)."""
    if batch_size < 1:
        raise ConfigError(f"{batch_size=} must be >= 1")
    order = np.asarray(seeds, dtype=np.int64)
    if shuffle:
        order = np.random.default_rng([seed, epoch]).permutation(order)
    stop = len(order) - len(order) % batch_size if drop_last else len(order)
    return [order[i : i + batch_size] for i in range(0, stop, batch_size)]


def num_batches(num_seeds: int, batch_size: int, drop_last: bool = False) -> int:
    return num_seeds // batch_size if drop_last else -(-num_seeds // batch_size)


def max_rows_per_batch(batch_size: int, fanouts: list[int] | tuple[int, ...], num_nodes: int) -> int:
    """Upper bound of the sampled nodes of one batch: ``B (1 + f1 + f1 f2 + ...)``, capped at N."""
    total, frontier = batch_size, batch_size
    for f in fanouts:
        if f < 0:
            return num_nodes
        frontier *= f
        total += frontier
        if total >= num_nodes:
            return num_nodes
    return min(total, num_nodes)
