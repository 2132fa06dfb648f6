"""The sync bridge where a loop is already running (Jupyter, sync code called from ``asyncio.run``):
``for batch in loader``, ``close()``, ``with`` and the GC finalizer, on both loop kinds; and the
bridge's own shutdown from the loop thread (where the garbage collector may finalize a loader)."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from conftest import LOOPS, random_graph, run, write_store

import outre_async as oa
from outre_async.aio._loop_thread import LoopThread
from outre_async.loader._sync_api import close_bridge as _close_bridge

N, DIM = 300, 8


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    rng = np.random.default_rng(3)
    indptr, indices = random_graph(rng, N, 8)
    return write_store(tmp_path_factory.mktemp("bridge") / "ds", indptr, indices,
                       features=rng.standard_normal((N, DIM)).astype(np.float32), labels=rng.integers(0, 3, N),
                       num_classes=3, splits={"train": np.arange(200)})


def _loader(ds: oa.Dataset, backend: str = "memory") -> oa.OutreLoader:
    return oa.OutreLoader(ds, fanouts=[3, 2], batch_size=32, io=oa.IOOptions(backend=backend))


def _threads_and_fds() -> tuple[int, int]:
    gc.collect()
    return threading.active_count(), len(os.listdir("/proc/self/fd"))


@pytest.fixture
def unraisable() -> Iterator[list[BaseException]]:
    """Errors raised where nobody can catch them (a finalizer): collected, so a test can assert none."""
    seen: list[BaseException] = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda info: seen.append(info.exc_value)  # type: ignore[assignment]
    try:
        yield seen
    finally:
        sys.unraisablehook = old


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("backend", ["memory", "io_uring"])
def test_sync_loop_close_with_and_gc_inside_a_running_loop(dataset: oa.Dataset, loop: str, backend: str,
                                                            unraisable: list[BaseException]) -> None:
    with _loader(dataset, backend) as warm:  # one-time process state (uvloop's wake-up pipe, numba)
        list(warm)
    before = _threads_and_fds()

    async def notebook_cell() -> None:
        assert asyncio.get_running_loop() is not None  # what Jupyter's kernel has running
        loader = _loader(dataset, backend)
        assert len(list(loader)) == len(loader)  # a full epoch
        for i, _ in enumerate(loader):  # a broken one
            if i == 1:
                break
        loader.close()
        loader.close()  # idempotent
        with _loader(dataset, backend) as scoped:
            assert next(iter(scoped)).x.shape[1] == DIM
        dropped = _loader(dataset, backend)
        next(iter(dropped))
        del dropped  # the GC finalizer closes it
        gc.collect()

    run(notebook_cell(), loop=loop)
    assert unraisable == []
    assert _threads_and_fds() == before


def test_the_finalizer_on_the_loop_thread_closes_without_joining_itself(dataset: oa.Dataset) -> None:
    loader = _loader(dataset)
    next(iter(loader))
    bridge, box = loader._bridge, loader._box
    assert bridge is not None and box.res is not None
    loader._finalizer.detach()
    bridge.loop.call_soon_threadsafe(_close_bridge, bridge, box)  # as a GC pass on that thread would
    bridge._thread.join(timeout=30)
    assert not bridge._thread.is_alive()
    assert box.res is None and box.closed is not None  # the resources were closed before the loop stopped
    assert bridge.loop.is_closed()


def test_loop_thread_close_from_a_running_loop_runs_the_last_step_on_its_own_loop() -> None:
    async def body() -> None:
        bridge = LoopThread()
        seen: list[object] = []

        async def last() -> None:
            seen.append(asyncio.get_running_loop())

        assert bridge.call(lambda: asyncio.sleep(0, "ok")) == "ok"
        bridge.close(last)
        assert seen == [bridge.loop] and bridge.loop.is_closed()
        with pytest.raises(oa.errors.PipelineClosed, match="closed"):
            bridge.call(last)

    run(body())


def test_start_opens_the_resources_before_the_first_batch_and_iterating_reuses_them(dataset: oa.Dataset) -> None:
    threads, fds = _threads_and_fds()
    loader = _loader(dataset, "io_uring")
    assert loader.start() is loader and loader._res is not None  # opened from sync code, on the bridge's loop
    opened = loader._res
    loader.start()  # idempotent
    assert sum(b.batch_size for b in loader) == len(dataset.split("train")) and loader._res is opened
    loader.close()
    assert _threads_and_fds() == (threads, fds)

    async def body() -> None:
        async with _loader(dataset) as async_loader:
            async for _ in async_loader:
                break
            with pytest.raises(oa.ConfigError, match="async mode"):
                async_loader.start()

    run(body(), timeout=30)
