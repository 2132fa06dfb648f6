"""The predicted epoch (issue 25 item 7): the three resources combined per device, the step timed on
the pre-sampled batches' own shapes, and the GPU tier's measured costs per hit and per miss priced
into the history's value and the prediction (issue 25 item 2)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from conftest import generated

import outre_async as oa
from outre_async.plan import MissCosts, measure_costs
from outre_async.plan._budget_plan import choose, epoch_seconds, knapsack_input, predict
from outre_async.plan._costs import BatchShape
from outre_async.plan._counts import SHAPES, Counts, presample
from outre_async.plan._knapsack import Choice
from outre_async.sampling import NeighborSampler, SeedItems
from outre_async.store import RowFormat
from outre_async.loader._options import group_knobs

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]
OPTS = {"fanouts": [5, 5], "batch_size": 64, "memory_budget": "6MiB", "backend": "memory", "seed": 7}


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("predict") / "ds", "tiny")


def _counts(n: int = 4, *, accesses: int = 1000) -> Counts:
    e, f = np.empty(0, np.int64), np.empty(0)
    return Counts(row_hot=np.full(n, 100.0), list_hot=np.full(n, 10.0), cand=e, cand_hits=f, cand_fresh=f, cand_rows=f,
                  attr_cand=e, attr_node=e, attr_rows=f, attr_lists=f, batches=10, epoch_batches=20,
                  accesses=accesses, sample_seconds=0.5, row_access=np.full(n, 500.0), attr_access=f)


NONE = Choice(features=np.empty(0, np.int64), history=np.empty(0, np.int64), neighbors=np.empty(0, np.int64),
              bytes={}, saved_us=0.0)


def test_the_loader_s_cpu_adds_to_the_steps_on_a_cpu_device_and_overlaps_on_an_accelerator() -> None:
    assert epoch_seconds(10.0, 4.0, 3.0, True) == 13.0  # the steps and the loader share the cores
    assert epoch_seconds(10.0, 14.0, 3.0, True) == 14.0  # the disk is the bound
    assert epoch_seconds(10.0, 4.0, 3.0, False) == 10.0
    assert epoch_seconds(1.0, 4.0, 6.0, False) == 6.0  # a loader-bound GPU epoch
    costs = MissCosts(row_us=10.0, list_us=1.0, recompute_us=2.0, backend="fixed", row_cpu_us=3.0, copy_us=0.5)
    got = predict(_counts(), costs, NONE, sample_seconds=0.5)
    rows, computed = 400.0, 1000 * 20 / 10
    reads, compute = (rows * 10.0 + 40.0 * 1.0) / 1e6, computed * 2.0 / 1e6
    cpu = 0.5 + (rows * 3.0 + computed * 0.5) / 1e6
    assert got["read_seconds"] == pytest.approx(reads) and got["compute_seconds"] == pytest.approx(compute)
    assert got["loader_cpu_seconds"] == pytest.approx(cpu)
    assert got["epoch_seconds"] == pytest.approx(max(compute + cpu, reads))
    gpu = predict(_counts(), dataclasses.replace(costs, device="cuda:0"), NONE, sample_seconds=0.5)
    assert gpu["epoch_seconds"] == pytest.approx(max(compute, reads, cpu))
    # outre bench --step-ms: a fixed wait per batch, off the cores, whatever the rows
    wait = predict(_counts(), dataclasses.replace(costs, recompute_us=0.0, step_us=8000.0), NONE, sample_seconds=0.5)
    assert wait["compute_seconds"] == pytest.approx(20 * 8000.0 / 1e6)
    assert wait["epoch_seconds"] == pytest.approx(max(20 * 8000.0 / 1e6, reads, cpu))


def test_a_proxy_step_is_a_fixed_wait_per_batch_and_its_rows_spare_nothing(ds: oa.Dataset) -> None:
    costs = MissCosts(row_us=20.0, list_us=2.0, recompute_us=5.0, backend="fixed")
    history = oa.HistoryConfig(staleness=20, dim=16)
    real = oa.profile(ds, name="real-step", costs=costs, history=history, **group_knobs(OPTS))
    wait = oa.profile(ds, name="proxy-step", costs=costs, history=history, step_seconds=0.008, **group_knobs(OPTS))
    assert wait["costs"]["recompute_us"] == 0.0 and wait["costs"]["step_us"] == 8000.0
    assert wait["predicted"]["compute_seconds"] == pytest.approx(wait["counts"]["epoch_batches"] * 0.008)
    assert real["predicted"]["compute_seconds"] > 0 and real["costs"]["step_us"] == 0.0
    with pytest.raises(oa.ConfigError, match="step_seconds"):
        oa.profile(ds, name="bad-step", costs=costs, step_seconds=float("nan"), **group_knobs(OPTS))


def test_the_gpu_tier_s_costs_per_hit_and_miss_go_into_the_prediction() -> None:
    costs = MissCosts(row_us=10.0, list_us=1.0, recompute_us=2.0, backend="fixed", gpu_hit_us=0.25, gpu_miss_us=4.0)
    held = np.array([1, 3])
    plain = predict(_counts(), costs, NONE, sample_seconds=0.0)
    tier = predict(_counts(), costs, NONE, sample_seconds=0.0, gpu_held=held)
    assembly = (2 * 500 * 0.25 + 2 * 500 * 4.0) / 1e6  # two nodes held, two not, 500 accesses each
    assert tier["compute_seconds"] == pytest.approx(plain["compute_seconds"] + assembly)


def test_a_history_slot_spares_the_gpu_tier_s_assembly_of_its_subtree() -> None:
    n = 4
    base = _counts(n)
    counts = dataclasses.replace(
        base, cand=np.array([0]), cand_hits=np.array([10.0]), cand_fresh=np.array([1.0]), cand_rows=np.array([30.0]),
        attr_cand=np.array([0, 0]), attr_node=np.array([2, 3]), attr_rows=np.array([0.0, 0.0]),
        attr_lists=np.array([0.0, 0.0]), attr_access=np.array([10.0, 20.0]))
    costs = MissCosts(row_us=10.0, list_us=1.0, recompute_us=2.0, backend="fixed", gpu_hit_us=0.5, gpu_miss_us=3.0)
    kw = {"num_nodes": n, "row": RowFormat.float32(4), "hist_dim": 4, "num_samplers": 2, "list_bytes": None}
    without = knapsack_input(counts, costs, **kw)
    held = knapsack_input(counts, costs, **kw, gpu_held=np.array([3]))
    assert without.hist_own[0] == pytest.approx(30.0 * 2.0)
    # node 2 missed (10 accesses at 3.0 us), node 3 held (20 at 0.5 us)
    assert held.hist_own[0] == pytest.approx(30.0 * 2.0 + 10 * 3.0 + 20 * 0.5)
    choice, _ = choose(held, 1 << 20, "auto")
    assert choice.compute_saved_us == pytest.approx(held.hist_own[0])


def test_a_pulled_row_costs_its_placement_s_measured_pull_in_the_slot_s_value_and_the_prediction() -> None:
    """Rows on the GPU: a pull is a device gather (``pull_device_us``); on the host, a host gather and
    a copy over (``pull_host_us``).  Each fresh appearance of a slot pays its placement's pull, so the
    saving the knapsack weighs and the prediction's spared compute are net of it."""
    from outre_async.cache._history_config import SlotPrice

    n = 4
    counts = dataclasses.replace(
        _counts(n), cand=np.array([0]), cand_hits=np.array([10.0]), cand_fresh=np.array([0.5]),
        cand_rows=np.array([30.0]), attr_cand=np.array([0]), attr_node=np.array([2]), attr_rows=np.array([0.0]),
        attr_lists=np.array([0.0]), attr_access=np.array([0.0]))
    costs = MissCosts(row_us=10.0, list_us=1.0, recompute_us=0.2, backend="fixed", device="cuda:0",
                      pull_host_us=0.5, pull_device_us=0.02)
    kw = {"num_nodes": n, "row": RowFormat.float32(4), "hist_dim": 4, "num_samplers": 2, "list_bytes": None}
    host = knapsack_input(counts, costs, **kw, price=SlotPrice(placement="host", host_bytes=40, max_slots=None))
    device = knapsack_input(counts, costs, **kw, price=SlotPrice(placement="device", host_bytes=24, max_slots=9))
    assert host.hist_own[0] == pytest.approx(30 * 0.2 - 10 * 0.5) and host.slot_bytes == 40
    assert device.hist_own[0] == pytest.approx(30 * 0.2 - 10 * 0.02) and device.max_slots == 9
    for inp in (host, device):
        choice, _ = choose(inp, 1 << 20, "auto")
        got = predict(counts, costs, choice, sample_seconds=0.0)
        assert choice.compute_saved_us == pytest.approx(0.5 * inp.hist_own[0])  # fresh share x net saving
        assert got["compute_seconds"] == pytest.approx((1000 * 20 / 10 * 0.2 - choice.compute_saved_us) / 1e6)
    # a pull dearer than the rows it spares: the slot is worth nothing, none is bought
    dear = knapsack_input(counts, dataclasses.replace(costs, pull_host_us=1.0), **kw,
                          price=SlotPrice(placement="host", host_bytes=40, max_slots=None))
    assert len(choose(dear, 1 << 20, "auto")[0].history) == 0


