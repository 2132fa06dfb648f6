"""The tier contract (``features._tier``): every tier over every fallback returns the source's rows,
bit for bit (random, duplicate, sorted and empty ids), through both the host path (``read_rows``)
and the batch path (``read_batch`` + ``assemble_x``, the GPU tier's device assembly, run here on
the CPU); budgets hold; policies and tiers are chosen by name; the stats add up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from conftest import run

import outre_async as oa
from outre_async.features import (
    EVICTION_POLICIES,
    TIERS,
    DeviceFeatureCache,
    FeatureBuffer,
    FeatureTier,
    GpuTier,
    SourceTier,
    StaticFeatureCache,
    detect_io_uring,
    make_tier,
    open_source,
)
from outre_async.features._device_rows import assemble_x
from outre_async.features._gpu_tier import gpu_cache_bytes, gpu_tier_rows, rank_rows
from outre_async.store import RowFormat

pytestmark = pytest.mark.timeout(120)

N, DIM = 700, 33
BACKENDS = ["memory", "pread", pytest.param("io_uring", marks=pytest.mark.skipif(not detect_io_uring(),
                                                                                   reason="io_uring unavailable"))]
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Dataset, np.ndarray]:
    path = tmp_path_factory.mktemp("tiers") / "ds"
    x = np.random.default_rng(7).standard_normal((N, DIM)).astype(np.float32)
    with oa.DatasetWriter(path, num_nodes=N, feature_dim=DIM, num_classes=2) as w:
        w.write_csc(np.arange(N + 1, dtype=np.int64), (np.arange(N) + 1) % N)
        w.append_features(x)
    return oa.open_dataset(path), x


def id_sets() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"random": rng.integers(0, N, 400), "duplicates": np.repeat(rng.integers(0, N, 50), 5),
            "sorted": np.arange(0, N, 3), "empty": np.empty(0, np.int64), "all": rng.permutation(N),
            "one": np.array([N - 1])}


def static_cache(rows: np.ndarray | None = None) -> StaticFeatureCache:
    nodes = np.arange(0, N, 4) if rows is None else rows
    return StaticFeatureCache(nodes, N, DIM)


def gpu_cache(device: str = "cpu") -> DeviceFeatureCache:
    return DeviceFeatureCache(np.arange(1, N, 5), N, DIM, device=device)


# each chain: the names top to bottom, and how to build it over a source
Builder = Callable[[Any, dict[str, Any]], FeatureTier]


def chain(names: tuple[str, ...], buffer_slots: int = 64) -> Builder:
    def build(source: Any, caches: dict[str, Any]) -> FeatureTier:
        top: Any = source
        for name in reversed(names):
            if name == "source":
                top = make_tier("source", top)
            elif name == "buffer":
                top = make_tier("buffer", top, buffer=FeatureBuffer(N, buffer_slots, DIM), piece_rows=16)
            else:
                top = make_tier(name, top, cache=caches[name])
        return top
    return build


CHAINS = [("source",), ("buffer", "source"), ("static", "source"), ("static", "buffer", "source"),
          ("gpu", "source"), ("gpu", "buffer", "source"), ("gpu", "static", "source"),
          ("gpu", "static", "buffer", "source"), ("buffer", "static", "source"), ("buffer", "gpu", "source"),
          ("buffer", "buffer", "source")]


async def read_all(store: tuple[oa.Dataset, np.ndarray], backend: str, names: tuple[str, ...],
                   device: str = "cpu") -> None:
    ds, x = store
    async with open_source(ds, backend) as source:  # type: ignore[arg-type]
        caches = {"static": static_cache(), "gpu": gpu_cache(device)}
        for cache in caches.values():
            await cache.load(source)
        top = chain(names)(source, caches)
        assert [t.name for t in top.chain()] == list(names)
        for label, ids in id_sets().items():
            out = np.full((len(ids), DIM), np.nan, np.float32)
            await top.read_rows(ids, out)
            np.testing.assert_array_equal(out, x[ids], err_msg=f"read_rows {names} {label}")
            out = np.full((len(ids), DIM), np.nan, np.float32)
            rows = await top.read_batch(ids, out)
            host = torch.from_numpy(out if rows is None else out[: len(rows.miss_pos)])
            got = assemble_x(host.to(device), rows)
            assert got.device.type == torch.device(device).type
            np.testing.assert_array_equal(got.cpu().numpy(), x[ids], err_msg=f"read_batch {names} {label}")
            if rows is not None:  # the accelerator's torch path, run here on the tier's device too
                got = rows.assemble_device(host.to(device))
                np.testing.assert_array_equal(got.cpu().numpy(), x[ids], err_msg=f"assemble_device {names} {label}")
        all_stats = top.chain_stats()
        assert len(all_stats) == len(names)
        for name, stats in all_stats.items():
            assert stats["tier"] == name.split("#")[0] and stats["hits"] >= 0 and stats["misses"] >= 0
            assert 0.0 <= stats["hit_rate"] <= 1.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("names", CHAINS, ids="-".join)
def test_every_tier_over_every_fallback_returns_the_source_rows(store: tuple, backend: str,
                                                                 names: tuple[str, ...]) -> None:
    run(read_all(store, backend, names))


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("names", [("gpu", "source"), ("gpu", "static", "buffer", "source")], ids="-".join)
def test_gpu_tier_on_cuda_returns_the_source_rows(store: tuple, names: tuple[str, ...]) -> None:
    run(read_all(store, "memory", names, device="cuda"))


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_gpu_tier_rows_live_on_the_device_and_only_misses_are_host_rows(store: tuple) -> None:
    ds, x = store

    async def main() -> None:
        async with open_source(ds, "memory") as source:
            cache = gpu_cache("cuda")
            await cache.load(source)
            assert cache.rows.is_cuda and cache.rows.shape == (len(cache.nodes), DIM)
            tier = GpuTier(SourceTier(source), cache)
            ids = np.arange(N)
            out = np.zeros((N, DIM), np.float32)
            rows = await tier.read_batch(ids, out)
            assert rows is not None and len(rows.miss_pos) == N - len(cache.nodes)
            got = assemble_x(torch.from_numpy(out[: len(rows.miss_pos)]).cuda(), rows)
            assert got.is_cuda
            torch.testing.assert_close(got.cpu(), torch.from_numpy(x), rtol=0, atol=0)

    run(main())


def test_tier_stats_add_up(store: tuple) -> None:
    ds, _ = store

    async def main() -> dict[str, dict[str, Any]]:
        async with open_source(ds, "memory") as source:
            caches = {"static": static_cache(), "gpu": gpu_cache()}
            for cache in caches.values():
                await cache.load(source)
            top = chain(("gpu", "static", "buffer", "source"))(source, caches)
            ids = np.arange(N)
            await top.read_batch(ids, np.zeros((N, DIM), np.float32))
            return top.chain_stats()

    stats = run(main())
    assert list(stats) == ["gpu", "static", "buffer", "source"]
    gpu_rows = len(np.arange(1, N, 5))
    static_rows = len(np.setdiff1d(np.arange(0, N, 4), np.arange(1, N, 5)))
    assert (stats["gpu"]["hits"], stats["gpu"]["misses"]) == (gpu_rows, N - gpu_rows)
    assert stats["gpu"]["pcie_bytes_saved"] == gpu_rows * 4 * DIM
    assert stats["gpu"]["bytes_held"] == gpu_rows * 4 * DIM and stats["gpu"]["host_index_bytes"] == 4 * N
    assert (stats["static"]["hits"], stats["static"]["misses"]) == (static_rows, N - gpu_rows - static_rows)
    # each tier passes its misses down: what one tier misses is what the next one is asked
    assert stats["buffer"]["hits"] + stats["buffer"]["misses"] == stats["static"]["misses"]
    assert stats["source"]["hits"] == stats["buffer"]["misses"] and stats["source"]["misses"] == 0
    assert stats["buffer"]["policy"] == "lru-lookahead"


def test_budgets_hold() -> None:
    row = RowFormat.float32(DIM).held_row_bytes
    assert gpu_tier_rows(row, row_bytes=row, num_nodes=N) == 1
    assert gpu_tier_rows(row * 10 + row - 1, row_bytes=row, num_nodes=N) == 10  # never more rows than the bytes allow
    assert gpu_tier_rows(10**12, row_bytes=row, num_nodes=N) == N  # never more than every node
    assert gpu_cache_bytes(gpu_tier_rows(12345, row_bytes=row, num_nodes=N), row_bytes=row) <= 12345
    with pytest.raises(oa.ConfigError, match="holds no feature row"):
        gpu_tier_rows(row - 1, row_bytes=row, num_nodes=N)
    with pytest.raises(oa.ConfigError, match="ascending unique"):
        DeviceFeatureCache(np.array([3, 3]), N, DIM)
    with pytest.raises(oa.ConfigError, match="smaller than"):
        FeatureBuffer(N, 0, DIM)


def test_rank_rows_by_falling_count_then_id() -> None:
    np.testing.assert_array_equal(rank_rows(np.array([0.0, 2, 5, 2, 0, 1])), [2, 1, 3, 5])


def test_policies_and_tiers_by_name(store: tuple) -> None:
    assert "lru-lookahead" in EVICTION_POLICIES and TIERS == ("gpu", "static", "buffer", "source")
    assert FeatureBuffer(N, 8, DIM, policy="lru-lookahead").policy == "lru-lookahead"
    assert FeatureBuffer(N, 8, DIM, policy="next-use").policy == "next-use"  # issue 26: built
    with pytest.raises(oa.ConfigError, match="must be one of"):
        FeatureBuffer(N, 8, DIM, policy="fifo")
    ds, _ = store
    source = open_source(ds, "memory")
    with pytest.raises(oa.ConfigError, match="must be one of"):
        make_tier("disk", source)
    with pytest.raises(oa.ConfigError, match="wraps a FeatureSource"):
        make_tier("source", SourceTier(source))
    with pytest.raises(oa.ConfigError, match="dim"):
        make_tier("buffer", source, buffer=FeatureBuffer(N, 8, DIM + 1))


def test_bad_calls_are_named_errors(store: tuple) -> None:
    ds, _ = store

    async def main() -> None:
        async with open_source(ds, "memory") as source:
            top = make_tier("gpu", source, cache=gpu_cache())
            with pytest.raises(oa.ConfigError, match="not loaded"):
                await top.read_rows(np.array([1]), np.zeros((1, DIM), np.float32))
            await top.cache.load(source)  # type: ignore[attr-defined]
            with pytest.raises(oa.ConfigError, match=r"ids must lie in \[0, 700\)"):
                await top.read_rows(np.array([N]), np.zeros((1, DIM), np.float32))
            with pytest.raises(oa.ConfigError, match=r"ids must lie"):
                await top.read_batch(np.array([-1]), np.zeros((1, DIM), np.float32))
            with pytest.raises(oa.ConfigError, match="float32 ndarray of shape"):
                await top.read_rows(np.array([1, 2]), np.zeros((1, DIM), np.float32))
            with pytest.raises(oa.ConfigError, match="1-D integer"):
                await top.read_rows(np.array([1.0]), np.zeros((1, DIM), np.float32))

    run(main())


def test_tiers_are_exported_from_the_package() -> None:
    import outre_async.features as features

    assert {"FeatureTier", "GpuTier", "StaticTier", "BufferTier", "SourceTier", "make_tier"} <= set(features.__all__)
