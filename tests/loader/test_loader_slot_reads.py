"""The loader over rows of whole sectors, where io_uring reads straight into the feature buffer's
slots: batches equal the stored rows, and cancelling the consumer with reads in flight leaves no
claimed slot, no read in flight, and (once closed) no descriptor or ring."""

from __future__ import annotations

import asyncio
import gc
import os

import numpy as np
import pytest
from conftest import random_graph, run, write_store

import outre_async as oa
from outre_async.features import detect_io_uring

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not detect_io_uring(), reason="io_uring unavailable here")]
N, DIM = 800, 128  # 512-byte rows: read into the slots


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    rng = np.random.default_rng(1)
    indptr, indices = random_graph(rng, N, 12)
    features = rng.standard_normal((N, DIM)).astype(np.float32)
    return write_store(tmp_path_factory.mktemp("slots") / "ds", indptr, indices, features=features,
                       labels=rng.integers(0, 3, size=N), num_classes=3, splits={"train": np.arange(N)})


def _fds() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def test_batches_read_into_slots_equal_the_stored_rows(dataset: oa.Dataset) -> None:
    with oa.OutreLoader(dataset, fanouts=[5, 5], batch_size=64, io=oa.IOOptions(backend="io_uring")) as loader:
        rows = 0
        for batch in loader:
            n_id = batch.n_id.numpy()
            np.testing.assert_array_equal(batch.x.numpy(), dataset.features[n_id])
            rows += len(n_id)
        stats = loader.stats()
    io = stats["io"]
    assert io["rows_into_slots"] == io["unique_rows"] > 0  # every row read went straight to its slot
    assert io["row_copies"] == 0 and stats["extract_rows"] == rows  # one copy: slot -> batch


def test_cancelled_consumer_with_reads_in_flight_leaves_nothing_claimed(dataset: oa.Dataset) -> None:
    async def body() -> None:
        before = _fds()
        loader = oa.OutreLoader(dataset, fanouts=[10, 10], batch_size=32, 
                                io=oa.IOOptions(backend="io_uring", max_in_flight=2, source_options={"max_gap_bytes": 0}))
        async with loader:
            source, buffer = loader._res.source, loader._res.buffer

            async def consume() -> None:
                async for _ in loader:
                    await asyncio.sleep(0.005)

            task = asyncio.create_task(consume())
            while source._flight.now == 0:
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert buffer.free_slots() == loader.buffer_rows  # no slot left claimed
        assert source._flight.now == 0 and not source._jobs
        assert source._ring is None and source._efd == -1
        assert _fds() == before

    run(body())
