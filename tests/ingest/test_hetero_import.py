"""Typed importers: the hetero npz schema (``outre convert`` detects it), PyG ``HeteroData`` in memory and
as a ``.pt`` file, and ``outre info`` on the result."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hetero_graphs import random_hetero
from torch_geometric.data import HeteroData

import outre_async as oa
from outre_async.cli import main
from outre_async.errors import InputFormatError, InvalidGraphError

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"  # ../shared beside the checkout


def _hetero_data(seed: int = 0) -> HeteroData:
    g = random_hetero(seed)
    data = HeteroData()
    for t, n in g.num_nodes.items():
        data[t].num_nodes = n
    data["paper"].x = torch.from_numpy(g.x["paper"])
    data["author"].x = torch.from_numpy(g.x["author"])
    data["paper"].y = torch.from_numpy(g.y["paper"])
    mask = torch.zeros(g.num_nodes["paper"], dtype=torch.bool)
    mask[torch.from_numpy(g.splits["paper"]["train"])] = True
    data["paper"].train_mask = mask
    data["paper"].val_idx = torch.from_numpy(g.splits["paper"]["val"])
    for et, ei in g.edge_index.items():
        data[et].edge_index = torch.from_numpy(ei)
    return data


def _check_same(ds: oa.Dataset, data: HeteroData) -> None:
    assert ds.node_types == tuple(data.node_types) and ds.edge_types == tuple(data.edge_types)
    assert ds.num_nodes_by_type == {t: data[t].num_nodes for t in data.node_types}
    assert ds.num_edges_by_type == {et: data[et].edge_index.shape[1] for et in data.edge_types}
    np.testing.assert_array_equal(ds.features_of("paper"), data["paper"].x.numpy())
    assert ds.features_of("author").dtype == np.float16  # a float16 input stays float16
    np.testing.assert_array_equal(ds.local_ids("paper", ds.split("train")), data["paper"].train_mask.nonzero().view(-1))
    np.testing.assert_array_equal(ds.local_ids("paper", ds.split("val")), data["paper"].val_idx)
    np.testing.assert_array_equal(ds.labels[: data["paper"].num_nodes], data["paper"].y.numpy())


def test_from_pyg_hetero_data(tmp_path: Path) -> None:
    data = _hetero_data()
    _check_same(oa.open_dataset(oa.from_pyg(data, tmp_path / "ds")), data)


def test_convert_a_saved_hetero_data(tmp_path: Path) -> None:
    data = _hetero_data(seed=2)
    torch.save(data, tmp_path / "g.pt")
    assert main(["convert", str(tmp_path / "g.pt"), str(tmp_path / "ds")]) == 0
    _check_same(oa.open_dataset(tmp_path / "ds"), data)


def test_hetero_data_without_a_count_is_named(tmp_path: Path) -> None:
    data = _hetero_data()
    del data["venue"].num_nodes
    with pytest.raises(InvalidGraphError, match=r"node type 'venue' has no num_nodes, x or y .* data\['venue'\].num_nodes"):
        oa.from_pyg(data, tmp_path / "ds")


def _save_npz(path: Path, g) -> None:
    arrays = {"node_types": np.array(list(g.num_nodes)), "edge_types": np.array(["__".join(e) for e in g.edge_index])}
    for t, n in g.num_nodes.items():
        arrays[f"num_nodes__{t}"] = np.int64(n)
    arrays["x__paper"] = g.x["paper"]
    arrays["y__paper"] = g.y["paper"]
    for s, ids in g.splits["paper"].items():
        arrays[f"{s}_idx__paper"] = ids
    for et, ei in g.edge_index.items():
        arrays["edge_index__" + "__".join(et)] = ei
    np.savez(path, **arrays)


def test_convert_detects_the_hetero_npz_schema(tmp_path: Path, capsys) -> None:
    g = random_hetero(seed=4)
    _save_npz(tmp_path / "g.npz", g)
    assert main(["convert", str(tmp_path / "g.npz"), str(tmp_path / "ds")]) == 0
    ds = oa.open_dataset(tmp_path / "ds")
    assert ds.num_nodes_by_type == g.num_nodes and ds.target_types == ("paper",)
    np.testing.assert_array_equal(ds.features_of("paper"), g.x["paper"])
    assert ds.features_of("author") is None
    capsys.readouterr()
    assert main(["info", str(tmp_path / "ds")]) == 0
    out = capsys.readouterr().out
    assert "node type    paper   40  features 5 x float32  (target)" in out
    assert "node type    venue    6  featureless" in out
    assert "edge type    author__writes__paper" in out


def test_hetero_npz_missing_member_is_named(tmp_path: Path) -> None:
    g = random_hetero()
    _save_npz(tmp_path / "g.npz", g)
    arrays = dict(np.load(tmp_path / "g.npz"))
    del arrays["num_nodes__venue"]
    np.savez(tmp_path / "h.npz", **arrays)
    with pytest.raises(InputFormatError, match="needs a member 'num_nodes__venue'"):
        oa.convert(tmp_path / "h.npz", tmp_path / "ds")
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("name, counts, features", [
    ("acm_heco.npz", {"paper": 4019, "author": 7167, "subject": 60}, {"paper": 1902, "author": 1902}),
    ("imdb_magnn.npz", {"movie": 4278, "director": 2081, "actor": 5257},
     {"movie": 3066, "director": 3066, "actor": 3066}),
    ("aminer_heco.npz", {"paper": 6564, "author": 13329, "reference": 35890}, {}),
    ("freebase_heco.npz", {"movie": 3492, "actor": 33401, "director": 2502, "writer": 4459}, {}),
])
def test_shared_hetero_graphs_convert(tmp_path: Path, name: str, counts: dict, features: dict, capsys) -> None:
    src = SHARED / name
    if not src.exists():
        pytest.skip(f"{src} is not on this machine")
    oa.convert(src, tmp_path / "ds")
    ds = oa.open_dataset(tmp_path / "ds")
    assert ds.num_nodes_by_type == counts
    assert {k.type: f.dim for k, f in ds.feature_files.items()} == features
    archive = np.load(src)
    target = ds.target_types[0]
    np.testing.assert_array_equal(ds.local_ids(target, ds.split("train")), archive[f"train_idx__{target}"])
    for et, n in ds.num_edges_by_type.items():
        assert n == archive["edge_index__" + "__".join(et)].shape[1]
    ds.verify()
    summary = json.loads(json.dumps(ds.summary()))
    assert summary["types"]["target_types"] == [target]
