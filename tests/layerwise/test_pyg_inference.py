"""``oa.inference`` takes PyG's own ``BasicGNN`` models as they are: the out-of-core layer-wise output
equals the model's own in-memory forward on the full graph (eval mode), and what layer by layer
cannot reproduce is refused by name."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_graph, write_store
from torch_geometric.nn import GAT, GCN, GIN, PNA, EdgeCNN, GCNConv, GraphSAGE

import outre_async as oa

IN, HID, OUT = 19, 8, 3


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory):
    rng = np.random.default_rng(4)
    n = 257
    indptr, indices = random_graph(rng, n, 9)  # repeats and self loops included: gcn_norm's corner cases
    x = rng.standard_normal((n, IN)).astype(np.float32)
    ds = write_store(Path(tmp_path_factory.mktemp("pyginf")) / "ds", indptr, indices, features=x,
                     labels=rng.integers(0, OUT, n), num_classes=OUT)
    edge_index = torch.stack([torch.from_numpy(indices).long(),
                              torch.from_numpy(np.repeat(np.arange(n), np.diff(indptr)))])
    return ds, torch.from_numpy(x), edge_index


def _pna(in_channels: int, hidden: int, layers: int, out: int | None = None, **kw) -> PNA:  # type: ignore[no-untyped-def]
    return PNA(in_channels, hidden, layers, out, aggregators=["mean", "min", "max", "std"],
               scalers=["identity", "amplification", "attenuation"], deg=torch.tensor([3, 9, 8, 7, 6, 5, 4, 3, 2]), **kw)


MODELS = {"sage": GraphSAGE, "gcn": GCN, "gat": partial(GAT, heads=2), "gatv2": partial(GAT, heads=2, v2=True),
          "gin": GIN, "edgecnn": EdgeCNN, "pna": _pna}
VARIANTS = {"plain": {}, "batch_norm": {"norm": "batch_norm"}, "node_layer_norm": {"norm": "layer_norm",
            "norm_kwargs": {"mode": "node"}}, "act_first": {"act": "elu", "act_first": True, "norm": "batch_norm"},
            "jk_last": {"jk": "last"}, "no_out": {"out_channels": None}}


def _trained_norms(model: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor) -> torch.nn.Module:
    """One train-mode forward moves batch norms' running statistics off (0, 1), so eval uses real ones."""
    model.train()
    with torch.no_grad():
        model(x, edge_index)
    return model.eval()


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_equals_the_models_own_full_graph_forward(graph, name: str, layers: int) -> None:
    ds, x, edge_index = graph
    torch.manual_seed(1)
    model = _trained_norms(MODELS[name](IN, HID, layers, OUT, dropout=0.5), x, edge_index)
    with torch.no_grad():
        want = model(x, edge_index)
    got = oa.inference(model, ds, chunk_nodes=40, chunk_edges=150, backend="pread")
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", ["sage", "gcn", "gat", "gin"])
def test_norms_activations_and_jk_last_are_the_models_own(graph, name: str, variant: str) -> None:
    ds, x, edge_index = graph
    torch.manual_seed(2)
    kw = {"out_channels": OUT, "dropout": 0.5, **VARIANTS[variant]}
    model = _trained_norms(MODELS[name](IN, HID, 3, **kw), x, edge_index)
    with torch.no_grad():
        want = model(x, edge_index)
    got = oa.inference(model, ds, chunk_nodes=50, chunk_edges=200, backend="memory")
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_embeddings_are_the_last_convs_input(graph) -> None:
    ds, x, edge_index = graph
    torch.manual_seed(3)
    model = _trained_norms(GraphSAGE(IN, HID, 3, OUT, norm="batch_norm"), x, edge_index)
    seen = []
    model.convs[-1].register_forward_pre_hook(lambda m, a: seen.append(a[0]))
    with torch.no_grad():
        model(x, edge_index)
    got = oa.inference(model, ds, embeddings=True, chunk_nodes=64, chunk_edges=300, backend="memory")
    torch.testing.assert_close(got, seen[0], atol=1e-5, rtol=1e-5)


# -- refused by name ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("kw", "match"), [
    ({"jk": "cat"}, r"GraphSAGE has jk='cat'"),
    ({"jk": "lstm"}, r"GraphSAGE has jk='lstm'"),
    ({"norm": "layer_norm"}, r"layer norm with mode='graph'"),
    ({"norm": "graph_norm"}, r"GraphNorm, a norm that pools over nodes"),
    ({"norm": "instance_norm"}, r"InstanceNorm, an instance norm"),
    ({"norm": "batch_norm", "norm_kwargs": {"track_running_stats": False}}, r"batch norm without running statistics"),
])
def test_what_layer_by_layer_cannot_reproduce_is_refused(graph, kw: dict, match: str) -> None:
    ds, _, _ = graph
    with pytest.raises(oa.ConfigError, match=r"^torch_geometric\.nn\.models\.basic_gnn\.GraphSAGE"):
        oa.inference(GraphSAGE(IN, HID, 2, OUT, **kw), ds)
    with pytest.raises(oa.ConfigError, match=match):
        oa.inference(GraphSAGE(IN, HID, 2, OUT, **kw), ds)


def test_gin_inner_graph_norm_is_refused(graph) -> None:
    ds, _, _ = graph
    with pytest.raises(oa.ConfigError, match=r"GIN\.convs\.0\.nn\.norms\.0 is torch_geometric\.nn\.norm\..*LayerNorm"):
        oa.inference(GIN(IN, HID, 2, OUT, norm="layer_norm", jk=None), ds)


@pytest.mark.parametrize("kw", [{"improved": True}, {"add_self_loops": False}])
def test_gcn_norm_variants_are_refused(graph, kw: dict) -> None:
    ds, _, _ = graph
    with pytest.raises(oa.ConfigError, match=r"GCN\.convs\[0\] is a GCNConv with improved="):
        oa.inference(GCN(IN, HID, 2, OUT, **kw), ds)
    GCN(IN, HID, 2, OUT, normalize=False)  # no normalisation: nothing to compute, accepted (below)


def test_gcn_without_normalisation_is_exact(graph) -> None:
    ds, x, edge_index = graph
    torch.manual_seed(5)
    model = GCN(IN, HID, 2, OUT, normalize=False).eval()
    assert not any(c.normalize for c in model.convs if isinstance(c, GCNConv))
    with torch.no_grad():
        want = model(x, edge_index)
    torch.testing.assert_close(oa.inference(model, ds, chunk_nodes=30, backend="memory"), want, atol=1e-4, rtol=1e-5)


def test_a_model_without_the_protocol_is_named_with_its_module(graph) -> None:
    ds, _, _ = graph
    with pytest.raises(oa.ConfigError, match=r"^torch\.nn\.modules\.linear\.Linear lacks the layer-wise protocol"):
        oa.inference(torch.nn.Linear(2, 2), ds)
