"""The disk probe (``features._disk_probe``, ``outre probe``): a file system without O_DIRECT is refused
by name and the CLI falls back to buffered reads and says so; the JSON's shape; the per-device cache
reused, refreshed and re-measured when it does not cover the grid; Little's law with numbers; the
scratch file of a folder removed."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from outre_async import cli
from outre_async.errors import DirectIOUnsupported, ProbeError
from outre_async.features import _disk_source, detect_io_uring
from outre_async.features._disk_probe import (
    SCHEMA,
    DiskProbe,
    ProbeCell,
    cached_probe,
    device_of,
    in_flight_for,
    probe_disk,
    saturating_depth,
)

pytestmark = pytest.mark.skipif(not detect_io_uring(), reason="io_uring unavailable here")
GRID = {"depths": (1, 4), "sizes": (4096, 16384), "seconds": 0.02}


def _file(path: Path, nbytes: int = 1 << 20) -> Path:
    path.write_bytes(np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8).tobytes())
    return path


@contextlib.contextmanager
def _ramfs(where: Path) -> Iterator[Path]:
    """A ramfs mount (a file system that refuses O_DIRECT); skipped where mounting is not allowed."""
    where.mkdir()
    done = subprocess.run(["mount", "-t", "ramfs", "ramfs", str(where)], capture_output=True, check=False)
    if done.returncode:
        pytest.skip(f"cannot mount a ramfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def _refuse_o_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    """O_DIRECT refused at open with EINVAL, as by a file system without it (the simulated case)."""
    real_open = os.open

    def fake_open(path: object, flags: int, *args: object) -> int:
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_disk_source.os, "open", fake_open)


def test_a_file_system_without_o_direct_is_refused_by_name(tmp_path: Path) -> None:
    with _ramfs(tmp_path / "ram") as ram:
        f = _file(ram / "x.bin")
        with pytest.raises(DirectIOUnsupported, match=r"ramfs.*refuses O_DIRECT.*buffered"):
            probe_disk(f, **GRID)
        buffered = probe_disk(f, direct=False, **GRID)
        assert buffered.direct is False and "buffered" in buffered.note
        assert buffered.device["fstype"] == "ramfs"


def test_cli_falls_back_to_buffered_reads_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path / "x.bin")
    _refuse_o_direct(monkeypatch)
    rc = cli.main(["probe", str(f), "--seconds", "0.02", "--depths", "1,4", "--sizes", "4k,16k",
                   "--cache-dir", str(tmp_path / "cache"), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    result = json.loads(out.out)
    assert result["direct"] is False and "O_DIRECT" in result["fallback"]
    assert "O_DIRECT refused: measuring buffered reads instead" in out.err
    assert list((tmp_path / "cache").glob("*-buffered.json"))  # cached apart from O_DIRECT grids


def test_probe_json_schema_and_round_trip(tmp_path: Path) -> None:
    probe = probe_disk(_file(tmp_path / "x.bin"), **GRID)
    data = json.loads(json.dumps(probe.to_json()))
    assert data["schema"] == SCHEMA and data["tool"] == "io_uring" and data["direct"] is True
    assert set(data) >= {"path", "file_bytes", "device", "measured_at", "measured_at_iso", "seconds_per_cell",
                         "depths", "sizes", "cells"}
    assert set(data["device"]) == {"dev", "source", "fstype", "mount", "block", "key"}
    assert data["depths"] == [1, 4] and data["sizes"] == [4096, 16384] and len(data["cells"]) == 4
    for c in data["cells"]:
        assert set(c) == {"depth", "size", "iops", "bytes_per_s", "reads", "seconds"}
        assert c["reads"] > 0 and c["iops"] > 0 and c["seconds"] >= GRID["seconds"]
        assert c["bytes_per_s"] == pytest.approx(c["iops"] * c["size"], rel=0.01)  # whole reads, none short
    again = DiskProbe.from_json(data)
    assert again.to_json() == probe.to_json()  # what was written reads back the same
    assert [(c.depth, c.size, c.reads) for c in again.cells] == [(c.depth, c.size, c.reads) for c in probe.cells]
    with pytest.raises(ProbeError, match="schema"):
        DiskProbe.from_json({**data, "schema": "outre-probe/0"})
    with pytest.raises(ProbeError, match="lacks or mistypes"):
        DiskProbe.from_json({k: v for k, v in data.items() if k != "cells"})


def test_cache_reused_refreshed_and_extended(tmp_path: Path) -> None:
    f, cache = _file(tmp_path / "x.bin"), tmp_path / "cache"
    first, cached = cached_probe(f, cache, **GRID)
    assert not cached
    files = list(cache.iterdir())
    assert [p.name for p in files] == [f"{device_of(f)['key']}.json"]
    again, cached = cached_probe(f, cache, **GRID)
    assert cached and again.measured_at == first.measured_at and again.to_json() == first.to_json()
    smaller, cached = cached_probe(f, cache, depths=(4,), sizes=(4096,), seconds=0.02)
    assert cached  # a sub-grid of the cached one
    fresh, cached = cached_probe(f, cache, refresh=True, **GRID)
    assert not cached and fresh.measured_at > first.measured_at
    wider, cached = cached_probe(f, cache, depths=(1, 4, 16), sizes=(4096,), seconds=0.02)
    assert not cached and wider.covers((16,), (4096,))  # not covered: measured again


def test_cli_reports_the_cache_and_its_age(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path / "x.bin")
    argv = ["probe", str(f), "--seconds", "0.02", "--depths", "1,4", "--sizes", "4k", "--cache-dir", str(tmp_path / "c")]
    assert cli.main(argv) == 0
    assert "measured now" in capsys.readouterr().out
    assert cli.main(argv) == 0
    assert "cached, measured" in capsys.readouterr().out
    assert cli.main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["cached"] is True and result["age_seconds"] >= 0 and result["in_flight"]["4096"] >= 2
    assert cli.main([*argv, "--refresh", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cached"] is False


def test_folder_gets_a_scratch_file_that_is_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    rc = cli.main(["probe", str(folder), "--seconds", "0.02", "--depths", "1", "--sizes", "4k",
                   "--scratch-size", "4MiB", "--cache-dir", str(tmp_path / "c"), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    result = json.loads(out.out)
    assert result["target_kind"] == "folder" and result["file_bytes"] == 4 << 20
    assert list(folder.iterdir()) == []  # the scratch file is gone


def test_a_file_smaller_than_the_largest_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="larger than its largest read"):
        probe_disk(_file(tmp_path / "small.bin", 8192), depths=(1,), sizes=(1 << 20,), seconds=0.02)


def test_plot_without_matplotlib_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    rc = cli.main(["probe", str(_file(tmp_path / "x.bin")), "--plot", str(tmp_path / "p.png")])
    assert rc == 2 and "--plot needs matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "p.png").exists()


def test_plot_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    rc = cli.main(["probe", str(_file(tmp_path / "x.bin")), "--seconds", "0.02", "--depths", "1,4", "--sizes", "4k",
                   "--cache-dir", str(tmp_path / "c"), "--plot", str(tmp_path / "p.png")])
    assert rc == 0, capsys.readouterr().err
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- Little's law ------------------------------------------------------------------------------------


def _probe(table: dict[int, dict[int, float]]) -> DiskProbe:
    cells = tuple(ProbeCell(depth=d, size=s, iops=r, bytes_per_s=r * s, reads=1, seconds=1.0)
                  for d, row in table.items() for s, r in row.items())
    return DiskProbe(path="x", file_bytes=1, direct=True, device={"key": "k"}, measured_at=0.0,
                     seconds_per_cell=1.0, cells=cells)


def test_saturating_depth_with_numbers() -> None:
    depths = [1, 4, 16, 64, 256]
    assert saturating_depth(depths, [10e3, 35e3, 70e3, 80e3, 82e3]) == 64        # 0.9 x 82k = 73.8k
    assert saturating_depth(depths, [10e3, 35e3, 70e3, 80e3, 82e3], fraction=0.85) == 16  # 69.7k
    assert saturating_depth(depths, [5e3, 5e3, 5e3, 5e3, 5e3]) == 1             # flat: depth 1 is enough
    assert saturating_depth([256, 1, 64], [90.0, 10.0, 100.0]) == 64              # any order
    with pytest.raises(ValueError, match="one rate per depth"):
        saturating_depth([1, 4], [1.0])


def test_in_flight_for_with_numbers() -> None:
    probe = _probe({1: {4096: 10e3, 1 << 20: 1.5e3}, 4: {4096: 35e3, 1 << 20: 2.8e3},
                    16: {4096: 70e3, 1 << 20: 2.9e3}, 64: {4096: 80e3, 1 << 20: 2.9e3},
                    256: {4096: 82e3, 1 << 20: 2.9e3}})
    assert in_flight_for(probe, 4096) == 128          # knee 64, x2
    assert in_flight_for(probe, 512) == 128           # a 512 B read costs a 4 KiB one
    assert in_flight_for(probe, 8192) == 8            # the next size up is 1 MiB: knee 4 (2.8k >= 2.61k)
    assert in_flight_for(probe, 4096, burst=1) == 64
    assert in_flight_for(probe, 4096, limit=100) == 100
    knee_at_the_top = _probe({1: {4096: 10e3}, 16: {4096: 50e3}, 64: {4096: 70e3}, 256: {4096: 82e3}})
    assert in_flight_for(knee_at_the_top, 4096) == 256  # knee 256, x2 = 512: never past the deepest depth measured
    assert probe.iops_at(100, 4096) == 80e3 and probe.iops_at(1, 4096) == 10e3


def test_a_grid_records_the_load_it_was_measured_under_and_older_files_still_load() -> None:
    from outre_async.features._disk_probe import DiskProbe, ProbeCell

    cells = (ProbeCell(depth=1, size=4096, iops=1.0, bytes_per_s=4096.0, reads=1, seconds=1.0),)
    grid = DiskProbe(path="f", file_bytes=1 << 30, direct=True, device={"key": "k"}, measured_at=0.0,
                     seconds_per_cell=1.0, cells=cells, load_per_core=0.25)
    doc = grid.to_json()
    assert DiskProbe.from_json(doc).load_per_core == 0.25
    del doc["load_per_core"]  # a grid cached before the field existed
    assert DiskProbe.from_json(doc).load_per_core is None
    assert grid.untrusted() is None and grid.source()["load_per_core"] == 0.25
