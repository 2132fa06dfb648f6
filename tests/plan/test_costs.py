"""The measured costs a profile predicts with (issue 25 item 7): outliers among the timings dropped,
warm-up runs untimed, the training device and each figure's spread recorded in the profile's meta."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import generated

import outre_async as oa
from outre_async.plan import measure_costs
from outre_async.plan._timing import robust, timed
from outre_async.loader._options import group_knobs

OPTS = {"fanouts": [5, 5], "batch_size": 64, "memory_budget": "6MiB", "backend": "memory", "seed": 7}
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("costs") / "ds", "tiny")


def test_outliers_are_dropped_and_the_spread_reported() -> None:
    steady = [10.0, 10.5, 9.5, 10.2, 9.8, 10.1, 9.9]
    # a first timing that compiled a kernel and one a neighbour's job slowed: both outside the fences
    got = robust([5000.0, *steady, 900.0])
    assert got.dropped == 2 and got.runs == 9
    assert got.value == pytest.approx(np.median(steady))  # the median of the kept: a burst inside the fences moves it less
    q1, med, q3 = np.percentile([5000.0, *steady, 900.0], [25, 50, 75])
    assert got.spread == pytest.approx((q3 - q1) / med)
    flat = robust([3.0] * 5)
    assert flat.value == 3.0 and flat.spread == 0.0 and flat.dropped == 0
    assert robust([]).runs == 0


def test_the_warm_up_is_not_timed_and_the_runs_adapt_to_the_budget() -> None:
    # the injected timings: the warm-up's (a numba compile) must never reach the figure
    feed = iter([1e6, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    got = timed(lambda: next(feed), budget_s=0.0, min_n=4, max_n=50)
    assert got.runs == 4 and got.value == 2.0  # budget spent: the minimum only
    many = timed(lambda: 1.0, budget_s=10.0, min_n=3, max_n=20)
    assert many.runs == 20  # budget left: up to the maximum


def test_measure_costs_records_the_device_and_spreads(ds: oa.Dataset) -> None:
    costs = measure_costs(ds, backend="memory", batch_rows=256, num_extractors=2, hidden=16, budget_s=0.05)
    meta = costs.to_json()
    assert meta["device"] == "cpu" and meta["backend"] == "memory" and meta["threads"] == torch.get_num_threads()
    assert set(meta["spread"]) == set(meta["runs"]) == {"row_us", "row_cpu_us", "list_us", "recompute_us", "copy_us"}
    assert len(set(meta["runs"].values())) == 1 and meta["runs"]["row_us"] >= 5  # every figure in every round
    assert all(v >= 0 for v in meta["spread"].values())
    assert costs.row_us > 0 and costs.list_us > 0 and costs.recompute_us > 0 and costs.copy_us > 0
    assert costs.row_cpu_us >= 0 and costs.gpu_hit_us == costs.gpu_miss_us == 0.0  # no GPU tier asked for


@pytest.mark.parametrize("device", DEVICES)
def test_the_profile_meta_holds_the_costs_schema(ds: oa.Dataset, device: str) -> None:
    meta = oa.profile(ds, name=f"costs-{device}", **group_knobs(dict(device=device, **OPTS)))
    costs = meta["costs"]
    assert costs["device"] == str(torch.device(device if device == "cpu" else "cuda:0"))
    assert {"row_us", "list_us", "recompute_us", "backend", "device", "threads", "spread", "runs", "sample_spread"} <= set(costs)
    assert isinstance(costs["sample_spread"], float) and costs["sample_spread"] >= 0
    assert meta["predicted"]["sample_seconds"] > 0
