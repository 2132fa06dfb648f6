"""Partition-based batch plans (OUTRE §4.2): macro batches of whole partitions, cut into micro-batches.

Each epoch shuffles the partitions that hold seeds, groups ``parts_per_batch`` of them into a macro
batch, shuffles the macro batch's seeds together (every micro-batch draws from all of its partitions)
and cuts them into ``ceil(n / batch_size)`` near-equal micro-batches (``drop_last``: full ones only).
A pure function of ``(grouped seeds, sizes, shuffle, seed, epoch)``, like
``outre_async.sampling._plan.plan_epoch``, so every loader (and the redundancy-ratio tool) agrees on the plan.

Accuracy: consecutive micro-batches of one macro batch come from the same few regions of the graph,
and training on them one macro batch after another costs accuracy against random batches at equal
epochs (``benchmarks/bench_partition_accuracy.py``).  ``interleave`` shuffles together the
micro-batches of that many consecutive macro batches: the same micro-batches (so the same redundancy
ratio), in an order that no longer dwells on one region.  The defaults (:func:`default_num_parts`,
:func:`default_parts_per_batch`, :func:`default_interleave`) are what
``benchmarks/bench_partition_accuracy.py`` measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from outre_async.errors import ConfigError
from outre_async.sampling._items import BatchItem, MacroRef, NodeTargets, node_item

from ._output_kernels import group_by_part


@dataclass(frozen=True, kw_only=True, slots=True)
class SeedGroups:
    """The seeds grouped by partition: ``order[ptr[p]:ptr[p + 1]]`` are the positions in ``seeds`` of
    partition p's seeds, in seed order (positions, so a planned item knows its ``input_id``)."""

    seeds: np.ndarray  # int64, the loader's input nodes
    ptr: np.ndarray    # [K + 1]
    order: np.ndarray  # int64 positions in ``seeds``, grouped by partition

    @property
    def nbytes(self) -> int:
        """What the grouping holds besides the seeds themselves."""
        return int(self.ptr.nbytes + self.order.nbytes)


DEFAULT_NODES_PER_PART = 128  # ``outre partition``'s part size when no count is given
MIN_DEFAULT_PARTS, MAX_DEFAULT_PARTS = 16, 4096
MACRO_SHARE = 64              # a default macro batch holds 1/64 of the partitions (at least one)
MICRO_PER_MACRO = 4           # ... and at least this many micro-batches' seeds
WINDOW_SHARE = 2              # ... and half of them have their micro-batches interleaved,
MAX_DEFAULT_INTERLEAVE = 8    # ... but never more than 8 macro batches' adjacency held at once


def default_num_parts(num_nodes: int) -> int:
    """``outre partition``'s K when none is given: about ``DEFAULT_NODES_PER_PART`` nodes a part (ClusterGCN
    uses ~150; OUTRE thousands of parts on 100M-node graphs), a power of two in [16, 4096]."""
    if num_nodes < 1:
        raise ConfigError(f"{num_nodes=} must be >= 1")
    k = 1 << max(0, round(math.log2(max(num_nodes / DEFAULT_NODES_PER_PART, 1))))
    return min(MAX_DEFAULT_PARTS, max(MIN_DEFAULT_PARTS, k))


