"""PyG's own ``BasicGNN`` models with the history: ``oa.with_history(model)`` and nothing else.

References are PyG's own forward (``copy.deepcopy`` of the model before it is hooked) and the input
of ``convs[-1]`` captured by a plain pre-hook in eval mode (h^(L-1) as evaluation computes it).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import random_graph, write_store
from torch_geometric.nn import GAT, GCN, GIN, PNA, EdgeCNN, GATConv, GCNConv, GraphSAGE, SAGEConv
from torch_geometric.nn.models.basic_gnn import BasicGNN

import outre_async as oa
from outre_async.loader._history_record import HistoryRecord, Push

IN, HID, OUT = 5, 8, 3


def _pna(in_channels: int, hidden: int, layers: int, out: int | None = None, **kw) -> PNA:  # type: ignore[no-untyped-def]
    return PNA(in_channels, hidden, layers, out, aggregators=["mean", "max"], scalers=["identity", "amplification"],
               deg=torch.tensor([1, 4, 3, 2]), **kw)


MODELS: dict[str, Callable[..., torch.nn.Module]] = {
    "sage": GraphSAGE, "gcn": GCN, "gat": partial(GAT, heads=2), "gin": GIN, "edgecnn": EdgeCNN, "pna": _pna}
VARIANTS = {"plain": {}, "norm": {"norm": "batch_norm"}, "act_first": {"act": "elu", "act_first": True},
            "jk_last": {"jk": "last"}, "jk_cat": {"jk": "cat"}, "jk_max": {"jk": "max"}}


def _build(name: str, layers: int, variant: str = "plain", seed: int = 0, **kw) -> torch.nn.Module:  # type: ignore[no-untyped-def]
    torch.manual_seed(seed)
    return MODELS[name](IN, HID, layers, OUT, **{**VARIANTS[variant], **kw})


def _graph(n: int = 40, e: int = 160, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, IN, generator=g), torch.randint(0, n, (2, e), generator=g)


def _record(pull: list[int], rows: torch.Tensor, push: list[int], pushes: list[Push] | None = None,
            degree: list[int] | None = None) -> HistoryRecord:
    sink = pushes.append if pushes is not None else (lambda push: None)
    rec = HistoryRecord(sink, 0, HID, "all", torch.tensor(pull, dtype=torch.long), rows,
                        torch.tensor(push, dtype=torch.long), np.arange(len(push)))
    rec.pull_degree = torch.tensor(degree if degree is not None else [0] * len(pull))
    return rec


def _last_input(model: torch.nn.Module, *args, **kw) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """The input of ``convs[-1]`` in one forward (a plain pre-hook, nothing of ours)."""
    seen: list[torch.Tensor] = []
    handle = model.convs[-1].register_forward_pre_hook(lambda m, a: seen.append(a[0].detach().clone()))
    try:
        with torch.no_grad():
            model(*args, **kw)
    finally:
        handle.remove()
    return seen[0]


# -- no history: PyG's forward, bit for bit ----------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_without_history_the_output_is_pyg_s_bit_for_bit(name: str, variant: str) -> None:
    model = _build(name, 3, variant, dropout=0.5)
    plain = copy.deepcopy(model)
    keys = list(model.state_dict())
    assert oa.with_history(model) is model and type(model) is type(plain) and list(model.state_dict()) == keys
    x, edge_index = _graph()
    for train in (False, True):  # eval first: a train-mode call moves batch norms' running statistics
        model.train(train)
        plain.train(train)
        outs = []
        for m, kw in ((plain, {}), (model, {}), (model, {"history": None})):
            torch.manual_seed(7)  # the same dropout masks
            outs.append(m(x, edge_index, **kw))
        assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_other_arguments_pass_through() -> None:
    x, edge_index = _graph()
    weight = torch.rand(edge_index.size(1))
    gcn = _build("gcn", 2)
    want = gcn(x, edge_index, weight)
    assert torch.equal(oa.with_history(gcn)(x, edge_index, edge_weight=weight), want)
    attr = torch.randn(edge_index.size(1), 4)
    gat = _build("gat", 2, edge_dim=4).eval()
    want = gat(x, edge_index, edge_attr=attr)
    assert not torch.equal(want, gat(x, edge_index))  # the edge features count
    assert torch.equal(oa.with_history(gat)(x, edge_index, edge_attr=attr), want)


# -- the exchange point: h^(L-1), after norm and activation, before dropout -------------------------------
@pytest.mark.parametrize("variant", ["plain", "act_first", "jk_last", "jk_cat"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_pushes_h_before_the_last_dropout_and_pulled_rows_get_a_fresh_mask(name: str, variant: str) -> None:
    model = _build(name, 2, variant, dropout=0.5)  # two layers: h^(1) has passed no dropout in train mode
    for conv in model.convs:
        if isinstance(conv, GATConv):
            conv.dropout = 0.0  # PyG's GAT also drops attention with the model's dropout: not what is tested here
    x, edge_index = _graph()
    exact = _last_input(model.eval(), x, edge_index)  # eval: no dropout, so h^(L-1) itself
    oa.with_history(model).train()
    pushes: list[Push] = []
    row = torch.rand(1, HID) + 0.5
    record = _record([2], row, [0, 1, 3, 7], pushes)
    seen = []
    model.convs[-1].register_forward_pre_hook(lambda m, a: seen.append(a[0].detach().clone()))
    torch.manual_seed(3)
    model(x, edge_index, history=record)
    torch.testing.assert_close(pushes[0].rows, exact[[0, 1, 3, 7]])  # no norm: train == eval but dropout
    pulled = seen[0][2]  # the last conv's input at the pulled row: the history's row under a fresh mask
    assert ((pulled == 0) | torch.isclose(pulled, 2 * row[0])).all() and (pulled == 0).any()


@pytest.mark.parametrize("variant", ["plain", "jk_last", "jk_cat", "jk_max"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_three_layers_exchange_the_last_conv_s_input(name: str, variant: str) -> None:
    model = _build(name, 3, variant).eval()
    x, edge_index = _graph()
    exact = _last_input(model, x, edge_index)
    pushes: list[Push] = []
    row = torch.rand(1, HID) + 0.5
    seen = []
    oa.with_history(model).convs[-1].register_forward_pre_hook(lambda m, a: seen.append(a[0].detach().clone()))
    with torch.no_grad():
        model(x, edge_index, history=_record([4], row, [0, 1, 3], pushes))
    torch.testing.assert_close(pushes[0].rows, exact[[0, 1, 3]])
    torch.testing.assert_close(seen[0][4], row[0])
    torch.testing.assert_close(seen[0][[0, 1, 3, 5]], exact[[0, 1, 3, 5]])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_pushes_are_normed_rows_with_batch_norm(name: str) -> None:
    model = _build(name, 3, "norm", dropout=0.5)
    model.train()
    x, edge_index = _graph()
    model(x, edge_index)  # move the running statistics off their start
    model.eval()
    exact = _last_input(model, x, edge_index)
    pushes: list[Push] = []
    with torch.no_grad():
        oa.with_history(model)(x, edge_index, history=_record([], torch.empty(0, HID), [0, 5], pushes))
    torch.testing.assert_close(pushes[0].rows, exact[[0, 5]])


# -- a pruned batch with exact history rows gives the seeds the unpruned batch's output ---------------
# seed 0 <- 1, 2 (hop 1); 1 <- 3, 4 and 2 <- 5 (hop 2).  Node 1 pulled: its in-edges are gone, and
# so are 3 and 4; the pruned batch is nodes 0, 1, 2, 5 relabelled 0..3.
FULL = torch.tensor([[1, 2, 3, 4, 5], [0, 0, 1, 1, 2]])
PRUNED = torch.tensor([[1, 2, 3], [0, 0, 2]])
KEEP = [0, 1, 2, 5]


@pytest.mark.parametrize("trim", [False, True])
@pytest.mark.parametrize("variant", ["plain", "norm", "jk_last"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_seeds_see_the_unpruned_batch(name: str, variant: str, trim: bool) -> None:
    model = _build(name, 2, variant).eval()
    x = torch.randn(6, IN)
    full_trim = {"num_sampled_nodes_per_hop": [1, 2, 3], "num_sampled_edges_per_hop": [2, 3]} if trim else {}
    pruned_trim = {"num_sampled_nodes_per_hop": [1, 2, 1], "num_sampled_edges_per_hop": [2, 1]} if trim else {}
    with torch.no_grad():
        want = model(x, FULL, **full_trim)[0]
        h = _last_input(model, x, FULL)  # h^(1) (layer 0 is never trimmed)
        oa.with_history(model)
        record = _record([1], h[1:2].clone(), [0, 2], degree=[2])  # node 1 had 2 in-edges
        got = model(x[KEEP], PRUNED, history=record, **pruned_trim)[0]
    torch.testing.assert_close(got, want)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", ["sage", "gcn"])
def test_on_cuda_the_history_rows_and_the_pulled_degree_follow_the_batch(name: str) -> None:
    model = _build(name, 2).eval().cuda()
    x = torch.randn(6, IN, device="cuda")
    full, pruned = FULL.cuda(), PRUNED.cuda()
    with torch.no_grad():
        want = model(x, full, num_sampled_nodes_per_hop=[1, 2, 3], num_sampled_edges_per_hop=[2, 3])[0]
        h = _last_input(model, x, full)
        record = _record([1], h[1:2].clone(), [0, 2], degree=[2])
        record.pull_index, record.pull_rows, record.push_index = (record.pull_index.cuda(), record.pull_rows,
                                                                  record.push_index.cuda())
        record.pull_degree = record.pull_degree.cuda()
        got = oa.with_history(model)(x[KEEP], pruned, history=record, num_sampled_nodes_per_hop=[1, 2, 1],
                                     num_sampled_edges_per_hop=[2, 1])[0]
    torch.testing.assert_close(got, want)


def test_gcn_without_the_degree_would_differ() -> None:
    """The GCN case above is a real check: the pulled node's degree changes the seed's output."""
    model = _build("gcn", 2).eval()
    x = torch.randn(6, IN)
    with torch.no_grad():
        want = model(x, FULL)[0]
        h = _last_input(model, x, FULL)
        oa.with_history(model)
        got = model(x[KEEP], PRUNED, history=_record([1], h[1:2].clone(), [], degree=[0]))[0]
    assert not torch.allclose(got, want, atol=1e-4)


# -- end to end: a PyG model as it is, the loader, full neighbourhoods -------------------------------------
N = 300


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Dataset, torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(11)
    indptr, indices = random_graph(rng, N, 6)
    x = rng.standard_normal((N, IN)).astype(np.float32)
    ds = write_store(Path(tmp_path_factory.mktemp("pygh")) / "ds", indptr, indices, features=x,
                     labels=rng.integers(0, OUT, N), num_classes=OUT, splits={"train": np.arange(N)})
    edge_index = torch.stack([torch.from_numpy(indices).long(), torch.from_numpy(np.repeat(np.arange(N), np.diff(indptr)))])
    return ds, torch.from_numpy(x), edge_index


@pytest.mark.timeout(180)
@pytest.mark.parametrize("trim", [False, True])
@pytest.mark.parametrize("name", ["sage", "gat", "gin", "edgecnn"])
def test_loader_batches_with_history_give_the_full_graph_output(dataset, name: str, trim: bool) -> None:
    """Full neighbourhoods and exact history rows (eval mode, weights fixed): every batch's seeds get
    the full graph's output, and the cache was used.  Not GCN: a 2-hop batch gives its hop-2 nodes
    no in-edges, so their ``1/sqrt(deg)`` differs from the full graph's with or without a history
    (the synthetic batches above check GCN's pulled degree)."""
    ds, x, edge_index = dataset
    model = _build(name, 2).eval()
    with torch.no_grad():
        want = model(x, edge_index)
        exact = _last_input(model, x, edge_index)
    model = oa.with_history(model)
    history = oa.HistoryConfig(staleness=1000, dim=HID, warmup=0, admission="all")
    pulled = 0
    with oa.OutreLoader(ds, fanouts=[-1, -1], batch_size=20, seed=1, history=history, io=oa.IOOptions(backend="memory")) as loader:
        for _ in range(2):
            for batch in loader:
                hops = {"num_sampled_nodes_per_hop": batch.num_sampled_nodes,
                        "num_sampled_edges_per_hop": batch.num_sampled_edges} if trim else {}
                with torch.no_grad():
                    out = model(batch.x, batch.edge_index, history=batch.history, **hops)[: batch.batch_size]
                rec = batch.history
                torch.testing.assert_close(rec.pull_rows, exact[batch.n_id[rec.pull_index]], atol=1e-5, rtol=0)
                torch.testing.assert_close(out, want[batch.n_id[: batch.batch_size]], atol=1e-5, rtol=1e-5)
                pulled += len(rec.pull_index)
    assert pulled > 50


# -- named errors -----------------------------------------------------------------------------------
def test_not_a_basic_gnn_is_named_with_its_module() -> None:
    with pytest.raises(oa.ConfigError, match=r"^torch\.nn\.modules\.linear\.Linear is not one of PyG's BasicGNN"):
        oa.with_history(torch.nn.Linear(2, 2))


def test_one_layer_is_refused() -> None:
    with pytest.raises(oa.ConfigError, match=r"torch_geometric\.nn\.models\.basic_gnn\.GraphSAGE has num_layers=1"):
        oa.with_history(GraphSAGE(IN, HID, 1, OUT))
    x, edge_index = _graph()
    one = oa.GraphSAGE(IN, HID, 1, OUT)
    one(x, edge_index)  # fine without a history
    with pytest.raises(oa.ConfigError, match=r"outre_async\.nn\.GraphSAGE has num_layers=1"):
        one(x, edge_index, history=_record([], torch.empty(0, HID), []))


class _OwnForward(GraphSAGE):
    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        for conv in self.convs:
            x = conv(x, edge_index).relu()
        return x


def test_a_subclass_with_its_own_forward_is_a_named_history_error() -> None:
    model = oa.with_history(_OwnForward(IN, HID, 2, OUT))
    x, edge_index = _graph()
    model(x, edge_index)  # without a history nothing is checked or changed
    with pytest.raises(oa.errors.HistoryError, match=r"test_pyg_models\._OwnForward\.forward applied its dropout 0 times"):
        model(x, edge_index, history=_record([], torch.empty(0, HID), [0]))


def test_twice_is_one_hook_and_a_deep_copy_is_hooked_to_itself() -> None:
    model = oa.with_history(oa.with_history(_build("sage", 2)))
    x, edge_index = _graph()
    model(x, edge_index, history=_record([], torch.empty(0, HID), [0]))  # twice hooked: "exchange() called twice"
    twin = copy.deepcopy(model)
    pushes: list[Push] = []
    twin(x, edge_index, history=_record([], torch.empty(0, HID), [0], pushes))
    assert len(pushes) == 1 and model._outre_history is not twin._outre_history
    assert model._outre_history.history is None and twin._outre_history.history is None


# -- oa.GraphSAGE, oa.GCN, oa.GAT: PyG's classes and signature, the old layer math ----------------------
def _old_convs(name: str, layers: int) -> list[torch.nn.Module]:
    """The conv stack the oa models built before they were PyG's classes (same constructor calls, same order)."""
    dims = [IN] + [HID] * (layers - 1) + [OUT]
    pairs = list(zip(dims[:-1], dims[1:], strict=True))
    if name == "sage":
        return [SAGEConv(a, b) for a, b in pairs]
    if name == "gcn":
        return [GCNConv(a, b) for a, b in pairs]
    return [GATConv(a, b // 2, heads=2) for a, b in pairs[:-1]] + [GATConv(*pairs[-1], heads=1)]


OA_MODELS = {"sage": oa.GraphSAGE, "gcn": oa.GCN, "gat": partial(oa.GAT, heads=2)}


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(OA_MODELS))
def test_oa_models_keep_the_old_layer_math_bit_for_bit(name: str, layers: int) -> None:
    """Same initial weights for a seed, same state_dict keys, and ReLU then dropout 0.5 between convs."""
    torch.manual_seed(4)
    model = OA_MODELS[name](IN, HID, layers, OUT)
    torch.manual_seed(4)
    old = torch.nn.ModuleList(_old_convs(name, layers))
    assert list(model.state_dict()) == [f"convs.{k}" for k in old.state_dict()]
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), old.state_dict().values(), strict=True))
    x, edge_index = _graph()
    for train in (True, False):
        model.train(train)
        torch.manual_seed(8)
        got = model(x, edge_index)
        torch.manual_seed(8)
        want = x
        for i, conv in enumerate(old):
            want = conv(want, edge_index)
            if i < layers - 1:
                want = F.dropout(F.relu(want), p=0.5, training=train)
        assert torch.equal(got, want)


@pytest.mark.parametrize("name", sorted(OA_MODELS))
def test_oa_models_take_pyg_s_signature(name: str) -> None:
    ours = list(inspect.signature(OA_MODELS[name].func if isinstance(OA_MODELS[name], partial)
                                  else OA_MODELS[name]).parameters)[:5]
    assert ours == ["in_channels", "hidden_channels", "num_layers", "out_channels", "dropout"]
    x, edge_index = _graph()
    assert OA_MODELS[name](IN, 64, 2)(x, edge_index).shape == (len(x), 64)  # PyG's (d, 64, 2): 64 outputs
    assert isinstance(OA_MODELS[name](IN, HID, 2), BasicGNN)
    assert OA_MODELS[name](IN, HID, 2).dropout.p == 0.5  # our default, PyG's is 0.0
    assert list(inspect.signature(oa.MLP).parameters)[:4] == ["in_channels", "hidden_channels", "num_layers",
                                                             "out_channels"]
    with pytest.raises(oa.ConfigError, match=r"^outre_async\.nn\.\w+ sizes must be .*num_layers=0.*\(in_channels, "
                                             r"hidden_channels, num_layers, out_channels\)"):
        OA_MODELS[name](IN, HID, 0, OUT)
