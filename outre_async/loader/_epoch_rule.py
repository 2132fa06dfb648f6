"""The iteration rule: a loader runs one epoch at a time, and a second one started meanwhile is refused.

Every ``for``/``async for``/``iter()`` of a loader starts an epoch, and every epoch drives the same
samplers, extractors, feature buffer and pool of batch matrices.  Two epochs at once starved each
other (``tests/loader/test_iteration_rule.py``): ``it = iter(loader); next(it)`` then ``for b in loader`` blocked forever (the
first epoch's batches held the pool's matrices and nobody consumed them), two threads iterating one
loader ended one of them with a misleading ``PipelineClosed``, two ``async for`` both ran a whole
epoch; with ``history=`` they would also tick one step clock.  So the rule is the one
the history already had, for every loader: an epoch started while another of the same loader is
still being iterated is refused with a :class:`ConcurrentEpochError` naming both, and the first
goes on undisturbed.  Why refuse rather than end the older iterator (torch's habit for persistent
workers): a second thread or task iterating the same loader is a bug to be told about where it
starts, not a surprise ending somewhere else, and the running epoch's batches stay valid.

An epoch is over when its iterator is exhausted, closed (``close()``/``aclose()``, leaving its loop
by ``break`` or an exception) or let go of (``del it``; the sync iterator closes at once, an ``async
for``'s generator is finalized by the event loop a few callbacks later): :class:`EpochToken` says
so, and a new epoch gives the running one :data:`EPOCH_GRACE_S` to go before it is refused.
"""

from __future__ import annotations

import asyncio
import threading

from ..errors import ConcurrentEpochError

__all__ = ["EPOCH_GRACE_S", "EpochToken", "OneEpochAtATime"]

EPOCH_GRACE_S = 0.5  # how long a new epoch waits for a running one's iterator to go


class EpochToken:
    """Whether an epoch is over: its iterator is gone (``abandon``, from a ``weakref.finalize`` on the
    iterator the user holds: it delivers nothing more, though the event loop closes it a moment
    later) or it was closed.  :meth:`wait` lets the next epoch wait for that."""

    __slots__ = ("abandoned", "_event", "_loop", "_thread")

    def __init__(self) -> None:
        self.abandoned = False
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = -1

    def abandon(self) -> None:
        """Any thread (a finalizer runs where the last reference goes)."""
        self.abandoned = True
        event, loop = self._event, self._loop
        if event is None or loop is None or loop.is_closed():
            return
        try:
            if threading.get_ident() == self._thread:
                event.set()
            else:
                loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # the loop closed meanwhile: nobody waits
            pass

    async def wait(self, timeout: float) -> bool:
        """Loop thread: wait up to ``timeout`` seconds for :meth:`abandon`; whether it came."""
        if not self.abandoned:
            self._loop, self._event, self._thread = asyncio.get_running_loop(), asyncio.Event(), threading.get_ident()
            try:
                await asyncio.wait_for(self._event.wait(), timeout)
            except TimeoutError:
                pass
        return self.abandoned


class OneEpochAtATime:
    """The loader's running epoch (loop thread): :meth:`begin` refuses a second, :meth:`end` frees the turn."""

    def __init__(self) -> None:
        self._running: tuple[int, EpochToken] | None = None

    async def begin(self, number: int, token: EpochToken) -> None:
        """Take the turn for epoch ``number``, or raise :class:`ConcurrentEpochError` when another epoch
        is still being iterated after the grace."""
        running = self._running
        if running is not None and not await running[1].wait(EPOCH_GRACE_S):
            raise ConcurrentEpochError(
                f"epoch {number} of this loader was started while epoch {running[0]} is still being iterated "
                "(another `for`/`async for`, thread or task, or an iterator kept from iter(loader)); a loader runs "
                "one epoch at a time: finish or close the first iterator (leave its loop, it.close() / await "
                "it.aclose(), or del it), or use a second loader")
        self._running = (number, token)

    @property
    def running(self) -> bool:
        """Whether an epoch has the turn now (its iterator is neither exhausted nor closed)."""
        return self._running is not None

    def end(self, token: EpochToken) -> None:
        """The epoch of ``token`` is over (its iterator ended, was closed or dropped)."""
        token.abandon()
        if self._running is not None and self._running[1] is token:
            self._running = None
