"""The per-edge-type sampler: the kernel against the plain-Python reference, the sampler against PyG's
hetero ``NeighborLoader`` on full neighbourhoods, the output's structure, and every bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hetero_graphs import EDGE_TYPES, random_hetero, write_random_hetero
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_hetero_sampler import reference_hetero_sample
from torch_geometric.data import HeteroData
from torch_geometric.loader import NeighborLoader

import outre_async as oa
from outre_async._rng import stream_state
from outre_async.errors import ConfigError, DatasetCorruptError
from outre_async.sampling import _hetero_kernels as HK
from outre_async.sampling._sampler_kernels import OK
from torch_geometric import typing as pyg_typing

HAS_PYG_SAMPLER = pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE  # PyG's NeighborLoader samples with one


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    path = tmp_path_factory.mktemp("typed") / "ds"
    write_random_hetero(path, seed=5, avg_edges=120)
    return oa.open_dataset(path)


def _kernel(ds, seeds, table, seed, stream):
    g2l = np.full(ds.num_nodes, -1, np.int32)
    out = HK.sample_hetero(ds.indptr, ds.indices, ds.type_per_edge, np.asarray(seeds, np.int64),
                           np.asarray(table, np.int64), stream_state(seed, stream), g2l)
    assert (g2l == -1).all()  # the scratch is left as found
    return out


@settings(max_examples=40, deadline=None)
@given(table=st.lists(st.lists(st.sampled_from([-1, 0, 1, 2, 3, 5, 30]), min_size=2, max_size=2),
                      min_size=len(EDGE_TYPES), max_size=len(EDGE_TYPES)),
       picks=st.lists(st.integers(0, 70), min_size=1, max_size=12, unique=True),
       seed=st.integers(0, 2**32), stream=st.integers(0, 50))
def test_kernel_equals_reference(typed, table, picks, seed, stream) -> None:
    status, _, n_id, rows, cols, kinds, e_id, nodes, edges = _kernel(typed, picks, table, seed, stream)
    ref = reference_hetero_sample(typed.indptr, typed.indices, typed.type_per_edge, picks, table, seed=seed,
                                  stream=stream)
    assert status == OK
    assert n_id.tolist() == ref["n_id"] and rows.tolist() == ref["rows"] and cols.tolist() == ref["cols"]
    assert kinds.tolist() == ref["kinds"] and e_id.tolist() == ref["e_id"]
    assert nodes.tolist() == ref["nodes_per_hop"] and edges.tolist() == ref["edges_per_hop"]


def test_sampled_edges_are_of_their_type(typed) -> None:
    """Each edge lies in its type's run of its target's list, joins nodes of the edge type's node types."""
    out = oa.HeteroNeighborSampler(typed, [4, 3], seed=3).sample("paper", np.arange(0, 40, 3))
    assert out.node["paper"][: out.batch_size].tolist() == list(range(0, 40, 3))  # seeds first
    for r, (s, rel, d) in enumerate(typed.edge_types):
        ei, e_id = out.edge_index[(s, rel, d)], out.e_id[(s, rel, d)]
        src = typed.global_ids(s, out.node[s][ei[0]])
        dst = typed.global_ids(d, out.node[d][ei[1]])
        assert (typed.indices[e_id] == src).all() and (typed.type_per_edge[e_id] == r).all()
        assert ((typed.indptr[dst] <= e_id) & (e_id < typed.indptr[dst + 1])).all()
        assert sum(out.num_sampled_edges[(s, rel, d)]) == ei.shape[1]
        assert ei.shape[1] == 0 or len(np.unique(e_id)) == len(e_id)  # without replacement
    for t, ids in out.node.items():
        assert len(np.unique(ids)) == len(ids) and sum(out.num_sampled_nodes[t]) == len(ids)


def test_fanouts_bound_each_edge_type(typed) -> None:
    fan = {et: [2, 1] for et in EDGE_TYPES}
    fan[("paper", "cites", "paper")] = [0, 0]
    out = oa.HeteroNeighborSampler(typed, fan, seed=0).sample("paper", np.arange(40))
    assert out.edge_index[("paper", "cites", "paper")].shape[1] == 0
    et = ("author", "writes", "paper")
    hop1 = out.edge_index[et][:, : out.num_sampled_edges[et][0]]
    assert np.bincount(hop1[1]).max() <= 2


