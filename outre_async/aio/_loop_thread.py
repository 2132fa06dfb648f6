"""The sync bridge: one owned thread running an event loop, called into from synchronous code.

``for batch in loader`` cannot run the pipeline on the caller's thread (it may have no loop, or a
loop that is busy: Jupyter, or sync code called from inside ``asyncio.run``), so the loader starts
one :class:`LoopThread` (uvloop when installed) and calls coroutines on it, waiting for each result:
the hand-off is one batch at a time and therefore bounded.  Everything that touches the loop,
including its shutdown (async generators finalized, loop closed), runs on the owned thread, never
on the caller's: the caller's thread may already be running a loop of its own, and asyncio refuses
to run a second one there.  ``close()`` stops the loop and joins the thread; it is idempotent and
is also what the loader's garbage-collection finalizer calls, from whatever thread the collector
happens to run on (on the loop thread itself it stops the loop without joining itself).

A child forked from the process that made the bridge (``multiprocessing``, torch ``DataLoader``
workers) inherits this object but not its thread: a call would wait forever for a loop nobody
runs, so it raises :class:`LoaderForkedError`, and ``close()`` there lets go without waiting.

Why not anyio's blocking portal (``anyio.from_thread.start_blocking_portal``), which is a maintained
implementation of this bridge: the pipeline is written against asyncio directly (``loop.add_reader``
on the io_uring eventfd, executor futures, uvloop), so anyio would add a dependency and a
cancel-scope layer per call to every batch's hand-off without replacing any of that; what the
portal gets right (the loop lives and dies on its own thread, exceptions cross back with their
tracebacks, one join on close) is what this class does, and the tests under a running loop
(tests/loader/test_sync_bridge.py) pin it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..errors import LoaderForkedError, PipelineClosed

T = TypeVar("T")


def forked_message(pid: int) -> str:
    """What a loader used in a child forked from the process ``pid`` that started it says."""
    return (f"this loader was started in process {pid} and is used in process {os.getpid()}, a child forked from it "
            "(multiprocessing, torch DataLoader workers): its threads and I/O ring stayed in the parent; make the "
            "loader in the worker, after the fork (or use the 'spawn' start method)")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where installed (faster callbacks and I/O), else asyncio's default."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """An event loop running in a thread this object owns."""

    def __init__(self, name: str = "outre-loop") -> None:
        self.loop = new_event_loop()
        self.pid = os.getpid()  # the thread runs in this process only (a forked child has none)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._closed = False
        self._closing: asyncio.Task[None] | None = None
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:  # on this thread: the caller's may be running a loop of its own
            try:
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                asyncio.set_event_loop(None)
                self.loop.close()

    def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run the coroutine made by ``fn()`` on the loop and wait for its result (or exception)."""
        if self.pid != os.getpid():
            raise LoaderForkedError(forked_message(self.pid))
        if self._closed:
            raise PipelineClosed("the loader was closed: this iterator delivers no more batches; iterate the "
                                 "loader again (it reopens) or make a new one")
        if threading.current_thread() is self._thread:
            raise RuntimeError("cannot wait for the loader's loop from inside it")
        return asyncio.run_coroutine_threadsafe(self._await(fn), self.loop).result()

    def close(self, last: Callable[[], Awaitable[object]] | None = None) -> None:
        """Run ``last()`` on the loop (the resources' close), stop the loop and join the thread, which
        closes the loop (idempotent).  Called on the loop thread itself (the GC can finalize the
        loader there), it schedules the same steps and returns without joining itself."""
        if self._closed:
            return
        self._closed = True
        if self.pid != os.getpid():
            return  # a forked child: the loop and its thread are the parent's
        if threading.current_thread() is self._thread:
            self._closing = self.loop.create_task(self._last_then_stop(last))  # held: tasks are weakly kept
            return
        try:
            if last is not None:
                asyncio.run_coroutine_threadsafe(self._await(last), self.loop).result()
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()

    async def _last_then_stop(self, last: Callable[[], Awaitable[object]] | None) -> None:
        try:
            if last is not None:
                await last()
        finally:
            self.loop.stop()

    @staticmethod
    async def _await(fn: Callable[[], Awaitable[T]]) -> T:
        return await fn()

    @property
    def closed(self) -> bool:
        return self._closed
