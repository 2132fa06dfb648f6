"""One epoch of the pipeline: the task group that owns every stage, and delivery to the consumer.

    plan ─▶ samplers ─▶ [extract channel] ─▶ extractors ─▶ [ready channel] ─▶ deliver() ─▶ consumer
                                                   ▲                                        │
                                                   └──────── release (buffer holds) ◀───────┘

:func:`run_stages` is one task that owns an ``asyncio.TaskGroup`` with every sampler and extractor
of the epoch; the first failure cancels the rest.  :func:`deliver` is the consumer side: an async
generator yielding batches in completion order (or plan order through a :class:`ReorderBuffer`) and,
when the stages failed, raising the first error itself (with its own cause), not an ExceptionGroup.

Cancellation rule: when the consumer stops early (break, exception, ``aclose``, garbage collection),
``deliver``'s ``finally`` cancels the stage task, waits for it (samplers wait for their running
kernels, sources for their submitted reads), then releases every buffer hold still queued.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..features._feature_buffer import FeatureBuffer
from ._batch import ExtractedBatch, SampledBatch
from ._channel import Channel
from ._extract_stage import extractor_worker
from ._reorder import ReorderBuffer
from ._sample_stage import sampler_worker


@dataclass(frozen=True, kw_only=True, slots=True)
class EpochParts:
    """Everything one epoch's stages use; built by the loader, shared by reference."""

    plan: list[np.ndarray]
    samplers: list[Any]
    executor: Executor
    buffer: FeatureBuffer
    source: Any
    extract_capacity: int
    ready_capacity: int
    num_extractors: int
    stream_base: int
    counters: dict[str, float]


async def run_stages(parts: EpochParts, ready: Channel[ExtractedBatch]) -> None:
    """Run every sampler and extractor of the epoch; close ``ready`` when done or failed."""
    extract: Channel[SampledBatch] = Channel(parts.extract_capacity, name="extract queue")
    plan = iter(enumerate(parts.plan))
    try:
        async with asyncio.TaskGroup() as tg:
            samplers = [
                tg.create_task(sampler_worker(s, plan, extract, parts.executor, parts.stream_base, parts.counters))
                for s in parts.samplers
            ]
            extractors = [
                tg.create_task(extractor_worker(extract, ready, parts.buffer, parts.source, parts.counters))
                for _ in range(parts.num_extractors)
            ]
            tg.create_task(_close_after(samplers, extract))
            tg.create_task(_close_after(extractors, ready))
    except BaseException:
        for eb in ready.drain_nowait():  # a failed epoch delivers nothing more: the error comes next
            parts.buffer.release(eb.hold)
        raise
    finally:
        extract.close()
        ready.close()


async def _close_after(tasks: list[asyncio.Task[None]], channel: Channel[Any]) -> None:
    """End ``channel``'s stream once every producer task is done (their errors go to the group)."""
    await asyncio.wait(tasks)
    channel.close()


class _AsCompleted:
    """Completion order: whatever is ready first."""

    def __init__(self, buffer: FeatureBuffer) -> None:
        self.buffer = buffer

    async def next(self, ready: Channel[ExtractedBatch]) -> ExtractedBatch | None:
        async for eb in ready:
            return eb
        return None

    def leftovers(self) -> list[ExtractedBatch]:
        return []


class _InPlanOrder(_AsCompleted):
    """Plan order through a reorder buffer.  A batch held out of turn gives its buffer slots back
    at once (its rows are already copied), so the batch everyone waits for can always get slots."""

    def __init__(self, buffer: FeatureBuffer) -> None:
        super().__init__(buffer)
        self.reorder: ReorderBuffer[ExtractedBatch] = ReorderBuffer()
        self.queue: deque[ExtractedBatch] = deque()

    async def next(self, ready: Channel[ExtractedBatch]) -> ExtractedBatch | None:
        while not self.queue:
            eb = await super().next(ready)
            if eb is None:
                return None
            in_turn = self.reorder.push(eb.seq, eb)
            if eb not in in_turn:
                self.buffer.release(eb.hold)
            self.queue.extend(in_turn)
        return self.queue.popleft()

    def leftovers(self) -> list[ExtractedBatch]:
        return self.reorder.clear() + list(self.queue)


async def deliver(parts: EpochParts, *, ordered: bool,
                  wrap: Callable[[ExtractedBatch], Any]) -> AsyncGenerator[Any, None]:
    """Yield the epoch's batches; release the previous batch's hold when the next is requested."""
    ready: Channel[ExtractedBatch] = Channel(parts.ready_capacity, name="ready queue")
    stages = asyncio.ensure_future(run_stages(parts, ready))
    order = _InPlanOrder(parts.buffer) if ordered else _AsCompleted(parts.buffer)
    current: ExtractedBatch | None = None
    try:
        while True:
            if current is not None:
                parts.buffer.release(current.hold)
                current = None
            start = time.perf_counter()
            current = await order.next(ready)
            parts.counters["stall_seconds"] += time.perf_counter() - start
            if current is None:
                break
            parts.counters["delivered_batches"] += 1
            yield wrap(current)
        try:
            await stages  # surfaces the failure that ended the stream early
        except BaseExceptionGroup as group:
            first = _first(group)
            raise first from first.__cause__
    finally:
        await _shutdown(stages, ready, order, current, parts.buffer)


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def _shutdown(stages: asyncio.Future[None], ready: Channel[ExtractedBatch], order: _AsCompleted,
                    current: ExtractedBatch | None, buffer: FeatureBuffer) -> None:
    if not stages.done():
        stages.cancel()
    await asyncio.wait([stages])
    if not stages.cancelled():
        stages.exception()  # already raised to the consumer, or superseded by its own error
    leftovers = ready.drain_nowait() + order.leftovers() + ([current] if current is not None else [])
    for eb in leftovers:
        buffer.release(eb.hold)
