"""``stats()["epoch_io"]`` and the probe's depth in the loader: the figures from two snapshots with
numbers, the loader's own epoch against its source's counters, ``disk_probe=`` sizing reads in flight by
Little's law, and a profile recording that depth for ``profile=`` to apply."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import generated

import outre_async as oa
from outre_async.features import detect_io_uring
from outre_async.features._disk_probe import DiskProbe, ProbeCell, in_flight_for
from outre_async.loader._epoch_io import IOMark, ProbeRate, disk_limit_seconds, epoch_io, known_rate, probe_rate
from outre_async.plan import MissCosts
from outre_async.loader._options import group_knobs
from outre_async.loader import LoaderConfig

NEEDS_URING = pytest.mark.skipif(not detect_io_uring(), reason="io_uring unavailable here")


def _probe(direct: bool = True) -> DiskProbe:
    rates = {1: 10e3, 4: 30e3, 16: 60e3, 64: 64e3, 256: 65e3}  # knee at 16 (>= 0.9 x 65k = 58.5k)
    cells = tuple(ProbeCell(depth=d, size=s, iops=r / (s // 4096), bytes_per_s=r * 4096, reads=1, seconds=1.0)
                  for d, r in rates.items() for s in (4096, 65536))
    return DiskProbe(path="features.bin", file_bytes=1 << 30, direct=direct, device={"key": "k"}, measured_at=0.0,
                     seconds_per_cell=0.4, cells=cells)


def test_epoch_io_with_numbers() -> None:
    start = IOMark(t=10.0, io={"reads_submitted": 100, "bytes_read": 409600, "unique_rows": 150, "busy_seconds": 1.0})
    end = IOMark(t=14.0, io={"reads_submitted": 1100, "bytes_read": 4505600, "unique_rows": 2150,
                             "busy_seconds": 3.0, "max_in_flight": 32, "direct": True})
    rate = ProbeRate(iops_at_depth=1000.0, peak_iops=2000.0, depth=32, read_bytes=4096, direct=True)
    out = epoch_io(start, end, rate)
    assert out["ios"] == 1000 and out["bytes_read"] == 4096000 and out["rows_from_disk"] == 2000
    assert out["rows_per_io"] == 2.0 and out["bytes_per_io"] == 4096.0
    assert out["reads_per_s"] == 250.0 and out["busy_reads_per_s"] == 500.0  # 1000 reads in 4 s, busy 2 s
    assert out["vs_probe"] == 0.25 and out["probe_peak_iops"] == 2000.0 and out["probe_direct"] is True
    bare = epoch_io(start, start, None)
    assert bare["ios"] == 0 and bare["rows_per_io"] == 0.0 and "vs_probe" not in bare


def test_probe_rate_takes_the_depth_at_or_below() -> None:
    by_depth = {1: 10.0, 16: 60.0, 256: 65.0}
    assert probe_rate(by_depth, 32, 4096, True).iops_at_depth == 60.0
    assert probe_rate(by_depth, 16, 4096, True).iops_at_depth == 60.0
    assert probe_rate(by_depth, 999, 4096, False) == ProbeRate(iops_at_depth=65.0, peak_iops=65.0, depth=999,
                                                               read_bytes=4096, direct=False)


def test_the_disk_limit_is_reads_at_their_mean_size_or_bytes_over_bandwidth() -> None:
    """A read costs 10 µs + its bytes at 1 GB/s (the linear model the grid is interpolated by)."""
    cost = {4096: 10e-6 + 4096e-9, 65536: 10e-6 + 65536e-9}
    cells = tuple(ProbeCell(depth=d, size=z, iops=1 / t, bytes_per_s=z / t, reads=1, seconds=1.0)
                  for d in (64, 256) for z, t in cost.items())
    probe = DiskProbe(path="f", file_bytes=1 << 30, direct=True, device={"key": "k"}, measured_at=0.0,
                      seconds_per_cell=0.4, cells=cells)
    rate = known_rate(probe, None, 4096, 256)
    assert rate is not None and [z for z, _ in rate.read_seconds] == [4096, 65536]
    assert [t for _, t in rate.read_seconds] == pytest.approx([cost[4096], cost[65536]])
    # 1000 reads of 16 KiB on average: 1000 x (10 µs + 16384 ns)
    assert disk_limit_seconds(rate, 1000, 1000 * 16384) == pytest.approx(1000 * (10e-6 + 16384e-9))
    # past the largest size the line goes on, but never below the bytes over the best bandwidth
    big = 10 * (1 << 20)
    assert disk_limit_seconds(rate, 10, big) == pytest.approx(max(10 * (10e-6 + (1 << 20) * 1e-9), big / rate.bandwidth))
    assert disk_limit_seconds(rate, 10, big) > 10 * (10e-6 + (1 << 20) * 1e-9)  # 65 KiB reads: 868 MB/s
    assert disk_limit_seconds(rate, 0, 0) == 0.0
    start = IOMark(t=0.0, io={"reads_submitted": 0, "bytes_read": 0, "unique_rows": 0, "busy_seconds": 0.0})
    end = IOMark(t=0.03, io={"reads_submitted": 1000, "bytes_read": 1000 * 16384, "unique_rows": 1500,
                             "busy_seconds": 0.03})
    out = epoch_io(start, end, rate)
    assert out["limit_seconds"] == pytest.approx(0.0264, abs=1e-3) and out["vs_limit"] == pytest.approx(0.03 / 0.026384, abs=2e-3)
    repeated = replace(probe, cells=probe.cells + probe.cells[-1:])  # a cached file that repeats a cell
    assert disk_limit_seconds(known_rate(repeated, None, 4096, 256), 10, big) == pytest.approx(
        disk_limit_seconds(rate, 10, big))
    single = known_rate(_probe(), None, 4096, 256)  # a one-depth-size profile record has no grid: no limit
    assert "limit_seconds" not in epoch_io(start, end, ProbeRate(iops_at_depth=1.0, peak_iops=1.0, depth=1,
                                                                  read_bytes=4096, direct=True))
    assert single is not None and single.read_seconds


def test_disk_probe_must_be_a_probe() -> None:
    with pytest.raises(oa.ConfigError, match="disk_probe must be a DiskProbe"):
        LoaderConfig(fanouts=(2,), batch_size=8, disk_probe={"iops": 1})  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("eio") / "ds", "tiny", feature_dim=1024)  # 4 KiB rows


@NEEDS_URING
def test_loader_epoch_io_against_its_source(ds: oa.Dataset) -> None:
    probe = _probe()
    loader = oa.OutreLoader(ds, split="train", fanouts=[5, 5], batch_size=128, 
                            seed=3, io=oa.IOOptions(backend="io_uring", disk_probe=probe))
    try:
        assert loader.stats()["epoch_io"] == {}  # no epoch yet
        batches = sum(1 for _ in loader)
        s = loader.stats()
    finally:
        loader.close()
    io, eio = s["io"], s["epoch_io"]
    assert batches > 0 and io["max_in_flight"] == in_flight_for(probe, 4096) == 32
    assert eio["ios"] == io["reads_submitted"] > 0  # one epoch since the source opened
    assert eio["bytes_read"] == io["bytes_read"] and eio["rows_from_disk"] == io["unique_rows"]
    assert eio["rows_per_io"] == pytest.approx(io["unique_rows"] / io["reads_submitted"], abs=1e-3)
    assert eio["probe_iops_at_depth"] == 60e3 and eio["probe_depth"] == 32 and eio["probe_direct"] is True
    assert eio["vs_probe"] == pytest.approx(eio["reads_per_s"] / 60e3, abs=1e-3)


@NEEDS_URING
def test_an_explicit_max_in_flight_wins_over_the_probe(ds: oa.Dataset) -> None:
    loader = oa.OutreLoader(ds, split="train", fanouts=[5], batch_size=128, 
                            io=oa.IOOptions(backend="io_uring", disk_probe=_probe(), max_in_flight=7))
    try:
        next(iter(loader))
        assert loader.stats()["io"]["max_in_flight"] == 7
    finally:
        loader.close()


@NEEDS_URING
def test_a_profile_records_the_probes_depth_and_profile_applies_it(ds: oa.Dataset, tmp_path: Path) -> None:
    opts = {"fanouts": [5, 5], "batch_size": 128, "memory_budget": "64MiB", "backend": "io_uring", "seed": 1}
    costs = MissCosts(row_us=20.0, list_us=2.0, recompute_us=1.0, backend="fixed")
    meta = oa.profile(ds, name="probed", costs=costs, **group_knobs(dict(disk_probe=_probe(direct=False), **opts)))
    assert meta["io"]["max_in_flight"] == 32 and meta["io"]["direct"] is False
    assert meta["io"]["iops_by_depth"]["16"] == 60e3
    loader = oa.OutreLoader(ds, **group_knobs(dict(split="train", profile="probed", **opts)))  # no probe passed: the profile's
    try:
        for _ in loader:
            pass
        s = loader.stats()
    finally:
        loader.close()
    assert s["io"]["max_in_flight"] == 32 and s["profile"]["io"]["max_in_flight"] == 32
    assert s["epoch_io"]["probe_iops_at_depth"] == 60e3 and s["epoch_io"]["probe_direct"] is False


@NEEDS_URING
def test_outre_profile_records_the_cached_probe(ds: oa.Dataset, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from outre_async.cli import main
    from outre_async.features import cached_probe

    cache = tmp_path / "probe-cache"
    probe, _ = cached_probe(ds.features_path, cache, seconds=0.01)  # the default grid, quickly
    argv = ["profile", str(ds.path), "--fanouts", "5,5", "--batch-size", "128", "--memory-budget", "64MiB",
            "--backend", "io_uring", "--name", "cliprobe", "--batches", "2", "--probe-cache-dir", str(cache),
            "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "disk probe: cached" in out and f"reads in flight: {in_flight_for(probe, 4096)}" in out
    meta = json.loads((ds.path / "profile" / "cliprobe" / "meta.json").read_text())
    assert meta["io"]["max_in_flight"] == in_flight_for(probe, 4096)
    assert meta["io"]["measured_at"] == probe.measured_at  # the cached probe, not a new one
    assert main([*argv[:-3], "--no-probe", "--name", "cliplain", "--no-progress"]) == 0
    assert json.loads((ds.path / "profile" / "cliplain" / "meta.json").read_text())["io"] is None


def test_max_in_flight_has_one_home() -> None:
    """The reads in flight are the loader's knob: the memory plan sizes staging and bounce pages by it
    (``_read_depth``), so ``source_options`` may not set them behind its back."""
    with pytest.raises(oa.ConfigError, match=r"repeats a loader knob; pass max_in_flight=8 instead"):
        LoaderConfig(fanouts=(3,), batch_size=8, source_options={"max_in_flight": 8})
