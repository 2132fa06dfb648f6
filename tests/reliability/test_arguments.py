"""Arguments checked where they enter (issue 27, item 4): values that used to pass validation and fail
later (numpy's error, torch's ``RuntimeError``, a ``MemoryError``, a bare ``OSError``) are now a
named error at the call, or (a fanout beyond the graph) a documented meaning.  Resume on another
dataset and wrongly typed checkpoints are in ``tests/trainer/test_train.py``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import generated

import outre_async as oa
from outre_async.sampling._sampler import clamp_fanouts
from outre_async.trainer import TrainConfig


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("args") / "g", "tiny", num_nodes=600, feature_dim=8)


@pytest.mark.timeout(120)
def test_a_fanout_beyond_the_largest_in_degree_means_all(ds: oa.Dataset) -> None:
    top = int(np.diff(ds.indptr).max())
    assert clamp_fanouts((top, top - 1, 10**12, -1), top) == (-1, top - 1, -1, -1)
    seeds = np.arange(0, 600, 5)
    want = oa.NeighborSampler(ds, [-1, 3], seed=2).sample(seeds, 7)
    for fanouts in ([10**12, 3], [top, 3], [top + 1, 3]):
        got = oa.NeighborSampler(ds, fanouts, seed=2).sample(seeds, 7)
        np.testing.assert_array_equal(got.n_id, want.n_id)
        np.testing.assert_array_equal(got.edge_index, want.edge_index)
    with oa.OutreLoader(ds, fanouts=[10**12, 5], batch_size=64, io=oa.IOOptions(backend="memory")) as loader:  # was a MemoryError
        assert sum(1 for _ in loader) == len(loader)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", [-1, 1.5, True, "3"])
def test_a_seed_is_a_non_negative_int_everywhere(ds: oa.Dataset, seed: object) -> None:
    for make in (lambda: oa.OutreLoader(ds, fanouts=[5], batch_size=64, seed=seed, io=oa.IOOptions(backend="memory")),
                 lambda: oa.NeighborSampler(ds, [5], seed=seed),
                 lambda: oa.SyncLoader(ds, fanouts=[5], batch_size=64, seed=seed),
                 lambda: TrainConfig(seed=seed)):
        with pytest.raises(oa.ConfigError, match="seed must be a non-negative integer"):
            make()
    oa.NeighborSampler(ds, [5], seed=np.int64(3))  # numpy ints are ints


@pytest.mark.timeout(60)
def test_a_device_this_machine_lacks_is_a_config_error_listing_the_ones_it_has(ds: oa.Dataset) -> None:
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count >= 8:
        pytest.skip("this machine has a cuda:7")
    with pytest.raises(oa.errors.DeviceNotFoundError, match=r"device='cuda:7': no such device on this machine; available: cpu"):
        oa.OutreLoader(ds, fanouts=[5], batch_size=64, device="cuda:7", io=oa.IOOptions(backend="memory"))
    with pytest.raises(oa.ConfigError, match="must be one of auto, cpu, cuda, cuda:N"):
        oa.OutreLoader(ds, fanouts=[5], batch_size=64, device="gpu-please", io=oa.IOOptions(backend="memory"))


@pytest.mark.timeout(60)
def test_a_closed_loaders_iterator_raises_pipeline_closed_sync_and_async(ds: oa.Dataset) -> None:
    loader = oa.OutreLoader(ds, fanouts=[5], batch_size=64, io=oa.IOOptions(backend="memory"))
    it = iter(loader)
    next(it)
    loader.close()
    with pytest.raises(oa.errors.PipelineClosed, match="the loader was closed"):
        next(it)
    assert sum(1 for _ in loader) == len(loader)  # iterating again reopens it
    loader.close()

    async def main() -> None:
        loader = oa.OutreLoader(ds, fanouts=[5], batch_size=64, io=oa.IOOptions(backend="memory"))
        epoch = loader.__aiter__()
        await epoch.__anext__()
        await loader.aclose()
        with pytest.raises(oa.errors.PipelineClosed, match="closed during this epoch"):
            await epoch.__anext__()

    asyncio.run(main())


@pytest.mark.timeout(180)
def test_running_out_of_file_descriptors_is_named(ds: oa.Dataset, tmp_path: Path) -> None:
    """Loaders kept open under ``ulimit -n 64`` (a child process): the one that finds no descriptor
    left raises ``TooManyOpenFilesError`` saying what and what to do, not a bare ``OSError``."""
    script = textwrap.dedent(f"""
        import resource
        import outre_async as oa
        ds = oa.open_dataset({str(ds.path)!r})
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        held = []
        try:
            for i in range(64):
                loader = oa.OutreLoader(ds, fanouts=[5, 5], batch_size=64, io=oa.IOOptions(backend="pread"))
                it = iter(loader)
                next(it)
                held.append((loader, it))
        except oa.errors.TooManyOpenFilesError as exc:
            print("named after", len(held), "loaders:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=150)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "named after" in done.stdout and "ulimit -n" in done.stdout and "EMFILE" in done.stdout, done.stdout
