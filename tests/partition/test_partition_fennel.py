"""Streaming FENNEL (numba, chunked reads) against the plain-Python in-memory reference, and the
assignment invariants: every node once, balance within nu, two-level consistency, Bloom filters."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import write_store
from outre_async.partition import PartitionConfig
from outre_async.partition._fennel import level_params, stream_partition, train_mask
from reference_fennel import reference_fennel

import outre_async as oa


def _random_dataset(path: Path, n: int, seed: int, *, avg_deg: int = 6, train_frac: float = 0.4) -> oa.Dataset:
    rng = np.random.default_rng(seed)
    deg = rng.integers(0, 2 * avg_deg, size=n)
    deg[rng.integers(0, n)] = n // 2  # a hub longer than the small test chunks
    indptr = np.concatenate([[0], np.cumsum(deg)])
    src = rng.integers(0, n, size=int(indptr[-1]))
    # some locality, so that there is structure to find
    dst = np.repeat(np.arange(n), deg)
    near = rng.random(len(src)) < 0.6
    src[near] = (dst[near] + rng.integers(-8, 9, size=int(near.sum()))) % n
    return write_store(path, indptr, src, splits={"train": rng.permutation(n)[: int(train_frac * n)]})


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return _random_dataset(tmp_path_factory.mktemp("fennel") / "g", 700, seed=1)


def _reference(ds: oa.Dataset, cfg: PartitionConfig, order=None) -> np.ndarray:
    mask = train_mask(ds)
    params = level_params(cfg, cfg.k1, np.array([ds.num_nodes]), np.array([mask.sum()]),
                          np.array([ds.num_edges / 2]))
    return reference_fennel(ds.indptr, np.asarray(ds.indices), mask, params, passes=cfg.passes, order=order)


@pytest.mark.parametrize("k", [1, 2, 7, 32])
@pytest.mark.parametrize("passes", [1, 3])
def test_streaming_equals_in_memory_reference(small: oa.Dataset, k: int, passes: int) -> None:
    cfg = PartitionConfig(parts=k, passes=passes, chunk_edges=97)  # many chunks, hub larger than one
    got = stream_partition(small, cfg).assign
    np.testing.assert_array_equal(got, _reference(small, cfg))


def test_ldg_objective_and_given_order_match_reference(small: oa.Dataset) -> None:
    order = np.random.default_rng(5).permutation(small.num_nodes)
    for objective in ("fennel", "ldg"):
        cfg = PartitionConfig(parts=5, objective=objective, chunk_edges=300)
        got = stream_partition(small, cfg, order=order).assign
        np.testing.assert_array_equal(got, _reference(small, cfg, order=order))


@pytest.mark.parametrize("k", [3, 16, 64])
def test_every_node_once_and_balance_within_nu(small: oa.Dataset, k: int) -> None:
    cfg = PartitionConfig(parts=k, passes=2)
    res = stream_partition(small, cfg)
    a = res.assign
    assert a.shape == (small.num_nodes,) and a.min() >= 0 and a.max() < k
    sizes = np.bincount(a, minlength=k)
    assert sizes.sum() == small.num_nodes
    assert sizes.max() <= math.ceil(cfg.nu * small.num_nodes / k)
    train = small.split("train")
    tsizes = np.bincount(a[train], minlength=k)
    if res.stats["train_cap_fallbacks"] == 0:
        assert tsizes.max() <= math.ceil(cfg.nu * len(train) / k)


def test_fennel_finds_planted_communities(tmp_path: Path) -> None:
    path = oa.generate(tmp_path / "g", "tiny", seed=3, feature_dim=0, num_communities=8, num_classes=4,
                       mixing_intra=0.9)
    ds = oa.open_dataset(path)
    k = 8
    fennel = stream_partition(ds, PartitionConfig(parts=k, passes=3)).assign
    hashed = (np.arange(ds.num_nodes) * 2654435761 % 2**32) % k
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))
    src = np.asarray(ds.indices)
    cut_f = float((fennel[src] != fennel[dst]).mean())
    cut_h = float((hashed[src] != hashed[dst]).mean())
    assert cut_f < 0.6 * cut_h


def test_two_level_is_consistent_with_its_levels(small: oa.Dataset) -> None:
    cfg = PartitionConfig(parts=12, levels=2, first_level=3, chunk_edges=200)
    res = stream_partition(small, cfg)
    assert res.level1 is not None
    np.testing.assert_array_equal(res.assign // 4, res.level1)
    one = stream_partition(small, PartitionConfig(parts=3, chunk_edges=200)).assign
    np.testing.assert_array_equal(res.level1, one)  # the first level is a single-level run with k1
    mask = train_mask(small)
    sizes1 = np.bincount(res.level1, minlength=3)
    for g in range(3):
        sub = np.bincount(res.assign[res.level1 == g] - 4 * g, minlength=4)
        assert sub.sum() == sizes1[g] and sub.max() <= math.ceil(cfg.nu * small.num_nodes / 12)
    # the second level equals the reference run per first-level group
    dst = np.repeat(np.arange(small.num_nodes), np.diff(small.indptr))
    src = np.asarray(small.indices)
    internal = np.bincount(res.level1[dst][res.level1[src] == res.level1[dst]], minlength=3)
    params = level_params(cfg, 4, sizes1, np.bincount(res.level1[mask], minlength=3), internal / 2,
                          even=(small.num_nodes / 12, mask.sum() / 12))
    ref = reference_fennel(small.indptr, src, mask, params, node_group=res.level1)
    np.testing.assert_array_equal(res.assign, ref)


def test_bloom_mode_assigns_every_node_within_balance(small: oa.Dataset) -> None:
    cfg = PartitionConfig(parts=8, mode="bloom", bloom_bytes=1 << 14)
    a = stream_partition(small, cfg).assign
    sizes = np.bincount(a, minlength=8)
    assert sizes.sum() == small.num_nodes and sizes.max() <= math.ceil(1.1 * small.num_nodes / 8)
    two = stream_partition(small, PartitionConfig(parts=8, levels=2, first_level=2, mode="bloom",
                                                  bloom_bytes=1 << 14)).assign
    assert np.bincount(two, minlength=8).sum() == small.num_nodes


def test_bloom_with_large_filters_equals_exact(small: oa.Dataset) -> None:
    # with (practically) no false positives, Bloom intersections are the exact ones
    exact = stream_partition(small, PartitionConfig(parts=6)).assign
    bloom = stream_partition(small, PartitionConfig(parts=6, mode="bloom", bloom_bytes=1 << 22)).assign
    np.testing.assert_array_equal(bloom, exact)


def test_partitioner_does_not_import_torch() -> None:
    code = ("import importlib, pkgutil, sys, outre_async.partition as p\n"
            "mods = [m.name for m in pkgutil.iter_modules(p.__path__, 'outre_async.partition.')]\n"
            "assert len(mods) >= 3, mods\n"
            "for m in mods: importlib.import_module(m)\n"
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-P", "-c", code], check=True)  # -P: the installed package, not ./outre_async
