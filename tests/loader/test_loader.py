"""OutreLoader end to end: delivery guarantees, ordering, shutdown paths, buffer accounting, errors."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import labelled_store, run
from fakes import DelayedSampler, FaultySource

import outre_async as oa
from outre_async.loader import LoaderConfig
from outre_async.sampling._plan import plan_epoch
from outre_async.loader._options import group_knobs

N, DIM = 600, 20


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("loader") / "ds", val=True)


def _loader(ds: oa.Dataset, **kw) -> oa.OutreLoader:
    opts = {"fanouts": [4, 3], "batch_size": 32, "seed": 7, **({} if "source" in kw else {"backend": "memory"}), **kw}
    return oa.OutreLoader(ds, **group_knobs(opts))


def _check_batch(ds: oa.Dataset, batch) -> None:
    n_id = batch.n_id.numpy()
    np.testing.assert_array_equal(batch.x.numpy(), ds.features[n_id])
    np.testing.assert_array_equal(batch.y.numpy(), ds.labels[n_id])
    assert batch.edge_index.max() < len(n_id)
    assert sum(batch.num_sampled_nodes) == len(n_id)


def _chaos(loader: oa.OutreLoader, seed: int) -> None:
    """Seeded delays in the samplers (the loader must be made with ``source=FaultySource(...)``)."""
    res = loader._res
    res.samplers[:] = [DelayedSampler(s, seed + i) for i, s in enumerate(res.samplers)]


@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_batch_once_under_random_delays(dataset: oa.Dataset, ordered: bool, seed: int) -> None:
    async def body() -> list[int]:
        loader = _loader(dataset, ordered=ordered, num_samplers=2, num_extractors=3, ready_queue=1,
                         source=FaultySource(dataset, seed=seed))
        async with loader:
            _chaos(loader, seed)
            seqs, seeds = [], []
            async for batch in loader:
                _check_batch(dataset, batch)
                seqs.append(batch.seq)
                seeds.append(batch.n_id[: batch.batch_size].numpy())
            assert loader.stats()["buffer"]["free_slots"] == loader.buffer_rows
        assert sorted(seqs) == list(range(len(loader)))
        plan = plan_epoch(dataset.split("train"), 32, shuffle=True, seed=7, epoch=0)
        by_seq = dict(zip(seqs, seeds, strict=True))
        for seq, expected in enumerate(plan):
            np.testing.assert_array_equal(by_seq[seq], expected)
        return seqs

    seqs = run(body())
    if ordered:
        assert seqs == sorted(seqs)


def test_second_iteration_is_the_next_epoch(dataset: oa.Dataset) -> None:
    async def body() -> None:
        async with _loader(dataset, ordered=True) as loader:
            first = [b.n_id[: b.batch_size].numpy() for b in [b async for b in loader]]
            second = [b.n_id[: b.batch_size].numpy() for b in [b async for b in loader]]
        assert len(first) == len(second) == len(loader) == 16
        assert not np.array_equal(np.concatenate(first), np.concatenate(second))
        assert sorted(np.concatenate(second).tolist()) == list(range(500))

    run(body())


def test_set_epoch_replays_that_epoch(dataset: oa.Dataset) -> None:
    """A resumed run: ``set_epoch(1)`` on a fresh loader gives the batches an uninterrupted run's
    second epoch had (seeds and sampled edges); a bad epoch is a named error."""
    def epoch_batches(loader: oa.OutreLoader) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(b.n_id[: b.batch_size].numpy(), b.n_id[b.edge_index].numpy()) for b in loader]

    with _loader(dataset, ordered=True) as straight:
        epoch_batches(straight)
        second = epoch_batches(straight)
    with _loader(dataset, ordered=True) as resumed:
        assert resumed.epoch == 0
        resumed.set_epoch(1)
        again = epoch_batches(resumed)
        assert resumed.epoch == 2
        for bad in (-1, 1.5, True):
            with pytest.raises(oa.ConfigError, match="set_epoch"):
                resumed.set_epoch(bad)  # type: ignore[arg-type]
    assert len(second) == len(again)
    for (s1, e1), (s2, e2) in zip(second, again, strict=True):
        np.testing.assert_array_equal(s1, s2)
        np.testing.assert_array_equal(e1, e2)


@pytest.mark.filterwarnings("ignore::outre_async.SmallBufferWarning")  # a buffer below a batch on purpose
@pytest.mark.parametrize("policy", ["next-use", "lru-lookahead"])
@pytest.mark.parametrize("seed", [1, 2])
def test_each_eviction_policy_serves_every_batch_from_a_small_buffer_under_delays(dataset: oa.Dataset, policy: str,
                                                                                   seed: int) -> None:
    """Both buffer policies, a buffer of 48 rows (pieces, evictions of pinned rows, read-ahead) and a
    deep queue: every batch's rows are the dataset's, nothing stays held or pinned."""

    async def body() -> None:
        loader = _loader(dataset, num_samplers=2, num_extractors=2, buffer_rows=48, extract_queue=12,
                         buffer_policy=policy, source=FaultySource(dataset, seed=seed))
        async with loader:
            _chaos(loader, seed)
            seqs = []
            async for batch in loader:
                _check_batch(dataset, batch)
                seqs.append(batch.seq)
            stats = loader.stats()
            assert stats["buffer_policy"] == policy
            assert stats["buffer"]["free_slots"] == 48 and stats["buffer"]["pinned_rows"] == 0
        assert sorted(seqs) == list(range(len(loader)))

    run(body())


def test_async_matches_the_sync_baseline_batch_for_batch(dataset: oa.Dataset) -> None:
    sync = oa.SyncLoader(dataset, split="train", fanouts=[4, 3], batch_size=32, seed=7)
    expected = list(sync)

    async def body() -> list:
        async with _loader(dataset, ordered=True) as loader:
            return [b async for b in loader]

    got = run(body())
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a.n_id, b.n_id)
        torch.testing.assert_close(a.edge_index, b.edge_index)
        torch.testing.assert_close(a.x, b.x)


def test_a_budget_below_the_floor_is_an_error_at_construction(dataset: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match=r"memory_budget=8192 \(8.0 KiB\) is below the \d+ bytes"):
        _loader(dataset, memory_budget="8KiB")


@pytest.mark.parametrize("bad", [{"fanouts": []}, {"fanouts": [0]}, {"batch_size": 0}, {"num_extractors": 0},
                                 {"backend": "nvme"}, {"ready_queue": -1}])
def test_bad_config_is_named(dataset: oa.Dataset, bad: dict) -> None:
    with pytest.raises(oa.ConfigError):
        _loader(dataset, **bad)


def test_read_error_reaches_the_consumer_without_a_hang(dataset: oa.Dataset) -> None:
    async def body() -> None:
        source = FaultySource(dataset, fail_on={int(dataset.split("train")[-1])})
        async with _loader(dataset, num_extractors=2, source=source) as loader:
            with pytest.raises(oa.errors.ExtractorError, match="injected EIO"):
                async for _ in loader:
                    pass
            assert loader.stats()["buffer"]["free_slots"] == loader.buffer_rows
            source.fail_on.clear()
            assert len([b async for b in loader]) == len(loader)  # usable afterwards
        assert loader.stats()["backend"] == "faulty-memory"
        assert not source.closed  # the caller's source: the loader reads through it, never closes it
        await source.aclose()

    run(body())


def test_truncated_feature_file_is_a_named_error(dataset: oa.Dataset, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "ds"
    shutil.copytree(dataset.path, copy)
    ds = oa.open_dataset(copy)

    async def body() -> None:
        async with oa.OutreLoader(ds, fanouts=[4, 3], batch_size=32, io=oa.IOOptions(backend="pread")) as loader:
            os.truncate(ds.features_path, ds.row_layout.stride * 10)  # under the open loader
            with pytest.raises(oa.errors.DatasetChangedError, match="size went from"):  # seen before a read fails
                async for _ in loader:
                    pass
        with pytest.raises(oa.errors.DatasetCorruptError, match="re-create"):  # and at the next open
            async with oa.OutreLoader(ds, fanouts=[4, 3], batch_size=32, io=oa.IOOptions(backend="pread")) as loader:
                pass

    run(body())


def _threads_and_fds() -> tuple[int, int]:
    gc.collect()
    return threading.active_count(), len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("backend", ["memory", "pread", "io_uring"])
def test_sync_loop_break_exception_and_gc_leave_nothing_behind(dataset: oa.Dataset, backend: str) -> None:
    with _loader(dataset, backend=backend) as warm:  # one-time process state (uvloop's wake-up pipe)
        assert len(list(warm)) == len(warm)
    before = _threads_and_fds()
    loader = _loader(dataset, backend=backend)
    assert len(list(loader)) == len(loader)
    for i, batch in enumerate(loader):
        _check_batch(dataset, batch)
        if i == 2:
            break
    with pytest.raises(RuntimeError, match="in the loop body"):
        for _ in loader:
            raise RuntimeError("in the loop body")
    loader.close()
    assert _threads_and_fds() == before
    loader = _loader(dataset, backend=backend)
    next(iter(loader))
    del loader
    assert _threads_and_fds() == before


def test_cancelling_the_consumer_drains_everything(dataset: oa.Dataset) -> None:
    async def body() -> None:
        loader = _loader(dataset, source=FaultySource(dataset, seed=5))
        async with loader:
            _chaos(loader, 5)

            async def consume() -> None:
                async for _ in loader:
                    await asyncio.sleep(0.01)

            task = asyncio.create_task(consume())
            await asyncio.sleep(0.03)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            buffer = loader._res.buffer
        # leaving `async with` closes the epoch the cancelled consumer abandoned mid-body; the event
        # loop's own task closing that epoch's generator (it waited for the same shutdown) ends next
        assert buffer.free_slots() == loader.buffer_rows
        await asyncio.sleep(0)

        def ours(task: asyncio.Task) -> bool:  # a task of the package's, or one closing an async generator
            code = getattr(task.get_coro(), "cr_code", None)
            return code is None or "outre_async" in code.co_filename

        assert [t for t in asyncio.all_tasks() if ours(t)] == []

    run(body())


def test_stats_report_stages_and_backend(dataset: oa.Dataset) -> None:
    loader = _loader(dataset, backend="auto")
    batches = list(loader)
    stats = loader.stats()
    loader.close()
    assert stats["delivered_batches"] == len(batches) == stats["sampled_batches"] == stats["extracted_batches"]
    assert stats["epochs_started"] == 1
    assert {"sample_seconds", "extract_seconds", "stall_seconds", "buffer_rows"} <= stats.keys()


def test_stats_report_cpu_seconds_per_stage(dataset: oa.Dataset) -> None:
    """Thread CPU per stage: sampling threads, the extract workers' own steps, the source's
    completion handling; all of it within the process's CPU time over the epoch."""
    import resource

    loader = _loader(dataset, backend="auto")
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    rows = sum(len(b.n_id) for b in loader)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    stats = loader.stats()
    loader.close()
    process = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    sample, extract, io = stats["sample_cpu_seconds"], stats["extract_cpu_seconds"], stats["io"]["io_cpu_seconds"]
    assert sample > 0 and extract > 0 and io >= 0
    assert sample + extract + io <= process + 0.05  # thread CPU can't exceed the process's
    assert stats["extract_rows"] == rows  # one gather copy per batch row
    assert stats["io"]["rows_per_read"] > 0 and stats["io"]["bytes_per_read"] > 0


