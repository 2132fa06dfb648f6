"""Per-edge data is refused by name (not dropped without a word), or dropped when asked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, HeteroData

import outre_async as oa
from outre_async.cli import main


def _data(**extra: torch.Tensor) -> Data:
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    return Data(edge_index=edge_index, x=torch.ones(3, 2), y=torch.tensor([0, 1, 0]), num_nodes=3, **extra)


@pytest.mark.parametrize("key", ["edge_attr", "edge_weight", "edge_type"])
def test_from_pyg_refuses_edge_features(tmp_path: Path, key: str) -> None:
    with pytest.raises(oa.NotSupportedError, match=f"per-edge data .*{key}.*--drop-edge-features"):
        oa.from_pyg(_data(**{key: torch.ones(3)}), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    ds = oa.open_dataset(oa.from_pyg(_data(**{key: torch.ones(3)}), tmp_path / "out", drop_edge_features=True))
    assert ds.num_edges == 3


def test_link_prediction_targets_and_hetero_edge_features_are_named(tmp_path: Path) -> None:
    with pytest.raises(oa.NotSupportedError, match="link prediction is not supported"):
        oa.from_pyg(_data(edge_label_index=torch.tensor([[0], [2]])), tmp_path / "a")
    hetero = HeteroData()
    hetero["a"].num_nodes = 3
    hetero["a", "to", "a"].edge_index = torch.tensor([[0, 1], [1, 2]])
    hetero["a", "to", "a"].edge_attr = torch.ones(2, 4)
    with pytest.raises(oa.NotSupportedError, match=r"edge type \('a', 'to', 'a'\)\) holds per-edge data"):
        oa.from_pyg(hetero, tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_convert_npz_refuses_then_drops_on_request(tmp_path: Path, capsys) -> None:
    src = tmp_path / "g.npz"
    np.savez(src, num_nodes=np.int64(3), edge_index=np.array([[0, 1], [1, 2]]), edge_weight=np.ones(2, np.float32))
    assert main(["convert", str(src), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "edge_weight" in err and "--drop-edge-features" in err and len(err.strip().splitlines()) == 1
    assert main(["convert", str(src), str(tmp_path / "out"), "--drop-edge-features"]) == 0
