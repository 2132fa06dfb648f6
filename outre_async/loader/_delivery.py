"""Delivery: the consumer side of an epoch, an async iterator over the ready channel (:class:`EpochStream`).

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
:meth:`EpochStream.aclose` (the loader's epoch generator calls it in its ``finally``, the loader's
``aclose`` too; the first call does the work, the others wait for it) cancels the stage task, waits
for it (samplers wait for their running kernels, sources for their submitted reads), then releases
every lease still queued or held.
On a device the copier is cancelled and awaited first (:class:`DeviceEpochStream`); batches it
queued already gave their leases back (or will, when their copies complete: the engine's close waits
for them).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..aio._channel import Channel, EndOfChannel
from ..aio._reorder import ReorderBuffer
from ._batch import ExtractedBatch
from ._batch_memory import MatrixLease
from ._device_copy import CopyEngine, Transfer, host_tensors
from ._pipeline import EpochParts, run_stages

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
    batch up to ``j - g`` has been.  The lowest batch not handed out yet waits for no one (both rules
    name only earlier batches).  A batch held back keeps its matrix lease, as in plan order: the
    samplers' out-of-turn gate (``_out_of_turn``, on whenever this order is, ``LoaderConfig.holds_back``)
    bounds what held batches take and says why the batches they wait for can always be extracted.
    (A held batch that gave its lease back, as it once did, let the pool extract more while it still
    held its matrix: memory outside the plan; ``tests/loader/test_history.py`` bounds it now.)"""

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
    in the copier), ``engine`` copies them, ``depth`` batches at most ahead of the consumer;
    ``decode`` (None: ``x`` is delivered as held) decodes ``x`` right after its copy, except for a
    batch with GPU-tier rows, decoded once assembled at hand-over."""

    engine: CopyEngine
    depth: int
    build: Callable[[ExtractedBatch], Any]
    decode: Callable[[Any], Any] | None = None


def _order(ordered: bool, window: int | None) -> _AsCompleted:
    return _InPlanOrder() if ordered else _AsCompleted() if window is None else _Windowed(window)


class Delivery:
    def __init__(self) -> None:
        self.counters = DeliveryCounters()
        self.device_counters = {"copied": 0, "leases_ended_by_copy": 0, "most_ahead": 0}

    def deliver(self, parts: EpochParts, *, ordered: bool, wrap: Callable[[ExtractedBatch], B],
                window: int | None = None) -> EpochStream[B]:
        """The epoch's batches, as an :class:`EpochStream` (``window`` bounds overtaking in completion
        order; None: unbounded)."""
        return EpochStream(self, parts, _order(ordered, window), wrap)

    def deliver_to_device(self, parts: EpochParts, *, ordered: bool, to: ToDevice,
                          wrap: Callable[[ExtractedBatch, Any, Transfer], B],
                          window: int | None = None) -> EpochStream[B]:
        """:meth:`deliver` through the copier (:class:`DeviceEpochStream`)."""
        return DeviceEpochStream(self, parts, _order(ordered, window), to, wrap)

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
                decode = to.decode if eb.device_rows is None else None
                transfer = to.engine.submit(host_tensors(batch), _lease_ender(loop, eb.lease, self.device_counters), decode)
                for key, tensor in transfer.tensors.items():  # the batch now holds the device's tensors only
                    setattr(batch, key, tensor)
                self.device_counters["copied"] += 1
                self.device_counters["most_ahead"] = max(self.device_counters["most_ahead"], len(resident) + 1)
                await resident.send((eb, batch, transfer))
        finally:
            resident.close()


class EpochStream(Generic[B]):
    """One epoch's deliveries: an async iterator with an idempotent, concurrency-safe :meth:`aclose`.

    Why a class and not an async generator: an async generator the event loop finalizes (its
    iterator dropped after ``break``) is closed by a task the loop creates, and the epoch was closed
    from two places, the loader's epoch generator and the loader's ``aclose``; whichever came second
    while the first was still waiting for the stages got ``RuntimeError: aclose(): asynchronous
    generator is already running`` in a task nobody awaited ("Task exception was never retrieved";
    ``tests/loader/test_epoch_close.py``).  Here the first :meth:`aclose` starts one shutdown task and every caller awaits it.

    The previous batch's lease is released once the next batch is in hand (the consumer's loop
    variable holds the previous matrix until then, so the pool keeps counting it)."""

    def __init__(self, delivery: Delivery, parts: EpochParts, order: _AsCompleted,
                 wrap: Callable[[ExtractedBatch], B]) -> None:
        self._delivery, self._parts, self._order, self._wrap = delivery, parts, order, wrap
        self._stages: asyncio.Future[None] | None = None
        self._current: ExtractedBatch | None = None
        self._closing: asyncio.Future[None] | None = None
        self._ended = False

    def __aiter__(self) -> EpochStream[B]:
        return self

    async def __anext__(self) -> B:
        if self._ended or self._closing is not None:
            raise StopAsyncIteration
        if self._stages is None:
            self._stages = asyncio.ensure_future(run_stages(self._parts))
        start = time.perf_counter()
        nxt = await self._order.next(self._parts.ready)
        delivery = self._delivery
        delivery.counters = delivery.counters.plus(time.perf_counter() - start, nxt is not None)
        if self._closing is not None:  # closed while this call waited: the shutdown owns the rest
            if nxt is not None:
                nxt.lease.release()
            raise StopAsyncIteration
        if self._current is not None:
            self._current.lease.release()
        self._current = nxt
        if nxt is None:
            self._ended = True
            try:
                await self._stages  # surfaces the failure that ended the stream early
            except BaseExceptionGroup as group:
                first = _first(group)
                raise first from first.__cause__
            raise StopAsyncIteration
        nxt.lease.hand_over()
        return self._wrap(nxt)

    async def aclose(self) -> None:
        """Stop the stages and release every lease still queued or held (idempotent; callers that
        come while the shutdown runs wait for the same one)."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._closing)

    async def _shutdown(self) -> None:
        stages = self._stages
        if stages is not None:
            if not stages.done():
                stages.cancel()
            await asyncio.wait([stages])
            if not stages.cancelled():
                stages.exception()  # already raised to the consumer, or superseded by its own error
        current, self._current = self._current, None
        leftovers = self._parts.ready.drain_nowait() + self._order.leftovers() + ([current] if current else [])
        for eb in leftovers:
            eb.lease.release()


