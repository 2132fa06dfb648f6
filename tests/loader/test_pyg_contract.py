"""NeighborLoader's batch contract: with full neighbourhoods, an OutreLoader batch is PyG's batch.

Three checks, from the most to the least dependent on optional packages:

* against PyG's own ``NeighborLoader`` (runs where pyg-lib or torch-sparse is importable: PyG 2.8.1
  has no sampling path without one of them, its ``NeighborSampler._sample`` raises ImportError; CI
  has neither, so there it is skipped and the two checks below carry the contract);
* against the plain-Python reference sampler (``tests/reference_sampler.py``) laid out by PyG's
  rules: seeds first in input order, each hop's new nodes after the previous hop's, ``edge_index``
  row 0 the source, ``e_id`` the edge's id in ``data.edge_index`` (its CSC position mapped through
  PyG's ``to_csc`` permutation, the pure-Python part of PyG's sampler setup), ``input_id`` the seeds'
  positions in ``input_nodes``;
* a PyG ``GraphSAGE`` run with ``num_sampled_nodes_per_hop`` / ``num_sampled_edges_per_hop`` (PyG's
  ``trim_to_layer``) on our batches gives the seeds' full-graph outputs, which only holds if nodes
  and edges are laid out hop by hop and point source → target (no compiled op needed).

Batches are compared after a canonical relabelling: nodes as global ids (seeds in order, then each
hop as a set), edges as a multiset of (global source, global target, e_id), rows of x and y by node.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch_geometric.typing as pyg_typing
from conftest import write_store
from reference_sampler import reference_sample
from torch_geometric.data import Data
from torch_geometric.nn import GraphSAGE
from torch_geometric.sampler.utils import to_csc

import outre_async as oa

HAS_PYG_SAMPLER = pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE
FANOUTS = [-1, -1]


def _graph(seed: int, n: int, m: int) -> Data:
    """A random directed multigraph (repeated edges, self loops, isolated nodes) with features/labels."""
    rng = np.random.default_rng(seed)
    edge_index = torch.from_numpy(rng.integers(0, n, size=(2, m)))
    x = torch.from_numpy(rng.standard_normal((n, 5)).astype(np.float32))
    return Data(x=x, edge_index=edge_index, y=torch.from_numpy(rng.integers(0, 3, n)), num_nodes=n)


@pytest.fixture(scope="module", params=[(0, 60, 240), (1, 150, 300)], ids=["dense", "sparse"])
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Data, oa.Dataset, torch.Tensor]:
    """The PyG graph, our store of it (the CSC in PyG's ``to_csc`` order) and PyG's CSC permutation."""
    seed, n, m = request.param
    data = _graph(seed, n, m)
    colptr, row, perm = to_csc(data, device="cpu", share_memory=False, is_sorted=False)
    ds = write_store(tmp_path_factory.mktemp("contract") / "ds", colptr.numpy(), row.numpy(),
                     features=data.x.numpy(), labels=data.y.numpy(), num_classes=3)
    return data, ds, perm if perm is not None else torch.arange(m)


def _input_nodes(data: Data) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(7).permutation(data.num_nodes)[:37])


def _ours(ds: oa.Dataset, input_nodes: torch.Tensor, perm: torch.Tensor) -> list[Data]:
    """Our batches with ``e_id`` mapped from CSC positions to ``data.edge_index`` ids (PyG does the same
    through its sampler's ``edge_permutation``)."""
    with oa.OutreLoader(ds, num_neighbors=FANOUTS, batch_size=8, input_nodes=input_nodes, shuffle=False,
                        ordered=True, io=oa.IOOptions(backend="memory")) as loader:
        batches = list(loader)
    for b in batches:
        b.e_id = perm[b.e_id]
    return batches


def canonical(b: Data, hops: list[int] | None = None) -> dict:
    """The batch with local ids replaced by global ones; ``hops``: the per-hop node counts to split
    ``n_id`` by (PyG's torch-sparse path does not report them)."""
    n_id, bs = b.n_id.tolist(), int(b.batch_size)
    hops = hops if hops is not None else list(b.num_sampled_nodes)
    bounds = np.cumsum([0, *hops]).tolist()
    src, dst = b.edge_index.tolist()
    return {
        "seeds": n_id[:bs], "input_id": b.input_id.tolist(), "batch_size": bs,
        "hops": [sorted(n_id[lo:hi]) for lo, hi in zip(bounds[1:-1], bounds[2:], strict=True)],
        "num_nodes": len(n_id),
        "edges": sorted(zip((n_id[s] for s in src), (n_id[t] for t in dst), b.e_id.tolist(), strict=True)),
        "x": {v: b.x[i].tolist() for i, v in enumerate(n_id)},
        "y": {v: int(b.y[i]) for i, v in enumerate(n_id)},
    }


def _reference_batch(data: Data, ds: oa.Dataset, perm: torch.Tensor, input_nodes: torch.Tensor, start: int) -> Data:
    """The reference sampler's output for ``input_nodes[start:start+8]``, laid out as PyG's batch."""
    seeds = input_nodes[start:start + 8].tolist()
    ref = reference_sample(ds.indptr, ds.indices, seeds, FANOUTS, seed=0)
    n_id = torch.tensor(ref["n_id"])
    return Data(x=data.x[n_id], y=data.y[n_id], edge_index=torch.tensor(ref["edge_index"]).view(2, -1), n_id=n_id,
                e_id=perm[torch.tensor(ref["e_id"], dtype=torch.long)], input_id=torch.arange(start, start + len(seeds)),
                batch_size=len(seeds), num_sampled_nodes=ref["num_sampled_nodes"],
                num_sampled_edges=ref["num_sampled_edges"])


def test_batches_carry_the_neighbor_loader_fields(case) -> None:
    data, ds, perm = case
    for b in _ours(ds, _input_nodes(data), perm):
        assert {"x", "y", "edge_index", "n_id", "e_id", "input_id", "batch_size", "num_sampled_nodes",
                "num_sampled_edges"} <= set(b.keys())
        assert len(b.num_sampled_nodes) == len(FANOUTS) + 1 and b.num_sampled_nodes[0] == b.batch_size
        assert len(b.num_sampled_edges) == len(FANOUTS)
        assert sum(b.num_sampled_nodes) == b.num_nodes and sum(b.num_sampled_edges) == b.num_edges
        assert b.e_id.dtype == b.input_id.dtype == b.edge_index.dtype == torch.long
        # e_id names the edge of data.edge_index that each sampled edge is
        torch.testing.assert_close(data.edge_index[:, b.e_id], b.n_id[b.edge_index])


def test_equals_the_reference_laid_out_by_pyg_rules(case) -> None:
    data, ds, perm = case
    input_nodes = _input_nodes(data)
    ours = _ours(ds, input_nodes, perm)
    assert len(ours) == 5
    for i, b in enumerate(ours):
        ref = _reference_batch(data, ds, perm, input_nodes, 8 * i)
        assert canonical(b) == canonical(ref)
        assert b.num_sampled_edges == ref.num_sampled_edges


@pytest.mark.skipif(not HAS_PYG_SAMPLER, reason="PyG's NeighborLoader needs pyg-lib or torch-sparse (docs/how-to/bench.md: Comparing with PyG)")
def test_equals_pyg_neighbor_loader(case) -> None:
    from torch_geometric.loader import NeighborLoader

    data, ds, perm = case
    input_nodes = _input_nodes(data)
    theirs = list(NeighborLoader(data, num_neighbors=FANOUTS, batch_size=8, input_nodes=input_nodes, shuffle=False))
    ours = _ours(ds, input_nodes, perm)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        hops = getattr(b, "num_sampled_nodes", None)  # None on the torch-sparse path
        assert canonical(a) == canonical(b, list(a.num_sampled_nodes) if hops is None else list(hops))


def test_graphsage_with_trimming_gives_the_full_graph_outputs(case) -> None:
    data, ds, perm = case
    torch.manual_seed(0)
    model = GraphSAGE(5, 8, num_layers=len(FANOUTS), out_channels=3).eval()
    with torch.no_grad():
        full = model(data.x, data.edge_index)
        for b in _ours(ds, _input_nodes(data), perm):
            bs = b.batch_size
            trimmed = model(b.x, b.edge_index, num_sampled_nodes_per_hop=b.num_sampled_nodes,
                            num_sampled_edges_per_hop=b.num_sampled_edges)[:bs]
            untrimmed = model(b.x, b.edge_index)[:bs]
            torch.testing.assert_close(trimmed, full[b.n_id[:bs]], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(untrimmed, trimmed, atol=1e-5, rtol=1e-5)


def test_trimming_notices_a_wrong_layout(case) -> None:
    """The trimming check above can fail: hop counts that do not match the layout change the output."""
    data, ds, perm = case
    torch.manual_seed(0)
    model = GraphSAGE(5, 8, num_layers=len(FANOUTS), out_channels=3).eval()
    b = next(b for b in _ours(ds, _input_nodes(data), perm) if b.num_sampled_edges[0] > 1)
    wrong_edges = [b.num_sampled_edges[0] - 1, b.num_sampled_edges[1] + 1]  # the last seed edge counted as hop 2
    with torch.no_grad():
        right = model(b.x, b.edge_index, num_sampled_nodes_per_hop=b.num_sampled_nodes,
                      num_sampled_edges_per_hop=b.num_sampled_edges)[: b.batch_size]
        wrong = model(b.x, b.edge_index, num_sampled_nodes_per_hop=b.num_sampled_nodes,
                      num_sampled_edges_per_hop=wrong_edges)[: b.batch_size]
    assert not torch.allclose(right, wrong, atol=1e-5)
