"""Layer-wise out-of-core inference equals full-graph inference in memory (1e-5), and cleans up."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_graph, write_store

import outre_async as oa
from outre_async.layerwise import _layerwise


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory):
    rng = np.random.default_rng(3)
    n = 257
    indptr, indices = random_graph(rng, n, 9)  # repeats and self loops included: gcn_norm's corner cases
    x = rng.standard_normal((n, 19)).astype(np.float32)
    ds = write_store(Path(tmp_path_factory.mktemp("inf")) / "ds", indptr, indices, features=x,
                     labels=rng.integers(0, 3, n), num_classes=3)
    edge_index = torch.stack([torch.from_numpy(indices).long(),
                              torch.from_numpy(np.repeat(np.arange(n), np.diff(indptr)))])
    return ds, torch.from_numpy(x), edge_index


def _full(model: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor, embeddings: bool) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        for i in range(len(model.convs) - (1 if embeddings else 0)):
            x = model.layer(i, x, edge_index)
    return x


MODELS = {"sage": oa.GraphSAGE, "gcn": oa.GCN, "gat": oa.GAT}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("layers", [1, 3])
def test_equals_full_graph_inference(graph, name: str, layers: int) -> None:
    ds, x, edge_index = graph
    torch.manual_seed(1)
    model = MODELS[name](19, 8, layers, 3)
    want = _full(model, x, edge_index, embeddings=False)
    with torch.no_grad():  # the model's own forward agrees with the layer stack
        torch.testing.assert_close(model(x, edge_index), want, atol=1e-5, rtol=1e-5)
    got = oa.inference(model, ds, chunk_nodes=40, chunk_edges=150, backend="pread")
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_embeddings_and_backends_agree(graph) -> None:
    ds, x, edge_index = graph
    torch.manual_seed(2)
    model = oa.GCN(19, 8, 2, 3)
    want = _full(model, x, edge_index, embeddings=True)
    for backend in ("memory", "auto"):
        got = oa.inference(model, ds, embeddings=True, chunk_nodes=1000, chunk_edges=1, backend=backend)
        assert got.shape == (ds.num_nodes, 8)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_spill_folder_is_removed_on_success_and_on_error(graph, tmp_path: Path, monkeypatch) -> None:
    ds, _, _ = graph
    model = oa.GraphSAGE(19, 8, 3, 3)
    oa.inference(model, ds, tmp_dir=tmp_path, chunk_nodes=50)
    assert list(tmp_path.iterdir()) == []
    calls = {"n": 0}
    real = _layerwise._layer

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 8:  # in the second layer: a spill file exists by then
            assert any(tmp_path.iterdir())
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(_layerwise, "_layer", failing)
    with pytest.raises(KeyboardInterrupt):
        oa.inference(model, ds, tmp_dir=tmp_path, chunk_nodes=50)
    assert list(tmp_path.iterdir()) == []


def test_refuses_what_it_cannot_do(graph) -> None:
    ds, _, _ = graph
    with pytest.raises(oa.ConfigError, match="layer-wise protocol"):
        oa.inference(torch.nn.Linear(19, 3), ds)
    with pytest.raises(oa.ConfigError, match="at least two layers"):
        oa.inference(oa.GraphSAGE(19, 8, 1, 3), ds, embeddings=True)
    with pytest.raises(oa.ConfigError, match="chunk sizes"):
        oa.inference(oa.GraphSAGE(19, 8, 2, 3), ds, chunk_nodes=0)
