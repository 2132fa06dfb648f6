"""The historical embedding table (OUTRE §4.3): candidates -> slots, rows of h^(L-1), push stamps.

``slot_of`` int32 [N] maps a candidate to its slot (-1: not a candidate) and never changes after
construction, so sampler threads may read it.  ``rows`` [C, dim] float32 and ``stamp`` int64 [C]
(the step of the row's push, -1: never pushed) change only through :meth:`HistoryTable.write`,
which the loader calls on its loop thread only (design §7: one owner); samplers see a :meth:`valid`
copy made on that thread, never the live stamps.

The rows live on ``device``: the training device under ``HistoryConfig(placement="device")``, so
:meth:`~HistoryTable.read` is a gather and :meth:`~HistoryTable.write` a scatter there (plain torch
indexing: the same lines on a CPU device, which is how CI runs them, bit-identical to a host
table), or the host (page-locked when the training device is CUDA).  Everything the pull decision
reads (``slot_of``, ``stamp``, ``retired``) stays in host numpy arrays whatever the placement: the
decision is made on the host (sampler threads, the loop thread's clock), and only the row movement
changes place.

:func:`decide` turns one sampled batch into its record: which hop-1 rows are pulled (the pruned
ones, from which slots) and which rows are pushed (candidates at hop <= 1 whose h^(L-1) the batch
computes exactly: not pruned and, for L >= 3, not fed by a pruned node within L-2 hops).
:func:`frontier_counts` is the cheap candidate ranking: how often each node is in hop 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from outre_async.errors import ConfigError
from outre_async.sampling._sampler import SampledSubgraph
from outre_async.sampling._sampler_kernels import HistoryPrune

from ._history_config import HistoryConfig, history_bytes, history_row_bytes, slots_for_budget


@dataclass(frozen=True, slots=True)
class HistoryDecision:
    """What the sampler decided for one batch (sampler -> loader contract): local rows of the last
    layer's input that are pulled and the slots they come from, local rows pushed and their slots."""

    pull_local: np.ndarray   # int64 [p]
    pull_slots: np.ndarray   # int64 [p]
    push_local: np.ndarray   # int64 [q]
    push_slots: np.ndarray   # int64 [q]
    pull_degree: np.ndarray  # int64 [p]: the in-degree a pulled node would have had if expanded (GCN's norm)
    wait_gap: int = 0        # > 0: a pull rests on a row promised by the batch this many places back, inside
                             # the overtaking window, so delivery must follow that batch's (0: no such pull)


