"""``outre bench --step-ms`` and ``--device``: the proxy step keeps a history system's staleness bound
and really waits, ``pyg-workers`` runs in a capped child, the NVML sampler reports or says why not,
and a device that is not here is a one-line error naming the ones that are."""

from __future__ import annotations

import sys
import time
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

import outre_async as oa
from outre_async.bench._cache_systems import OutreHist
from outre_async.bench._epoch import proxy_step, timed_epoch
from outre_async.bench._gpu_util import UtilisationSampler
from outre_async.bench._presets import get_preset
from outre_async.bench._run_in_child import run_in_child
from outre_async.bench._runner import SuiteConfig, ensure_dataset
from outre_async.bench._systems import SYSTEMS, RunSpec, default_workers
from outre_async.cli import main
from outre_async.machine._device import available_devices, resolve_device


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_dataset(get_preset("tiny"), tmp_path_factory.mktemp("step"), 0, lambda _: None)


def _spec(path: Path, **changes: Any) -> RunSpec:
    preset = get_preset("tiny")
    spec = RunSpec(dataset=str(path), fanouts=preset.fanouts, batch_size=preset.batch_size, hidden=16, lr=0.01,
                   seed=0)
    return replace(spec, **changes)


def test_a_history_system_under_the_proxy_step_keeps_its_staleness_bound(tiny: Path) -> None:
    """Two epochs of outre-hist with a 1 ms step: every batch pushes zero rows of h^(L-1)'s shape, rows
    are pulled, the realised ages stay within the staleness, and each step really waited."""
    staleness, step_ms = 12, 1.0
    options = {**get_preset("tiny").system_options["outre-hist"], "staleness": staleness, "warmup": 0}
    spec = _spec(tiny, step_ms=step_ms, options=options)
    system = OutreHist()
    system.prepare(str(tiny), spec)
    ds = oa.open_dataset(tiny)
    model = oa.GraphSAGE(ds.feature_dim, spec.hidden, 2, ds.num_classes)
    optimizer = torch.optim.Adam(model.parameters())
    before = [p.detach().clone() for p in model.parameters()]
    try:
        batches = system.open(ds, spec)
        first = timed_epoch(model, optimizer, batches, num_nodes=ds.num_nodes, step=proxy_step(step_ms / 1e3))
        second = timed_epoch(model, optimizer, iter(system.loader), num_nodes=ds.num_nodes,
                             step=proxy_step(step_ms / 1e3))
        history = system.stats()["extra"]["history"]
    finally:
        system.close()
    assert first.batches == second.batches > 0
    assert first.train_seconds >= first.batches * step_ms / 1e3  # the wait happened, once per batch
    ages = {int(k): v for k, v in history["realised_staleness"].items()}
    assert ages and max(ages) <= staleness and min(ages) >= 0
    assert sum(ages.values()) == history["pulled"] > 0
    assert history["pushed"] > 0 and history["batches"] == first.batches + second.batches
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))  # no training


def test_the_proxy_step_pushes_rows_of_h_shape() -> None:
    seen: list[tuple[int, ...]] = []

    class Record:
        dim = 5

        def exchange(self, h: torch.Tensor) -> torch.Tensor:
            seen.append(tuple(h.shape))
            return h

    batch = types.SimpleNamespace(n_id=torch.arange(7), x=torch.zeros(7, 3), history=Record())
    start = time.perf_counter()
    assert proxy_step(0.02)(batch) == (0.0, 0, 0)
    assert time.perf_counter() - start >= 0.02
    assert seen == [(7, 5)]


def test_pyg_workers_runs_in_a_child_with_the_step_share(tiny: Path) -> None:
    if SYSTEMS["pyg-workers"]().skip_reason():
        pytest.skip(SYSTEMS["pyg-workers"]().skip_reason() or "")
    spec = _spec(tiny, step_ms=2.0, max_batches=3, val_nodes=64, options={"workers": 2})
    record = run_in_child("pyg-workers", spec, cap_bytes=None, timeout_s=240, dataset_dir=tiny)
    assert record["outcome"] == "ok", record
    m = record["metrics"]
    assert m["batches"] == 3 and m["extra"]["workers"] == 2
    assert m["train_seconds"] >= 3 * 2e-3 and 0 < m["step_share"] <= 1
    assert m["gpu_utilisation"] == {"skipped": "training on cpu"} and m["device"] == "cpu"


def test_default_workers_follow_the_cores() -> None:
    import os

    assert default_workers() == max(1, min(4, len(os.sched_getaffinity(0))))


