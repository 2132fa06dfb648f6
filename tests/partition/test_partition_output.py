"""Partition outputs on disk: contents against numpy recomputations, atomic writes, validation on
open, named errors for bad input, and the Bloom filters' false-positive rate."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from bloom_filter2 import BloomFilter
from conftest import generated
from outre_async.partition import _bloom_kernels as K
from outre_async.partition import list_partitions, open_partitions, partition
from outre_async.partition._fennel import bloom_fp_bound

import outre_async as oa


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return generated(tmp_path_factory.mktemp("out") / "g", "tiny", seed=2, feature_dim=4)


@pytest.fixture(scope="module")
def parts(ds: oa.Dataset):
    return partition(ds, 6, name="six", passes=2, chunk_edges=1000)


def _edges(ds: oa.Dataset) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(ds.indices).astype(np.int64), np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))


def test_node_and_train_lists(ds: oa.Dataset, parts) -> None:
    a = parts.assignment
    seen = np.concatenate([parts.nodes(p) for p in range(6)])
    np.testing.assert_array_equal(np.sort(seen), np.arange(ds.num_nodes))  # every node exactly once
    for p in range(6):
        np.testing.assert_array_equal(parts.nodes(p), np.flatnonzero(a == p))
        train = np.sort(ds.split("train"))
        np.testing.assert_array_equal(np.sort(parts.train_nodes(p)), train[a[train] == p])


def test_partition_adjacency_equals_induced_csc(ds: oa.Dataset, parts) -> None:
    for group in ([0], [5, 2], list(range(6))):
        block = parts.read_adjacency(group)
        np.testing.assert_array_equal(block.nodes, np.concatenate([parts.nodes(p) for p in group]))
        for i, v in enumerate(block.nodes):
            np.testing.assert_array_equal(block.indices[block.indptr[i] : block.indptr[i + 1]],
                                          ds.indices[ds.indptr[v] : ds.indptr[v + 1]])


def test_cross_counts_and_quality(ds: oa.Dataset, parts) -> None:
    src, dst = _edges(ds)
    a = parts.assignment
    cut = a[src] != a[dst]
    np.testing.assert_array_equal(parts.cross, np.bincount(dst[cut], minlength=ds.num_nodes))
    q = parts.meta["quality"]
    assert q["edges_cut"] == int(cut.sum())
    assert math.isclose(q["edge_cut_fraction"], cut.mean())
    assert q["node_balance"] <= 1.1 * math.ceil(1.1 * ds.num_nodes / 6) / (1.1 * ds.num_nodes / 6) + 1e-9
    for key in ("seconds", "peak_rss_bytes", "dataset", "config"):
        assert parts.meta[key]
    assert [row["name"] for row in list_partitions(ds)] == ["six"]


def test_written_atomically_and_not_twice(ds: oa.Dataset, parts) -> None:
    root = ds.path / "partitions"
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temp dirs left
    with pytest.raises(oa.errors.PartitionExistsError):
        partition(ds, 3, name="six")
    assert open_partitions(ds, "six").num_parts == 6  # the failed attempt left the old one alone
    again = partition(ds, 3, name="three")
    assert again.num_parts == 3
    assert partition(ds, 4, name="three", overwrite=True).num_parts == 4
    shutil.rmtree(root / "three")


def test_bad_arguments_are_named_errors(ds: oa.Dataset, tmp_path: Path) -> None:
    with pytest.raises(oa.ConfigError, match="parts=0"):
        partition(ds, 0)
    with pytest.raises(oa.ConfigError, match="exceeds the node count"):
        partition(ds, ds.num_nodes + 1)
    with pytest.raises(oa.ConfigError, match="first_level"):
        partition(ds, 10, levels=2, first_level=3)
    with pytest.raises(oa.ConfigError, match="bloom"):
        partition(ds, 4, mode="bloom", passes=2)
    with pytest.raises(oa.errors.DatasetNotFoundError):
        partition(tmp_path / "missing", 4)
    with pytest.raises(oa.errors.PartitionNotFoundError, match="outre partition"):
        open_partitions(ds, "nope")
    assert not (ds.path / "partitions" / "fennel-0").exists()


def _copy(ds: oa.Dataset, parts, name: str) -> Path:
    dst = ds.path / "partitions" / name
    shutil.copytree(parts.path, dst)
    return dst


@pytest.mark.parametrize("damage", ["truncate", "flip", "meta-garbage", "meta-missing", "adj-short", "other-k"])
def test_corrupt_folder_is_refused(ds: oa.Dataset, parts, damage: str) -> None:
    path = _copy(ds, parts, f"bad-{damage}")
    try:
        if damage == "truncate":
            os.truncate(path / "assignment.bin", 10)
        elif damage == "flip":
            raw = bytearray((path / "part_nodes.bin").read_bytes())
            raw[7] ^= 0x40
            (path / "part_nodes.bin").write_bytes(bytes(raw))
        elif damage == "meta-garbage":
            (path / "meta.json").write_text("{not json")
        elif damage == "meta-missing":
            (path / "meta.json").unlink()
        elif damage == "adj-short":
            os.truncate(path / "adj_indices.bin", 4)
        else:
            meta = json.loads((path / "meta.json").read_text())
            meta["num_parts"] = 5
            (path / "meta.json").write_text(json.dumps(meta))
        with pytest.raises(oa.errors.PartitionCorruptError):
            open_partitions(ds, path.name)
        if damage not in ("flip", "other-k"):  # listing checks meta, identity and sizes, not checksums
            status = {r["name"]: r["status"] for r in list_partitions(ds)}
            assert status[path.name] != "ok"
    finally:
        shutil.rmtree(path)


def test_partitions_of_another_dataset_version_are_refused(tmp_path: Path) -> None:
    path = oa.generate(tmp_path / "g", "tiny", seed=4, feature_dim=0)
    partition(path, 4, name="p")
    saved = tmp_path / "saved"
    shutil.copytree(path / "partitions", saved)
    oa.generate(path, "tiny", seed=5, feature_dim=0, overwrite=True)  # same path, new version
    shutil.copytree(saved, path / "partitions")
    with pytest.raises(oa.errors.PartitionMismatchError, match="another version"):
        open_partitions(oa.open_dataset(path), "p")


@pytest.mark.parametrize("error_rate", [0.01, 0.1])
def test_bloom_false_positive_rate_within_bound(error_rate: float) -> None:
    items, probes = 5_000, 200_000
    reference = BloomFilter(max_elements=items, error_rate=error_rate)  # same size and hash count
    nbits = 64 * -(-reference.num_bits_m // 64)
    nhash = reference.num_probes_k
    bits = np.zeros((2, nbits // 64), np.uint64)
    rng = np.random.default_rng(0)
    members = rng.choice(10**9, size=items, replace=False).astype(np.int64)
    K.bloom_add_many(bits, 1, nbits, nhash, members)
    assert K.bloom_count(bits, 1, nbits, nhash, members) == items  # no false negatives
    assert K.bloom_count(bits, 0, nbits, nhash, members) == 0  # filters are independent rows
    others = np.arange(10**9, 10**9 + probes, dtype=np.int64)
    ours = K.bloom_count(bits, 1, nbits, nhash, others) / probes
    bound = bloom_fp_bound(nbits, nhash, items)
    sigma = math.sqrt(bound * (1 - bound) / probes)
    assert ours <= bound + 4 * sigma, (ours, bound)
    for m in members[:2000]:
        reference.add(int(m))
    ref_rate = sum(int(x) in reference for x in others[:20_000]) / 20_000
    ref_bound = bloom_fp_bound(reference.num_bits_m, nhash, 2000)
    assert ref_rate <= ref_bound + 4 * math.sqrt(ref_bound / 20_000) + 1e-3  # the reference meets it too
