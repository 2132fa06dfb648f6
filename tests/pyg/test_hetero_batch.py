"""Typed batches as PyG ``HeteroData``: the fields of PyG's hetero ``NeighborLoader`` batches, and a
``to_hetero(GraphSAGE)`` forward on ACM equal to the same model's forward on PyG's own batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hetero_graphs import write_random_hetero
from torch_geometric.data import HeteroData
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE, to_hetero

import outre_async as oa
from outre_async.errors import ConfigError
from outre_async.pyg import to_hetero_batch
from torch_geometric import typing as pyg_typing

HAS_PYG_SAMPLER = pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE  # PyG's NeighborLoader samples with one

ACM = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "acm_heco.npz"  # ../shared beside the checkout


def test_batch_has_pyg_hetero_contract(tmp_path: Path) -> None:
    write_random_hetero(tmp_path / "ds", seed=1)
    ds = oa.open_dataset(tmp_path / "ds")
    seeds = np.array([5, 1, 30, 7])
    sampled = oa.HeteroNeighborSampler(ds, [3, 2], seed=2).sample("paper", seeds)
    batch = to_hetero_batch(sampled, ds)
    assert isinstance(batch, HeteroData)
    paper = batch["paper"]
    assert paper.batch_size == 4 and paper.input_id.tolist() == [0, 1, 2, 3]
    assert paper.n_id[:4].tolist() == seeds.tolist()  # seeds first
    assert paper.y.tolist() == ds.labels[paper.n_id.numpy()].tolist()  # paper is the first type: offset 0
    for t in ds.node_types:
        assert batch[t].n_id.dtype == torch.long and sum(batch[t].num_sampled_nodes) == batch[t].n_id.numel()
    np.testing.assert_array_equal(paper.x.numpy(), ds.features_of("paper")[paper.n_id.numpy()])
    author = batch["author"]
    assert author.x.dtype == torch.float32 and author.x.shape[1] == 3  # stored float16, delivered float32
    np.testing.assert_array_equal(author.x.numpy(), ds.features_of("author")[author.n_id.numpy()].astype(np.float32))
    assert "x" not in batch["venue"]  # featureless: an n_id-indexed embedding gives it rows
    for s, r, d in ds.edge_types:
        store = batch[s, r, d]
        ei = store.edge_index
        assert ei.dtype == torch.long and store.e_id.numel() == ei.shape[1] == sum(store.num_sampled_edges)
        if ei.numel():
            assert ei[0].max() < batch[s].n_id.numel() and ei[1].max() < batch[d].n_id.numel()


def test_features_from_the_wrong_graph_are_named(tmp_path: Path) -> None:
    write_random_hetero(tmp_path / "ds", seed=1)
    ds = oa.open_dataset(tmp_path / "ds")
    sampled = oa.HeteroNeighborSampler(ds, [-1], seed=0).sample("paper", np.arange(40))
    with pytest.raises(ConfigError, match="node type 'paper' has 3 feature rows"):
        to_hetero_batch(sampled, {"paper": np.zeros((3, 5), np.float32)})


def _model(ds: oa.Dataset) -> tuple[torch.nn.Module, torch.nn.Embedding]:
    torch.manual_seed(0)
    sage = GraphSAGE((-1, -1), hidden_channels=16, num_layers=2, out_channels=ds.num_classes)
    return to_hetero(sage, (list(ds.node_types), list(ds.edge_types)), aggr="sum"), torch.nn.Embedding(60, 8)


def _forward(model, emb, batch) -> torch.Tensor:
    x = {t: batch[t].x for t in ("paper", "author")}
    x["subject"] = emb(batch["subject"].n_id)  # the featureless type's documented path
    return model(x, batch.edge_index_dict)["paper"][: batch["paper"].batch_size]


@pytest.mark.skipif(not HAS_PYG_SAMPLER, reason="PyG's hetero NeighborLoader needs pyg-lib or torch-sparse (docs/how-to/bench.md)")
def test_to_hetero_graphsage_on_acm_equals_pyg_batch(tmp_path: Path) -> None:
    if not ACM.exists():
        pytest.skip(f"{ACM} is not on this machine")
    ds = oa.open_dataset(oa.convert(ACM, tmp_path / "acm"))
    seeds = ds.local_ids("paper", ds.split("train"))[:8]
    ours = to_hetero_batch(oa.HeteroNeighborSampler(ds, [-1, -1], seed=0).sample("paper", seeds), ds)
    data = HeteroData()  # the same graph in memory, for PyG's own loader
    for t, n in ds.num_nodes_by_type.items():
        data[t].num_nodes = n
        if ds.features_of(t) is not None:
            data[t].x = torch.from_numpy(np.array(ds.features_of(t)))
    data["paper"].y = torch.from_numpy(ds.labels[: ds.num_nodes_by_type["paper"]])
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))
    for r, (s, rel, d) in enumerate(ds.edge_types):
        sel = ds.type_per_edge == r
        data[s, rel, d].edge_index = torch.from_numpy(np.stack([ds.local_ids(s, ds.indices[sel]), ds.local_ids(d, dst[sel])]))
    theirs = next(iter(NeighborLoader(data, num_neighbors=[-1, -1], input_nodes=("paper", torch.from_numpy(seeds)),
                                      batch_size=len(seeds))))
    model, emb = _model(ds)
    with torch.no_grad():
        a, b = _forward(model, emb, ours), _forward(model, emb, theirs)
    assert a.shape == (8, 3)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert ours["paper"].y[:8].tolist() == theirs["paper"].y[:8].tolist()