def test_the_nvml_sampler_samples_in_a_thread_and_says_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    with UtilisationSampler(torch.device("cpu")) as cpu:
        pass
    assert cpu.result() == {"skipped": "training on cpu"}
    calls: list[str] = []
    fake = types.SimpleNamespace(  # NVML's four calls, answering 40 % busy
        nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByIndex=lambda i: f"gpu{i}",
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=40))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with UtilisationSampler(torch.device("cuda", 0), period=0.005) as gpu:
        time.sleep(0.05)
    result = gpu.result()
    assert result["mean_percent"] == result["max_percent"] == 40 and result["samples"] >= 2
    assert calls == ["init", "shutdown"] and not gpu._thread.is_alive()  # type: ignore[union-attr]
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    with UtilisationSampler(torch.device("cuda", 0)) as missing:
        pass
    assert "no NVML" in missing.result()["skipped"]


def test_resolve_device_names_the_devices_there_are() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(oa.ConfigError, match="must be one of auto, cpu, cuda, cuda:N"):
        resolve_device("gpu")
    with pytest.raises(oa.errors.DeviceNotFoundError, match=r"device='cuda:99': no such device on this machine; "
                                                     rf"available: {', '.join(available_devices())}"):
        resolve_device("cuda:99")
    if not torch.cuda.is_available():
        with pytest.raises(oa.errors.DeviceNotFoundError, match="available: cpu "):
            resolve_device("cuda")
    else:
        assert resolve_device("cuda") == torch.device("cuda", torch.cuda.current_device())


def test_bench_flags_are_checked_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["bench", "--preset", "tiny", "--out", str(tmp_path / "r"), "--data-dir", str(tmp_path / "d")]
    assert main([*base, "--step-ms", "-1"]) == 2
    assert "--step-ms" in capsys.readouterr().err
    assert main([*base, "--device", "tpu"]) == 2
    assert "must be auto, cpu, cuda or cuda:N" in capsys.readouterr().err
    with pytest.raises(oa.ConfigError, match="step_ms"):
        SuiteConfig(data_dir=tmp_path, step_ms=float("nan"))
    assert main([*base, "--device", "cuda:99", "--systems", "sync"]) == 2
    err = capsys.readouterr().err
    assert "no such device" in err and "available: cpu" in err and len(err.strip().splitlines()) == 1


