"""The synchronous baseline loader: epoch coverage and order, batch contents against the store,
PyG compatibility (SAGEConv forward, trim_to_layer), float16 stores, stats, and bad arguments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_graph, write_store
from torch_geometric.nn import SAGEConv
from torch_geometric.utils import trim_to_layer

import outre_async as oa
from outre_async.sampling._plan import plan_epoch

CORA = Path(__file__).resolve().parents[3] / "shared" / "data" / "cora.npz"


def _store(path: Path, indptr, indices, x, y, train, dtype: str = "float32") -> oa.Dataset:
    return write_store(path, indptr, indices, features=x, labels=y, num_classes=int(y.max()) + 1,
                       splits={"train": train}, feature_dtype=dtype)


def synthetic(n: int = 600, dim: int = 100, seed: int = 0):
    rng = np.random.default_rng(seed)
    indptr, indices = random_graph(rng, n, 25)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    y = rng.integers(0, 5, size=n)
    train = np.sort(rng.choice(n, size=n // 3, replace=False))
    return indptr, indices, x, y, train


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return _store(tmp_path_factory.mktemp("sync") / "ds", *synthetic())


@pytest.fixture(scope="module")
def cora(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    if not CORA.exists():
        pytest.skip(f"{CORA} not available")
    z = np.load(CORA)
    src, dst = z["edge_index"]
    order = np.argsort(dst, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=int(z["num_nodes"])))])
    return _store(tmp_path_factory.mktemp("cora") / "ds", indptr, src[order], z["x"], z["y"], z["train_idx"])


# -- epochs ----------------------------------------------------------------------------------------
def seed_order(loader: oa.SyncLoader) -> list[int]:
    return [v for batch in loader for v in batch.n_id[: batch.batch_size].tolist()]


def test_each_epoch_covers_every_train_node_once_and_reshuffles(store: oa.Dataset) -> None:
    loader = oa.SyncLoader(store, fanouts=[5, 5], batch_size=64, seed=1)
    train = store.split("train").tolist()
    assert len(loader) == -(-len(train) // 64)
    first, second = seed_order(loader), seed_order(loader)
    assert sorted(first) == sorted(second) == sorted(train)
    assert first != second, "a new iteration is the next epoch, reshuffled"
    again = oa.SyncLoader(store, fanouts=[5, 5], batch_size=64, seed=1)
    assert seed_order(again) == first, "same seed, same order"
    assert seed_order(oa.SyncLoader(store, fanouts=[5, 5], batch_size=64, seed=2)) != first


def test_same_seed_gives_identical_batches(store: oa.Dataset) -> None:
    a = list(oa.SyncLoader(store, fanouts=[4, 3], batch_size=50, seed=9))
    b = list(oa.SyncLoader(store, fanouts=[4, 3], batch_size=50, seed=9))
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x.edge_index, y.edge_index) and torch.equal(x.n_id, y.n_id)


def test_no_shuffle_keeps_split_order_and_drop_last(store: oa.Dataset) -> None:
    train = store.split("train").tolist()
    loader = oa.SyncLoader(store, fanouts=[2], batch_size=64, shuffle=False)
    assert seed_order(loader) == train
    dropped = oa.SyncLoader(store, fanouts=[2], batch_size=64, shuffle=False, drop_last=True)
    assert len(dropped) == len(train) // 64
    assert seed_order(dropped) == train[: 64 * (len(train) // 64)]
    assert all(b.batch_size == 64 for b in dropped)


def test_explicit_id_array_as_split(store: oa.Dataset) -> None:
    ids = np.array([5, 3, 100, 7])
    loader = oa.SyncLoader(store, split=ids, fanouts=[3], batch_size=3, shuffle=False)
    assert len(loader) == 2 and seed_order(loader) == [5, 3, 100, 7]


# -- batch contents --------------------------------------------------------------------------------
def test_batch_rows_match_the_store(store: oa.Dataset) -> None:
    for batch in oa.SyncLoader(store, fanouts=[5, 3], batch_size=100, seed=3):
        n_id = batch.n_id.numpy()
        assert batch.x.dtype == torch.float32 and batch.x.shape == (len(n_id), store.feature_dim)
        np.testing.assert_array_equal(batch.x.numpy(), store.features[n_id])
        np.testing.assert_array_equal(batch.y.numpy(), store.labels[n_id])
        assert batch.num_nodes == len(n_id) == sum(batch.num_sampled_nodes)
        assert batch.edge_index.shape[1] == sum(batch.num_sampled_edges)
        assert batch.num_sampled_nodes[0] == batch.batch_size
        src, dst = n_id[batch.edge_index.numpy()]
        for u, v in zip(src[:50], dst[:50], strict=True):
            assert u in store.indices[store.indptr[v] : store.indptr[v + 1]]


def test_float16_store_gives_float32_features(tmp_path: Path) -> None:
    indptr, indices, x, y, train = synthetic(n=200, dim=129)
    ds = _store(tmp_path / "f16", indptr, indices, x, y, train, dtype="float16")
    batch = next(iter(oa.SyncLoader(ds, fanouts=[4], batch_size=32)))
    assert batch.x.dtype == torch.float32
    expect = x.astype(np.float16)[batch.n_id.numpy()].astype(np.float32)
    np.testing.assert_array_equal(batch.x.numpy(), expect)


def test_stats_count_what_was_loaded(store: oa.Dataset) -> None:
    loader = oa.SyncLoader(store, fanouts=[5, 5], batch_size=64)
    batches = list(loader)
    s = loader.stats()
    assert s["batches"] == len(batches) == len(loader) and s["epochs_started"] == 1
    assert s["seeds"] == len(store.split("train"))
    assert s["sampled_nodes"] == sum(b.num_nodes for b in batches)
    assert s["sampled_edges"] == sum(b.edge_index.shape[1] for b in batches)
    assert s["sample_seconds"] > 0 and s["gather_seconds"] > 0


# -- PyG compatibility -----------------------------------------------------------------------------
class TwoLayerSAGE(torch.nn.Module):
    def __init__(self, dim: int, classes: int) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList([SAGEConv(dim, 16), SAGEConv(16, classes)])

    def forward(self, batch, trim: bool = False) -> torch.Tensor:
        x, edge_index = batch.x, batch.edge_index
        for layer, conv in enumerate(self.convs):
            if trim:
                x, edge_index, _ = trim_to_layer(layer, batch.num_sampled_nodes,
                                                 batch.num_sampled_edges, x, edge_index)
            x = conv(x, edge_index)
            if layer == 0:
                x = x.relu()
        return x[: batch.batch_size]


def test_sageconv_runs_and_trim_to_layer_gives_the_same_seed_outputs(cora: oa.Dataset) -> None:
    torch.manual_seed(0)
    model = TwoLayerSAGE(cora.feature_dim, cora.num_classes).eval()
    batch = next(iter(oa.SyncLoader(cora, fanouts=[10, 5], batch_size=32, seed=0)))
    with torch.no_grad():
        full, trimmed = model(batch), model(batch, trim=True)
    assert full.shape == (32, cora.num_classes) and torch.isfinite(full).all()
    torch.testing.assert_close(full, trimmed)
    first_seeds = plan_epoch(cora.split("train"), 32, shuffle=True, seed=0, epoch=0)[0]
    np.testing.assert_array_equal(batch.n_id[:32].numpy(), first_seeds)  # seeds' rows come first


def test_a_training_step_on_cora_lowers_the_loss(cora: oa.Dataset) -> None:
    torch.manual_seed(0)
    model = TwoLayerSAGE(cora.feature_dim, cora.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = oa.SyncLoader(cora, fanouts=[10, 5], batch_size=70, seed=0)
    losses = []
    for _ in range(5):
        for batch in loader:
            loss = torch.nn.functional.cross_entropy(model(batch), batch.y[: batch.batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert losses[-1] < losses[0]


# -- bad arguments ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    {"batch_size": 0}, {"batch_size": 2.5}, {"fanouts": [0]}, {"split": "nope"},
    {"split": np.array([1, 1])}, {"split": np.array([-1])}, {"split": np.array([10**6])},
    {"split": np.array([0.5])},
])
def test_bad_arguments_are_config_errors(store: oa.Dataset, kw: dict) -> None:
    args = {"fanouts": [3], "batch_size": 8, **kw}
    with pytest.raises(oa.ConfigError):
        oa.SyncLoader(store, **args)
