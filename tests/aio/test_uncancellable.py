"""``uncancellable``: waits for the read to end whatever happens, and never swallows the waiting
task's own cancellation (issue 34's deadlock: a cancellation landing in the loop step where the
awaited copy finished was taken for "not cancelled", and the extractor went on into a full channel
that nobody read any more)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import LOOPS, run

from outre_async.features._disk_source import uncancellable


@pytest.mark.parametrize("loop", LOOPS)
def test_a_cancellation_in_the_step_the_future_completes_is_reraised(loop: str) -> None:
    async def main() -> None:
        fut = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(uncancellable(fut))
        await asyncio.sleep(0)  # the task now waits on the shield
        fut.set_result(None)    # the shield's callback is scheduled, not run yet ...
        task.cancel()           # ... when the cancellation arrives: fut is done by the time the task wakes
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    run(main(), loop, timeout=10)


@pytest.mark.parametrize("loop", LOOPS)
def test_it_waits_for_the_future_then_reraises(loop: str) -> None:
    async def main() -> None:
        fut = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(uncancellable(fut))
        await asyncio.sleep(0)
        task.cancel()
        task.cancel()  # twice: still one wait to the end
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()  # the read may still write into the memory: it keeps waiting
        fut.set_exception(OSError("the read failed"))  # the caller inspects fut itself
        with pytest.raises(asyncio.CancelledError):
            await task
        assert isinstance(fut.exception(), OSError)

    run(main(), loop, timeout=10)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_cancelled_future_is_not_the_task_cancelled(loop: str) -> None:
    async def main() -> None:
        fut = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(uncancellable(fut))
        await asyncio.sleep(0)
        fut.cancel()  # e.g. an executor's future cancelled at its shutdown: the task goes on
        await task
        assert not task.cancelled() and task.result() is None

    run(main(), loop, timeout=10)
