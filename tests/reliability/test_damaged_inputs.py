"""Damaged datasets, partition folders and ``.npz`` inputs (``damage.py``) end in a named error: the CLI
exits 2 with one line on stderr and no traceback, nothing outside the folder is opened, the input is
left as it was (no temp folder either).  Each run is a forked child of one ``runner.py`` process, so
a segfault is that case's failure.  The suite runs every seventh variant of each class;
``benchmarks/reliability_sweep.py`` runs them all.

Also here: a partition folder replaced under a live loader, and the errors that must name the file and
the position in it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import generated
from damage import CLASSES, PART, Damage, make_base
from outre_async.partition import open_partitions, partition
from runner import classify, jobs_for, run_jobs

import outre_async as oa

SUITE: list[Damage] = [d for make in CLASSES.values() for d in make()[::7]]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    root = tmp_path_factory.mktemp("damage")
    base = make_base(root)
    by_damage: dict[str, list[dict]] = {}
    jobs = []
    for i, d in enumerate(SUITE):
        mine = jobs_for(d, base, root / f"case{i}", root)
        by_damage[d.id] = mine
        jobs += mine
    results = run_jobs(jobs, root, timeout=600)
    return {d.id: [results[j["id"]] for j in by_damage[d.id]] for d in SUITE}


@pytest.mark.parametrize("damage", SUITE, ids=lambda d: d.id)
def test_damaged_input_ends_in_one_named_error(swept: dict[str, list[dict]], damage: Damage) -> None:
    for result in swept[damage.id]:
        assert classify(damage, result) in ("named-error", "unread"), result
        assert result["outside"] == []
        assert result["changed"] == [], result["changed"]  # input untouched, no temp folder left


def test_every_class_is_in_the_suite() -> None:
    assert {d.kind for d in SUITE} == set(CLASSES)


def _edges_exist(ds: oa.Dataset, batch) -> bool:
    n_id = batch.n_id.numpy()
    src, dst = n_id[batch.edge_index[0].numpy()], n_id[batch.edge_index[1].numpy()]
    indptr, indices = ds.indptr, np.asarray(ds.indices)
    return all(u in indices[indptr[v]:indptr[v + 1]] for u, v in zip(src.tolist(), dst.tolist(), strict=True))


def test_partition_folder_replaced_under_a_live_loader_keeps_its_batches(tmp_path: Path) -> None:
    ds = generated(tmp_path / "g", "tiny", seed=4, feature_dim=4, num_nodes=3000)
    partition(ds, 12, name="p")
    parts = open_partitions(ds, "p")
    loader = oa.OutreLoader(ds, fanouts=[5, 5], batch_size=32, partitions="p", seed=1,
                            io=oa.IOOptions(backend="memory"), pipeline=oa.PipelineOptions(num_samplers=1, num_extractors=1, extract_queue=1, ready_queue=1))
    it = iter(loader)
    first = [next(it) for _ in range(2)]  # the samplers can run only a few batches ahead
    partition(ds, 5, name="p", overwrite=True)  # another assignment: other offsets, other ids
    rest = list(it)
    assert len(rest) > 20
    assert all(_edges_exist(ds, b) for b in first + rest)
    block = parts.read_adjacency(range(parts.num_parts))  # the set opened before still reads its own files
    indptr, indices = ds.indptr, np.asarray(ds.indices)
    for i, v in enumerate(block.nodes.tolist()):
        np.testing.assert_array_equal(block.indices[block.indptr[i]:block.indptr[i + 1]], indices[indptr[v]:indptr[v + 1]])
    parts.close()


def test_adjacency_error_names_the_partition_file_and_position(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    parts = open_partitions(oa.open_dataset(base), PART)
    adj = base / "partitions" / PART / "adj_indices.bin"
    with open(adj, "r+b") as f:  # the descriptor taken at open sees the write: same inode
        f.seek(4 * 123)
        f.write(np.array([-3], np.int32).tobytes())
    with pytest.raises(oa.errors.PartitionCorruptError, match=r"adj_indices\.bin: item 123 = -3 is not a node id"):
        parts.read_adjacency(range(parts.num_parts))
    parts.close()
    with pytest.raises(oa.errors.PartitionError, match="closed"):
        parts.read_adjacency([0])


def test_partition_refuses_a_negative_neighbour_before_fennel(tmp_path: Path) -> None:
    ds = generated(tmp_path / "g", "tiny", seed=5, feature_dim=4, num_nodes=300)
    at = int(ds.indptr[17])
    with open(ds.path / "indices.bin", "r+b") as f:
        f.seek(4 * at)
        f.write(np.array([-1], np.int32).tobytes())
    with pytest.raises(oa.errors.DatasetCorruptError, match=rf"indices\.bin: item {at} \(node 17's in-neighbour 0\) = -1"):
        partition(oa.open_dataset(ds.path), 4, name="x")
    assert not (ds.path / "partitions").exists() or not any((ds.path / "partitions").iterdir())


def test_a_partition_is_chosen_by_name_never_by_path(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    ds = oa.open_dataset(base)
    shutil.copytree(base / "partitions" / PART, tmp_path / "elsewhere")
    for name in (str(tmp_path / "elsewhere"), "../../elsewhere", "/etc", f"{PART}/"):
        with pytest.raises(oa.ConfigError, match="plain folder name"):
            open_partitions(ds, name)
    with pytest.raises(TypeError, match="partition name"):
        open_partitions(ds, tmp_path / "elsewhere")  # type: ignore[arg-type]


def test_float_node_ids_are_refused_not_truncated(tmp_path: Path) -> None:
    from outre_async.sampling import plan_epoch

    ds = generated(tmp_path / "g", "tiny", seed=6, feature_dim=4, num_nodes=200)
    with pytest.raises(TypeError, match="seeds must be a 1-D array of integer node ids, got float64"):
        plan_epoch(np.array([0.5, 1.7]), 2, shuffle=False, seed=0, epoch=0)
    with pytest.raises(oa.ConfigError, match="split must be"):
        oa.OutreLoader(ds, split=np.array([0.5, 1.7]), fanouts=[2], batch_size=2, io=oa.IOOptions(backend="memory"))
    with pytest.raises(oa.errors.InvalidGraphError, match="split 'train' must be a 1-D integer array, got float64"):
        oa.write_dataset(tmp_path / "w", edge_index=np.array([[0, 1], [1, 0]]), train_idx=np.array([0.0, 1.0]))
