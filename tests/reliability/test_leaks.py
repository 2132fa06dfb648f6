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

LOADERS = 50


def rss_bytes() -> int:
    """This process's RSS once garbage waiting for the cyclic collector is gone (that is no leak)."""
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


async def open_read_close(ds: oa.Dataset, backend: str) -> dict:
    """One loader: open, read a one-batch epoch (every row from disk), close; its I/O counters."""
    async with oa.OutreLoader(ds, split=np.arange(512), fanouts=[10, 10], batch_size=512, backend=backend,
                              max_in_flight=8) as loader:
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
