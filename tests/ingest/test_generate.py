"""The synthetic graph generator: determinism, the planted structure it promises, and its errors.

Statistical checks use seeded graphs, so they are deterministic; their bounds leave several standard
deviations of room yet fail if the structure (communities, heavy tail, label signal) is missing.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import generated

import outre_async as oa
from outre_async._rng import py_next_u64
from outre_async.ingest import _gen_kernels as kernels
from outre_async.ingest import _generate
from outre_async.ingest._generate import planted_communities

TINY = oa.PRESETS["tiny"]
SMALL = dict(num_nodes=400, avg_degree=6.0, max_degree=60, num_communities=8, num_classes=4,
             feature_dim=8)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("gen") / "tiny", "tiny")


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def _edges(ds: oa.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` of every edge."""
    return np.asarray(ds.indices), np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))


# -- API, presets, counts --------------------------------------------------------------------------


def test_presets_cover_the_documented_shapes() -> None:
    assert {"tiny", "quickstart", "products-like", "papers-like", "igb-like"} <= set(oa.PRESETS)
    for name, cfg in oa.PRESETS.items():
        assert isinstance(cfg, oa.GeneratorConfig) and cfg.name == name
    assert oa.PRESETS["products-like"].num_classes == 47
    assert oa.PRESETS["papers-like"].num_classes == 172
    assert oa.PRESETS["igb-like"].feature_dim == 1024
    assert TINY.num_nodes <= 5_000


def test_tiny_opens_with_the_configured_counts(tiny: oa.Dataset) -> None:
    assert (tiny.num_nodes, tiny.feature_dim, tiny.num_classes) == (2_000, 32, 8)
    assert tiny.feature_dtype == np.float32
    assert abs(tiny.num_edges / tiny.num_nodes - TINY.avg_degree) < 0.1 * TINY.avg_degree
    assert tiny.manifest.meta["generator"] == {"model": "dc-sbm", "version": 1,
                                               **TINY.as_dict(), "seed": 0}
    assert set(np.unique(tiny.labels)) == set(range(8))
    tiny.verify()


def test_neighbour_lists_are_sorted_distinct_and_loop_free(tiny: oa.Dataset) -> None:
    src, dst = _edges(tiny)
    same_list = dst[1:] == dst[:-1]
    assert (src[1:][same_list] > src[:-1][same_list]).all()  # strictly increasing: sorted, distinct
    assert not (src == dst).any()
    assert np.diff(tiny.indptr).max() <= TINY.max_degree


def test_splits_are_disjoint_and_sized(tiny: oa.Dataset) -> None:
    splits = {name: tiny.split(name) for name in ("train", "val", "test")}
    assert {k: len(v) for k, v in splits.items()} == {"train": 1_000, "val": 400, "test": 600}
    together = np.concatenate(list(splits.values()))
    assert len(np.unique(together)) == len(together)
    assert all((np.diff(ids) > 0).all() for ids in splits.values())


def test_overrides_replace_fields_and_feature_dim_zero_is_topology_only(tmp_path: Path) -> None:
    ds = oa.open_dataset(oa.generate(tmp_path / "g", "tiny", num_nodes=777, feature_dim=0))
    assert (ds.num_nodes, ds.feature_dim) == (777, 0)
    assert ds.manifest.meta["generator"]["num_nodes"] == 777


def test_float16_features_round_the_float32_ones(tmp_path: Path) -> None:
    full = oa.open_dataset(oa.generate(tmp_path / "f32", "tiny", **SMALL))
    half = oa.open_dataset(oa.generate(tmp_path / "f16", "tiny", feature_dtype="float16", **SMALL))
    assert half.feature_dtype == np.float16
    np.testing.assert_array_equal(np.asarray(half.features),
                                  np.asarray(full.features).astype(np.float16))


# -- determinism -----------------------------------------------------------------------------------


def test_same_seed_gives_identical_bytes_whatever_the_chunking(tmp_path: Path) -> None:
    first = oa.generate(tmp_path / "a", "tiny", seed=7)
    again = oa.generate(tmp_path / "b", "tiny", seed=7, chunk_nodes=333)
    assert _files(first) == _files(again)


