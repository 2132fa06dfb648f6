"""Leaving an epoch early never leaves a background error (issue 28.9).

``async for batch in loader: break`` drops the epoch's iterator; the event loop closes it a moment
later in a task of its own, while the user's code may already be closing the loader (``async with``
exit) or starting the next epoch.  Both used to close the epoch's delivery, and the second got
``RuntimeError: aclose(): asynchronous generator is already running`` in a task nobody awaited
("Task exception was never retrieved").  Here every break point and every follow-up is tried with
seeded delays in the samplers, and the loop's exception handler records anything a task leaves."""

from __future__ import annotations

import asyncio
import gc

import numpy as np
import pytest
from conftest import random_graph, run, write_store
from fakes import DelayedSampler

import outre_async as oa

N, DIM = 300, 8


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    rng = np.random.default_rng(11)
    indptr, indices = random_graph(rng, N, 5)
    return write_store(tmp_path_factory.mktemp("close") / "ds", indptr, indices,
                       features=rng.standard_normal((N, DIM)).astype(np.float32),
                       labels=rng.integers(0, 3, size=N), num_classes=3, splits={"train": np.arange(240)})


async def _wrapped(loader: oa.OutreLoader):  # type: ignore[no-untyped-def]
    async for batch in loader:  # the user's own async generator around the loader
        yield batch


async def _scenario(ds: oa.Dataset, *, stop_at: int, follow: str, wrap: bool, history: bool, seed: int) -> list:
    errors: list = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    hist = oa.HistoryConfig(staleness=5, dim=4, warmup=0, admission="all") if history else None
    loader = oa.OutreLoader(ds, fanouts=[3, 3], batch_size=20, seed=seed, history=hist,
                            io=oa.IOOptions(backend="memory"), pipeline=oa.PipelineOptions(num_samplers=2, num_extractors=2))
    async with loader:
        loader._res.samplers[:] = [DelayedSampler(s, seed + i) for i, s in enumerate(loader._res.samplers)]
        for i_epoch in range(2):
            source = _wrapped(loader) if wrap else loader
            i = 0
            async for _batch in source:
                if i == stop_at:
                    break
                i += 1
            del source
            if follow == "collect":
                gc.collect()
            if follow == "next epoch" and i_epoch == 0:
                continue  # straight into the next epoch, the first one's close still pending
            if follow == "close":
                break  # straight out of ``async with``: loader.aclose() races the iterator's close
            await asyncio.sleep(0)
    for _ in range(20):  # let the loop run every close it scheduled
        await asyncio.sleep(0.005)
    gc.collect()
    await asyncio.sleep(0.01)
    return errors


@pytest.mark.parametrize("history", [False, True])
@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize("follow", ["close", "next epoch", "collect"])
def test_break_at_any_point_leaves_no_background_error(dataset: oa.Dataset, follow: str, wrap: bool,
                                                        history: bool) -> None:
    for seed, stop_at in enumerate([0, 1, 3, 7, 11]):
        errors = run(_scenario(dataset, stop_at=stop_at, follow=follow, wrap=wrap, history=history, seed=seed),
                     timeout=60)
        assert errors == [], (stop_at, [str(e.get("exception") or e.get("message")) for e in errors])
