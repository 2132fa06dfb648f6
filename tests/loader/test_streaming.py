"""The loader with a feature buffer smaller than its batches and a budget that follows real batches:
rows equal the source, nothing stays held or pinned after any shutdown path, no deadlock."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from conftest import labelled_store, random_graph, run, write_store
from fakes import DelayedSampler, FaultySource

import outre_async as oa
from outre_async.sampling._plan import max_rows_per_batch

# buffers smaller than a batch on purpose (streaming in pieces): their SmallBufferWarning is expected
pytestmark = pytest.mark.filterwarnings("ignore::outre_async.SmallBufferWarning")

N, DIM = 600, 20


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("stream") / "ds")


def _left_clean(loader: oa.OutreLoader) -> None:
    s = loader.stats()
    assert s["buffer"]["free_slots"] == loader.buffer_rows and s["buffer"]["pinned_rows"] == 0
    assert s["batch_matrices"]["used"] == 0
    assert (loader._box.res is None) or (loader._box.res.buffer._wanted == 0).all()


@pytest.mark.parametrize("rows", [1, 5, 40])
@pytest.mark.parametrize("ordered", [False, True])
def test_a_buffer_smaller_than_the_queued_batches_serves_every_batch(dataset: oa.Dataset, rows: int,
                                                                     ordered: bool) -> None:
    async def body() -> None:
        # 100 seeds, ~120 rows a batch: with 1 slot every row is a piece (a read with a random delay)
        loader = oa.OutreLoader(dataset, split=np.arange(0, 500, 5), fanouts=[3, 2], batch_size=16, seed=7,
                                ordered=ordered, 
                                cache=oa.CacheOptions(buffer_rows=rows), pipeline=oa.PipelineOptions(num_samplers=2, num_extractors=3), io=oa.IOOptions(source=FaultySource(dataset, seed=rows)))
        assert loader.buffer_rows == rows < max_rows_per_batch(16, [3, 2], N)
        async with loader:
            loader._res.samplers[:] = [DelayedSampler(s, rows + i) for i, s in enumerate(loader._res.samplers)]
            seqs = []
            async for batch in loader:
                np.testing.assert_array_equal(batch.x.numpy(), dataset.features[batch.n_id.numpy()])
                seqs.append(batch.seq)
                await asyncio.sleep(0.001 * (batch.seq % 3))
            assert sorted(seqs) == list(range(len(loader)))
            _left_clean(loader)

    run(body(), timeout=60)


def test_batches_waiting_in_the_extract_queue_pin_their_rows(dataset: oa.Dataset) -> None:
    async def body() -> None:
        loader = oa.OutreLoader(dataset, fanouts=[4, 3], batch_size=16, seed=7, io=oa.IOOptions(backend="memory"), pipeline=oa.PipelineOptions(extract_queue=4))
        async with loader:
            async for _batch in loader:  # the consumer holds the first batch: the pipeline fills up behind it
                for _ in range(1000):
                    if loader.stats()["queues"]["extract"]["queued"] == loader.config.extract_capacity:
                        break
                    await asyncio.sleep(0.01)
                queued = loader.stats()["queues"]["extract"]["queued"]
                buffer = loader._res.buffer
                assert queued > 0 and buffer.pinned_rows() == int(buffer._wanted.sum()) > 0
                break
            await loader.aclose()
            _left_clean(loader)

    run(body(), timeout=60)


@pytest.mark.parametrize("how", ["break", "cancel", "error"])
def test_no_slot_pin_or_matrix_is_left_after_an_early_end(dataset: oa.Dataset, how: str) -> None:
    async def body() -> None:
        source = FaultySource(dataset, seed=3, fail_on={int(dataset.split("train")[200])} if how == "error" else set())
        loader = oa.OutreLoader(dataset, fanouts=[4, 3], batch_size=16, seed=7, 
                                cache=oa.CacheOptions(buffer_rows=7), pipeline=oa.PipelineOptions(extract_queue=6), io=oa.IOOptions(source=source))
        async with loader:

            async def consume() -> None:
                async for batch in loader:
                    if how == "break" and batch.seq >= 0:
                        await asyncio.sleep(0.01)  # the queues fill up meanwhile (pins on queued batches)
                        break
                    await asyncio.sleep(0.002)

            task = asyncio.ensure_future(consume())
            if how == "cancel":
                await asyncio.sleep(0.05)
                task.cancel()
            with pytest.raises((asyncio.CancelledError, oa.errors.ExtractorError)) if how != "break" else _nothing():
                await task
            await loader.aclose()
            _left_clean(loader)

    run(body(), timeout=60)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def test_the_refused_facebook_like_case_now_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """18 KiB rows (Facebook Page-Page's 4,714 dims), batch 64, fanouts [10, 10], memory_budget 128 MiB:
    the worst case is R = 7,104 rows = 128 MiB a batch, which the worst-case plan refused; real batches
    need the probe's rows, stream through a buffer of a few hundred rows and fit two at a time."""
    rng = np.random.default_rng(1)
    n, dim = 3000, 4714
    indptr, indices = random_graph(rng, n, 30)  # mean in-degree ~15, like Facebook Page-Page
    features = rng.standard_normal((n, dim)).astype(np.float32)
    ds = write_store(tmp_path / "fb", indptr, indices, features=features, labels=rng.integers(0, 4, size=n),
                     num_classes=4, splits={"train": np.arange(0, n, 5)})
    loader = oa.OutreLoader(ds, fanouts=[10, 10], batch_size=64, memory_budget="128MiB", io=oa.IOOptions(backend="pread"))
    s = loader.stats()
    assert s["expected_rows_per_batch"] < s["max_rows_per_batch"] and s["memory"]["planned"] <= 128 << 20
    try:
        count = 0
        for batch in loader:
            np.testing.assert_array_equal(batch.x.numpy(), features[batch.n_id.numpy()])
            count += 1
        assert count == len(loader)
        used = loader.stats()["batch_matrices"]
        assert used["peak"] <= s["memory"]["batches"]
    finally:
        loader.close()
