"""The loader's foresight (issue 26, ``loader._foresight``): batches beyond the extract queue foreseen in the
buffer while the queue is full, the same batches as without it, nothing left counted after any end, the
knob's rules and its part of the memory plan."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from conftest import labelled_store, run
from fakes import FaultySource

import outre_async as oa
from outre_async.features import _buffer_kernels as K
from outre_async.loader._budget import FORESIGHT_REACH, Sizes, foresight_bytes, plan_memory, plan_memory_floor
from outre_async.store import RowFormat
from outre_async.loader._options import group_knobs
from outre_async.loader import LoaderConfig

# buffers smaller than a batch on purpose (streaming in pieces): their SmallBufferWarning is expected
pytestmark = pytest.mark.filterwarnings("ignore::outre_async.SmallBufferWarning")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("sight") / "ds")


def _nothing_counted(loader: oa.OutreLoader) -> None:
    buffer = loader._res.buffer
    assert buffer.foreseen_rows() == 0 and buffer.pinned_rows() == 0
    assert (buffer._nodes[:, K.WANTED] == 0).all()  # pins and foresight, both parts of the packed counts


async def _epoch(loader: oa.OutreLoader, pause: float) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    got = {}
    async for batch in loader:
        got[batch.seq] = (batch.n_id.numpy().copy(), batch.x.numpy().copy())
        await asyncio.sleep(pause)  # a slow step: the extract queue fills and the samplers foresee
    return got


def test_foresight_foresees_batches_past_a_full_queue_and_changes_no_batch(dataset: oa.Dataset) -> None:
    async def body() -> None:
        opts = dict(fanouts=[4, 3], batch_size=16, seed=7, buffer_rows=40, extract_queue=3, num_samplers=2,
                    num_extractors=2)
        runs = {}
        for sight in (0, 12):
            loader = oa.OutreLoader(dataset, **group_knobs(dict(foresight=sight, source=FaultySource(dataset, seed=1), **opts)))
            assert loader.config.foresight == sight
            async with loader:
                runs[sight] = await _epoch(loader, 0.004)
                stats = loader.stats()["foresight"]
                _nothing_counted(loader)
            if sight:
                assert stats["depth"] == 12 and stats["batches"] > 0 and stats["used"] > 0
                assert 0 < stats["most_rows_held"] <= stats["rows"]
            else:
                assert stats["batches"] == 0
        assert runs[0].keys() == runs[12].keys()
        for seq, (n_id, x) in runs[0].items():
            np.testing.assert_array_equal(runs[12][seq][0], n_id)
            np.testing.assert_array_equal(runs[12][seq][1], x)
            np.testing.assert_array_equal(x, dataset.features[n_id])

    run(body(), timeout=120)


@pytest.mark.parametrize("how", ["break", "cancel", "error"])
def test_no_foresight_is_left_counted_after_an_early_end(dataset: oa.Dataset, how: str) -> None:
    async def body() -> None:
        fail = {int(dataset.split("train")[200])} if how == "error" else set()
        source = FaultySource(dataset, seed=3, fail_on=fail)
        loader = oa.OutreLoader(dataset, fanouts=[4, 3], batch_size=16, seed=7, 
                                cache=oa.CacheOptions(buffer_rows=30, foresight=10), pipeline=oa.PipelineOptions(extract_queue=2), io=oa.IOOptions(source=source))
        async with loader:

            async def consume() -> None:
                async for batch in loader:
                    await asyncio.sleep(0.005)
                    if how == "break" and batch.seq >= 4:
                        break

            if how == "cancel":
                task = asyncio.create_task(consume())
                await asyncio.sleep(0.05)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await loader.aclose()
            elif how == "error":
                with pytest.raises(oa.errors.ExtractorError):
                    await consume()
            else:
                await consume()
                await loader.aclose()
            await loader.open()
            _nothing_counted(loader)
            source.fail_on = set()
            await _epoch(loader, 0.0)  # the next epoch runs as usual
            _nothing_counted(loader)

    run(body(), timeout=120)


def test_the_foresight_knob_is_checked_and_refused_where_it_cannot_work() -> None:
    base = dict(fanouts=(4, 3), batch_size=16)
    for bad in (-1, 1.5, True, K.MAX_FORESIGHT + 1):
        with pytest.raises(oa.ConfigError, match="foresight"):
            LoaderConfig(foresight=bad, **base)  # type: ignore[arg-type]
    with pytest.raises(oa.ConfigError, match="history off"):
        LoaderConfig(foresight=4, history=oa.HistoryConfig(staleness=2, dim=8), **base)  # type: ignore[arg-type]
    with pytest.raises(oa.ConfigError, match="lru-lookahead"):
        LoaderConfig(foresight=4, buffer_policy="next-use", **base)  # type: ignore[arg-type]
    assert LoaderConfig(foresight=0, buffer_policy="next-use", **base).foresight == 0  # type: ignore[arg-type]
    history = LoaderConfig(history=oa.HistoryConfig(staleness=2, dim=8), memory_budget="1GiB", **base)  # type: ignore[arg-type]
    assert not history.foresight_allowed


SIZES = Sizes(num_nodes=8_000_000, format=RowFormat.float32(128), stride=512, max_rows=120_000, max_edges=330_000,
              batch_rows=31_000)


def _cfg(**kw: object) -> LoaderConfig:
    return LoaderConfig(fanouts=(10, 10), batch_size=1024, **kw)  # type: ignore[arg-type]


def test_the_plan_sizes_foresight_by_the_buffer_s_rows_and_counts_its_part() -> None:
    plan = plan_memory(_cfg(memory_budget="1GiB"), SIZES, source="disk")
    assert plan.foresight > 0 and plan.total <= 1 << 30
    in_sight = (plan.foresight + plan.extract_queue) * SIZES.expected_rows
    assert abs(in_sight / plan.buffer_rows - FORESIGHT_REACH) < 0.3  # the rule, on the buffer it leaves
    assert plan.parts["foresight"] == foresight_bytes(_cfg(memory_budget="1GiB"), SIZES, plan.foresight)
    assert plan.parts["foresight"] == 4 * (plan.foresight * 31_000 + 120_000) + 2 * (8 * 120_000 + 24 * 330_000)
    off = plan_memory(_cfg(memory_budget="1GiB", foresight=0), SIZES, source="disk")
    assert off.foresight == 0 and "foresight" not in off.parts and off.buffer_rows > plan.buffer_rows
    asked = plan_memory(_cfg(memory_budget="1GiB", foresight=5), SIZES, source="disk")
    assert asked.foresight == 5 and asked.parts["foresight"] < plan.parts["foresight"]
    for no in (_cfg(memory_budget="1GiB", buffer_policy="next-use"),
               _cfg(memory_budget="1GiB", history=oa.HistoryConfig(staleness=2, dim=8))):
        assert plan_memory(no, SIZES, source="disk").foresight == 0


def test_a_default_foresight_that_does_not_fit_is_left_off_and_an_asked_one_is_an_error() -> None:
    floor = plan_memory_floor(_cfg(memory_budget="1GiB", foresight=0), SIZES, source="disk")
    small = plan_memory(_cfg(memory_budget=floor + 4096), SIZES, source="disk")
    assert small.foresight == 0 and small.total <= floor + 4096
    with pytest.raises(oa.ConfigError, match="memory_budget"):
        plan_memory(_cfg(memory_budget=floor + 4096, foresight=200), SIZES, source="disk")


def test_partition_batches_are_foreseen_without_macro_blocks_and_are_the_same(tmp_path) -> None:
    from conftest import generated
    from outre_async.partition import partition

    ds = generated(tmp_path / "g", "tiny", seed=6, feature_dim=8)
    partition(ds, 16, name="p16", passes=2)

    async def body() -> None:
        runs, lists = {}, {}
        for sight in (0, 8):
            loader = oa.OutreLoader(ds, partitions=oa.PartitionOptions(name="p16", parts_per_batch=2), fanouts=[4, 3], batch_size=32, seed=3,
                                    cache=oa.CacheOptions(buffer_rows=60, foresight=sight), pipeline=oa.PipelineOptions(extract_queue=2), io=oa.IOOptions(backend="memory"))
            async with loader:
                runs[sight] = await _epoch(loader, 0.004)
                _nothing_counted(loader)
            lists[sight] = loader.stats()["neighbor_lists"]  # after close too: the closed opening's counters
        assert lists[0]["foresight_lists_from_global_cache"] + lists[0]["foresight_lists_from_disk"] == 0
        assert lists[8]["foresight_lists_from_global_cache"] + lists[8]["foresight_lists_from_disk"] > 0
        assert lists[8]["macro_loads"] == lists[0]["macro_loads"]  # foresight loads no block
        assert runs[0].keys() == runs[8].keys()
        for seq, (n_id, x) in runs[0].items():
            np.testing.assert_array_equal(runs[8][seq][0], n_id)
            np.testing.assert_array_equal(runs[8][seq][1], x)

    run(body(), timeout=120)
