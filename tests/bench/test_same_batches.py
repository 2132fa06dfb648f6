"""``compute-only-part``: compute-only on exactly the batches a partition system trains.

Its batches (plan, seeds, sampled subgraphs) equal those ``OutreLoader(partitions=...)`` delivers,
and differ from them when the seed or the streams differ; the harness schedules it only beside a
partition system; the summary's ratio is taken per repeat from the runs' ``train_seconds``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
from outre_async.partition import partition

import outre_async as oa
from outre_async.bench._physical_limit import compute_only_part, partition_subgraphs
from outre_async.bench._runner import limit_runs
from outre_async.bench._summary import summarize
from outre_async.bench._systems import OutrePart, RunSpec, resolve_system
from outre_async.bench.child import COMPUTE_ONLY, COMPUTE_ONLY_PART
from outre_async.loader._config import LoaderConfig
from outre_async.loader._partition_mode import PartitionBatching
from outre_async.nn import GraphSAGE

OPTIONS = {"parts": 16, "parts_per_batch": 2, "neighbor_cache": 1 << 20}
Key = tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...]]


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    ds = oa.open_dataset(oa.generate(tmp_path_factory.mktemp("same") / "g", "tiny"))
    partition(ds, OPTIONS["parts"], name="bench-fennel-16")
    return ds


def _spec(ds: oa.Dataset, *, seed: int = 3, max_batches: int = 0) -> RunSpec:
    return RunSpec(dataset=str(ds.path), fanouts=(5, 5), batch_size=64, hidden=8, lr=0.01, seed=seed,
                   max_batches=max_batches, options=OPTIONS)


def _key(n_id: Any, edge_index: Any, batch_size: int) -> Key:
    n_id, edge_index = np.asarray(n_id), np.asarray(edge_index)
    return (tuple(n_id[:batch_size].tolist()), tuple(n_id.tolist()), tuple(map(tuple, edge_index.T.tolist())))


def _ours(ds: oa.Dataset, spec: RunSpec) -> list[Key]:
    subs, seconds = partition_subgraphs(ds, spec)
    assert seconds >= 0
    return [_key(s.n_id, s.edge_index, s.batch_size) for s in subs]


def _loader(ds: oa.Dataset, *, ordered: bool) -> list[Key]:
    """What outre-part's loader delivers (its keywords written out, not taken from OutrePart)."""
    with oa.OutreLoader(ds, split="train", fanouts=[5, 5], batch_size=64, seed=3, partitions=oa.PartitionOptions(name="bench-fennel-16", parts_per_batch=2),
                        ordered=ordered, cache=oa.CacheOptions(neighbor_cache=1 << 20), io=oa.IOOptions(backend="pread")) as loader:
        return [_key(b.n_id.numpy(), b.edge_index.numpy(), b.batch_size) for b in loader]


@pytest.mark.timeout(240)
def test_compute_only_part_samples_the_loaders_epoch(ds: oa.Dataset) -> None:
    delivered = _loader(ds, ordered=False)  # completion order: compared as sets of batches
    ours = _ours(ds, _spec(ds))
    assert len(ours) == len(delivered) > 4
    assert sorted(ours) == sorted(delivered)
    assert sorted(_ours(ds, _spec(ds, seed=4))) != sorted(delivered)  # another plan and other streams


@pytest.mark.timeout(240)
def test_max_batches_takes_the_plans_first_batches_in_order(ds: oa.Dataset) -> None:
    """``--max-batches 3``: outre-part runs ordered and trains the plan's first 3 batches; so does
    compute-only-part, in the same order."""
    assert OutrePart().loader_kwargs(_spec(ds, max_batches=3))["ordered"] is True
    assert _ours(ds, _spec(ds, max_batches=3)) == _loader(ds, ordered=True)[:3]


@pytest.mark.timeout(240)
def test_other_streams_give_other_batches(ds: oa.Dataset) -> None:
    """The same plan sampled with each batch's stream shifted by one is not what the loader delivers."""
    cfg = LoaderConfig(fanouts=(5, 5), batch_size=64, seed=3, partitions="bench-fennel-16", parts_per_batch=2,
                       neighbor_cache=1 << 20)
    batching = PartitionBatching.of_config(ds, cfg, ds.split("train"))
    (sampler,) = batching.samplers(ds, cfg.fanouts, cfg.seed, 1)
    shifted = [sampler.sample(item, batching.stream(0, seq) + 1) for seq, item in enumerate(batching.plan(0))]
    keys = sorted(_key(s.n_id, s.edge_index, s.batch_size) for s in shifted)
    delivered = sorted(_loader(ds, ordered=False))
    assert [k[0] for k in keys] == [k[0] for k in delivered]  # the same seeds ...
    assert keys != delivered                                    # ... sampled otherwise


