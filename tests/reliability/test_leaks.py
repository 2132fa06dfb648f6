"""Free what you take: opening and closing loaders does not grow the process (issue 11, item 6).

The io_uring source's staging arenas hold the biggest allocations a loader makes besides its feature
buffer (tens of MiB for a batch of a few thousand rows).  They are given back at close; RSS of this
process is measured across 50 loader openings that each read a batch, so a leak of even 0.5 MiB
per loader fails (before the fix: +46 MiB per loader here).  Both disk backends run, each in its own epoch loop.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest
from conftest import generated, run

import outre_async as oa
from outre_async.features import detect_io_uring
from outre_async.loader._options import group_knobs

LOADERS = 50


def rss_bytes() -> int:
    """This process's RSS once garbage waiting for the cyclic collector is gone (that is no leak)."""
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


async def open_read_close(ds: oa.Dataset, backend: str) -> dict:
    """One loader: open, read a one-batch epoch (every row from disk), close; its I/O counters."""
    async with oa.OutreLoader(ds, split=np.arange(512), fanouts=[10, 10], batch_size=512, 
                              io=oa.IOOptions(backend=backend, max_in_flight=8)) as loader:
        async for _batch in loader:
            pass
        return dict(loader.stats()["io"])


# 250 float32: rows go through staging arenas; 256 float32 (1 KiB rows): io_uring reads them straight
# into the buffer's slots (no arena), pread stages them
@pytest.mark.parametrize("dim", [250, 256])
@pytest.mark.parametrize("backend", ["io_uring", "pread"])
def test_fifty_loaders_open_and_close_without_growing_rss(tmp_path: Path, backend: str, dim: int) -> None:
    if backend == "io_uring" and not detect_io_uring():
        pytest.skip("io_uring is not available here")
    ds = generated(tmp_path / "g", "tiny", num_nodes=6_000, feature_dim=dim)

    async def main() -> tuple[dict, int, int]:
        io = await open_read_close(ds, backend)  # warm: kernels, allocator, first arenas
        await open_read_close(ds, backend)
        before = rss_bytes()
        for _ in range(LOADERS):
            await open_read_close(ds, backend)
        return io, before, rss_bytes()

    io, before, after = run(main(), timeout=120)
    if backend == "io_uring" and dim == 256:  # every row went to its slot: no staging to leak
        assert io["rows_into_slots"] == io["unique_rows"] > 1000 and io["staging_bytes_peak"] == 0
    else:  # the loaders did stage several MiB each: a leak of them would show
        assert io["staging_bytes_peak"] >= 2 << 20
    assert after - before < 20 << 20, f"RSS grew {(after - before) / 2**20:.1f} MiB over {LOADERS} loaders"


CYCLES = 30


@pytest.mark.timeout(600)
def test_thirty_loaders_with_history_and_profile_open_and_close_without_growing_rss(tmp_path: Path) -> None:
    """Issue 27: 30 open/close cycles of a loader with the history cache and a profile's plan (static
    feature cache, history slots), each running a short epoch through a model that pulls and pushes:
    RSS grows less than 20 MiB (the history table, static cache and plan are released at close)."""
    import torch

    from outre_async.plan import MissCosts

    ds = generated(tmp_path / "g", "tiny", num_nodes=4_000, feature_dim=64)
    opts = {"split": np.arange(2048), "fanouts": [5, 5], "batch_size": 128, "memory_budget": "16MiB",
            "backend": "pread", "history": oa.HistoryConfig(staleness=20, dim=16)}
    oa.profile(ds, name="leak", costs=MissCosts(row_us=20.0, list_us=2.0, recompute_us=50.0, backend="fixed"),
               **group_knobs(opts))
    probe = oa.OutreLoader(ds, **group_knobs(dict(profile="leak", **opts)))
    assert probe.config.history is not None and probe._static is not None  # the plan keeps both caches
    probe.close()
    model = oa.GraphSAGE(ds.feature_dim, 16, 2, ds.num_classes)

    def cycle() -> int:
        with oa.OutreLoader(ds, **group_knobs(dict(profile="leak", **opts))) as loader:
            batches = 0
            for batch in loader:
                with torch.no_grad():
                    model(batch.x, batch.edge_index, history=batch.history)
                batches += 1
            assert loader.stats()["history"]["pushed"] > 0
        return batches

    cycle()
    cycle()  # warm: kernels, allocator
    before = rss_bytes()
    assert sum(cycle() for _ in range(CYCLES)) == 16 * CYCLES
    after = rss_bytes()
    assert after - before < 20 << 20, f"RSS grew {(after - before) / 2**20:.1f} MiB over {CYCLES} loaders"