@pytest.mark.parametrize(("opts", "depth"), [({}, 32), ({"max_in_flight": 7}, 7)])
def test_max_in_flight_reaches_the_source(dataset: oa.Dataset, opts: dict, depth: int) -> None:
    async def body() -> int:
        async with _loader(dataset, backend="pread", **opts) as loader:
            return loader.stats()["io"]["max_in_flight"]

    assert run(body()) == depth
    with pytest.raises(oa.ConfigError, match="max_in_flight"):
        _loader(dataset, max_in_flight=0)


def test_fanouts_and_batch_size_are_required_and_sizes_parse_once(dataset: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match="needs fanouts"):
        oa.OutreLoader(dataset, batch_size=16)
    sized = LoaderConfig(fanouts=[4], batch_size=8, memory_budget="2MiB", neighbor_cache="1KiB")
    assert (sized.memory_budget, sized.neighbor_cache) == (2 << 20, 1 << 10)  # parsed once, in the config


@pytest.mark.parametrize("name", ["extract_queue", "ready_queue", "buffer_rows", "memory_budget"])
def test_zero_is_not_a_default(dataset: oa.Dataset, name: str) -> None:
    with pytest.raises(oa.ConfigError, match=f"{name}=0 must be an int >= 1 \\(or None for the default\\)"):
        _loader(dataset, **{name: 0})