def test_homogeneous_dataset_samples_as_the_homogeneous_sampler(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    oa.write_dataset(tmp_path / "h", edge_index=rng.integers(0, 200, (2, 3000)), num_nodes=200)
    ds = oa.open_dataset(tmp_path / "h")
    seeds = rng.choice(200, 20, replace=False)
    typed = oa.HeteroNeighborSampler(ds, [5, 3], seed=4).sample("_N", seeds, stream=2)
    plain = oa.NeighborSampler(ds, [5, 3], seed=4).sample(seeds, stream=2)
    assert typed.node["_N"].tolist() == plain.n_id.tolist()
    assert typed.edge_index[("_N", "_E", "_N")].tolist() == plain.edge_index.tolist()


def _hetero_data(g) -> HeteroData:
    data = HeteroData()
    for t, n in g.num_nodes.items():
        data[t].num_nodes = n
    for et, ei in g.edge_index.items():
        data[et].edge_index = torch.from_numpy(ei)
    return data


def _pyg_sets(batch, node_types, edge_types):
    nodes = {t: set(batch[t].n_id.tolist()) for t in node_types}
    edges = {}
    for s, r, d in edge_types:
        ei = batch[s, r, d].edge_index
        edges[(s, r, d)] = set(zip(batch[s].n_id[ei[0]].tolist(), batch[d].n_id[ei[1]].tolist()))
    return nodes, edges


def _our_sets(out, node_types, edge_types):
    nodes = {t: set(out.node[t].tolist()) for t in node_types}
    edges = {(s, r, d): set(zip(out.node[s][out.edge_index[(s, r, d)][0]].tolist(),
                                out.node[d][out.edge_index[(s, r, d)][1]].tolist())) for s, r, d in edge_types}
    return nodes, edges


@pytest.mark.skipif(not HAS_PYG_SAMPLER, reason="PyG's hetero NeighborLoader needs pyg-lib or torch-sparse (docs/how-to/bench.md)")
@settings(max_examples=25, deadline=None)
@given(graph_seed=st.integers(0, 2**32 - 1), avg_edges=st.integers(2, 80), hops=st.integers(1, 3),
       form=st.sampled_from(["all", "beyond_degree", "dict"]), table_seed=st.integers(0, 2**32 - 1),
       num_seeds=st.integers(1, 10))
def test_equal_to_pyg_hetero_neighbor_loader_on_full_neighbourhoods(tmp_path_factory, graph_seed, avg_edges, hops,
                                                                    form, table_seed, num_seeds) -> None:
    """Per node type the sampled node set, per edge type the sampled edge set: PyG's, exactly, whenever no
    neighbour is left out (-1, a fanout past every degree, or 0 for whole edge types in the dict form)."""
    g = random_hetero(graph_seed, features=False, avg_edges=avg_edges)
    data = _hetero_data(g)
    ds = oa.open_dataset(oa.from_pyg(data, tmp_path_factory.mktemp("pyg") / "ds"))
    pick = np.random.default_rng(table_seed)
    num_neighbors = {"all": [-1] * hops, "beyond_degree": [1000] * hops,
                     "dict": {et: pick.choice([-1, 0, 1000], hops).tolist() for et in data.edge_types}}[form]
    seeds = pick.choice(g.num_nodes["paper"], num_seeds, replace=False)
    loader = NeighborLoader(data, num_neighbors=num_neighbors, input_nodes=("paper", torch.from_numpy(seeds)),
                            batch_size=len(seeds), shuffle=False)
    batch = next(iter(loader))
    out = oa.HeteroNeighborSampler(ds, num_neighbors, seed=0).sample("paper", seeds)
    assert _our_sets(out, data.node_types, data.edge_types) == _pyg_sets(batch, data.node_types, data.edge_types)
    assert out.node["paper"][: len(seeds)].tolist() == batch["paper"].n_id[: len(seeds)].tolist()


@pytest.mark.parametrize("num_neighbors, match", [
    ({("paper", "at", "conf"): [2]}, r"names edge type \('paper', 'at', 'conf'\), which the graph lacks"),
    ({"author__writes__paper": [2]}, r"no entry for edge type \('paper', 'written_by', 'author'\)"),
    ({et: ([2] if et[1] == "in" else [2, 2]) for et in EDGE_TYPES}, r"lists \[1, 2\] hop counts"),
    ([], "non-empty list"),
    ([2, -2], "int > 0, 0 .* or -1"),
    ("10", "non-empty list"),
])
def test_bad_num_neighbors_is_named(typed, num_neighbors, match) -> None:
    with pytest.raises(ConfigError, match=match):
        oa.HeteroNeighborSampler(typed, num_neighbors)


def test_dict_keys_may_be_npz_style_names(typed) -> None:
    fan = {"__".join(et): [1] for et in EDGE_TYPES}
    sampler = oa.HeteroNeighborSampler(typed, fan)
    assert sampler.num_neighbors == dict.fromkeys(EDGE_TYPES, (1,))


def test_bad_seeds_are_named(typed) -> None:
    sampler = oa.HeteroNeighborSampler(typed, [2])
    with pytest.raises(ConfigError, match="no node type 'conf'"):
        sampler.sample("conf", [0])
    with pytest.raises(ConfigError, match=r"'venue' node ids hold 6, outside \[0, 6\)"):
        sampler.sample("venue", [6])
    with pytest.raises(ConfigError, match="'author' node 3 is at positions 0 and 2"):
        sampler.sample("author", [3, 1, 3])
    sampler.sample("author", [3, 1])  # the scratch was reset: the sampler still works


@pytest.mark.parametrize("damage, match", [
    (lambda tpe, ds: tpe.__setitem__(int(ds.indptr[0]), 200), "edge type id past the 6 edge types"),
    (lambda tpe, ds: tpe.__setitem__(slice(int(ds.indptr[0]), int(ds.indptr[1])),
                                     tpe[int(ds.indptr[0]) : int(ds.indptr[1])][::-1].copy()), "not sorted"),
])
def test_corrupt_type_per_edge_is_named_not_a_crash(tmp_path: Path, damage, match) -> None:
    write_random_hetero(tmp_path / "ds", seed=5, avg_edges=120)
    path = tmp_path / "ds" / "type_per_edge.bin"
    ds = oa.open_dataset(tmp_path / "ds")
    tpe = np.fromfile(path, np.uint8)
    assert len(set(tpe[ds.indptr[0] : ds.indptr[1]].tolist())) > 1  # node 0's list holds two types
    damage(tpe, ds)
    tpe.tofile(path)
    ds = oa.open_dataset(tmp_path / "ds")
    with pytest.raises(DatasetCorruptError, match=match):
        oa.HeteroNeighborSampler(ds, [-1]).sample("paper", [0])