class DeviceEpochStream(EpochStream[B]):
    """:class:`EpochStream` through the copier (the module): ``wrap(eb, device_batch, transfer)`` runs at
    hand-over, on the loop thread.  A slot of ``to.depth`` is taken by the copier before it fetches the
    next batch and given back when the consumer has the batch after it in hand; leases end when their
    copies complete, so :attr:`_current` stays empty.  :meth:`aclose` is the parent's one shutdown, the
    copier cancelled and awaited first."""

    def __init__(self, delivery: Delivery, parts: EpochParts, order: _AsCompleted, to: ToDevice,
                 wrap: Callable[[ExtractedBatch, Any, Transfer], B]) -> None:
        super().__init__(delivery, parts, order, _through_the_copier)
        self._to, self._wrap_copied = to, wrap
        self._resident: Channel[tuple[ExtractedBatch, Any, Transfer]] = Channel(to.depth, name="device queue")
        self._slots = asyncio.Semaphore(to.depth)
        self._copier: asyncio.Future[None] | None = None
        self._taken = False

    async def __anext__(self) -> B:
        if self._ended or self._closing is not None:
            raise StopAsyncIteration
        if self._stages is None:
            self._stages = asyncio.ensure_future(run_stages(self._parts))
            self._copier = asyncio.ensure_future(self._delivery._copy(self._order, self._parts.ready, self._resident,
                                                                      self._slots, self._to))
        start = time.perf_counter()
        try:
            item: tuple[ExtractedBatch, Any, Transfer] | None = await self._resident.receive()
        except EndOfChannel:
            item = None
        delivery = self._delivery
        delivery.counters = delivery.counters.plus(time.perf_counter() - start, item is not None)
        if self._taken:
            self._slots.release()  # the batch before the one now in hand leaves the device's count
        if self._closing is not None:  # closed while this call waited: the shutdown owns the rest
            if item is not None:
                item[0].lease.release()
            raise StopAsyncIteration
        if item is None:
            self._ended = True
            if self._copier is not None:
                await self._copier  # surfaces a failure of the copier (an engine error)
            try:
                await self._stages
            except BaseExceptionGroup as group:
                first = _first(group)
                raise first from first.__cause__
            raise StopAsyncIteration
        self._taken = True
        return self._wrap_copied(*item)

    async def _shutdown(self) -> None:
        copier = self._copier
        if copier is not None:
            if not copier.done():
                copier.cancel()
            await asyncio.wait([copier])
            if not copier.cancelled():
                copier.exception()  # raised to the consumer already, or superseded by its own error
        await super()._shutdown()
        for eb, _, _ in self._resident.drain_nowait():
            eb.lease.release()  # copied or not: the engine's close waits for its copies


class AsyncEpoch(Generic[B]):
    """What ``async for`` iterates: the epoch's async generator behind a plain object, so that the
    loader learns (``weakref.finalize``) the moment the user lets go of it; the generator itself is
    finalized later, by a task of the event loop (see ``HistoryOwner.epoch``)."""

    __slots__ = ("_agen", "__weakref__")

    def __init__(self, agen: AsyncGenerator[B, None]) -> None:
        self._agen = agen

    def __aiter__(self) -> AsyncEpoch[B]:
        return self

    def __anext__(self) -> Awaitable[B]:
        return self._agen.__anext__()

    def aclose(self) -> Awaitable[None]:
        """Close the epoch now (what leaving ``async for`` by an exception leaves to the event loop)."""
        return self._agen.aclose()


def _through_the_copier(eb: ExtractedBatch) -> Any:
    """The host wrap a :class:`DeviceEpochStream` never uses: its batches are handed over copied."""
    raise TypeError("a device epoch hands its batches over through the copier (wrap(eb, batch, transfer))")


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
