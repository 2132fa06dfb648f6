"""Delivery: the consumer side of an epoch, an async generator over the ready channel.

Batches are yielded in completion order (optionally with bounded overtaking, :class:`_Windowed`), or
in plan order through a :class:`ReorderBuffer` (its batches keep their leases: the samplers' gate,
``_out_of_turn``, keeps what it can hold inside the memory plan and says why that cannot deadlock); when
the stages failed, the first error is raised itself (with its own cause), not an ExceptionGroup.
The previous batch's matrix lease is released when the next batch is in hand.  The :class:`Delivery`
outlives epochs and owns the consumer-side counters.

On a device (:class:`ToDevice`: a CUDA loader, or a test's synchronous engine) a *copier* task sits
between the order and the consumer: it takes each batch in delivery order, issues its copy
(``_device_copy.CopyEngine``) and queues it, at most ``depth`` batches ahead of the consumer (a
semaphore: a slot is taken before the next batch is fetched and given back when the consumer has the
batch after it in hand, as the host lease used to be).  The host lease ends when the copy completes
(the engine's callback, any thread, through ``call_soon_threadsafe``), not at the next batch.
Anything the trainer must see in step order (the history's clock and pulls) is done at hand-over, by
``wrap``, never by the copier.

Cancellation rule: when the consumer stops early (break, exception, ``aclose``, garbage collection),
the generator's ``finally`` cancels the stage task, waits for it (samplers wait for their running
kernels, sources for their submitted reads), then releases every lease still queued or held.  On a
device the copier is cancelled and awaited first; batches it queued already gave their leases back
(or will, when their copies complete: the engine's close waits for them).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ._batch import ExtractedBatch
from ._batch_memory import MatrixLease
from ._channel import Channel, EndOfChannel
from ._device_copy import CopyEngine, Transfer, host_tensors
from ._pipeline import EpochParts, run_stages
from ._reorder import ReorderBuffer

B = TypeVar("B")


@dataclass(frozen=True, slots=True)
class DeliveryCounters:
    """Totals of the consumer side since the loader was made."""

    batches: int = 0
    stall_seconds: float = 0.0   # time the consumer waited for a ready batch

    def plus(self, stall: float, delivered: bool) -> DeliveryCounters:
        return DeliveryCounters(self.batches + int(delivered), self.stall_seconds + stall)


class _AsCompleted:
    """Completion order: whatever is ready first."""

    async def next(self, ready: Channel[ExtractedBatch]) -> ExtractedBatch | None:
        async for eb in ready:
            return eb
        return None

    def leftovers(self) -> list[ExtractedBatch]:
        return []


class _Windowed(_AsCompleted):
    """Completion order with bounded overtaking: batch ``j`` is handed out only once every batch
    before ``j - window`` has been, so at most ``j + window`` batches precede it (the history
    cache's staleness bound rests on this), and, when its history decision has ``wait_gap = g > 0``
    (it pulls a row that batch ``j - g`` promised, ``_history.EpochHistory.promise``), only once every
    batch up to ``j - g`` has been.  No deadlock: the lowest batch not handed out yet waits for no
    one (both rules name only earlier batches).  A batch held back gives its matrix lease back at
    once, so the batches it waits for can always be extracted."""

    def __init__(self, window: int) -> None:
        self.window, self.low = window, 0
        self.done: set[int] = set()
        self.held: dict[int, ExtractedBatch] = {}

    def _eligible(self, eb: ExtractedBatch) -> bool:
        gap = eb.history.wait_gap if eb.history is not None else 0
        return eb.seq - self.window <= self.low and (gap <= 0 or eb.seq - gap < self.low)

    async def next(self, ready: Channel[ExtractedBatch]) -> ExtractedBatch | None:
        while True:
            eligible = [s for s, eb in self.held.items() if self._eligible(eb)]
            if eligible:
                return self._handed(self.held.pop(min(eligible)))
            eb = await super().next(ready)
            if eb is None:
                return None
            if self._eligible(eb):
                return self._handed(eb)
            self.held[eb.seq] = eb
            eb.lease.release()

    def _handed(self, eb: ExtractedBatch) -> ExtractedBatch:
        self.done.add(eb.seq)
        while self.low in self.done:
            self.done.remove(self.low)
            self.low += 1
        return eb

    def leftovers(self) -> list[ExtractedBatch]:
        held = list(self.held.values())
        self.held.clear()
        return held


class _InPlanOrder(_AsCompleted):
    """Plan order through a reorder buffer.  A batch held until the earlier ones arrive keeps its
    lease: either it was sent out of turn and its bytes are the out-of-turn budget's, or it was sent
    in turn after the batch everyone waits for, which therefore reserved its matrix first
    (``_out_of_turn``).  While the consumer waits, every ready batch is taken off the ready channel."""

    def __init__(self) -> None:
        self.reorder: ReorderBuffer[ExtractedBatch] = ReorderBuffer()
        self.queue: deque[ExtractedBatch] = deque()

    async def next(self, ready: Channel[ExtractedBatch]) -> ExtractedBatch | None:
        while not self.queue:
            eb = await super().next(ready)
            if eb is None:
                return None
            self.queue.extend(self.reorder.push(eb.seq, eb))
        return self.queue.popleft()

    def leftovers(self) -> list[ExtractedBatch]:
        return self.reorder.clear() + list(self.queue)


@dataclass(frozen=True, slots=True)
class ToDevice:
    """How an epoch's batches reach the device: ``build`` makes a batch's host tensors (on the loop,
    in the copier), ``engine`` copies them, ``depth`` batches at most ahead of the consumer."""

    engine: CopyEngine
    depth: int
    build: Callable[[ExtractedBatch], Any]


class Delivery:
    def __init__(self) -> None:
        self.counters = DeliveryCounters()
        self.device_counters = {"copied": 0, "leases_ended_by_copy": 0, "most_ahead": 0}

    async def deliver(self, parts: EpochParts, *, ordered: bool, wrap: Callable[[ExtractedBatch], B],
                      window: int | None = None) -> AsyncGenerator[B, None]:
        """Yield the epoch's batches; release the previous batch's lease once the next is in hand (the
        consumer's loop variable holds the previous matrix until then, so the pool keeps counting it).
        ``window`` bounds overtaking in completion order (None: unbounded)."""
        ready = parts.ready
        stages = asyncio.ensure_future(run_stages(parts))
        order = _InPlanOrder() if ordered else _AsCompleted() if window is None else _Windowed(window)
        current: ExtractedBatch | None = None
        try:
            while True:
                start = time.perf_counter()
                nxt = await order.next(ready)
                self.counters = self.counters.plus(time.perf_counter() - start, nxt is not None)
                if current is not None:
                    current.lease.release()
                current = nxt
                if current is None:
                    break
                current.lease.hand_over()
                yield wrap(current)
            try:
                await stages  # surfaces the failure that ended the stream early
            except BaseExceptionGroup as group:
                first = _first(group)
                raise first from first.__cause__
        finally:
            await _shutdown(stages, ready, order, current)


    async def deliver_to_device(self, parts: EpochParts, *, ordered: bool, to: ToDevice,
                                wrap: Callable[[ExtractedBatch, Any, Transfer], B],
                                window: int | None = None) -> AsyncGenerator[B, None]:
        """:meth:`deliver` through the copier (the module): ``wrap(eb, device_batch, transfer)`` runs
        at hand-over, on the loop thread."""
        ready = parts.ready
        stages = asyncio.ensure_future(run_stages(parts))
        order = _InPlanOrder() if ordered else _AsCompleted() if window is None else _Windowed(window)
        resident: Channel[tuple[ExtractedBatch, Any, Transfer]] = Channel(to.depth, name="device queue")
        slots = asyncio.Semaphore(to.depth)
        copier = asyncio.ensure_future(self._copy(order, ready, resident, slots, to))
        taken = False
        try:
            while True:
                start = time.perf_counter()
                try:
                    item: tuple[ExtractedBatch, Any, Transfer] | None = await resident.receive()
                except EndOfChannel:
                    item = None
                self.counters = self.counters.plus(time.perf_counter() - start, item is not None)
                if taken:
                    slots.release()  # the batch before the one now in hand leaves the device's count
                if item is None:
                    break
                taken = True
                yield wrap(*item)
            await copier  # surfaces a failure of the copier (an engine error)
            try:
                await stages
            except BaseExceptionGroup as group:
                first = _first(group)
                raise first from first.__cause__
        finally:
            if not copier.done():
                copier.cancel()
            await asyncio.wait([copier])
            await _shutdown(stages, ready, order, None)
            for eb, _, _ in resident.drain_nowait():
                eb.lease.release()  # copied or not: the engine's close waits for its copies

    async def _copy(self, order: _AsCompleted, ready: Channel[ExtractedBatch],
                    resident: Channel[tuple[ExtractedBatch, Any, Transfer]], slots: asyncio.Semaphore,
                    to: ToDevice) -> None:
        """The copier: a slot, the next batch in delivery order, its copy issued, queued for the consumer."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                await slots.acquire()
                eb = await order.next(ready)
                if eb is None:
                    return
                batch = to.build(eb)
                transfer = to.engine.submit(host_tensors(batch), _lease_ender(loop, eb.lease, self.device_counters))
                for key, tensor in transfer.tensors.items():  # the batch now holds the device's tensors only
                    setattr(batch, key, tensor)
                self.device_counters["copied"] += 1
                self.device_counters["most_ahead"] = max(self.device_counters["most_ahead"], len(resident) + 1)
                await resident.send((eb, batch, transfer))
        finally:
            resident.close()


def _lease_ender(loop: asyncio.AbstractEventLoop, lease: MatrixLease, counters: dict[str, int]) -> Callable[[], None]:
    """The engine's callback when a batch's copy is complete (any thread): its host lease ends, on the
    loop thread (the pool's owner).  After the loop closed nothing is left to give back."""
    def end() -> None:
        counters["leases_ended_by_copy"] += 1
        if threading.get_ident() == loop_thread:
            lease.release()
            return
        try:
            loop.call_soon_threadsafe(lease.release)
        except RuntimeError:  # the loop closed: the pool went with it
            pass

    loop_thread = threading.get_ident()  # made on the loop thread
    return end


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def _shutdown(stages: asyncio.Future[None], ready: Channel[ExtractedBatch], order: _AsCompleted,
                    current: ExtractedBatch | None) -> None:
    if not stages.done():
        stages.cancel()
    await asyncio.wait([stages])
    if not stages.cancelled():
        stages.exception()  # already raised to the consumer, or superseded by its own error
    leftovers = ready.drain_nowait() + order.leftovers() + ([current] if current is not None else [])
    for eb in leftovers:
        eb.lease.release()
