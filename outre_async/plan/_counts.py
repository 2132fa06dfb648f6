"""Pre-sampling (GNNLab's PreSC, OUTRE's profiling epoch): what an epoch reads, node by node.

The loader's own plan (partition order with ``partitions=``) is sampled with the real sampler and the
loader's RNG streams (``stream_base + seq``: the same samples the loader will draw), caches off, for
the first ``max_batches`` batches; counts are scaled to one epoch.  Per batch:

* every sampled node's feature row is an access; an access counts as a *read* only when the node's
  previous access is more than ``reuse`` batches back (what the feature buffer, holding ``reuse``
  batches' rows, would not catch);
* every expanded node (hops 0..L-2) is a list read, unless partition mode's macro batch holds it;
* every seed and hop-1 node is an appearance of a history candidate; a hop-1 node *owns* the nodes
  only its subtree reaches (:func:`subtree_owners`): pruning it would save their rows and lists and
  the compute of those rows;
* replaying each candidate's appearances against ``staleness - window`` gives the chance its row is
  fresh when it is met (a pulled row is not pushed again, so it ages).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..sampling._items import BatchItem
from ..sampling._sampler import NeighborSampler
from . import _profile_kernels as K
from ._costs import BatchShape
from ._timing import Timing, robust

SHAPES = 3  # pre-sampled batches kept for timing the training step on (``_costs.BatchShape``)


@dataclass(frozen=True, kw_only=True, slots=True)
class Counts:
    """Per-epoch counts (scaled from ``batches`` pre-sampled of ``epoch_batches``)."""

    row_hot: np.ndarray        # float64 [N]: feature-row reads the buffer would not catch
    list_hot: np.ndarray       # float64 [N]: list reads from disk (not the macro batch)
    cand: np.ndarray           # int64 [C]: hop-1 nodes, most frequent first
    cand_hits: np.ndarray      # float64 [C]: hop-1 appearances per epoch
    cand_fresh: np.ndarray     # float64 [C]: share of them that would pull a fresh row
    cand_rows: np.ndarray      # float64 [C]: rows its subtree owns, per epoch
    attr_cand: np.ndarray      # int64 [k]: position in ``cand``
    attr_node: np.ndarray      # int64 [k]
    attr_rows: np.ndarray      # float64 [k]
    attr_lists: np.ndarray     # float64 [k]
    batches: int
    epoch_batches: int
    accesses: int              # feature-row accesses pre-sampled (before the reuse filter)
    sample_seconds: float      # time in the sampler itself over the pre-sampled batches (outliers dropped)
    sample_spread: float = 0.0  # IQR / median of the per-batch sampling times
    row_access: np.ndarray | None = None  # float64 [N]: feature-row accesses per epoch (before the buffer)
    attr_access: np.ndarray | None = None  # float64 [k]: accesses of ``attr_node`` under ``attr_cand``
    shapes: tuple[BatchShape, ...] = ()    # a few pre-sampled batches' topology (the step is timed on them)


def presample(ds: Any, plan: Sequence[BatchItem], *, fanouts: Sequence[int], seed: int, stream_base: int,
              max_batches: int, buffer_rows: int, horizon: int, max_candidates: int,
              assignment: np.ndarray | None = None, progress: Callable[[int], None] | None = None) -> Counts:
    """Count the first ``max_batches`` batches of ``plan`` (see the module); ``buffer_rows`` / the mean
    rows per batch = ``reuse``; ``horizon`` = staleness - window (``< 0``: no history);
    ``assignment`` = the partition of each node (partition mode)."""
    sampler = NeighborSampler(ds, list(fanouts), seed=seed)
    layers = len(fanouts)
    acc, lists, app, pairs = [], [], [], []
    limit = min(len(plan), max(1, int(max_batches)))
    times: list[float] = []
    keep = {limit * (i + 1) // (SHAPES + 1) for i in range(SHAPES)} if limit else set()
    shapes: list[BatchShape] = []
    if limit:  # warm-up, untimed: the first call may compile the sampler's kernels
        sampler.sample(plan[0].seeds, stream_base)
    for step in range(limit):
        item = plan[step]
        start = time.perf_counter()
        sub = sampler.sample(item.seeds, stream_base + step)
        times.append(time.perf_counter() - start)
        n_id, b = sub.n_id, sub.batch_size
        n1 = sub.num_sampled_nodes[1] if layers > 1 else 0
        acc.append(n_id)
        if step in keep:
            shapes.append(BatchShape(edge_index=np.asarray(sub.edge_index, np.int64), num_nodes=len(n_id),
                                     batch_size=int(b)))
        expanded = n_id[: sum(sub.num_sampled_nodes[:-1])]
        on_disk = np.ones(len(expanded), bool)
        if assignment is not None and item.macro is not None:
            on_disk = ~np.isin(assignment[expanded], np.asarray(item.macro.parts))
        lists.append(expanded[on_disk])
        app.append((n_id[: b + n1], b, step))
        if layers > 1 and n1:
            pairs.append(_owned(sub, b, n1, layers, on_disk))
        if progress is not None:
            progress(1)
    mean_rows = sum(len(a) for a in acc) / max(len(acc), 1)
    reuse = max(1, int(buffer_rows // max(mean_rows, 1)))
    counts = _aggregate(ds.num_nodes, acc, lists, app, pairs, epoch_batches=len(plan), reuse=reuse,
                        horizon=horizon, max_candidates=max_candidates, sampling=robust(times))
    return replace(counts, shapes=tuple(shapes))


def _owned(sub: Any, b: int, n1: int, layers: int, on_disk: np.ndarray) -> tuple[np.ndarray, ...]:
    """(owner global id, node global id, row saved, list saved) for this batch's hop-1 subtrees."""
    owner = np.empty(sub.num_nodes, np.int64)
    src, dst = sub.edge_index
    K.subtree_owners(np.ascontiguousarray(src), np.ascontiguousarray(dst), sub.num_nodes, b, n1, layers, owner)
    local = np.arange(sub.num_nodes)
    mine = owner >= 0
    row = (local >= b + n1).astype(np.float64)
    lst = np.zeros(sub.num_nodes)
    lst[: len(on_disk)] = on_disk
    keep = mine & ((row > 0) | (lst > 0))
    return sub.n_id[owner[keep]], sub.n_id[keep], row[keep], lst[keep]


