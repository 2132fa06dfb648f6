"""Extractor stage: resolve each sampled batch against the feature buffer and read the misses.

For every :class:`SampledBatch` on the extract channel an extractor acquires buffer slots for the
batch's rows (hits need no I/O; rows another extractor is reading are awaited), reads the rest through
the :class:`FeatureSource` (io_uring, pread or memory), gathers the batch matrix and sends an
:class:`ExtractedBatch` on the bounded ready channel.  The buffer hold travels with the batch and is
released by the consumer.

Cancellation rule: if cancelled (or failing) while it owns a hold that has not been handed on, the
extractor releases it; the source itself waits for reads already submitted before giving up the
memory they write into.
"""

from __future__ import annotations

import time
from typing import Any

from ..features._feature_buffer import FeatureBuffer
from ._batch import ExtractedBatch, SampledBatch
from ._channel import Channel


async def extractor_worker(inp: Channel[SampledBatch], out: Channel[ExtractedBatch], buffer: FeatureBuffer,
                           source: Any, counters: dict[str, float]) -> None:
    async for sb in inp:
        start = time.perf_counter()
        hold = await buffer.acquire(sb.subgraph.n_id)
        try:
            await buffer.fill(hold, source)
            x = buffer.gather(hold)
            counters["extract_seconds"] += time.perf_counter() - start
            counters["extracted_batches"] += 1
            await out.send(ExtractedBatch(sb.seq, sb.subgraph, x, hold))
        except BaseException:
            buffer.release(hold)
            raise