def test_another_seed_gives_another_graph(tmp_path: Path, tiny: oa.Dataset) -> None:
    other = oa.open_dataset(oa.generate(tmp_path / "c", "tiny", seed=1))
    assert not np.array_equal(np.asarray(other.features), np.asarray(tiny.features))
    assert other.num_edges != tiny.num_edges or not np.array_equal(other.indices, tiny.indices)
    assert not np.array_equal(other.split("train"), tiny.split("train"))


def test_kernels_give_the_same_dataset_as_plain_python(tmp_path: Path) -> None:
    """``NUMBA_DISABLE_JIT=1`` runs the kernels as Python: the bytes must not change."""
    script = (f"import outre_async as oa; oa.generate({str(tmp_path / 'nojit')!r}, 'tiny', "
              f"seed=3, **{SMALL!r})")
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    subprocess.run([sys.executable, "-P", "-W", "error", "-c", script], env=env, check=True, timeout=120)
    jitted = oa.generate(tmp_path / "jit", "tiny", seed=3, **SMALL)
    assert _files(tmp_path / "nojit") == _files(jitted)


# -- the planted structure -------------------------------------------------------------------------


def test_edges_stay_in_their_community_at_the_mixing_rate(tiny: oa.Dataset) -> None:
    community = planted_communities("tiny")
    src, dst = _edges(tiny)
    intra = community[src] == community[dst]
    assert intra.mean() > 10 / TINY.num_communities  # a random graph would have ~1/32
    assert TINY.mixing_intra - 0.08 < intra.mean() <= TINY.mixing_intra + 0.01
    # nodes whose community can supply their whole intra share realise mixing_intra itself
    sizes = np.bincount(community)
    roomy = np.diff(tiny.indptr)[dst] < sizes[community[dst]] / 4
    assert abs(intra[roomy].mean() - TINY.mixing_intra) < 0.02


def test_node_ids_hide_the_communities_unless_asked() -> None:
    shuffled = planted_communities("tiny")
    contiguous = planted_communities("tiny", shuffle_ids=False)
    assert (np.diff(contiguous) >= 0).all()
    assert (np.diff(shuffled) == 0).mean() < 0.2
    assert np.array_equal(np.bincount(shuffled), np.bincount(contiguous))
    sizes = np.bincount(shuffled)
    assert sizes.min() >= 2 and sizes.max() >= 4 * sizes.min()  # heavy-tailed sizes


def test_in_degrees_follow_the_configured_power_law(tmp_path: Path) -> None:
    """Hill's estimator of the in-degree tail recovers ``degree_exponent``; out-degrees are heavy
    too (sources are drawn by the same weights)."""
    path = oa.generate(tmp_path / "tail", "tiny", num_nodes=20_000, avg_degree=10.0,
                       max_degree=2_000, degree_exponent=2.5, num_communities=40, feature_dim=0)
    ds = oa.open_dataset(path)
    degree, out_degree = np.diff(ds.indptr), np.bincount(ds.indices, minlength=ds.num_nodes)
    tail = degree[degree >= 20].astype(np.float64)
    hill = 1 + len(tail) / np.log(tail / 19.5).sum()
    assert abs(hill - 2.5) < 0.15
    assert degree.max() > 50 * degree.mean()
    assert out_degree.max() > 30 * out_degree.mean()


