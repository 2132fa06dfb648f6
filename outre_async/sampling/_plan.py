"""The batch plan of one epoch: which seeds form batch ``seq``.

A pure function of (seed ids, batch size, shuffle, seed, epoch), so every loader (the synchronous
baseline, the async pipeline, every rank of a data-parallel run) agrees on the plan.

Data parallel (``world_size`` W > 1).  Every rank computes the same global permutation of the epoch
from ``(seed, epoch)``: derived, not broadcast, so no collective runs in the loader, a rank given
``rank``/``world_size`` without a process group (a test's reference) plans the same, and a resumed
run replays it.  The permutation is cut into global steps of W batches, and rank r takes batch r of
every step (:func:`step_cuts`): every rank has the same number of steps, so no rank waits in an
all-reduce for a step another never takes.  All steps but the last are W full batches; the last
step's ``m`` seeds are cut into W near-equal batches (sizes differ by at most one), so every seed is
used exactly once per epoch.  Two cases drop the tail instead: ``drop_last`` (every batch full: up
to ``W·B - 1`` seeds a epoch) and ``m < W`` (fewer leftover seeds than ranks: up to ``W - 1``); with
``shuffle`` the dropped seeds are a different random set each epoch.  W = 1 is the one-process plan.  The seed ids
themselves come from :func:`seed_ids`, the one place a split name or a caller's id array is checked
(both loaders and the redundancy tool use it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..errors import ConfigError
from ..store._masks import mask_hint

if TYPE_CHECKING:
    from ..store._dataset import Dataset


def plan_epoch(seeds: np.ndarray, batch_size: int, *, shuffle: bool, seed: int, epoch: int,
               drop_last: bool = False, rank: int = 0, world_size: int = 1) -> list[np.ndarray]:
    """Cut the (shuffled) seed ids into batches of ``batch_size`` (the last may be smaller); with
    ``world_size`` > 1, rank ``rank``'s batches of the global plan (see the module docstring)."""
    if batch_size < 1:
        raise ConfigError(f"{batch_size=} must be >= 1")
    check_rank(rank, world_size)
    order = np.asarray(seeds)
    if order.ndim != 1 or (order.size and not np.issubdtype(order.dtype, np.integer)):
        raise TypeError(f"seeds must be a 1-D array of integer node ids, got {order.dtype} {order.shape} "
                        "(float ids are refused, not truncated)")
    order = order.astype(np.int64, copy=False)
    if shuffle:
        order = np.random.default_rng([seed, epoch]).permutation(order)
    cuts = step_cuts(len(order), batch_size, world_size, drop_last)
    return [order[a:b] for a, b in cuts[rank::world_size]]


def step_cuts(n: int, batch_size: int, world_size: int, drop_last: bool) -> list[tuple[int, int]]:
    """Bounds of the global plan's batches, step-major (step s, rank r at ``s * W + r``): full steps
    of W batches of ``batch_size``, then the last ``m`` seeds as W near-equal batches, or dropped
    when ``drop_last`` or ``m < W`` (a rank would get an empty batch)."""
    per_step = batch_size * world_size
    full = n // per_step
    cuts = [(i, i + batch_size) for i in range(0, full * per_step, batch_size)]
    tail = n - full * per_step
    if tail and not drop_last and tail >= world_size:
        if world_size == 1:
            return cuts + [(full * per_step, n)]
        start = full * per_step
        bounds = [start + i * tail // world_size for i in range(world_size + 1)]
        cuts += list(zip(bounds[:-1], bounds[1:], strict=True))
    return cuts


def check_rank(rank: int, world_size: int) -> None:
    """``0 <= rank < world_size``, both ints (the one rule, for the plan and the loader's knobs)."""
    for name, value in (("rank", rank), ("world_size", world_size)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ConfigError(f"{name}={value!r} must be an int")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ConfigError(f"{rank=} must be in [0, {world_size=}) and world_size >= 1")


def num_batches(num_seeds: int, batch_size: int, drop_last: bool = False, world_size: int = 1) -> int:
    """Batches of one rank per epoch (the same on every rank): ``len(step_cuts(...)) // world_size``."""
    full, tail = divmod(num_seeds, batch_size * world_size)
    return full + int(bool(tail) and not drop_last and tail >= world_size)


def max_rows_per_batch(batch_size: int, fanouts: list[int] | tuple[int, ...], num_nodes: int) -> int:
    """Upper bound of the sampled nodes of one batch: ``B (1 + f1 + f1 f2 + ...)``, capped at N."""
    return _hop_bound(batch_size, fanouts, start=batch_size, cap=num_nodes)


def max_edges_per_batch(batch_size: int, fanouts: list[int] | tuple[int, ...], num_edges: int) -> int:
    """Upper bound of the edges one batch samples: ``B (f1 + f1 f2 + ...)``, capped at the graph's."""
    return _hop_bound(batch_size, fanouts, start=0, cap=num_edges)


def _hop_bound(batch_size: int, fanouts: list[int] | tuple[int, ...], *, start: int, cap: int) -> int:
    """``start + B f1 + B f1 f2 + ...``, capped at ``cap`` (a fanout of -1 takes everything)."""
    total, frontier = start, batch_size
    for f in fanouts:
        if f < 0:
            return cap
        frontier *= f
        total += frontier
        if total >= cap:
            return cap
    return min(total, cap)


def seed_ids(dataset: Dataset, split: str | ArrayLike) -> np.ndarray:
    """The seed node ids of ``split`` as int64: a split name of the store, a boolean mask over the
    nodes (PyG's ``input_nodes=data.train_mask``), or explicit node ids, which must be 1-D, integer,
    in range and unique (a node twice would be two batches' seed).  Tensors are taken as arrays."""
    if isinstance(split, str):
        return np.asarray(dataset.split(split), dtype=np.int64)
    ids = _as_array(split)
    if ids.dtype == np.bool_:
        if ids.shape != (dataset.num_nodes,):
            raise ConfigError(f"a boolean input_nodes mask must have one entry per node ({dataset.num_nodes}), "
                              f"got shape {ids.shape}; pass the dataset's own mask or node ids")
        return np.flatnonzero(ids).astype(np.int64)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ConfigError(f"split must be a split name, a boolean node mask or a 1-D array of node ids, "
                          f"got {ids.dtype} {ids.shape}")
    given, ids = ids, ids.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= dataset.num_nodes):
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        raise ConfigError(f"split node id {bad} is out of range [0, {dataset.num_nodes})")
    if len(np.unique(ids)) != len(ids):
        hint = mask_hint(given, dataset.num_nodes) or "; pass unique ids (e.g. np.unique(split))"
        raise ConfigError(f"split lists {len(ids) - len(np.unique(ids))} node ids more than once{hint}")
    return ids


def _as_array(value: object) -> np.ndarray:
    """A caller's ids or mask as numpy (a torch tensor on any device is copied to the CPU first)."""
    detach = getattr(value, "detach", None)
    if callable(detach):
        value = detach().cpu().numpy()
    return np.asarray(value)

