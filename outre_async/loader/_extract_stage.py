"""Extractor stage: fill each sampled batch's own matrix by asking the top feature tier for its rows.

For every :class:`SampledBatch` on the extract channel an extractor takes three steps:

1. *reserve* the batch matrix's bytes in the :class:`BatchMemory` pool (its real unique rows; waits
   while matrices in flight fill the budget's share; when delivery holds batches back (plan order, or
   history's overtaking window: ``LoaderConfig.holds_back``) the subgraph's bytes too, and a batch
   sent out of turn brings its lease from the sampler, ``_out_of_turn``);
2. *extract*: the top :class:`FeatureTier` (``features._tier``) fills the matrix; each tier answers
   what it holds and passes the rest down: the GPU tier (its rows stay on the device: only the
   misses fill the matrix, as its prefix, and the batch carries a :class:`DeviceRows` assembled at
   delivery), the static tier (the profile's hot rows, merged in place), the feature buffer (rows
   stream through it piece by piece: hits need no I/O, rows another extractor is reading are awaited,
   the rest are read through the :class:`FeatureSource`); the batch's look-ahead pin shrinks as the
   buffer takes its rows;
3. *send* an :class:`ExtractedBatch` on the bounded ready channel; its :class:`MatrixLease` travels
   with it and is released by the consumer.

A buffer piece holds at most ``buffer slots / extractors`` rows (``_tiers.build_tiers``), so every
extractor finds slots and a batch larger than the buffer still goes through.  The
:class:`ExtractStage` outlives epochs and owns the stage's counters (only its workers update them).

The stage's counters: wall seconds, and the loop-thread CPU seconds of the worker's own steps (buffer
bookkeeping, planning and submitting reads, copying rows), measured by :func:`outre_async.aio._cpu_meter.metered`
so time other tasks ran meanwhile is not counted; ``rows`` counts the rows written into batch
matrices (a GPU tier's hits are not: they never reach the host).

Cancellation rule: if cancelled (or failing) while it owns a lease that has not been handed on, the
extractor releases it, and it always drops what is left of the batch's pin; the buffer releases the
piece in hand; the source itself waits for reads already submitted before giving up the memory they
write into.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..aio._channel import Channel
from ..aio._cpu_meter import CpuMeter, metered
from ..features import FeatureTier
from ._batch import ExtractedBatch, SampledBatch
from ._batch_memory import BatchMemory
from ._out_of_turn import subgraph_bytes


@dataclass(frozen=True, slots=True)
class ExtractCounters:
    """Totals of the extract stage since the loader was made."""

    batches: int = 0
    seconds: float = 0.0      # summed over workers: reserve + read + gather, waits included
    cpu_seconds: float = 0.0  # loop-thread CPU of those steps (waits excluded: see _cpu_meter)
    rows: int = 0             # batch rows copied into batch matrices (one copy each)

    def plus(self, seconds: float, cpu_seconds: float, rows: int) -> ExtractCounters:
        return ExtractCounters(self.batches + 1, self.seconds + seconds, self.cpu_seconds + cpu_seconds,
                               self.rows + rows)


class ExtractStage:
    def __init__(self) -> None:
        self.counters = ExtractCounters()

    async def worker(self, inp: Channel[SampledBatch], out: Channel[ExtractedBatch], tiers: FeatureTier,
                     matrices: BatchMemory, *, holds_back: bool = False) -> None:
        """Extract every batch on ``inp``; ``holds_back``: delivery may hold a batch past its queue slot
        (plan order's reorder buffer, or history's overtaking window), so leases count subgraphs too."""
        async for sb in inp:
            try:
                await self._one(sb, out, tiers, matrices, holds_back)
            finally:
                if sb.pin is not None:
                    sb.pin.release()

    async def _one(self, sb: SampledBatch, out: Channel[ExtractedBatch], tiers: FeatureTier,
                   matrices: BatchMemory, holds_back: bool) -> None:
        start, cpu = time.perf_counter(), CpuMeter()
        ids = sb.subgraph.n_id
        lease = sb.lease
        if lease is None:
            lease = await matrices.reserve(len(ids), sb.seq, subgraph_bytes(sb.subgraph) if holds_back else 0)
        try:
            # one metered coroutine per batch: two clock reads per suspension, not per step
            x = matrices.matrix(lease, len(ids), tiers.dim)
            device_rows = await metered(tiers.read_batch(ids, x, pin=sb.pin), cpu)
            if device_rows is not None:  # the GPU tier's hits stay on the device: x holds the misses
                x = x[: len(device_rows.miss_pos)]
            self.counters = self.counters.plus(time.perf_counter() - start, cpu.seconds, len(x))
            await out.send(ExtractedBatch(sb.seq, sb.subgraph, x, lease, sb.history, device_rows))
        except BaseException:
            lease.release()
            raise
