"""Thread CPU time of a stage's own work on the event loop (design §9: CPU seconds per stage).

Wall time of a coroutine includes what other tasks ran while it was suspended; its CPU time does
not have to.  :func:`metered` drives a coroutine step by step and adds ``time.thread_time()`` spent
inside each step (the synchronous code between two suspensions) to a :class:`CpuMeter`: exactly the
CPU this coroutine used on the loop thread, whatever ran in between.  Callbacks the loop runs on
its own (an I/O source's completion handler) are not steps of any coroutine; their owner meters
them where they run.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class CpuMeter:
    """Seconds of thread CPU time added up; owned by one event loop."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0


class _Metered:
    __slots__ = ("coro", "meter")

    def __init__(self, coro: Coroutine[Any, Any, T], meter: CpuMeter) -> None:
        self.coro, self.meter = coro, meter

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, meter, clock = self.coro, self.meter, time.thread_time
        send: Any = None
        error: BaseException | None = None
        while True:
            t = clock()
            try:
                step = coro.send(send) if error is None else coro.throw(error)
            except StopIteration as stop:
                meter.seconds += clock() - t
                return stop.value
            except BaseException:
                meter.seconds += clock() - t
                raise
            meter.seconds += clock() - t
            try:
                send, error = (yield step), None
            except BaseException as exc:  # cancellation (or a throw) goes into the coroutine
                send, error = None, exc


async def metered(coro: Coroutine[Any, Any, T], meter: CpuMeter) -> T:
    """Await ``coro`` and add the thread CPU time of its steps to ``meter``.  Cancellation and
    errors pass through unchanged; a coroutine that is never awaited to its end is closed."""
    try:
        return await _Metered(coro, meter)  # type: ignore[no-any-return]
    finally:
        coro.close()


def thread_cpu_call(fn: Any, *args: Any) -> tuple[Any, float]:
    """Run ``fn(*args)`` (in a worker thread) and return its result with the thread CPU it took."""
    t = time.thread_time()
    result = fn(*args)
    return result, time.thread_time() - t
