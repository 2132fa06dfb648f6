"""The loader's GPU tier (``gpu_cache_budget=``): on ``device="cpu"`` (the same code as on CUDA) the
batches are those of a loader without it, bit for bit; its rows fit its budget; the host tiers read only
its misses; a budget below one row is a named error; with ``profile=`` it takes the profile's hottest
rows and the static tier drops them.  CUDA-only tests check the device placement."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from conftest import generated, labelled_store

import outre_async as oa
from outre_async.loader._tiers import RANK_BATCHES, plan_row_counts
from outre_async.plan import MissCosts
from outre_async.loader._options import group_knobs

pytestmark = pytest.mark.timeout(300)

N, DIM = 600, 20
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("gpu_tier") / "ds")


def _epoch(ds: oa.Dataset, **kw: Any) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    opts = {"fanouts": [4, 3], "batch_size": 32, "seed": 7, "backend": "memory", "ordered": True, **kw}
    with oa.OutreLoader(ds, **group_knobs(opts)) as loader:
        out = [(b.n_id.cpu().numpy(), b.x.cpu().numpy()) for b in loader]
        return out, loader.stats()


@pytest.mark.parametrize("budget", [4 * DIM, 100 * 4 * DIM, 10**9])
def test_batches_equal_those_without_the_tier(dataset: oa.Dataset, budget: int) -> None:
    plain, plain_stats = _epoch(dataset)
    tiered, stats = _epoch(dataset, gpu_cache_budget=budget)
    assert len(plain) == len(tiered)
    for (n_a, x_a), (n_b, x_b) in zip(plain, tiered, strict=True):
        np.testing.assert_array_equal(n_a, n_b)
        np.testing.assert_array_equal(x_a, x_b)
    gpu = stats["tiers"]["gpu"]
    assert list(stats["tiers"]) == ["gpu", "buffer", "source"]
    assert gpu["rows_held"] <= min(budget // (4 * DIM), N)  # at most the budget (only rows met are held)
    assert gpu["bytes_held"] == gpu["rows_held"] * 4 * DIM <= budget  # the budget holds
    assert gpu["hits"] > 0 and gpu["pcie_bytes_saved"] == gpu["hits"] * 4 * DIM
    rows = stats["sampled_nodes"]
    assert gpu["hits"] + gpu["misses"] == rows
    # only the misses reach the host: the host tiers are asked for exactly those rows
    buffer = stats["tiers"]["buffer"]
    assert buffer["hits"] + buffer["misses"] == gpu["misses"] == stats["extract_rows"]
    assert plain_stats["extract_rows"] == rows and "gpu" not in plain_stats["tiers"]
    assert stats["memory"]["gpu tier index"] == 4 * N  # host memory: the node -> slot table


def test_without_a_profile_the_first_planned_batches_rank_the_rows(dataset: oa.Dataset) -> None:
    rows = 50
    with oa.OutreLoader(dataset, fanouts=[4, 3], batch_size=32, seed=7, 
                        io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(gpu_cache_budget=rows * 4 * DIM)) as loader:
        held = loader._gpu.nodes
        counts = plan_row_counts(dataset, [4, 3], loader._setup.plan(0), seed=7)
        assert len(held) == rows
        # every held row is met at least as often as every row left out
        assert counts[held].min() >= np.delete(counts, held).max()
        assert RANK_BATCHES >= 1


def test_a_budget_below_one_row_is_a_named_error(dataset: oa.Dataset) -> None:
    with pytest.raises(oa.ConfigError, match="holds no feature row"):
        oa.OutreLoader(dataset, fanouts=[4], batch_size=32, io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(gpu_cache_budget=4 * DIM - 1))
    with pytest.raises(oa.ConfigError, match="byte count"):
        oa.OutreLoader(dataset, fanouts=[4], batch_size=32, io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(gpu_cache_budget=-5))
    for off in (0, None):  # off
        with oa.OutreLoader(dataset, fanouts=[4], batch_size=32, io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(gpu_cache_budget=off)) as loader:
            assert loader._gpu is None and "gpu tier index" not in loader.memory.parts


def test_disk_backend_and_sync_epochs_twice(dataset: oa.Dataset) -> None:
    feats = np.asarray(dataset.features[:])
    with oa.OutreLoader(dataset, fanouts=[4, 3], batch_size=64, io=oa.IOOptions(backend="pread"), cache=oa.CacheOptions(gpu_cache_budget="8KiB")) as loader:
        for _ in range(2):  # the rows are loaded once; a second epoch reuses them
            for batch in loader:
                np.testing.assert_array_equal(batch.x.numpy(), feats[batch.n_id.numpy()])
        assert loader.stats()["tiers"]["gpu"]["hits"] > 0


@pytest.fixture(scope="module")
def prof_ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("gpu_prof") / "ds", "tiny")


def test_with_a_profile_the_knapsack_buys_rows_other_than_the_tier_s(prof_ds: oa.Dataset) -> None:
    opts = {"fanouts": [5, 5], "batch_size": 64, "memory_budget": "6MiB", "backend": "memory", "seed": 7}
    costs = MissCosts(row_us=20.0, list_us=2.0, recompute_us=1.0, backend="fixed")
    rows = 40
    budget = rows * 4 * prof_ds.feature_dim
    meta = oa.profile(prof_ds, name="gpu-tier", costs=costs, **group_knobs(dict(gpu_cache_budget=budget, **opts)))
    plain = oa.profile(prof_ds, name="no-gpu-tier", costs=costs, **group_knobs(opts))
    folder = prof_ds.path / "profile" / "gpu-tier"
    row_hot = np.fromfile(folder / "row_hot.bin", np.float64)
    static_rows = np.fromfile(folder / "static_rows.bin", np.int64)
    assert meta["gpu_tier"]["rows"] == rows and plain["gpu_tier"] is None
    feats = np.asarray(prof_ds.features[:])
    with oa.OutreLoader(prof_ds, **group_knobs(dict(profile="gpu-tier", gpu_cache_budget=budget, **opts))) as loader:
        held = loader._gpu.nodes
        assert len(held) == rows
        counts = plan_row_counts(prof_ds, [5, 5], loader._setup.plan(0), seed=7)
        assert counts[held].min() >= np.delete(counts, held).max()  # the rows met most often, as without a profile
        assert not np.isin(static_rows, held).any()  # the knapsack bought other rows for the host
        np.testing.assert_array_equal(loader._static.nodes, static_rows)
        assert meta["gpu_tier"]["row_reads_spared"] == pytest.approx(row_hot[held].sum())
        assert loader.memory.total <= 6 << 20 and loader.memory.parts["gpu tier index"] == 4 * prof_ds.num_nodes
        for batch in loader:
            np.testing.assert_array_equal(batch.x.numpy(), feats[batch.n_id.numpy()])
        tiers = loader.stats()["tiers"]
        assert list(tiers) == ["gpu", "static", "buffer", "source"]
        assert tiers["gpu"]["hits"] > 0 and tiers["static"]["hits"] > 0
        assert tiers["static"]["hits"] + tiers["static"]["misses"] == tiers["gpu"]["misses"]
    with pytest.raises(oa.errors.ProfileMismatchError, match="gpu_cache_budget"):  # made for a loader without the tier
        oa.OutreLoader(prof_ds, **group_knobs(dict(profile="no-gpu-tier", gpu_cache_budget=budget, **opts)))


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_cuda_batches_are_assembled_on_the_device(dataset: oa.Dataset) -> None:
    plain, _ = _epoch(dataset)
    opts = {"fanouts": [4, 3], "batch_size": 32, "seed": 7, "backend": "memory", "ordered": True}
    with oa.OutreLoader(dataset, **group_knobs(dict(device="cuda", gpu_cache_budget=200 * 4 * DIM, **opts))) as loader:
        assert loader._gpu.rows.numel() == 0  # loaded on open
        got = []
        for batch in loader:
            assert batch.x.is_cuda
            got.append((batch.n_id.cpu().numpy(), batch.x.cpu().numpy()))
        assert loader._gpu.rows.is_cuda
        assert loader.stats()["tiers"]["gpu"]["device"].startswith("cuda")
    for (n_a, x_a), (n_b, x_b) in zip(plain, got, strict=True):
        np.testing.assert_array_equal(n_a, n_b)
        np.testing.assert_array_equal(x_a, x_b)


def test_the_buffer_policy_is_chosen_by_name(dataset: oa.Dataset) -> None:
    with oa.OutreLoader(dataset, fanouts=[4], batch_size=32, io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(buffer_policy="lru-lookahead")) as loader:
        list(loader)
        assert loader.stats()["tiers"]["buffer"]["policy"] == "lru-lookahead"
    with oa.OutreLoader(dataset, fanouts=[4], batch_size=32, io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(buffer_policy="next-use")) as loader:
        list(loader)
        assert loader.stats()["tiers"]["buffer"]["policy"] == "next-use"
    with pytest.raises(oa.ConfigError, match="must be one of"):
        oa.OutreLoader(dataset, fanouts=[4], batch_size=32, io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(buffer_policy="lfu"))


def test_history_and_partition_mode_read_the_same_rows_with_the_tier(prof_ds: oa.Dataset) -> None:
    from outre_async.partition import partition

    if not (prof_ds.path / "partitions" / "p8").is_dir():
        partition(prof_ds, 8, name="p8")
    feats = np.asarray(prof_ds.features[:])
    hid = 16
    model = oa.GraphSAGE(prof_ds.feature_dim, hid, 2, prof_ds.num_classes)
    with oa.OutreLoader(prof_ds, fanouts=[5, 5], batch_size=64, partitions=oa.PartitionOptions(name="p8", parts_per_batch=2), 
                        history=oa.HistoryConfig(staleness=20, dim=hid),
                        io=oa.IOOptions(backend="memory"), cache=oa.CacheOptions(gpu_cache_budget=100 * 4 * prof_ds.feature_dim)) as loader:
        delivered = 0
        for _ in range(2):
            for batch in loader:
                np.testing.assert_array_equal(batch.x.numpy(), feats[batch.n_id.numpy()])
                model(batch.x, batch.edge_index, history=batch.history)
                delivered += 1
        stats = loader.stats()
        assert stats["tiers"]["gpu"]["hits"] > 0 and stats["history"]["batches"] == delivered


def test_the_buffer_never_holds_a_row_the_gpu_tier_serves(dataset: oa.Dataset) -> None:
    """The sampler pins only what the tiers above the buffer pass down (``FeatureTier.passed_down``), so
    the buffer's read-ahead of queued batches never fetches a row the GPU (or static) tier serves.  When
    the pins held a batch's every id, the read-ahead read those rows too (igb-like's outre-auto read
    2.09 M rows from disk for 1.16 M static-tier misses, issue 26's read-ahead under issue 25's tiers)."""
    budget = 40 * 4 * dataset.feature_dim
    with oa.OutreLoader(dataset, fanouts=[4, 4], batch_size=16, 
                        io=oa.IOOptions(backend="pread"), cache=oa.CacheOptions(gpu_cache_budget=budget), pipeline=oa.PipelineOptions(extract_queue=8, num_samplers=2, num_extractors=1)) as loader:
        for _ in loader:
            pass
        res = loader._res
        assert res is not None and loader._gpu is not None
        held = np.asarray(loader._gpu.nodes, dtype=np.int64)
        buf = res.buffer
        assert buf.counters["read_ahead_rows"] > 0  # the read-ahead ran: the check below could fail
        mapped = buf._nodes[held, 0] >= 0  # column 0: the node's slot (-1: none)
        assert not mapped.any(), f"{int(mapped.sum())} GPU-tier rows went through the buffer"
        ids = np.arange(dataset.num_nodes, dtype=np.int64)
        np.testing.assert_array_equal(res.tiers.passed_down(ids), ids[~np.isin(ids, held)])
