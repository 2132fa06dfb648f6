"""Foresight: the feature buffer learns which rows the batches beyond the extract queue will need.

Why: the buffer evicts rows no queued batch needs first, and only the extract queue's batches are
pinned, so past the queue's horizon eviction is least-recently-released, which on papers-like read
well above the rows Belady's MIN reads with the same buffer.  Pinning more batches read fewer, but a
queue that deep costs each batch's whole subgraph (``8 R + 24 E``) out of the buffer, and with every
row pinned the windows found no unpinned slot to read into (products-like: many times the I/Os;
``benchmarks/replay_window_reads.py --extract-queue``).  Foresight costs ``4 r`` bytes a
batch instead: a batch ``depth`` places ahead of the samplers is sampled for its ``n_id`` alone
(same ``(seed, stream)``, so the same rows as when its turn comes), its rows are *foreseen* in the
buffer (:meth:`FeatureBuffer.foresee`: evicted after the cold rows, before the pinned ones; windows
may still read into their slots) and the ids are kept, as int32 where they fit, until the batch is
pinned, when the hold is dropped.  The subgraph's edges are dropped at once.

Who samples: the sample stage's own workers, with their own samplers and threads, whenever the extract
queue is full (:meth:`EpochForesight.wanted`: a worker with a batch to send would otherwise just wait),
so foresight takes no scratch, thread or core of its own and never delays a batch the queue has room
for.  Partition mode samples a foreseen batch without its macro batch's adjacency block
(``PartitionSampler.sample_nodes``: the neighbour cache, then ``indices``), so blocks are still
loaded once, in turn.  Off with the history cache (what a batch samples depends on the history's state
when its turn comes) and with ``buffer_policy="next-use"``.

Replaying saved epochs through the buffer (``benchmarks/replay_window_reads.py --foresight``), foresight
brought papers-like and products-like close to MIN with as many merged reads as before, and igb-like
(already close) a little closer.  Deeper than the best is worse, as then windows evict foreseen rows the
buffer would have kept; the depth is therefore sized by rows, not batches (``_budget.foresight_depth``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from ..aio._threads import run_in_thread
from ..features import FeatureBuffer, FeatureTier
from ..features._buffer_holds import Foresight
from ..sampling._items import BatchItem
from ._batch import Sampler


def compact_ids(ids: np.ndarray, num_nodes: int) -> np.ndarray:
    """``ids`` as int32 where every node id fits (half the bytes a held batch costs), else int64."""
    return ids.astype(np.int32) if num_nodes <= np.iinfo(np.int32).max else ids.astype(np.int64)


def held_id_bytes(num_nodes: int) -> int:
    """Bytes one foreseen id holds (``compact_ids``): 4 where every node id fits int32, else 8."""
    return 4 if num_nodes <= np.iinfo(np.int32).max else 8


@dataclass(slots=True)
class ForesightTotals:
    """The loader's foresight figures over every epoch (``stats()["foresight"]``)."""

    batches: int = 0      # batches foreseen
    used: int = 0         # of them, still held when their own pin came (the others were taken first, or dropped)
    rows: int = 0         # ids held, summed over the batches foreseen
    seconds: float = 0.0  # wall seconds the sample workers spent sampling them
    most_rows_held: int = 0

    def stats(self) -> dict[str, int | float]:
        return {"batches": self.batches, "used": self.used, "rows": self.rows, "seconds": round(self.seconds, 3),
                "most_rows_held": self.most_rows_held}


class EpochForesight:
    """One epoch's foresight: which batches are foreseen, and their holds on the buffer.

    The sample stage reports each batch it takes (:meth:`taken`) and pins (:meth:`pinned`), and asks
    for work while its queue is full (:meth:`wanted`, :meth:`step`).  Only the event loop touches it."""

    def __init__(self, plan: Sequence[BatchItem], depth: int, buffer: FeatureBuffer, tiers: FeatureTier, *,
                 stream_of: Callable[[int], int], num_nodes: int, max_held_rows: int, totals: ForesightTotals) -> None:
        self.plan, self.depth, self.buffer, self.tiers = plan, depth, buffer, tiers
        self.stream_of, self.num_nodes = stream_of, num_nodes
        self.max_held_rows = max_held_rows  # the memory plan's bound on held ids (``_budget.foresight_bytes``)
        self.totals = totals  # the loader's, over every epoch
        self._taken = 0       # batches the samplers have taken (they take them in plan order)
        self._next = 0        # the next batch to foresee
        self._holds: dict[int, Foresight] = {}
        self._held_rows = 0
        self._busy: set[int] = set()  # batches being sampled for foresight now
        self.closed = False

    def taken(self, seq: int) -> None:
        """A sampler took batch ``seq`` (so every earlier one too)."""
        self._taken = max(self._taken, seq + 1)

    def pinned(self, seq: int) -> None:
        """Batch ``seq`` is pinned now: its foresight hold is redundant."""
        hold = self._holds.pop(seq, None)
        if hold is not None:
            self.totals.used += 1
            self._held_rows -= len(hold.ids)
            hold.release()

    def _job(self) -> int | None:
        seq = max(self._next, self._taken)
        while seq in self._busy:
            seq += 1
        if self.closed or seq >= min(len(self.plan), self._taken + self.depth) or self._held_rows >= self.max_held_rows:
            return None
        return seq

    def wanted(self) -> bool:
        """Whether a batch within ``depth`` of the samplers is still to be foreseen."""
        return self._job() is not None

    async def step(self, sampler: Sampler, executor: Executor) -> None:
        """Foresee the next batch with ``sampler``, in ``executor`` (a sample worker's own)."""
        seq = self._job()
        if seq is None:
            return
        self._next = seq + 1
        self._busy.add(seq)
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            ids = await run_in_thread(executor, sampler.sample_nodes, self.plan[seq], self.stream_of(seq))
        finally:
            self._busy.discard(seq)
            self.totals.seconds += loop.time() - start
        if self.closed or seq < self._taken:  # its turn came first: its own pin counts its rows
            return
        kept = compact_ids(self.tiers.passed_down(np.asarray(ids)), self.num_nodes)
        self._holds[seq] = self.buffer.foresee(kept)
        self._held_rows += len(kept)
        t = self.totals
        t.batches, t.rows, t.most_rows_held = t.batches + 1, t.rows + len(kept), max(t.most_rows_held, self._held_rows)

    def close(self) -> None:
        """Drop every hold (the epoch ended or failed); later steps foresee nothing."""
        self.closed = True
        for hold in self._holds.values():
            hold.release()
        self._holds.clear()
        self._held_rows = 0