def test_explicit_seed_ids_are_checked_like_the_sync_loader(dataset: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match="more than once"):
        _loader(dataset, split=np.array([1, 2, 2]))
    with pytest.raises(oa.ConfigError, match="out of range"):
        _loader(dataset, split=np.array([N]))


def test_stats_queues_are_the_channels_statistics(dataset: oa.Dataset) -> None:
    with _loader(dataset, ready_queue=1, extract_queue=3) as loader:
        before = loader.stats()["queues"]
        batches = len(list(loader))
        queues = loader.stats()["queues"]
    assert before["extract"]["capacity"] == 3 and before["extract"]["sent"] == 0
    for name, capacity in (("extract", 3), ("ready", 1)):
        q = queues[name]
        assert q["capacity"] == capacity and q["queued"] == 0 and q["closed"]
        assert 1 <= q["max_queued"] <= capacity
        assert q["sent"] == q["received"] == batches


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_stats_keep_the_backend_after_close(dataset: oa.Dataset, mode: str) -> None:
    loader = _loader(dataset)
    assert "backend" not in loader.stats()  # nothing opened yet
    if mode == "sync":
        n = len(list(loader))
        loader.close()
    else:
        async def body() -> int:
            async with loader:
                return len([b async for b in loader])

        n = run(body())
    stats = loader.stats()
    assert loader._res is None
    assert stats["backend"] == "memory" and stats["io"]["rows"] > 0
    assert stats["buffer"]["free_slots"] == loader.buffer_rows and stats["delivered_batches"] == n


def test_injected_source_must_fit_and_excludes_backend_knobs(dataset: oa.Dataset, tmp_path: Path) -> None:
    other = oa.open_dataset(oa.generate(tmp_path / "other", "tiny"))
    with pytest.raises(oa.ConfigError, match="pass a source over this dataset"):
        _loader(dataset, source=FaultySource(other))
    with pytest.raises(oa.ConfigError, match="backend"):
        _loader(dataset, source=FaultySource(dataset), backend="pread")