@pytest.mark.parametrize("device", DEVICES)
def test_pulls_are_measured_through_the_record_s_transfer_per_placement(ds: oa.Dataset, device: str) -> None:
    costs = measure_costs(ds, backend="memory", batch_rows=128, num_extractors=2, hidden=8, budget_s=0.02,
                          device=device, history_dim=16, pull_placements=["host", "device"])
    assert costs.pull_host_us > 0 and costs.pull_device_us > 0
    assert {"pull_host_us", "pull_device_us"} <= set(costs.runs) and costs.runs["pull_host_us"] == costs.runs["row_us"]
    plain = measure_costs(ds, backend="memory", batch_rows=128, num_extractors=2, hidden=8, budget_s=0.02, device=device)
    assert plain.pull_host_us == plain.pull_device_us == 0.0 and "pull_host_us" not in plain.runs


def test_presample_keeps_the_shapes_of_batches_it_sampled(ds: oa.Dataset) -> None:
    seeds = ds.split("train")
    plan = SeedItems(seeds=seeds, batch_size=64, shuffle=True, seed=7).plan(0)
    counts = presample(ds, plan, fanouts=[5, 5], seed=7, stream_base=0, max_batches=8, buffer_rows=256, horizon=-1,
                       max_candidates=0)
    assert len(counts.shapes) == SHAPES
    sampler = NeighborSampler(ds, [5, 5], seed=7)
    steps = [8 * (i + 1) // (SHAPES + 1) for i in range(SHAPES)]
    for step, shape in zip(steps, counts.shapes, strict=True):
        sub = sampler.sample(plan[step].seeds, step)
        assert (shape.num_nodes, shape.batch_size) == (len(sub.n_id), sub.batch_size)
        np.testing.assert_array_equal(shape.edge_index, sub.edge_index)
    assert counts.row_access is not None and counts.row_access.sum() == pytest.approx(counts.accesses * len(plan) / 8)


@pytest.mark.parametrize("device", DEVICES)
def test_the_gpu_tier_s_costs_are_measured_through_its_assembly_on_the_device(ds: oa.Dataset, device: str) -> None:
    shape = BatchShape(edge_index=np.array([[1, 2, 3], [0, 0, 1]]), num_nodes=4, batch_size=1)
    costs = measure_costs(ds, backend="memory", batch_rows=128, num_extractors=2, hidden=8, budget_s=0.02,
                          shapes=[shape], gpu_rows=64, device=device)
    assert costs.device == device
    assert costs.gpu_hit_us > 0 and costs.gpu_miss_us > 0
    assert {"gpu_hit_us", "gpu_miss_us"} <= set(costs.runs) and costs.runs["gpu_hit_us"] == costs.runs["row_us"]


def test_a_profile_with_a_gpu_tier_records_its_costs_and_spares_no_host_read_of_its_rows(ds: oa.Dataset) -> None:
    budget = 40 * 4 * ds.feature_dim
    costs = MissCosts(row_us=20.0, list_us=2.0, recompute_us=1.0, backend="fixed", gpu_hit_us=0.5, gpu_miss_us=2.0)
    meta = oa.profile(ds, name="gpu-costs", costs=costs, 
                      history=oa.HistoryConfig(staleness=20, dim=16), **group_knobs(dict(gpu_cache_budget=budget, **OPTS)))
    tier = meta["gpu_tier"]
    assert tier["hit_us"] == 0.5 and tier["miss_us"] == 2.0
    assert tier["hits"] > 0 and tier["misses"] > 0
    assert tier["assembly_seconds"] == pytest.approx((tier["hits"] * 0.5 + tier["misses"] * 2.0) / 1e6)
    assert meta["costs"]["gpu_hit_us"] == 0.5 and meta["costs"]["gpu_miss_us"] == 2.0


def test_the_host_tiers_neither_read_nor_spare_the_gpu_tier_s_rows(ds: oa.Dataset) -> None:
    from outre_async.loader._config import LoaderConfig
    from outre_async.loader._profiling import host_counts

    seeds = ds.split("train")
    plan = SeedItems(seeds=seeds, batch_size=64, shuffle=True, seed=7).plan(0)
    counts = presample(ds, plan, fanouts=[5, 5], seed=7, stream_base=0, max_batches=len(plan), buffer_rows=256,
                       horizon=10, max_candidates=500)
    cfg = LoaderConfig(fanouts=(5, 5), batch_size=64, seed=7, gpu_cache_budget=40 * 4 * ds.feature_dim)
    host, info, held = host_counts(counts, cfg, ds, plan)
    assert held is not None and info is not None and len(held) == 40
    assert (host.row_hot[held] == 0).all() and counts.row_hot[held].sum() > 0
    under = np.isin(host.attr_node, held)
    assert counts.attr_rows[under].sum() > 0 and (host.attr_rows[under] == 0).all()  # no host read of them to spare
    np.testing.assert_array_equal(host.attr_rows[~under], counts.attr_rows[~under])
    assert info["row_reads_spared"] == pytest.approx(counts.row_hot[held].sum())
