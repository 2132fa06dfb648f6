"""Extractor stage: resolve each sampled batch against the feature buffer and read the misses.

For every :class:`SampledBatch` on the extract channel an extractor acquires buffer slots for the
batch's rows (hits need no I/O; rows another extractor is reading are awaited), reads the rest through
the :class:`FeatureSource` (io_uring, pread or memory), gathers the batch matrix and sends an
:class:`ExtractedBatch` on the bounded ready channel.  The :class:`BufferLease` travels with the batch
and is released by the consumer.  The :class:`ExtractStage` outlives epochs and owns the stage's
counters (only its workers update them): wall seconds, and the loop-thread CPU seconds of the
worker's own steps (buffer bookkeeping, planning and submitting reads, copying rows, gathering),
measured by :func:`._cpu_meter.metered` so time other tasks ran meanwhile is not counted.

With a :class:`StaticFeatureCache` (the profile's hot rows, ``static``), a batch's ids are looked up
there first: only the misses acquire buffer slots and are read, and the matrix merges both.

Cancellation rule: if cancelled (or failing) while it owns a lease that has not been handed on, the
extractor releases it; the source itself waits for reads already submitted before giving up the
memory they write into.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..features import FeatureBuffer, FeatureSource
from ..features._static_cache import StaticFeatureCache
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
        self.static: StaticFeatureCache | None = None  # looked up before the buffer (loaded by the loader)

    async def _extract(self, sb: SampledBatch, buffer: FeatureBuffer,
                       source: FeatureSource) -> tuple[BufferLease, np.ndarray]:
        """Look the batch's rows up in the static cache, acquire slots for the rest, read the misses,
        gather its matrix (merged with the static hits); release if that fails."""
        ids, static = sb.subgraph.n_id, self.static
        hits = static.lookup(ids) if static is not None else None
        lease = BufferLease(buffer, await buffer.acquire(ids if hits is None else ids[hits < 0]))
        try:
            await buffer.fill(lease.acquisition, source)
            x = buffer.gather(lease.acquisition)
            if static is not None and hits is not None:
                x = static.merge(hits, x)
            return lease, x
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
