"""The typed store: node and edge types over one global-id CSC, per-type features, the one-type case,
and every bad input named before anything is written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hetero_graphs import EDGE_TYPES, random_hetero, write_random_hetero

import outre_async as oa
from outre_async.errors import DatasetCorruptError, InvalidGraphError, ManifestError, NotSupportedError
from outre_async.ingest._hetero import write_hetero
from outre_async.ingest._source import parse_options
from outre_async.store import NODE_FEATURES, FeatureKey


def _edge_sets(ds: oa.Dataset) -> dict[tuple[str, str, str], set[tuple[int, int]]]:
    """Per edge type, the (src, dst) pairs the store holds, in type-local ids."""
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))
    kinds = np.searchsorted(ds.node_type_offsets, np.arange(ds.num_nodes), side="right") - 1
    out = {}
    for i, (s, r, d) in enumerate(ds.edge_types):
        sel = ds.type_per_edge == i
        src = ds.indices[sel].astype(np.int64) - ds.node_type_offsets[ds.node_types.index(s)]
        dd = dst[sel] - ds.node_type_offsets[ds.node_types.index(d)]
        assert (kinds[ds.indices[sel]] == ds.node_types.index(s)).all() and (kinds[dst[sel]] == ds.node_types.index(d)).all()
        out[(s, r, d)] = set(zip(src.tolist(), dd.tolist()))
    return out


def test_round_trip_per_type(tmp_path: Path) -> None:
    g = write_random_hetero(tmp_path / "ds")
    ds = oa.open_dataset(tmp_path / "ds")
    assert ds.is_hetero and ds.node_types == ("paper", "author", "venue")
    assert ds.num_nodes_by_type == g.num_nodes and ds.num_nodes == sum(g.num_nodes.values())
    assert ds.edge_types == tuple(EDGE_TYPES) and ds.metadata() == (["paper", "author", "venue"], EDGE_TYPES)
    assert ds.node_type_offsets.tolist() == [0, 40, 65, 71]
    assert ds.num_edges_by_type == {et: g.edge_index[et].shape[1] for et in EDGE_TYPES}
    assert _edge_sets(ds) == {et: set(zip(*g.edge_index[et].tolist())) for et in EDGE_TYPES}
    # per-type features: own width, own dtype; the featureless type has no key
    files = ds.feature_files
    assert set(files) == {FeatureKey("node", "paper", "x"), FeatureKey("node", "author", "x")}
    assert files[FeatureKey("node", "paper", "x")].dim == 5 and files[FeatureKey("node", "paper", "x")].num_rows == 40
    assert files[FeatureKey("node", "author", "x")].dtype == np.float16
    np.testing.assert_array_equal(ds.features_of("paper"), g.x["paper"])
    np.testing.assert_array_equal(ds.features_of("author"), g.x["author"])
    assert ds.features_of("venue") is None
    # labels and splits on the target type, as global ids of that type's range
    assert ds.target_types == ("paper",)
    np.testing.assert_array_equal(ds.labels[:40], g.y["paper"])
    assert (ds.labels[40:] == -1).all()
    np.testing.assert_array_equal(ds.local_ids("paper", ds.split("train")), g.splits["paper"]["train"])
    ds.verify()


def test_each_neighbour_list_is_sorted_by_edge_type(tmp_path: Path) -> None:
    write_random_hetero(tmp_path / "ds", seed=3)
    ds = oa.open_dataset(tmp_path / "ds")
    tpe = ds.type_per_edge
    for v in range(ds.num_nodes):
        run = tpe[ds.indptr[v] : ds.indptr[v + 1]]
        assert (np.diff(run.astype(int)) >= 0).all()
    # paper--cites-->paper and paper--refs-->paper land in the same lists: some list holds two types
    assert any(len(set(tpe[ds.indptr[v] : ds.indptr[v + 1]].tolist())) > 1 for v in range(40))


def test_homogeneous_dataset_is_the_one_type_case(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    oa.write_dataset(tmp_path / "h", edge_index=rng.integers(0, 20, (2, 60)), x=rng.random((20, 4)),
                     y=rng.integers(0, 2, 20), train_idx=np.arange(10))
    doc = json.loads((tmp_path / "h" / "manifest.json").read_text())
    assert "types" not in doc  # written exactly as before: older readers see what they always saw
    ds = oa.open_dataset(tmp_path / "h")
    assert not ds.is_hetero and ds.node_types == ("_N",) and ds.edge_types == (("_N", "_E", "_N"),)
    assert ds.num_nodes_by_type == {"_N": 20} and ds.target_types == ("_N",)
    assert set(ds.feature_files) == {NODE_FEATURES}
    assert (ds.type_per_edge == 0).all() and len(ds.type_per_edge) == ds.num_edges
    np.testing.assert_array_equal(ds.features_of("_N"), ds.features)


def test_typed_dataset_refuses_the_single_feature_matrix(tmp_path: Path) -> None:
    write_random_hetero(tmp_path / "ds")
    ds = oa.open_dataset(tmp_path / "ds")
    with pytest.raises(NotSupportedError, match="heterogeneous .* features_of"):
        ds.feature_file
    with pytest.raises(NotSupportedError, match="heterogeneous"):
        ds.features


def test_overwrite_replaces_a_typed_dataset(tmp_path: Path) -> None:
    write_random_hetero(tmp_path / "ds", seed=0)
    g = random_hetero(seed=1)
    write_hetero(tmp_path / "ds", g, parse_options({"overwrite": True}))
    np.testing.assert_array_equal(oa.open_dataset(tmp_path / "ds").features_of("paper"), g.x["paper"])


@pytest.mark.parametrize("name", ["", "a__b", "a/b", "..", ".hidden", "a\\b", "x" * 101, "a b"])
def test_bad_type_names_are_named_and_nothing_is_written(tmp_path: Path, name: str) -> None:
    g = random_hetero()
    counts = {**g.num_nodes, name: 3}
    bad = dataclasses.replace(g, num_nodes=counts)
    with pytest.raises(InvalidGraphError, match="node type name .* rename the type"):
        write_hetero(tmp_path / "ds", bad, parse_options({}))
    assert list(tmp_path.iterdir()) == []


def _edit(g, **kw):
    return dataclasses.replace(g, **kw)


@pytest.mark.parametrize("change, match", [
    (lambda g: _edit(g, edge_index={**g.edge_index, ("paper", "at", "conf"): np.zeros((2, 1), np.int64)}),
     "names node type 'conf', which is not among"),
    (lambda g: _edit(g, edge_index={**g.edge_index, ("author", "writes", "paper"): np.array([[0], [40]])}),
     r"row 1 holds id 40, outside \[0, 40\) of node type 'paper'"),
    (lambda g: _edit(g, edge_index={**g.edge_index, ("paper", "a__b", "paper"): np.zeros((2, 1), np.int64)}),
     "relation name 'a__b' holds '__'"),
    (lambda g: _edit(g, x={**g.x, "venue": np.ones((5, 2), np.float32)}),
     "features of node type 'venue' have 5 rows, the type has 6 nodes"),
    (lambda g: _edit(g, splits={**g.splits, "author": {"train": np.arange(3)}}),
     "node type 'author' has splits but no labels"),
    (lambda g: _edit(g, y={**g.y, "conf": np.zeros(3, np.int64)}),
     "labels of node type 'conf', which is not among"),
    (lambda g: _edit(g, y={"paper": np.zeros(7, np.int64)}), r"y has shape \[7\], expected \[40\]"),
])
def test_bad_typed_input_is_named_and_nothing_is_written(tmp_path: Path, change, match) -> None:
    with pytest.raises(InvalidGraphError, match=match):
        write_hetero(tmp_path / "ds", change(random_hetero()), parse_options({}))
    assert list(tmp_path.iterdir()) == []


def _tamper_manifest(path: Path, edit) -> None:
    doc = json.loads((path / "manifest.json").read_text())
    edit(doc["types"])
    (path / "manifest.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("edit, error, match", [
    (lambda t: t["edge_types"][0].update(src="conf"), ManifestError, "names node type 'conf'"),
    (lambda t: t["node_types"][0].update(count=41), ManifestError, "count 72 nodes"),
    (lambda t: t["node_types"][2].update(name="a/b"), ManifestError, "node type 'a/b' is not letters"),
    (lambda t: t["node_types"][1].update(name="paper"), ManifestError, "lists a name twice"),
    (lambda t: t["edge_types"].append(dict(t["edge_types"][0], num_edges=0)), ManifestError,
     "lists an edge type twice"),
    (lambda t: t.update(target_types=["conf"]), ManifestError, "names node type 'conf'"),
    (lambda t: t["type_per_edge"].update(dtype="int8"), ManifestError, "type_per_edge dtype"),
    (lambda t: t.update(target_types=[]), DatasetCorruptError, "not a target type"),
    (lambda t: t.update(node_types=[]), ManifestError, "types.node_types must be a non-empty list"),
    (lambda t: t.update(target_types="paper"), ManifestError, "types.target_types must be a list"),
])
def test_damaged_types_section_is_named(tmp_path: Path, edit, error, match) -> None:
    write_random_hetero(tmp_path / "ds")
    _tamper_manifest(tmp_path / "ds", edit)
    with pytest.raises(error, match=match):
        oa.open_dataset(tmp_path / "ds")


def test_target_types_without_labels_are_named(tmp_path: Path) -> None:
    write_random_hetero(tmp_path / "ds")
    doc = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    doc["labels"] = None
    (tmp_path / "ds" / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ManifestError, match=r"target types \['paper'\] but the manifest has no labels"):
        oa.open_dataset(tmp_path / "ds")


def test_truncated_per_type_file_is_named(tmp_path: Path) -> None:
    write_random_hetero(tmp_path / "ds")
    with open(tmp_path / "ds" / "features__author.bin", "r+b") as f:
        f.truncate(10)
    with pytest.raises(DatasetCorruptError, match="features__author.bin"):
        oa.open_dataset(tmp_path / "ds")


@pytest.mark.parametrize("damage, match", [
    (lambda tpe: tpe.__setitem__(0, 9), "holds edge type 9 of 6"),
    (lambda tpe: tpe.__setitem__(slice(None), tpe[::-1]), "disagree|not sorted"),
])
def test_verify_checks_type_per_edge(tmp_path: Path, damage, match) -> None:
    write_random_hetero(tmp_path / "ds")
    path = tmp_path / "ds" / "type_per_edge.bin"
    tpe = np.fromfile(path, np.uint8)
    damage(tpe)
    tpe.tofile(path)
    with pytest.raises(DatasetCorruptError, match=match):
        oa.open_dataset(tmp_path / "ds").verify()


def test_writer_refuses_unsorted_type_per_edge(tmp_path: Path) -> None:
    with oa.DatasetWriter(tmp_path / "ds", num_nodes=4) as w:
        w.write_csc(np.array([0, 0, 2, 2, 2]), np.array([0, 3]))
        with pytest.raises(InvalidGraphError, match="not sorted within a neighbour list"):
            w.write_types([("a", 2), ("b", 2)], [("a", "r", "a"), ("b", "s", "a")], np.array([1, 0]))
        w.abort()
    assert list(tmp_path.iterdir()) == []


def test_reorder_refuses_a_typed_dataset_by_name(tmp_path: Path) -> None:
    """A partition order would interleave the node types' id ranges: refused, not written without types."""
    from outre_async.partition import reorder

    write_random_hetero(tmp_path / "ds")
    with pytest.raises(NotSupportedError, match="reordering a typed dataset is not supported yet"):
        reorder(tmp_path / "ds", "fennel-2", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_homogeneous_readers_refuse_a_typed_dataset_by_name(tmp_path: Path) -> None:
    """The loader and the PyG FeatureStore read one [N, D] matrix: a typed dataset is named, not "featureless"."""
    from outre_async.pyg import OutreFeatureStore

    write_random_hetero(tmp_path / "ds")
    ds = oa.open_dataset(tmp_path / "ds")
    with pytest.raises(NotSupportedError, match="heterogeneous .* HeteroNeighborSampler"):
        oa.OutreLoader(ds, num_neighbors=[2], batch_size=4)
    with pytest.raises(NotSupportedError, match="heterogeneous"):
        OutreFeatureStore(ds)
    from outre_async.cli import main

    assert main(["train", str(tmp_path / "ds"), "--epochs", "1", "--out", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()