def test_features_reveal_the_class_weakly_and_neighbourhoods_strongly(tiny: oa.Dataset) -> None:
    """Nearest class centroid on raw rows (what an MLP can do) beats chance but stays weak; on
    rows averaged with their in-neighbours (what a GNN does) it is far better."""
    x, y = np.asarray(tiny.features, dtype=np.float64), tiny.labels
    src, dst = _edges(tiny)
    smooth = x.copy()
    np.add.at(smooth, dst, x[src])
    smooth /= (np.diff(tiny.indptr) + 1)[:, None]
    train, test = tiny.split("train"), tiny.split("test")

    def accuracy(z: np.ndarray) -> float:
        centroids = np.stack([z[train][y[train] == c].mean(0) for c in range(tiny.num_classes)])
        guess = ((z[test][:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
        return float((guess == y[test]).mean())

    raw, averaged = accuracy(x), accuracy(smooth)
    assert 1 / 8 + 0.1 < raw < 0.6
    assert averaged > raw + 0.3


# -- kernels against simple references --------------------------------------------------------------


def test_alias_tables_reproduce_the_weights_exactly() -> None:
    weights = np.array([5.0, 1.0, 1.0, 3.0, 0.5, 7.0, 2.0])
    ptr = np.array([0, 3, 7])  # two groups: members[0:3] and members[3:7]
    members = np.array([6, 0, 3, 1, 5, 2, 4])
    table = np.empty((7, 4), dtype=np.int32)
    with np.errstate(over="ignore"):
        kernels.alias_tables(ptr, members, weights, table)
    for lo, hi in zip(ptr[:-1], ptr[1:], strict=True):
        keep = table[lo:hi, 0] / 2**31
        prob = np.zeros(len(weights))
        np.add.at(prob, table[lo:hi, 1], keep / (hi - lo))
        np.add.at(prob, table[lo:hi, 2], (1 - keep) / (hi - lo))
        group = members[lo:hi]
        np.testing.assert_allclose(prob[group], weights[group] / weights[group].sum(), atol=1e-8)
        assert prob.sum() == pytest.approx(1.0)


def test_scalar_streams_are_the_rng_module_splitmix() -> None:
    state, reference = np.uint64(12345), 12345
    with np.errstate(over="ignore"):
        for _ in range(5):
            state, word = kernels.next_word(np.uint64(state))
            expected, reference = py_next_u64(reference)
            assert int(word) == expected


def test_feature_noise_is_standard_normal() -> None:
    rows = np.empty((64, 1024), dtype=np.float32)
    with np.errstate(over="ignore"):
        kernels.feature_rows(np.uint64(99), 0, np.zeros(64, np.int64), np.zeros((1, 1024), np.float32),
                             1.0, *kernels.ziggurat_tables(), rows)
    x = rows.ravel().astype(np.float64)
    assert abs(x.mean()) < 0.02 and abs(x.std() - 1) < 0.02
    assert 0.0021 < (np.abs(x) > 3).mean() < 0.0033  # N(0,1): 0.0027
    assert (np.abs(x) > kernels._ZIGGURAT_R).any()  # the tail path runs


def test_pareto_xmin_hits_the_mean() -> None:
    for exponent in (1.5, 2.0, 2.5, 3.5):
        xmin = _generate.pareto_xmin(12.0, 500.0, exponent)
        assert _generate._pareto_mean(xmin, 500.0, exponent) == pytest.approx(12.0, rel=1e-9)


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value"), [
    ("num_nodes", 1), ("num_nodes", 2.5), ("avg_degree", 0.0), ("avg_degree", 500.0),
    ("num_classes", 40), ("num_communities", 0), ("mixing_intra", 1.5), ("degree_exponent", 1.0),
    ("feature_dtype", "float64"), ("feature_dim", -1), ("train_fraction", 0.9),
    ("feature_noise", float("nan")), ("name", ""),
])
def test_bad_config_names_the_offending_value(tmp_path: Path, field: str, value: object) -> None:
    with pytest.raises(oa.ConfigError, match=field):
        dataclasses.replace(TINY, **{field: value})
    with pytest.raises(oa.ConfigError, match=field):
        oa.generate(tmp_path / "g", "tiny", **{field: value})
    assert list(tmp_path.iterdir()) == []


def test_unknown_names_list_the_choices(tmp_path: Path) -> None:
    with pytest.raises(oa.ConfigError, match="tiny.*quickstart"):
        oa.generate(tmp_path / "g", "no-such-preset")
    with pytest.raises(oa.ConfigError, match="num_nodes"):
        oa.generate(tmp_path / "g", "tiny", nodes=10)
    with pytest.raises(oa.ConfigError, match="seed"):
        oa.generate(tmp_path / "g", "tiny", seed=-1)
    with pytest.raises(oa.ConfigError, match="chunk_nodes"):
        oa.generate(tmp_path / "g", "tiny", chunk_nodes=0)
    assert list(tmp_path.iterdir()) == []


def test_failure_midway_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(_generate, "_features", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        oa.generate(tmp_path / "g", "tiny", chunk_nodes=500)
    assert list(tmp_path.iterdir()) == []


def test_existing_output_needs_overwrite(tmp_path: Path) -> None:
    path = oa.generate(tmp_path / "g", "tiny", **SMALL)
    with pytest.raises(oa.errors.DatasetExistsError):
        oa.generate(path, "tiny", **SMALL)
    oa.generate(path, "tiny", seed=1, overwrite=True, **SMALL)
    assert oa.open_dataset(path).manifest.meta["generator"]["seed"] == 1
