"""``outre bench`` probes the device beside each run (``bench._beside_probe``): at the run's mean read
size and reads in flight, right after its epoch; the run's limit comes from that probe first, the
cached grid second (``bench._disk_limit``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import generated

import outre_async as oa
from outre_async.bench._beside_probe import ALIGN, probe_beside
from outre_async.bench._disk_limit import BESIDE, GRID, annotate
from outre_async.bench._report import disk_limit_table
from outre_async.bench._runner import SuiteConfig
from outre_async.features._disk_probe import ALIGN as PROBE_ALIGN
from outre_async.features._disk_probe import DiskProbe, ProbeCell


@pytest.fixture(scope="module")
def features(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated(tmp_path_factory.mktemp("beside") / "tiny", "tiny", num_nodes=600).features_path


def _run(ios: int, nbytes: int, depth: int, epoch_s: float = 1.0) -> dict[str, Any]:
    return {"system": "outre", "repeat": 0, "metrics": {"epoch_seconds": epoch_s, "extra": {
        "io": {"reads_submitted": ios, "bytes_read": nbytes, "max_in_flight": depth}}}}


def test_a_run_is_probed_at_its_own_mean_read_size_and_depth(features: Path) -> None:
    run, bare = _run(50, 50 * 6000, 4), {"system": "pyg-mmap", "metrics": {"epoch_seconds": 1.0, "extra": {}}}
    probe_beside(features, run, seconds=0.1)
    probe_beside(features, bare, seconds=0.1)
    beside = run["metrics"]["extra"]["disk_probe_beside"]
    assert [(c["depth"], c["size"]) for c in beside["cells"]] == [(4, 8192)]  # 6000 B rounded up to 4 KiB blocks
    assert beside["cells"][0]["reads"] > 0 and beside["path"] == str(features.resolve())
    assert "MiB file" in beside["untrusted"]  # a test file this small must not judge a run
    assert "disk_probe_beside" not in bare["metrics"]["extra"]  # no reads of its own: nothing to probe at
    annotate([run], None, 4096)
    assert "disk_limit" not in run["metrics"]["extra"]
    assert ALIGN == PROBE_ALIGN


def test_a_probe_that_cannot_run_is_recorded_not_raised(features: Path) -> None:
    run = _run(10, 10 * (64 << 20), 4)  # 64 MiB reads: the tiny file holds none
    probe_beside(features, run, seconds=0.1)
    assert "ProbeError" in run["metrics"]["extra"]["disk_probe_beside"]["error"]
    annotate([run], None, 4096)
    assert "disk_limit" not in run["metrics"]["extra"]


def _probe(depth: int, size: int, per_read_s: float, file_bytes: int = 1 << 30) -> DiskProbe:
    cell = ProbeCell(depth=depth, size=size, iops=1 / per_read_s, bytes_per_s=size / per_read_s, reads=1, seconds=1.0)
    return DiskProbe(path="f", file_bytes=file_bytes, direct=True, device={"key": "k"}, measured_at=0.0,
                     seconds_per_cell=1.0, cells=(cell,))


def test_the_probe_beside_a_run_judges_it_before_the_cached_grid() -> None:
    own, other = _run(1000, 1000 * 16384, 256, epoch_s=0.1), _run(1000, 1000 * 16384, 256, epoch_s=0.1)
    own["metrics"]["extra"]["disk_probe_beside"] = {**_probe(256, 16384, 50e-6).to_json(), "untrusted": None}
    grid = _probe(256, 16384, 20e-6)  # a faster device than the run met: the grid alone would flatter it
    annotate([own, other], grid, 4096)
    mine, theirs = own["metrics"]["extra"]["disk_limit"], other["metrics"]["extra"]["disk_limit"]
    assert mine["source"] == BESIDE and mine["seconds"] == pytest.approx(0.05)
    assert theirs["source"] == GRID and theirs["seconds"] == pytest.approx(0.02)
    assert mine["vs_limit"] == pytest.approx(2.0) and theirs["vs_limit"] == pytest.approx(5.0)
    # a grid too small to trust judges nothing, but a run's own probe still does
    own["metrics"]["extra"].pop("disk_limit"), other["metrics"]["extra"].pop("disk_limit")
    source = annotate([own, other], _probe(256, 16384, 20e-6, file_bytes=1 << 20), 4096)
    assert own["metrics"]["extra"]["disk_limit"]["source"] == BESIDE and "disk_limit" not in other["metrics"]["extra"]
    table = disk_limit_table({"runs": [own, other], "disk_grid": source})
    assert f"| 2.00 | {BESIDE} |" in table and "No run was judged by the cached grid" in table


def test_the_probe_beside_is_a_suite_option() -> None:
    assert SuiteConfig(data_dir=Path("d")).beside_seconds > 0  # on by default
    with pytest.raises(oa.ConfigError, match="beside_seconds=-1"):
        SuiteConfig(data_dir=Path("d"), beside_seconds=-1)
