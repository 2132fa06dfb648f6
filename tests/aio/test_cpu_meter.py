"""The CPU meter counts a coroutine's own steps, not what other tasks ran while it was suspended."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import run

from outre_async.aio._cpu_meter import CpuMeter, metered, thread_cpu_call


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def own_work(step: float) -> int:
    spin(step)
    await asyncio.sleep(0.01)  # another task burns CPU meanwhile
    spin(step)
    return 7


async def other_work(seconds: float) -> None:
    await asyncio.sleep(0)
    spin(seconds)


def test_metered_counts_only_its_own_steps() -> None:
    async def main() -> tuple[int, float]:
        meter = CpuMeter()
        value, _ = await asyncio.gather(metered(own_work(0.02), meter), other_work(0.1))
        return value, meter.seconds

    value, seconds = run(main())
    assert value == 7
    assert 0.04 <= seconds < 0.09  # 2 x 0.02 s of its own, none of the other task's 0.1 s


def test_cancellation_passes_through_and_is_metered_until_then() -> None:
    async def main() -> float:
        meter = CpuMeter()
        task = asyncio.create_task(metered(own_work(0.02), meter))
        await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return meter.seconds

    assert 0.02 <= run(main()) < 0.06


def test_thread_cpu_call_returns_result_and_cpu() -> None:
    result, cpu = thread_cpu_call(lambda: spin(0.02) or 3)
    assert result == 3 and 0.02 <= cpu < 0.1