def default_parts_per_batch(num_parts: int, num_seeds: int, batch_size: int) -> int:
    """``parts_per_batch`` when none is given: 1/64 of the partitions, so a micro-batch's seeds are close
    together (the redundancy ratio drops), but enough that a macro batch holds about
    ``MICRO_PER_MACRO`` micro-batches' seeds (else its micro-batches come out smaller than
    ``batch_size``); at most all of them."""
    if num_parts < 1 or num_seeds < 0 or batch_size < 1:
        raise ConfigError(f"{num_parts=} and {batch_size=} must be >= 1, {num_seeds=} >= 0")
    enough = -(-MICRO_PER_MACRO * batch_size * num_parts // max(num_seeds, 1))
    return min(num_parts, max(1, num_parts // MACRO_SHARE, enough))


def default_interleave(num_parts: int, parts_per_batch: int) -> int:
    """``interleave`` when none is given: enough macro batches to span half of the partitions.  Consecutive
    micro-batches of one macro batch are correlated (same few regions of the graph); interleaving those
    of many macro batches is what keeps accuracy at the level of random batches (the measurements in
    ``benchmarks/bench_partition_accuracy.py``); it costs their adjacency blocks in memory at once, so the
    default holds at most ``MAX_DEFAULT_INTERLEAVE`` macro batches (with the default ``parts_per_batch`` =
    K/64, an eighth of the graph's adjacency) however many partitions there are."""
    if num_parts < 1 or parts_per_batch < 1:
        raise ConfigError(f"{num_parts=} and {parts_per_batch=} must be >= 1")
    return max(1, min(MAX_DEFAULT_INTERLEAVE, -(-num_parts // (WINDOW_SHARE * parts_per_batch))))


def group_seeds(assignment: np.ndarray, seeds: np.ndarray, num_parts: int) -> SeedGroups:
    """The seeds' positions grouped by partition: a stable counting sort, O(len(seeds) + K)."""
    seeds = np.ascontiguousarray(seeds, dtype=np.int64)
    ptr, order = group_by_part(np.asarray(assignment)[seeds], np.arange(len(seeds), dtype=np.int64), num_parts)
    return SeedGroups(seeds=seeds, ptr=ptr, order=order)


def plan_partition_epoch(groups: SeedGroups, *, parts_per_batch: int, batch_size: int,
                         shuffle: bool, seed: int, epoch: int, drop_last: bool = False,
                         interleave: int = 1) -> list[BatchItem]:
    """The micro-batches of one epoch; with ``shuffle``, those of each run of ``interleave`` consecutive
    macro batches are put in a random order together (their adjacency blocks are in use at once)."""
    for name, value in (("parts_per_batch", parts_per_batch), ("batch_size", batch_size), ("interleave", interleave)):
        if value < 1:
            raise ConfigError(f"{name}={value} must be >= 1")
    rng = np.random.default_rng([seed, epoch, 0x9A47])
    mix = np.random.default_rng([seed, epoch, 0x1E4F])  # its own stream: the macro batches do not depend on it
    ptr = groups.ptr
    holding = np.flatnonzero(np.diff(ptr) > 0)
    order = rng.permutation(holding) if shuffle else holding
    plan: list[BatchItem] = []
    window: list[BatchItem] = []
    for macro, start in enumerate(range(0, len(order), parts_per_batch)):
        parts = tuple(int(p) for p in order[start : start + parts_per_batch])
        ref = MacroRef(index=macro, parts=parts, epoch=epoch)
        pos = np.concatenate([groups.order[ptr[p] : ptr[p + 1]] for p in parts])
        if shuffle:
            pos = rng.permutation(pos)
        window += [node_item(groups.seeds, pos[a:b], ref) for a, b in _cuts(len(pos), batch_size, drop_last)]
        if (macro + 1) % interleave == 0 or start + parts_per_batch >= len(order):
            plan += [window[i] for i in mix.permutation(len(window))] if shuffle and interleave > 1 else window
            window = []
    return plan


def _cuts(n: int, batch_size: int, drop_last: bool) -> list[tuple[int, int]]:
    """Bounds of a macro batch's micro-batches: ``ceil(n / batch_size)`` near-equal ones (sizes differ by
    at most one, none above ``batch_size``), so a macro batch ends in no small noisy step; with
    ``drop_last``, ``n // batch_size`` full ones."""
    if drop_last:
        return [(i, i + batch_size) for i in range(0, n - n % batch_size, batch_size)]
    count = -(-n // batch_size)
    bounds = [i * n // count for i in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def max_batches_per_epoch(num_seeds: int, num_parts: int, parts_per_batch: int, batch_size: int) -> int:
    """An upper bound of ``len(plan)`` over all epochs (each macro batch adds at most one partial batch);
    the loader spaces the epochs' RNG streams by it so no two batches ever share a stream."""
    return -(-num_seeds // batch_size) + -(-num_parts // parts_per_batch)


def shard_partition_plan(plan: list[BatchItem], *, rank: int, world_size: int,
                         drop_last: bool) -> list[BatchItem]:
    """Rank ``rank``'s share of the epoch's global micro-batch plan (the same on every rank), with
    the same number of steps on every rank.

    The epoch's macro batches are dealt round-robin in plan order (rank r reads macro batches r, r + W,
    ...), each rank keeping their micro-batches in plan order, interleaving included.  To equalise, ranks
    holding more than ``S = T // W`` micro-batches (T in all) pass their last ones to ranks holding
    fewer (in rank order; the receiver samples them with that macro batch's adjacency, read once more);
    the ``T mod W`` left over become one last step: their seeds cut into W near-equal plain seed
    batches (sampled from the global cache and the disk), or dropped with ``drop_last`` or when fewer
    than W seeds.  So every seed is used once per epoch unless a drop is stated, as in
    :func:`outre_async.sampling._plan.plan_epoch`.
    """
    if world_size == 1:
        return list(plan)
    firsts: dict[int, int] = {}
    for mb in plan:
        firsts.setdefault(_macro_of(mb).index, len(firsts))
    owned: list[list[BatchItem]] = [[] for _ in range(world_size)]
    for mb in plan:
        owned[firsts[_macro_of(mb).index] % world_size].append(mb)
    steps, spare = divmod(len(plan), world_size)
    pool = [mb for share in owned for mb in share[steps:]]
    for share in owned:
        del share[steps:]
    for share in owned:
        need = steps - len(share)
        share += pool[:need]
        del pool[:need]
    if pool and not drop_last:
        seeds = np.concatenate([mb.seeds for mb in pool])
        input_id = np.concatenate([mb.targets.input_id for mb in pool])
        if len(seeds) >= world_size:
            bounds = [i * len(seeds) // world_size for i in range(world_size + 1)]
            for r in range(world_size):
                cut = slice(bounds[r], bounds[r + 1])
                owned[r].append(BatchItem(seeds=seeds[cut], targets=NodeTargets(input_id=input_id[cut])))
    return owned[rank]


def _macro_of(item: BatchItem) -> MacroRef:
    """The macro batch of an item of :func:`plan_partition_epoch` (every one names its own)."""
    if item.macro is None:
        raise ConfigError("shard_partition_plan takes the items of plan_partition_epoch, each of a macro "
                          "batch; got an item of plain seeds: pass the unsharded epoch plan")
    return item.macro