class HistoryTable:
    """The slot table (see the module); ``device``: where ``rows`` live, ``pin``: page-lock host rows."""

    def __init__(self, candidates: np.ndarray, num_nodes: int, dim: int, *, pin: bool = False,
                 device: str | torch.device = "cpu") -> None:
        if len(candidates) and (candidates.min() < 0 or candidates.max() >= num_nodes):
            raise ConfigError(f"history candidates must be node ids in [0, {num_nodes}); got "
                              f"{int(candidates.min())}..{int(candidates.max())}")
        self.device = torch.device(device)
        if pin and self.device.type != "cpu":
            raise ConfigError(f"a history table on {self.device} cannot be page-locked; pin only host rows")
        self.nodes = np.asarray(candidates, dtype=np.int64)
        self.slot_of = np.full(num_nodes, -1, np.int32)
        self.slot_of[self.nodes] = np.arange(len(self.nodes), dtype=np.int32)
        self.dim = dim
        rows = torch.zeros(len(self.nodes), dim, dtype=torch.float32, device=self.device)
        self.rows = rows.pin_memory() if pin else rows
        self.stamp = np.full(len(self.nodes), -1, np.int64)
        self.retired = np.zeros(len(self.nodes), np.bool_)  # refused by admission "grad": no new pulls

    @property
    def num_slots(self) -> int:
        return len(self.nodes)

    def nbytes(self, num_samplers: int) -> int:
        """The whole table's bytes (:func:`history_bytes`), wherever its parts live."""
        return history_bytes(len(self.slot_of), self.num_slots, self.dim, num_samplers)

    @property
    def device_bytes(self) -> int:
        """Bytes held in a training device's own memory: the rows on a GPU, else 0 (a CPU device's
        memory is the host's)."""
        return 0 if self.device.type == "cpu" else history_row_bytes(self.num_slots, self.dim)

    def host_bytes(self, num_samplers: int) -> int:
        """Bytes of host memory (a part of ``memory_budget``): the whole table less :attr:`device_bytes`."""
        return self.nbytes(num_samplers) - self.device_bytes

    def valid(self, horizon: int, staleness: int, jitter: float = 0.0) -> HistoryPrune:
        """The sampler's view: slots whose row, used at step ``horizon`` at the latest, is within its
        lifetime (at most ``staleness`` steps, see :func:`lifetimes`).  A copy: later pushes do not
        change what a running sampler reads."""
        life = lifetimes(np.arange(self.num_slots), self.stamp, staleness, jitter)
        fresh = (self.stamp >= 0) & (horizon - self.stamp <= life) & ~self.retired
        return HistoryPrune(self.slot_of, fresh.astype(np.uint8))

    def nothing_valid(self) -> HistoryPrune:
        """The sampler's view during the warm-up: no slot may be pruned."""
        return HistoryPrune(self.slot_of, np.zeros(self.num_slots, np.uint8))

    def write(self, slots: np.ndarray, rows: torch.Tensor, step: int) -> None:
        """Store pushed rows (loop thread only): a scatter on the table's device (rows made elsewhere
        are copied there first, as a host table's are)."""
        if len(slots):
            self.rows[self._index(slots)] = rows.to(self.device, self.rows.dtype)
            self.stamp[slots] = step
            self.retired[slots] = False

    def retire(self, slots: np.ndarray) -> None:
        """Stop new pulls of ``slots`` until their next write (loop thread only): admission ``"grad"``
        refused a fresh row, so the older one must not be served either.  The rows and stamps stay, so
        a batch whose sampler already decided to pull them still reads them, within its bound."""
        self.retired[slots] = True

    def read(self, slots: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:
        """Copies of the rows (a gather on the table's device) and host stamps of ``slots`` (loop thread only)."""
        return self.rows[self._index(slots)], self.stamp[slots].copy()

    def gather(self, index: torch.Tensor) -> torch.Tensor:
        """Copies of the rows at ``index``, a tensor already on the table's device (loop thread only;
        ``_record_transfer`` sends it with the batch's other arrays in one copy)."""
        return self.rows[index]

    def _index(self, slots: np.ndarray) -> torch.Tensor:
        """``slots`` as an index on the table's device.  To a GPU the copy is issued without a wait
        (``non_blocking``): from pageable memory the driver stages it before the call returns, and
        the stream orders it before the gather or scatter that reads it."""
        return torch.from_numpy(np.asarray(slots, dtype=np.int64)).to(self.device, non_blocking=True)


def lifetimes(slots: np.ndarray, stamps: np.ndarray, staleness: int, jitter: float) -> np.ndarray:
    """How many steps each row may be used: ``staleness`` minus a pseudo-random share of up to
    ``jitter`` of it, a hash of (slot, push step), so the table needs no state for it.

    Why: a row is refreshed only when it expires, so rows pushed together (the whole first epoch on
    a small graph) expire together and come back in waves: every ``staleness`` steps most of the last
    layer's input is suddenly recomputed by a model that has moved on, and gradient flows through
    those rows again at once, which can collapse test accuracy at the first wave on a small graph
    (``benchmarks/bench_history_accuracy.py --jitter 0``; docs/benchmarks.md).  Spreading the lifetimes over
    ``[(1 - jitter) staleness, staleness]`` turns the waves into a steady trickle."""
    span = int(jitter * (staleness - 1))
    if span == 0:
        return np.full(len(slots), staleness, np.int64)
    x = slots.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ stamps.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(29)
    return staleness - (x % np.uint64(span + 1)).astype(np.int64)


def decide(sub: SampledSubgraph, prune: HistoryPrune, num_layers: int, indptr: np.ndarray | None = None,
           fanout: int = -1) -> HistoryDecision:
    """The batch's record, from its sample and the validity the sampler saw (``indptr`` and the
    fanout of hop 2 give the pulled nodes' would-be sampled in-degree; without them, 0)."""
    b = sub.batch_size
    n1 = sub.num_sampled_nodes[1] if len(sub.num_sampled_nodes) > 1 else 0
    slot = prune.slot_of[sub.n_id[: b + n1]].astype(np.int64)
    has = slot >= 0
    pulled = np.zeros(len(slot), bool)
    pulled[b:] = has[b:] & (prune.valid[np.where(has[b:], slot[b:], 0)] != 0)
    exact = ~_tainted(sub, np.flatnonzero(pulled), num_layers)[: b + n1]
    pull = np.flatnonzero(pulled)
    push = np.flatnonzero(has & exact)
    degree = np.zeros(len(pull), np.int64)
    if indptr is not None and len(pull):
        v = sub.n_id[pull]
        degree = indptr[v + 1] - indptr[v]
        if fanout >= 0:
            degree = np.minimum(degree, fanout)
    codes = prune.valid[slot[pull]]
    close = codes[codes > 1]  # promised within the window: the code is 1 + the promising batch's gap
    wait_gap = int(close.min()) - 1 if len(close) else 0
    return HistoryDecision(pull, slot[pull], push, slot[push], degree, wait_gap)


def _tainted(sub: SampledSubgraph, pulled: np.ndarray, num_layers: int) -> np.ndarray:
    """Nodes whose h^(L-1) reads a pruned node's (incomplete) h^(l>=1): the pruned nodes, then
    L-2 steps along the sampled edges."""
    bad = np.zeros(sub.num_nodes, bool)
    bad[pulled] = True
    src, dst = sub.edge_index
    for _ in range(num_layers - 2):
        if not bad.any():
            break
        bad[dst[bad[src]]] = True
    return bad


def frontier_counts(sample: Callable[[np.ndarray, int], SampledSubgraph], plan: Sequence[np.ndarray],
                    num_nodes: int, limit: int | None) -> tuple[np.ndarray, int]:
    """How often each node is in hop 1 over ``limit`` batches of ``plan`` spread evenly over it
    (all of them when ``limit`` is None; ``sample`` is a one-hop sampler), and how many batches were
    counted: the default candidate ranking when no profile is given (design §8)."""
    counts = np.zeros(num_nodes, np.int64)
    picks = range(len(plan)) if limit is None or limit >= len(plan) else \
        np.unique(np.linspace(0, len(plan) - 1, limit).round().astype(np.int64)).tolist()
    for i in picks:
        sub = sample(plan[i], i)
        b = sub.batch_size
        np.add.at(counts, sub.n_id[b: b + sub.num_sampled_nodes[1]], 1)
    return counts, len(picks)


def choose_candidates(cfg: HistoryConfig, counts: np.ndarray, num_samplers: int, counted_batches: int = 0) -> np.ndarray:
    """``cfg.candidates``, else the most frequent frontier nodes (ties: lower id) the budget holds;
    with no budget, those met at least twice (once when the ``counted_batches`` are no more than
    the staleness: see :mod:`._history_config`)."""
    num_nodes = len(counts)
    cap = num_nodes if cfg.budget is None else slots_for_budget(int(cfg.budget), num_nodes, cfg.dim, num_samplers)
    if cfg.candidates is not None:
        ids = np.asarray(cfg.candidates, dtype=np.int64)
        return ids[:cap]
    least = 2 if cfg.budget is None and counted_batches > cfg.staleness else 1
    order = np.lexsort((np.arange(num_nodes), -counts))
    ranked = order[counts[order] >= least]
    return np.sort(ranked[:cap])