def _aggregate(n: int, acc: list[np.ndarray], lists: list[np.ndarray], app: list[tuple[np.ndarray, int, int]],
               pairs: list[tuple[np.ndarray, ...]], *, epoch_batches: int, reuse: int, horizon: int,
               max_candidates: int, sampling: Timing) -> Counts:
    scale = epoch_batches / max(len(acc), 1)
    node = np.concatenate(acc) if acc else np.empty(0, np.int64)
    step = np.concatenate([np.full(len(a), i, np.int64) for i, a in enumerate(acc)]) if acc else node
    order = np.lexsort((step, node))
    reads = np.empty(len(node), np.uint8)
    K.reads_after_reuse(node[order], step[order], int(reuse), reads)
    row_reads = np.bincount(node[order], weights=reads, minlength=n)
    row_access = np.bincount(node, minlength=n).astype(np.float64)
    miss = np.divide(row_reads, row_access, out=np.zeros(n), where=row_access > 0)
    list_hot = np.bincount(np.concatenate(lists), minlength=n).astype(np.float64) if lists else np.zeros(n)
    cand, hits, fresh = _candidates(n, app, horizon, max_candidates)
    pos = np.full(n, -1, np.int64)
    pos[cand] = np.arange(len(cand))
    attr = _attribution(pos, pairs, miss)
    cand_rows = np.bincount(attr[0], weights=attr[4], minlength=len(cand))
    return Counts(row_hot=row_reads * scale, list_hot=list_hot * scale, cand=cand, cand_hits=hits * scale,
                  cand_fresh=fresh, cand_rows=cand_rows * scale, attr_cand=attr[0], attr_node=attr[1],
                  attr_rows=attr[2] * scale, attr_lists=attr[3] * scale, batches=len(acc),
                  epoch_batches=epoch_batches, accesses=len(node),
                  sample_seconds=sampling.value * sampling.runs, sample_spread=sampling.spread,
                  row_access=row_access * scale, attr_access=attr[4] * scale)


def _candidates(n: int, app: list[tuple[np.ndarray, int, int]], horizon: int,
                max_candidates: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The most frequent hop-1 nodes (ties: lower id), their hop-1 appearances and fresh share."""
    if not app or horizon < 0 or max_candidates < 1:
        return np.empty(0, np.int64), np.empty(0), np.empty(0)
    node = np.concatenate([a[0] for a in app])
    step = np.concatenate([np.full(len(a[0]), a[2], np.int64) for a in app])
    frontier = np.concatenate([np.arange(len(a[0])) >= a[1] for a in app]).astype(np.uint8)
    hits = np.bincount(node, weights=frontier, minlength=n)
    ranked = np.lexsort((np.arange(n), -hits))
    cand = np.sort(ranked[hits[ranked] > 0][:max_candidates])
    order = np.lexsort((step, node))
    pulled = np.empty(len(node), np.uint8)
    K.replay_history(node[order], step[order], frontier[order], int(horizon), pulled)
    pulls = np.bincount(node[order], weights=pulled, minlength=n)
    fresh = np.divide(pulls[cand], hits[cand], out=np.zeros(len(cand)), where=hits[cand] > 0)
    return cand.astype(np.int64), hits[cand], fresh


def _attribution(pos: np.ndarray, pairs: list[tuple[np.ndarray, ...]],
                 miss: np.ndarray) -> tuple[np.ndarray, ...]:
    """Summed (candidate position, node, rows read, lists read, rows computed) over the batches,
    candidates only; a row read counts at the node's buffer-miss share (the buffer catches the rest)."""
    if not pairs:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0), np.empty(0)
    owner = pos[np.concatenate([p[0] for p in pairs])]
    node = np.concatenate([p[1] for p in pairs])
    rows = np.concatenate([p[2] for p in pairs])
    lists = np.concatenate([p[3] for p in pairs])
    keep = owner >= 0
    owner, node, rows, lists = owner[keep], node[keep], rows[keep], lists[keep]
    key = owner * len(pos) + node
    uniq, inv = np.unique(key, return_inverse=True)
    computed = np.bincount(inv, weights=rows, minlength=len(uniq))
    uniq_node = (uniq % len(pos)).astype(np.int64)
    return ((uniq // len(pos)).astype(np.int64), uniq_node, computed * miss[uniq_node],
            np.bincount(inv, weights=lists, minlength=len(uniq)), computed)
