"""Extractor stage: stream each sampled batch's rows through the feature buffer into its own matrix.

For every :class:`SampledBatch` on the extract channel an extractor takes three steps:

1. *reserve* the batch matrix's bytes in the :class:`BatchMemory` pool (its real unique rows; waits
   while matrices in flight fill the budget's share; in ordered mode the subgraph's bytes too, and a
   batch sent out of turn brings its lease from the sampler, ``_out_of_turn``);
2. *extract*: the rows stream through the :class:`FeatureBuffer` piece by piece (hits need no I/O,
   rows another extractor is reading are awaited, the rest are read through the
   :class:`FeatureSource`) and each piece is copied into the matrix; the batch's look-ahead pin
   shrinks as its rows are taken;
3. *send* an :class:`ExtractedBatch` on the bounded ready channel; its :class:`MatrixLease` travels
   with it and is released by the consumer.

A piece holds at most ``buffer slots / extractors`` rows, so every extractor finds slots and a batch
larger than the buffer still goes through.  The :class:`ExtractStage` outlives epochs and owns the
stage's counters (only its workers update them).

The stage's counters: wall seconds, and the loop-thread CPU seconds of the worker's own steps (buffer
bookkeeping, planning and submitting reads, copying rows), measured by :func:`outre_async.aio._cpu_meter.metered`
so time other tasks ran meanwhile is not counted.  With a :class:`StaticFeatureCache` (the profile's
hot rows, ``static``), a batch's ids are looked up there first: only the misses stream through the
buffer (into the matrix's prefix), then the cached rows are merged in place.

Cancellation rule: if cancelled (or failing) while it owns a lease that has not been handed on, the
extractor releases it, and it always drops what is left of the batch's pin; the buffer releases the
piece in hand; the source itself waits for reads already submitted before giving up the memory they
write into.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..aio._channel import Channel
from ..aio._cpu_meter import CpuMeter, metered
from ..features import FeatureBuffer, FeatureSource
from ..features._static_cache import StaticFeatureCache
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
        self.static: StaticFeatureCache | None = None  # looked up before the buffer (loaded by the loader)

    async def worker(self, inp: Channel[SampledBatch], out: Channel[ExtractedBatch], buffer: FeatureBuffer,
                     source: FeatureSource, matrices: BatchMemory, *, piece_rows: int, ordered: bool = False) -> None:
        """Extract every batch on ``inp``; ``ordered``: leases count subgraphs too (the reorder buffer
        may hold a batch past its queue slot)."""
        async for sb in inp:
            try:
                await self._one(sb, out, buffer, source, matrices, piece_rows, ordered)
            finally:
                if sb.pin is not None:
                    sb.pin.release()

    async def _one(self, sb: SampledBatch, out: Channel[ExtractedBatch], buffer: FeatureBuffer,
                   source: FeatureSource, matrices: BatchMemory, piece_rows: int, ordered: bool) -> None:
        start, cpu = time.perf_counter(), CpuMeter()
        ids = sb.subgraph.n_id
        lease = sb.lease
        if lease is None:
            lease = await matrices.reserve(len(ids), sb.seq, subgraph_bytes(sb.subgraph) if ordered else 0)
        try:
            # one metered coroutine per batch: two clock reads per suspension, not per step
            x = await metered(self._extract(sb, matrices.matrix(lease, len(ids), buffer.data.shape[1]), buffer,
                                            source, piece_rows), cpu)
            self.counters = self.counters.plus(time.perf_counter() - start, cpu.seconds, len(x))
            await out.send(ExtractedBatch(sb.seq, sb.subgraph, x, lease, sb.history))
        except BaseException:
            lease.release()
            raise

    async def _extract(self, sb: SampledBatch, x: np.ndarray, buffer: FeatureBuffer, source: FeatureSource,
                       piece_rows: int) -> np.ndarray:
        """Fill the batch matrix ``x``: static-cache hits merged in place, the rest streamed through the buffer."""
        ids, static = sb.subgraph.n_id, self.static
        if static is None:
            await buffer.extract(ids, x, source, piece_rows=piece_rows, pin=sb.pin)
            return x
        hits = static.lookup(ids)
        missed = ids[hits < 0]
        await buffer.extract(missed, x[: len(missed)], source, piece_rows=piece_rows, pin=sb.pin)
        static.merge_into(hits, x)
        return x
