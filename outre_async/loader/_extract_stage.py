"""Extractor stage: stream each sampled batch's rows through the feature buffer into its own matrix.

For every :class:`SampledBatch` on the extract channel an extractor takes three steps:

1. *reserve* the batch matrix's bytes in the :class:`BatchMemory` pool (its real unique rows; waits
   while matrices in flight fill the budget's share);
2. *extract*: the rows stream through the :class:`FeatureBuffer` piece by piece (hits need no I/O,
   rows another extractor is reading are awaited, the rest are read through the
   :class:`FeatureSource`) and each piece is copied into the matrix; the batch's look-ahead pin
   shrinks as its rows are taken;
3. *send* an :class:`ExtractedBatch` on the bounded ready channel; its :class:`MatrixLease` travels
   with it and is released by the consumer.

A piece holds at most ``buffer slots / extractors`` rows, so every extractor finds slots and a batch
larger than the buffer still goes through.  The :class:`ExtractStage` outlives epochs and owns the
stage's counters (only its workers update them).

Cancellation rule: if cancelled (or failing) while it owns a lease that has not been handed on, the
extractor releases it, and it always drops what is left of the batch's pin; the buffer releases the
piece in hand; the source itself waits for reads already submitted before giving up the memory they
write into.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..features import FeatureBuffer, FeatureSource
from ._batch import ExtractedBatch, SampledBatch
from ._batch_memory import BatchMemory, new_matrix
from ._channel import Channel


@dataclass(frozen=True, slots=True)
class ExtractCounters:
    """Totals of the extract stage since the loader was made."""

    batches: int = 0
    seconds: float = 0.0   # summed over workers: reserve + read + gather, waits included

    def plus(self, seconds: float) -> ExtractCounters:
        return ExtractCounters(self.batches + 1, self.seconds + seconds)


class ExtractStage:
    def __init__(self) -> None:
        self.counters = ExtractCounters()

    async def worker(self, inp: Channel[SampledBatch], out: Channel[ExtractedBatch], buffer: FeatureBuffer,
                     source: FeatureSource, matrices: BatchMemory, *, piece_rows: int) -> None:
        async for sb in inp:
            try:
                await self._one(sb, out, buffer, source, matrices, piece_rows)
            finally:
                if sb.pin is not None:
                    sb.pin.release()

    async def _one(self, sb: SampledBatch, out: Channel[ExtractedBatch], buffer: FeatureBuffer,
                   source: FeatureSource, matrices: BatchMemory, piece_rows: int) -> None:
        start = time.perf_counter()
        ids = sb.subgraph.n_id
        lease = await matrices.reserve(len(ids), sb.seq)
        try:
            x = new_matrix(len(ids), buffer.data.shape[1])
            await buffer.extract(ids, x, source, piece_rows=piece_rows, pin=sb.pin)
            self.counters = self.counters.plus(time.perf_counter() - start)
            await out.send(ExtractedBatch(sb.seq, sb.subgraph, x, lease, sb.history))
        except BaseException:
            lease.release()
            raise
