"""Extractor stage: resolve each sampled batch against the feature buffer and read the misses.

For every :class:`SampledBatch` on the extract channel an extractor acquires buffer slots for the
batch's rows (hits need no I/O; rows another extractor is reading are awaited), reads the rest through
the :class:`FeatureSource` (io_uring, pread or memory), gathers the batch matrix and sends an
:class:`ExtractedBatch` on the bounded ready channel.  The :class:`BufferLease` travels with the batch
and is released by the consumer.  The :class:`ExtractStage` outlives epochs and owns the stage's
counters (only its workers update them): wall seconds, and the loop-thread CPU seconds of the
worker's own steps (buffer bookkeeping, planning and submitting reads, copying rows, gathering),
measured by :func:`._cpu_meter.metered` so time other tasks ran meanwhile is not counted.

Cancellation rule: if cancelled (or failing) while it owns a lease that has not been handed on, the
extractor releases it; the source itself waits for reads already submitted before giving up the
memory they write into.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..features import FeatureBuffer, FeatureSource
from ._batch import BufferLease, ExtractedBatch, SampledBatch
from ._channel import Channel
from ._cpu_meter import CpuMeter, metered


@dataclass(frozen=True, slots=True)
class ExtractCounters:
    """Totals of the extract stage since the loader was made."""

    batches: int = 0
    seconds: float = 0.0      # summed over workers: acquire + read + gather, waits included
    cpu_seconds: float = 0.0  # loop-thread CPU of those steps (waits excluded: see _cpu_meter)
    rows: int = 0             # batch rows gathered from the buffer (one copy each)

    def plus(self, seconds: float, cpu_seconds: float, rows: int) -> ExtractCounters:
        return ExtractCounters(self.batches + 1, self.seconds + seconds, self.cpu_seconds + cpu_seconds,
                               self.rows + rows)


class ExtractStage:
    def __init__(self) -> None:
        self.counters = ExtractCounters()

    @staticmethod
    async def _extract(sb: SampledBatch, buffer: FeatureBuffer,
                       source: FeatureSource) -> tuple[BufferLease, np.ndarray]:
        """Acquire the batch's slots, read the misses, gather its matrix; release if that fails."""
        lease = BufferLease(buffer, await buffer.acquire(sb.subgraph.n_id))
        try:
            await buffer.fill(lease.acquisition, source)
            return lease, buffer.gather(lease.acquisition)
        except BaseException:
            lease.release()
            raise

    async def worker(self, inp: Channel[SampledBatch], out: Channel[ExtractedBatch], buffer: FeatureBuffer,
                     source: FeatureSource) -> None:
        async for sb in inp:
            start, cpu = time.perf_counter(), CpuMeter()
            # one metered coroutine per batch: two clock reads per suspension, not per step
            lease, x = await metered(self._extract(sb, buffer, source), cpu)
            try:
                self.counters = self.counters.plus(time.perf_counter() - start, cpu.seconds, len(x))
                await out.send(ExtractedBatch(sb.seq, sb.subgraph, x, lease, sb.history))
            except BaseException:
                lease.release()
                raise
