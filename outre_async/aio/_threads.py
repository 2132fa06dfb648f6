"""Running a blocking call in an executor from a coroutine, without leaving the thread running behind a
cancellation (the sample stage's kernels and the loader's foresight use it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

R = TypeVar("R")


async def run_in_thread(executor: Executor, fn: Callable[..., R], *args: object) -> R:
    """Run ``fn`` in ``executor``; if cancelled, wait for the thread to finish before re-raising."""
    fut = asyncio.get_running_loop().run_in_executor(executor, fn, *args)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        await asyncio.wait([fut])
        if not fut.cancelled():
            fut.exception()  # retrieved: the cancellation is what matters now
        raise
