"""Merged reads (issue 26 item 2b): the hole worth reading through between two needed rows, from the
probe's rates (a pure function), and reads merged across holes returning bit-identical rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import run

import outre_async as oa
from outre_async.features import detect_io_uring, open_source
from outre_async.features._disk_probe import DiskProbe, ProbeCell, gap_from_probe
from outre_async.features._staging import DEFAULT_MERGE_GAP, merge_gap_bytes, plan_reads

pytestmark = pytest.mark.timeout(120)
DISK_BACKENDS = [pytest.param("io_uring", marks=pytest.mark.skipif(not detect_io_uring(), reason="no io_uring")),
                 "pread"]


def test_the_gap_is_the_bytes_one_extra_read_costs() -> None:
    # 50k reads/s and 1 GB/s: one read costs 20 µs = 20 kB of transfer, less the 4 KiB read itself
    assert merge_gap_bytes(50_000, 1e9) == (20_000 - 4096) // 4096 * 4096
    assert merge_gap_bytes(1e6, 1e9) == 0  # a read cheaper than a sector of transfer: never read holes
    assert merge_gap_bytes(100, 1e10, max_read=128 << 10) == 128 << 10  # capped by the read size cap
    assert merge_gap_bytes(None, 1e9) == DEFAULT_MERGE_GAP == merge_gap_bytes(50_000, 0.0)
    assert merge_gap_bytes(None, None, max_read=16 << 10) == 16 << 10 < DEFAULT_MERGE_GAP
    slower = [merge_gap_bytes(iops, 2e9) for iops in (1e3, 1e4, 1e5, 1e6)]
    assert slower == sorted(slower, reverse=True)  # more reads/s: smaller holes worth reading


def _probe(cells: list[tuple[int, int, float]]) -> DiskProbe:
    return DiskProbe(path="/x", file_bytes=1 << 30, direct=True, device={}, measured_at=0.0, seconds_per_cell=0.1,
                     cells=tuple(ProbeCell(depth=d, size=s, iops=r, bytes_per_s=r * s, reads=1, seconds=0.1)
                                 for d, s, r in cells))


def test_the_gap_from_a_probe_takes_its_rates_at_the_depth_used() -> None:
    probe = _probe([(1, 4096, 5_000), (1, 1 << 20, 300), (64, 4096, 40_000), (64, 1 << 20, 2_000)])
    deep = merge_gap_bytes(40_000, 2_000 * (1 << 20))
    assert gap_from_probe(probe, 64, 4096) == deep == gap_from_probe(probe, 200, 4096)  # 200: the 64 cell
    assert gap_from_probe(probe, 1, 4096) == merge_gap_bytes(5_000, 300 * (1 << 20))
    assert gap_from_probe(None, 64, 4096) == DEFAULT_MERGE_GAP


def test_each_needed_row_is_planned_once_and_holes_within_the_gap_merge() -> None:
    rows = np.array([0, 3, 10, 200, 201, 5000])  # 4 KiB rows
    plan = plan_reads(rows, stride=4096, row_bytes=4096, itemsize=4, align=4096, max_read=128 << 10,
                      max_gap=8 << 10)
    assert plan.num_reads == 4  # [0, 3] (a 2-row hole), [10], [200, 201], [5000]
    plan = plan_reads(rows, stride=4096, row_bytes=4096, itemsize=4, align=4096, max_read=128 << 10,
                      max_gap=64 << 10)
    assert plan.num_reads == 3  # 0..10 merged too
    assert (np.diff(plan.offsets) > 0).all()  # each extent once, in file order


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Dataset, np.ndarray]:
    path: Path = tmp_path_factory.mktemp("merged") / "d"
    n, dim = 3000, 1024  # 4 KiB rows
    x = np.random.default_rng(7).standard_normal((n, dim)).astype(np.float32)
    with oa.DatasetWriter(path, num_nodes=n, feature_dim=dim, num_classes=2) as w:
        w.write_csc(np.arange(n + 1, dtype=np.int64), (np.arange(n) + 1) % n)
        w.append_features(x)
    return oa.open_dataset(path), x


@pytest.mark.parametrize("backend", DISK_BACKENDS)
@pytest.mark.parametrize("gap", [0, 4096, 64 << 10, 128 << 10])
def test_merged_reads_return_the_memory_sources_rows_bit_for_bit(dataset: Any, backend: str, gap: int) -> None:
    ds, x = dataset
    rng = np.random.default_rng(gap)
    ids = rng.choice(ds.num_nodes, size=700, replace=True)  # duplicates, random order, holes of every size

    async def body() -> tuple[np.ndarray, np.ndarray, int]:
        async with open_source(ds, backend, max_in_flight=8, max_gap_bytes=gap) as src:
            out = np.empty((len(ids), ds.feature_dim), np.float32)
            await src.read_rows(ids, out)
            reads = src.stats()["reads_submitted"]
        async with open_source(ds, "memory") as mem:
            ref = np.empty_like(out)
            await mem.read_rows(ids, ref)
        return out, ref, reads

    out, ref, reads = run(body())
    assert out.tobytes() == ref.tobytes() == x[ids].tobytes()
    unique = len(np.unique(ids))
    assert (reads < unique) if gap >= 64 << 10 else (reads <= unique)
