"""Sampler stage: coroutines that run the numba sampling kernel in a bounded executor.

Each worker owns one ``NeighborSampler`` (its O(N) relabel scratch is not shared), takes the next
``(seq, seeds)`` from the epoch's shared plan iterator (one event loop, so each batch is taken exactly
once without a lock) and sends a :class:`SampledBatch` on the bounded extract channel.

Cancellation rule: a worker stops taking batches at once; a kernel already running in a thread is
waited for (a thread cannot be interrupted, and the next epoch must not share its scratch), its
result is dropped, and only then does the cancellation propagate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import Executor
from typing import Any

import numpy as np

from ._batch import SampledBatch
from ._channel import Channel


async def run_in_thread(executor: Executor, fn: Any, *args: Any) -> Any:
    """Run ``fn`` in ``executor``; if cancelled, wait for the thread to finish before re-raising."""
    fut = asyncio.get_running_loop().run_in_executor(executor, fn, *args)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        await asyncio.wait([fut])
        if not fut.cancelled():
            fut.exception()  # retrieved: the cancellation is what matters now
        raise


async def sampler_worker(sampler: Any, plan: Iterator[tuple[int, np.ndarray]], out: Channel[SampledBatch],
                         executor: Executor, stream_base: int, counters: dict[str, float]) -> None:
    for seq, seeds in plan:
        start = time.perf_counter()
        subgraph = await run_in_thread(executor, sampler.sample, seeds, stream_base + seq)
        counters["sample_seconds"] += time.perf_counter() - start
        counters["sampled_batches"] += 1
        counters["sampled_nodes"] += len(subgraph.n_id)
        counters["sampled_edges"] += int(subgraph.edge_index.shape[1])
        await out.send(SampledBatch(seq, subgraph))
