"""Bounded async channels with close semantics: the only way pipeline stages talk.

``asyncio.Queue()`` is unbounded by default and has no end-of-stream on Python 3.11, so stages would
need sentinels.  A :class:`Channel` always has a capacity (>= 1), a full channel blocks its sender
(the back-pressure that bounds the pipeline's memory), and ``close()`` ends the stream: receivers
drain what is queued and then stop (``async for`` ends, ``receive`` raises :class:`EndOfChannel`);
senders get :class:`~outre_async.errors.PipelineClosed`.  Waiters are woken in FIFO order.

Cancellation: a cancelled ``send`` leaves the channel unchanged (the item is not queued); a cancelled
``receive`` takes nothing.  A wake-up that landed on a cancelled waiter is passed to the next one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..errors import ConfigError, PipelineClosed

T = TypeVar("T")


class EndOfChannel(Exception):
    """Raised by :meth:`Channel.receive` once the channel is closed and drained."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ChannelStats:
    capacity: int
    queued: int
    max_queued: int
    sent: int
    received: int
    waiting_senders: int
    waiting_receivers: int
    closed: bool


class Channel(Generic[T]):
    """A FIFO of at most ``capacity`` items owned by one event loop."""

    def __init__(self, capacity: int, *, name: str = "channel") -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ConfigError(f"{name}: {capacity=} must be an int >= 1 (a channel is never unbounded)")
        self.name = name
        self._capacity = capacity
        self._items: deque[T] = deque()
        self._senders: deque[asyncio.Future[None]] = deque()
        self._receivers: deque[asyncio.Future[None]] = deque()
        self._closed = False
        self._sent = self._received = self._max_queued = 0

    async def send(self, item: T) -> None:
        """Queue ``item``, waiting while the channel is full; PipelineClosed once closed."""
        while True:
            if self._closed:
                raise PipelineClosed(f"{self.name} is closed; no more items can be sent")
            if len(self._items) < self._capacity:
                break
            await self._wait(self._senders)
        self._items.append(item)
        self._sent += 1
        self._max_queued = max(self._max_queued, len(self._items))
        _wake_one(self._receivers)

    async def receive(self) -> T:
        """Next item, waiting while empty; :class:`EndOfChannel` when closed and drained."""
        while not self._items:
            if self._closed:
                raise EndOfChannel(self.name)
            await self._wait(self._receivers)
        self._received += 1
        _wake_one(self._senders)
        return self._items.popleft()

    def close(self) -> None:
        """End the stream: queued items can still be received; every waiter wakes up."""
        self._closed = True
        for waiters in (self._senders, self._receivers):
            while waiters:
                fut = waiters.popleft()
                if not fut.done():
                    fut.set_result(None)

    def full(self) -> bool:
        """Whether a :meth:`send` now would wait for room."""
        return len(self._items) >= self._capacity

    def __len__(self) -> int:
        return len(self._items)

    def drain_nowait(self) -> list[T]:
        """Take every queued item at once (used on shutdown to release what nobody will consume)."""
        items = list(self._items)
        self._items.clear()
        _wake_one(self._senders)
        return items

    def statistics(self) -> ChannelStats:
        return ChannelStats(
            capacity=self._capacity, queued=len(self._items), max_queued=self._max_queued,
            sent=self._sent, received=self._received, waiting_senders=len(self._senders),
            waiting_receivers=len(self._receivers), closed=self._closed,
        )

    def __aiter__(self) -> AsyncIterator[T]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[T]:
        while True:
            try:
                item = await self.receive()
            except EndOfChannel:
                return
            yield item

    async def _wait(self, waiters: deque[asyncio.Future[None]]) -> None:
        fut = asyncio.get_running_loop().create_future()
        waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut in waiters:
                waiters.remove(fut)
            elif fut.done() and not fut.cancelled():
                _wake_one(waiters)  # we were woken but will not act: pass the turn on
            raise


def _wake_one(waiters: deque[asyncio.Future[None]]) -> None:
    while waiters:
        fut = waiters.popleft()
        if not fut.done():
            fut.set_result(None)
            return
