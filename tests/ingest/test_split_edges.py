"""``oa.split_edges`` / ``outre split-edges``: held-out pairs leave message passing (both directions of
an undirected pair together), splits are disjoint, negatives are stored, the manifest is strict."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import random_graph, write_store

import outre_async as oa
from outre_async.cli import main


def _edges(ds: oa.Dataset) -> set[tuple[int, int]]:
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))
    return set(zip(ds.indices.tolist(), dst.tolist(), strict=True))


def _undirected_store(path, n: int = 80, seed: int = 0) -> oa.Dataset:
    """A symmetric graph (every edge with its reverse, a few parallel copies and self loops)."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, 300), rng.integers(0, n, 300)
    src, dst = np.concatenate([src, dst, src[:10]]), np.concatenate([dst, src, dst[:10]])
    order = np.argsort(dst, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    feats = rng.standard_normal((n, 4)).astype(np.float32)
    return write_store(path, indptr, src[order], features=feats, labels=rng.integers(0, 3, n), num_classes=3,
                       splits={"train": np.arange(50)})


def test_undirected_split_removes_both_directions_and_is_disjoint(tmp_path) -> None:
    ds = _undirected_store(tmp_path / "g")
    out = oa.open_dataset(oa.split_edges(ds.path, tmp_path / "s", val=0.1, test=0.2, seed=3))
    assert out.manifest.meta["edge_split"]["undirected"] is True
    kept = _edges(out)
    train, val, test = (out.edge_split(s) for s in ("train", "val", "test"))
    as_pairs = {name: {tuple(sorted(p)) for p in a.T.tolist()} for name, a in (("train", train), ("val", val), ("test", test))}
    assert not (as_pairs["train"] & as_pairs["val"]) and not (as_pairs["val"] & as_pairs["test"])
    assert not (as_pairs["train"] & as_pairs["test"])
    for u, v in (*val.T.tolist(), *test.T.tolist()):
        assert (u, v) not in kept and (v, u) not in kept  # both directions (and every copy) held out
    for u, v in train.T.tolist():
        assert (u, v) in kept and (v, u) in kept          # training pairs stay in message passing
    original = {tuple(sorted(e)) for e in _edges(ds) if e[0] != e[1]}
    assert as_pairs["train"] | as_pairs["val"] | as_pairs["test"] == original
    assert len(val.T) == int(0.1 * len(original)) and len(test.T) == int(0.2 * len(original))
    assert out.edge_split("val_neg").shape == val.shape and out.edge_split("test_neg").shape == test.shape
    # node data is copied as it was
    np.testing.assert_array_equal(out.features, ds.features)
    np.testing.assert_array_equal(out.labels, ds.labels)
    np.testing.assert_array_equal(out.split("train"), ds.split("train"))


def test_directed_split_and_disjoint_train_ratio(tmp_path) -> None:
    rng = np.random.default_rng(1)
    indptr, indices = random_graph(rng, 100, 8)
    ds = write_store(tmp_path / "g", indptr, indices, features=rng.standard_normal((100, 3)).astype(np.float32))
    out = oa.open_dataset(oa.split_edges(ds, tmp_path / "s", seed=0, disjoint_train_ratio=0.3, undirected=False))
    kept = _edges(out)
    train = {tuple(p) for p in out.edge_split("train").T.tolist()}
    assert train and not (train & kept)  # supervision-only training pairs are out of message passing
    for u, v in out.edge_split("test").T.tolist():
        assert (u, v) not in kept
    # a directed pair's reverse is a different pair: removing (u, v) leaves (v, u) where it was
    removed = _edges(ds) - kept
    assert all((u, v) in train or (u, v) in {tuple(p) for s in ("val", "test") for p in out.edge_split(s).T.tolist()}
               for u, v in removed)


def test_same_seed_same_split_other_seed_other_split(tmp_path) -> None:
    ds = _undirected_store(tmp_path / "g")
    a = oa.open_dataset(oa.split_edges(ds, tmp_path / "a", seed=5)).edge_split("test")
    b = oa.open_dataset(oa.split_edges(ds, tmp_path / "b", seed=5)).edge_split("test")
    c = oa.open_dataset(oa.split_edges(ds, tmp_path / "c", seed=6)).edge_split("test")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"val": 0.6, "test": 0.5}, "leaves no training edges"),
    ({"val": -0.1}, r"val=-0.1 must be a fraction"),
    ({"disjoint_train_ratio": 1.0}, r"disjoint_train_ratio=1.0 must be a fraction"),
    ({"eval_negatives": -1}, r"eval_negatives=-1 must be an int"),
])
def test_bad_arguments_are_named(tmp_path, kwargs, match) -> None:
    ds = _undirected_store(tmp_path / "g")
    with pytest.raises(oa.ConfigError, match=match):
        oa.split_edges(ds, tmp_path / "s", **kwargs)
    assert not (tmp_path / "s").exists()


def test_undirected_true_on_a_directed_graph_is_refused(tmp_path) -> None:
    ds = write_store(tmp_path / "g", np.array([0, 0, 1, 2]), np.array([0, 1]), features=np.ones((3, 2), np.float32))
    with pytest.raises(oa.errors.InvalidGraphError, match="has no reverse"):
        oa.split_edges(ds, tmp_path / "s", undirected=True)


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


@pytest.mark.parametrize(("edit", "match"), [
    (lambda e: e["edge_splits"]["test"].update(shape=[3, e["edge_splits"]["test"]["shape"][1]]), r"shape must be \[2"),
    (lambda e: e["edge_splits"]["test"].update(nbytes=8), "nbytes=8"),
    (lambda e: e["edge_splits"].update(bogus=e["edge_splits"]["test"]), "edge split names must be among"),
    (lambda e: e["edge_splits"]["test"].update(dtype="int32"), "edge_split dtype must be one of"),
])
def test_manifest_edge_splits_are_parsed_strictly(tmp_path, edit, match) -> None:
    out = oa.split_edges(_undirected_store(tmp_path / "g").path, tmp_path / "s")
    doc = _manifest(out)
    edit(doc)
    (out / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(oa.errors.ManifestError, match=match):
        oa.open_dataset(out)


def test_a_truncated_edge_split_file_is_refused_on_open(tmp_path) -> None:
    out = oa.split_edges(_undirected_store(tmp_path / "g").path, tmp_path / "s")
    name = _manifest(out)["edge_splits"]["val"]["file"]
    (out / name).write_bytes((out / name).read_bytes()[:-8])
    with pytest.raises(oa.errors.DatasetCorruptError):
        oa.open_dataset(out)


def test_cli_split_edges(tmp_path, capsys) -> None:
    ds = _undirected_store(tmp_path / "g")
    assert main(["split-edges", str(ds.path), str(tmp_path / "s"), "--val", "0.1", "--test", "0.1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["edge_splits"]) == {"train", "val", "test", "val_neg", "test_neg"}
    assert report["num_edges"] < ds.num_edges
    assert main(["split-edges", str(ds.path), str(tmp_path / "s")]) == 2  # exists: a named one-line error
    assert "already exists" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "s")]) == 0
    assert "edge splits  train" in capsys.readouterr().out


def test_overwrite_replaces_a_split_dataset_edge_split_files_included(tmp_path) -> None:
    ds = _undirected_store(tmp_path / "g")
    first = oa.open_dataset(oa.split_edges(ds, tmp_path / "s", seed=1)).edge_split("test")
    again = oa.open_dataset(oa.split_edges(ds, tmp_path / "s", seed=2, overwrite=True)).edge_split("test")
    assert not np.array_equal(first, again)