def test_disk_grid_gives_the_outre_systems_the_devices_probe_and_a_disk_limit(tiny: Path, tmp_path: Path) -> None:
    """``--disk-grid``: the loader reads with the cached grid of the features' device (its reads in flight
    come from it) and the run reports the disk's limit for the reads it issued; no grid cached for a
    device is a named error, not a silent default."""
    from outre_async.bench._systems import Outre, disk_grid
    from outre_async.features._disk_probe import DEPTHS, SIZES, DiskProbe, ProbeCell, cache_file, device_of, in_flight_for

    ds = oa.open_dataset(tiny)
    cache = tmp_path / "probe"
    with pytest.raises(oa.ConfigError, match="--disk-grid: no probe"):
        disk_grid(ds, _spec(tiny, probe_cache_dir=str(cache)))
    device = device_of(ds.features_path)
    cells = tuple(ProbeCell(depth=d, size=z, iops=float(min(d, 8) * 10000 // (1 + z // 65536)),
                            bytes_per_s=float(min(d, 8) * 10000 // (1 + z // 65536) * z), reads=1, seconds=0.4)
                  for d in DEPTHS for z in SIZES)
    probe = DiskProbe(path=str(ds.features_path), file_bytes=1, direct=True, device=device, measured_at=time.time(),
                      seconds_per_cell=0.4, cells=cells)
    cache.mkdir()
    cache_file(cache, device, True).write_text(__import__("json").dumps(probe.to_json()))
    spec = _spec(tiny, probe_cache_dir=str(cache), options={"memory_budget": "16MiB"})
    assert disk_grid(ds, spec)["disk_probe"].cells == cells
    system = Outre()
    try:
        for _ in system.open(ds, spec):
            pass
        extra = system.stats()["extra"]
    finally:
        system.close()
    assert extra["io"]["max_in_flight"] == in_flight_for(probe, ds.row_layout.stride)  # from the grid
    assert extra["epoch_io"]["ios"] > 0  # the tiny graph's rows came from the disk
    assert extra["epoch_io"]["limit_seconds"] > 0 and extra["epoch_io"]["vs_limit"] > 0


def test_runs_are_judged_against_the_disk_limit_of_a_cached_grid() -> None:
    """``_disk_limit.annotate``: a run's reads and bytes against the grid at its reads in flight; the
    report lists it; no grid or no reads: nothing added."""
    from outre_async.bench._disk_limit import annotate
    from outre_async.bench._report import disk_limit_table
    from outre_async.features._disk_probe import DiskProbe, ProbeCell

    cost = {4096: 10e-6 + 4096e-9, 65536: 10e-6 + 65536e-9}  # 10 µs + 1 ns per byte
    cells = tuple(ProbeCell(depth=d, size=z, iops=1 / t, bytes_per_s=z / t, reads=1, seconds=1.0)
                  for d in (16, 256) for z, t in cost.items())
    grid = DiskProbe(path="f", file_bytes=1 << 30, direct=True, device={"key": "k"}, measured_at=0.0,
                     seconds_per_cell=1.0, cells=cells)
    run = {"system": "outre-part", "repeat": 0, "metrics": {"epoch_seconds": 0.03, "extra": {
        "io": {"reads_submitted": 1000, "bytes_read": 1000 * 16384, "max_in_flight": 256}}}}
    bare = {"system": "pyg-mmap", "repeat": 0, "metrics": {"epoch_seconds": 1.0, "extra": {}}}
    annotate([run, bare], None, 4096)
    assert "disk_limit" not in run["metrics"]["extra"]
    annotate([run, bare], grid, 4096)
    lim = run["metrics"]["extra"]["disk_limit"]
    assert lim["seconds"] == pytest.approx(1000 * (10e-6 + 16384e-9), abs=1e-3)
    assert lim["vs_limit"] == pytest.approx(0.03 / (1000 * (10e-6 + 16384e-9)), abs=2e-3)
    assert "disk_limit" not in bare["metrics"]["extra"]
    table = disk_limit_table({"runs": [run, bare], "disk_grid": grid.source()})
    assert "| outre-part | 0 | 0.03 | 1,000 |" in table and "pyg-mmap" not in table
    assert "Grid: f (1.00 GiB, 1 s a cell" in table  # the table names the grid it judged by


def _limit_grid(**fields: object) -> object:
    from outre_async.features._disk_probe import DiskProbe, ProbeCell

    cells = tuple(ProbeCell(depth=d, size=z, iops=1e5, bytes_per_s=1e5 * z, reads=1, seconds=1.0)
                  for d in (16, 256) for z in (4096, 65536))
    return DiskProbe(**{"path": "f", "file_bytes": 1 << 30, "direct": True, "device": {"key": "k"}, "measured_at": 0.0,
                        "seconds_per_cell": 1.0, "cells": cells, **fields})


def _io_run(epoch_s: float) -> dict:
    return {"system": "outre-auto", "repeat": 0, "metrics": {"epoch_seconds": epoch_s, "extra": {
        "io": {"reads_submitted": 100_000, "bytes_read": 100_000 * 4096, "max_in_flight": 256}}}}


@pytest.mark.parametrize("fields, why", [({"file_bytes": 2_500_000}, "2.4 MiB file"),
                                         ({"seconds_per_cell": 0.4}, "0.4 s a cell")])
def test_a_grid_too_small_or_too_short_judges_no_run(fields: dict, why: str) -> None:
    """A 2.5 MB test file probed at 0.4 s a cell under load once made igb-like come out at 0.23x the disk's
    limit: such a grid is named in the report and judges nothing."""
    from outre_async.bench._disk_limit import annotate
    from outre_async.bench._report import disk_limit_table

    run = _io_run(0.5)
    source = annotate([run], _limit_grid(**fields), 4096)
    assert "disk_limit" not in run["metrics"]["extra"]
    assert source is not None and why in source["untrusted"]
    assert "No run judged against the disk's limit" in disk_limit_table({"runs": [run], "disk_grid": source})


def test_a_run_that_beats_its_own_limit_is_flagged_not_reported() -> None:
    from outre_async.bench._disk_limit import annotate
    from outre_async.bench._report import disk_limit_table

    fast, fair = _io_run(0.2), _io_run(2.0)  # the grid says 100k reads take 1 s
    source = annotate([fast, fair], _limit_grid(), 4096)
    flagged = fast["metrics"]["extra"]["disk_limit"]
    assert flagged["vs_limit"] is None and "grid is wrong" in flagged["beats_limit"]
    assert fair["metrics"]["extra"]["disk_limit"]["vs_limit"] == pytest.approx(2.0, rel=0.01)
    table = disk_limit_table({"runs": [fast, fair], "disk_grid": source})
    assert "flagged: 0.20 x the limit" in table and "| 2.00 |" in table