@pytest.mark.timeout(240)
def test_compute_only_part_trains_every_batch_in_ram_windows(ds: oa.Dataset) -> None:
    spec = replace(_spec(ds), ram_budget=40 * ds.feature_dim * 4 * 64)  # a few windows, not one
    subs, _ = partition_subgraphs(ds, spec)
    torch.manual_seed(0)
    model = GraphSAGE(ds.feature_dim, 8, 2, ds.num_classes)
    m = compute_only_part(model, torch.optim.Adam(model.parameters(), lr=0.01), ds, spec)
    assert m["batches"] == len(subs) and m["seeds"] == len(ds.split("train"))
    assert m["rows_requested"] == sum(len(s.n_id) for s in subs)
    assert m["rows_unique"] == len(np.unique(np.concatenate([s.n_id for s in subs])))
    assert m["train_seconds"] > 0 and m["loss"] > 0 and m["extra"]["partitions"] == "bench-fennel-16"
    # the steps' own CPU, set against a loaded run's (no wall-clock figure is asserted)
    assert m["user_cpu_seconds"] > 0 and m["sys_cpu_seconds"] >= 0


def test_compute_only_part_is_scheduled_only_beside_a_partition_system() -> None:
    base = RunSpec(dataset="d", fanouts=(5, 5), batch_size=64, hidden=8, lr=0.01, seed=0, ram_budget=1 << 20)
    names = ["sync", "outre", "outre-hist", "outre-part"]
    plugins = {name: resolve_system(name) for name in names}
    specs = {name: replace(base, options={"parts": 8 if name == "outre-hist" else 16}) for name in names}
    plain = limit_runs({n: plugins[n] for n in ("sync", "outre")}, {}, specs, base)
    assert list(plain) == [COMPUTE_ONLY]
    runs = limit_runs(plugins, {"outre-hist": None}, specs, base)
    assert list(runs) == [COMPUTE_ONLY, COMPUTE_ONLY_PART]
    part_spec, why = runs[COMPUTE_ONLY_PART]
    assert why is None and part_spec.options == {"parts": 8} and part_spec.ram_budget == 1 << 20
    # the first partition system that prepared gives the partitions; none prepared: skipped, saying why
    failed = {"outre-hist": "prepare failed: X"}
    part_spec, why = limit_runs(plugins, failed, specs, base)[COMPUTE_ONLY_PART]
    assert why is None and part_spec.options == {"parts": 16}
    _, why = limit_runs(plugins, failed | {"outre-part": "no"}, specs, base)[COMPUTE_ONLY_PART]
    assert why == "no partition system ran (outre-hist: prepare failed: X)"


def _run(system: str, repeat: int, train: float, *, batches: int = 10, rows: int = 1000,
         outcome: str = "ok") -> dict[str, Any]:
    metrics = {"epoch_seconds": train * 2, "train_seconds": train, "batches": batches, "rows_requested": rows,
               "rows_unique": rows // 2, "sample_seconds": 0.1}
    return {"system": system, "repeat": repeat, "outcome": outcome, "metrics": metrics}


def test_summary_ratio_is_the_median_of_per_repeat_ratios() -> None:
    runs = [_run("outre-part", 0, 1.2), _run(COMPUTE_ONLY_PART, 0, 1.0),
            _run("outre-part", 1, 3.0), _run(COMPUTE_ONLY_PART, 1, 2.0),
            _run("outre-part", 2, 0.9), _run(COMPUTE_ONLY_PART, 2, 1.0),
            _run("outre-hist", 0, 1.1, rows=700), _run(COMPUTE_ONLY_PART, 3, 5.0),
            _run("outre", 0, 0.5), _run(COMPUTE_ONLY, 0, 0.4)]
    s = summarize(runs, {"iops": 0.0}, ["outre", "outre-part", "outre-hist"], partitioned=["outre-part", "outre-hist"])
    part = s["same_batches"]["outre-part"]
    assert part["train_vs_compute_only"] == pytest.approx(1.2)  # median of 1.2, 1.5, 0.9 (not 1.2 / 1.0 of medians)
    assert part["train_seconds"] == 1.2 and part["compute_only_train_seconds"] == pytest.approx(1.5)
    assert (part["batches"], part["compute_only_batches"]) == (10, 10) and part["same_batches"] is True
    hist = s["same_batches"]["outre-hist"]
    assert hist["train_vs_compute_only"] == pytest.approx(1.1) and hist["same_batches"] is False  # rows differ
    assert "outre" not in s["same_batches"]
    assert s["systems"][COMPUTE_ONLY_PART]["speedup_vs_baseline"] is None
    assert s["systems"][COMPUTE_ONLY_PART]["efficiency"] is None and s["limit"]["compute_only_seconds"] == 0.4


def test_summary_without_compute_only_part_has_no_ratio() -> None:
    runs = [_run("outre-part", 0, 1.2), _run(COMPUTE_ONLY_PART, 0, 1.0, outcome="error")]
    s = summarize(runs, {"iops": 0.0}, ["outre-part"], partitioned=["outre-part"])
    assert s["same_batches"]["outre-part"]["train_vs_compute_only"] is None
    assert s["same_batches"]["outre-part"]["same_batches"] is False
    assert summarize(runs[:1], {"iops": 0.0}, ["outre-part"])["same_batches"] == {}
