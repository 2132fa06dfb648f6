"""The FeatureStore / GraphStore adapters and OutreNodeSampler against the in-memory graph they came from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_graph, write_store
from torch_geometric.data import TensorAttr
from torch_geometric.loader import NodeLoader
from torch_geometric.nn import GraphSAGE as PygGraphSAGE

import outre_async as oa
from outre_async.pyg import OutreFeatureStore, OutreGraphStore, OutreNodeSampler, to_pyg

BACKENDS = ["memory", "pread", pytest.param("io_uring", marks=pytest.mark.skipif(
    not oa.detect_io_uring(), reason="io_uring unavailable here"))]


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[oa.Dataset, dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    n = 300
    indptr, indices = random_graph(rng, n, 6)
    x = rng.standard_normal((n, 37)).astype(np.float32)  # 37: a packed, odd row width
    y = rng.integers(0, 4, n)
    y[::11] = -1
    train = rng.permutation(n)[:120]
    ds = write_store(Path(tmp_path_factory.mktemp("pyg")) / "ds", indptr, indices, features=x, labels=y,
                     num_classes=4, splits={"train": np.sort(train)})
    return ds, {"indptr": indptr, "indices": indices, "x": x, "y": y, "train": np.sort(train)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_feature_store_reads_the_rows_it_came_from(graph, backend: str) -> None:
    ds, ref = graph
    ids = torch.tensor([5, 0, 299, 5, 17, 123])
    with OutreFeatureStore(ds, backend=backend) as fs:
        assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=ids),
                           torch.from_numpy(ref["x"][ids.numpy()]))
        x, y = fs.multi_get_tensor([TensorAttr(None, "x", ids), TensorAttr(None, "y", ids[:3])])
        assert torch.equal(x, torch.from_numpy(ref["x"][ids.numpy()]))
        assert torch.equal(y, torch.from_numpy(ref["y"][[5, 0, 299]]))
        mask = torch.zeros(ds.num_nodes, dtype=torch.bool)
        mask[[3, 9]] = True
        assert torch.equal(fs.get_tensor(None, "x", mask), torch.from_numpy(ref["x"][[3, 9]]))
        assert fs.get_tensor_size(None, "x") == (300, 37)
        assert {a.attr_name for a in fs.get_all_tensor_attrs()} == {"x", "y"}
        if backend != "memory":
            assert fs.backend == backend


def test_feature_store_refuses_bad_requests_by_name(graph) -> None:
    ds, _ = graph
    with OutreFeatureStore(ds, backend="pread") as fs:
        with pytest.raises(oa.ConfigError, match=r"\[0, 300\)"):
            fs.get_tensor(None, "x", torch.tensor([0, 300]))
        with pytest.raises(oa.ConfigError, match="not 'edge_attr'"):
            fs.get_tensor(None, "edge_attr", torch.tensor([0]))
        with pytest.raises(oa.NotSupportedError, match="heterogeneous"):
            fs.get_tensor("paper", "x", torch.tensor([0]))
        with pytest.raises(oa.ConfigError, match="read-only"):
            fs.put_tensor(torch.zeros(1, 37), None, "x", torch.tensor([0]))
    with pytest.raises(oa.errors.PipelineClosed):
        fs.get_tensor(None, "x", torch.tensor([0]))


def test_graph_store_gives_the_same_edges(graph) -> None:
    ds, ref = graph
    gs = OutreGraphStore(ds)
    row, colptr = gs.get_edge_index(edge_type=None, layout="csc")
    assert torch.equal(colptr, torch.from_numpy(ref["indptr"]))
    assert torch.equal(row, torch.from_numpy(ref["indices"]).long())
    src, dst = gs.get_edge_index(edge_type=None, layout="coo")
    target = np.repeat(np.arange(ds.num_nodes), np.diff(ref["indptr"]))
    assert torch.equal(dst, torch.from_numpy(target)) and torch.equal(src, row)
    rowptr, col = gs.get_edge_index(edge_type=None, layout="csr")
    pairs = {(int(u), int(v)) for u, v in zip(src, dst, strict=True)}
    got = {(u, int(v)) for u in range(ds.num_nodes) for v in col[rowptr[u]:rowptr[u + 1]]}
    assert got == pairs
    with pytest.raises(oa.NotSupportedError, match="heterogeneous"):
        gs.get_edge_index(edge_type=("a", "to", "b"), layout="csc")


def test_node_loader_over_the_stores_matches_full_graph_inference(graph) -> None:
    """Full neighbourhoods, two layers: a PyG GraphSAGE (with trimming) on each batch gives the seeds the
    outputs the same model gives them on the whole in-memory graph."""
    ds, ref = graph
    torch.manual_seed(0)
    model = PygGraphSAGE(37, 16, num_layers=2, out_channels=4).eval()
    src = torch.from_numpy(ref["indices"]).long()
    dst = torch.from_numpy(np.repeat(np.arange(ds.num_nodes), np.diff(ref["indptr"])))
    with torch.no_grad():
        full = model(torch.from_numpy(ref["x"]), torch.stack([src, dst]))
    fs, gs = to_pyg(ds, backend="pread")
    with fs:
        loader = NodeLoader((fs, gs), node_sampler=OutreNodeSampler((fs, gs), [-1, -1]),
                            input_nodes=torch.from_numpy(ref["train"]), batch_size=32)
        seen = []
        for batch in loader:
            assert torch.equal(batch.x, torch.from_numpy(ref["x"][batch.n_id.numpy()]))
            assert torch.equal(batch.y, torch.from_numpy(ref["y"][batch.n_id.numpy()]))
            assert batch.num_sampled_nodes[0] == batch.batch_size
            with torch.no_grad():
                out = model(batch.x, batch.edge_index, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                            num_sampled_edges_per_hop=batch.num_sampled_edges)[: batch.batch_size]
            seeds = torch.from_numpy(ref["train"])[batch.input_id]  # input_id: positions in input_nodes
            assert torch.equal(batch.n_id[: batch.batch_size], seeds)
            torch.testing.assert_close(out, full[seeds], atol=1e-5, rtol=1e-5)
            seen.append(seeds)
        assert torch.equal(torch.sort(torch.cat(seen)).values, torch.from_numpy(ref["train"]))


def test_sampler_refuses_link_prediction_and_other_inputs(graph) -> None:
    ds, _ = graph
    sampler = OutreNodeSampler(ds, [5])
    with pytest.raises(oa.NotSupportedError, match="link prediction"):
        sampler.sample_from_edges(None)
    with pytest.raises(oa.ConfigError, match="Dataset"):
        OutreNodeSampler("not a dataset", [5])


@pytest.mark.timeout(120)
def test_node_loader_with_forked_workers_reads_in_each_worker(graph) -> None:
    """num_workers > 0 forks: each worker opens its own reader instead of waiting on the parent's loop."""
    ds, ref = graph
    with OutreFeatureStore(ds, backend="pread") as fs:
        fs.get_tensor(None, "x", torch.tensor([0]))  # the parent's reader is open and used before the fork
        gs = OutreGraphStore(ds)
        loader = NodeLoader((fs, gs), node_sampler=OutreNodeSampler(ds, [3, 3]), num_workers=2,
                            input_nodes=torch.from_numpy(ref["train"]), batch_size=40)
        batches = list(loader)
        assert sum(b.batch_size for b in batches) == len(ref["train"])
        for b in batches:
            assert torch.equal(b.x, torch.from_numpy(ref["x"][b.n_id.numpy()]))
        assert torch.equal(fs.get_tensor(None, "x", torch.tensor([1])), torch.from_numpy(ref["x"][[1]]))
