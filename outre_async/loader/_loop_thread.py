"""The sync bridge: one owned thread running an event loop, called into from synchronous code.

``for batch in loader`` cannot run the pipeline on the caller's thread (it may have no loop, or a
loop that is busy), so the loader starts one :class:`LoopThread` (uvloop when installed) and calls
coroutines on it, waiting for each result: the hand-off is one batch at a time and therefore
bounded.  ``close()`` stops the loop and joins the thread; it is idempotent and is also what the
loader's garbage-collection finalizer calls.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


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
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._closed = False

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run the coroutine made by ``fn()`` on the loop and wait for its result (or exception)."""
        if self._closed:
            raise RuntimeError("the loader's event-loop thread is closed")
        if threading.current_thread() is self._thread:
            raise RuntimeError("cannot wait for the loader's loop from inside it")

        async def runner() -> Any:
            return await fn()

        return asyncio.run_coroutine_threadsafe(runner(), self.loop).result()

    def close(self) -> None:
        """Stop the loop, join the thread, close the loop (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    @property
    def closed(self) -> bool:
        return self._closed
