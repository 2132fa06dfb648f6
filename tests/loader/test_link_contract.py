"""LinkNeighborLoader's batch contract: with full neighbourhoods and the same negatives, an
OutreLoader edge batch is PyG's (binary and triplet, amounts 1 and 3), plus what must hold without
PyG's compiled sampler: the layout rules, reproducible negatives, and named errors for bad input.

PyG's negatives are ``torch.randint`` draws; to compare, a ``NegativeSampling`` whose ``sample``
hands out our batch's negatives in the order PyG asks for them (binary: sources, then destinations;
triplet: destinations) replays them.  PyG's sampler needs pyg-lib or torch-sparse (the comparison is
skipped without both, as in ``test_pyg_contract``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch_geometric.typing as pyg_typing
from conftest import write_store
from torch_geometric.data import Data
from torch_geometric.sampler import NegativeSampling
from torch_geometric.sampler.utils import to_csc

import outre_async as oa
from outre_async.loader._options import group_knobs
from outre_async.errors import AllPairsError

HAS_PYG_SAMPLER = pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE
FANOUTS = [-1, -1]
BATCH = 8
MODES = [("binary", 1), ("binary", 3), ("triplet", 1), ("triplet", 3)]


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Data, oa.Dataset, torch.Tensor, torch.Tensor]:
    """A random directed multigraph, our store of it (PyG's ``to_csc`` order), the CSC permutation and
    29 supervision pairs (some repeated endpoints, so seeds de-duplicate)."""
    rng = np.random.default_rng(3)
    n, m = 70, 260
    edge_index = torch.from_numpy(rng.integers(0, n, size=(2, m)))
    data = Data(x=torch.from_numpy(rng.standard_normal((n, 5)).astype(np.float32)), edge_index=edge_index,
                y=torch.from_numpy(rng.integers(0, 3, n)), num_nodes=n)
    colptr, row, perm = to_csc(data, device="cpu", share_memory=False, is_sorted=False)
    ds = write_store(tmp_path_factory.mktemp("link") / "ds", colptr.numpy(), row.numpy(), features=data.x.numpy(),
                     labels=data.y.numpy(), num_classes=3)
    pairs = torch.from_numpy(rng.integers(0, n, size=(2, 29)))
    return data, ds, perm if perm is not None else torch.arange(m), pairs


def _ours(ds: oa.Dataset, pairs: torch.Tensor, perm: torch.Tensor, **kw) -> list[Data]:
    with oa.OutreLoader(ds, **group_knobs(dict(num_neighbors=FANOUTS, batch_size=BATCH, edge_label_index=pairs, shuffle=False,
                        ordered=True, backend="memory", **kw))) as loader:
        batches = list(loader)
    for b in batches:
        b.e_id = perm[b.e_id]
    return batches


def _negatives(batches: list[Data], mode: str) -> list[torch.Tensor]:
    """Our negatives (global ids) in the order PyG's sampler draws them."""
    out = []
    for b in batches:
        num_pos = len(b.input_id)
        if mode == "binary":
            out += [b.n_id[b.edge_label_index[0, num_pos:]], b.n_id[b.edge_label_index[1, num_pos:]]]
        else:
            out.append(b.n_id[b.dst_neg_index].reshape(-1))
    return out


class Replay(NegativeSampling):
    """PyG's NegativeSampling with ``sample`` replaying the given draws (checked for their size)."""

    def __init__(self, mode: str, amount: int, draws: list[torch.Tensor]) -> None:
        super().__init__(mode, amount)
        self.draws = list(draws)

    def sample(self, num_samples: int, endpoint: str, num_nodes: int | None = None) -> torch.Tensor:
        draw = self.draws.pop(0)
        assert draw.numel() == num_samples
        return draw


def canonical(b: Data, hops: list[int], num_seeds: int) -> dict:
    """The batch in global ids: seeds, each hop as a set, edges as a multiset, targets as global pairs."""
    n_id = b.n_id
    ids = n_id.tolist()
    bounds = np.cumsum([0, *hops]).tolist()
    src, dst = b.edge_index.tolist()
    out = {
        "seeds": ids[:num_seeds], "input_id": b.input_id.tolist(),
        "hops": [sorted(ids[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)],
        "edges": sorted(zip((ids[s] for s in src), (ids[t] for t in dst), b.e_id.tolist(), strict=True)),
        "x": {v: b.x[i].tolist() for i, v in enumerate(ids)},
    }
    for name in ("edge_label_index", "src_index", "dst_pos_index", "dst_neg_index"):
        if getattr(b, name, None) is not None:
            out[name] = n_id[getattr(b, name)].tolist()
    if getattr(b, "edge_label", None) is not None:
        out["edge_label"] = (b.edge_label.dtype, b.edge_label.tolist())
    return out


@pytest.mark.skipif(not HAS_PYG_SAMPLER, reason="PyG's LinkNeighborLoader needs pyg-lib or torch-sparse (docs/how-to/bench.md)")
@pytest.mark.parametrize(("mode", "amount"), MODES)
def test_equals_pyg_link_neighbor_loader_with_the_same_negatives(case, mode: str, amount: int) -> None:
    from torch_geometric.loader import LinkNeighborLoader

    data, ds, perm, pairs = case
    ours = _ours(ds, pairs, perm, neg_sampling=NegativeSampling(mode, amount))
    replay = Replay(mode, amount, _negatives(ours, mode))
    theirs = list(LinkNeighborLoader(data, num_neighbors=FANOUTS, edge_label_index=pairs, batch_size=BATCH,
                                     neg_sampling=replay, shuffle=False))
    assert not replay.draws and len(ours) == len(theirs) == math.ceil(29 / BATCH)
    for a, b in zip(ours, theirs, strict=True):
        hops = list(a.num_sampled_nodes)
        assert canonical(a, hops, a.batch_size) == canonical(b, hops, a.batch_size)


@pytest.mark.skipif(not HAS_PYG_SAMPLER, reason="PyG's LinkNeighborLoader needs pyg-lib or torch-sparse")
def test_equals_pyg_with_labels_and_no_negatives_and_shifted_labels(case) -> None:
    from torch_geometric.loader import LinkNeighborLoader

    data, ds, perm, pairs = case
    labels = torch.arange(29) % 2  # 0-based: binary sampling shifts them by one (0 = negative), as PyG
    for neg in (None, "binary"):
        ours = _ours(ds, pairs, perm, edge_label=labels, neg_sampling=neg)
        replay = None if neg is None else Replay("binary", 1, _negatives(ours, "binary"))
        theirs = list(LinkNeighborLoader(data, num_neighbors=FANOUTS, edge_label_index=pairs, edge_label=labels,
                                         batch_size=BATCH, neg_sampling=replay, shuffle=False))
        for a, b in zip(ours, theirs, strict=True):
            hops = list(a.num_sampled_nodes)
            assert canonical(a, hops, a.batch_size) == canonical(b, hops, a.batch_size)
        if neg == "binary":
            assert ours[0].edge_label[: len(ours[0].input_id)].min() >= 1 and ours[0].edge_label[-1] == 0


@pytest.mark.parametrize(("mode", "amount"), MODES)
def test_layout_without_pyg(case, mode: str, amount: int) -> None:
    """Seeds are the sorted unique endpoints (negatives included) first in n_id; the targets point at
    the input pairs (``input_id``) and at negatives of the announced count."""
    data, ds, perm, pairs = case
    seen = []
    for b in _ours(ds, pairs, perm, neg_sampling=NegativeSampling(mode, amount)):
        num_pos, seeds = len(b.input_id), b.n_id[: b.batch_size]
        seen += b.input_id.tolist()
        if mode == "binary":
            targets = b.n_id[b.edge_label_index]
            assert b.edge_label_index.shape == (2, num_pos + math.ceil(num_pos * amount))
            torch.testing.assert_close(b.edge_label, torch.cat([torch.ones(num_pos), torch.zeros(num_pos * amount)]))
            ends = targets.reshape(-1)
        else:
            targets = torch.stack([b.n_id[b.src_index], b.n_id[b.dst_pos_index]])
            assert b.dst_neg_index.shape == ((num_pos,) if amount == 1 else (num_pos, amount))
            ends = torch.cat([targets.reshape(-1), b.n_id[b.dst_neg_index].reshape(-1)])
        torch.testing.assert_close(targets[:, :num_pos], pairs[:, b.input_id])
        torch.testing.assert_close(seeds, torch.unique(ends))  # sorted, unique, first in n_id
    assert seen == list(range(29))


def test_negatives_repeat_per_seed_and_epoch(case) -> None:
    data, ds, perm, pairs = case
    kw = {"num_neighbors": [2], "batch_size": BATCH, "edge_label_index": pairs, "neg_sampling": "binary",
          "backend": "memory", "ordered": True}

    def epochs(seed: int) -> list[list[list[int]]]:
        with oa.OutreLoader(ds, **group_knobs(dict(seed=seed, **kw))) as loader:
            return [[b.n_id[b.edge_label_index].tolist() for b in loader] for _ in range(2)]

    a, b, c = epochs(0), epochs(0), epochs(1)
    assert a == b            # same seed: the same negatives, epoch by epoch
    assert a[0] != a[1]      # another epoch: other negatives (and order)
    assert a[0] != c[0]      # another seed: other negatives


def test_stored_split_names_and_their_negatives(tmp_path) -> None:
    rng = np.random.default_rng(0)
    n = 60
    src, dst = rng.integers(0, n, 200), rng.integers(0, n, 200)
    src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    order = np.argsort(dst, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    base = write_store(tmp_path / "g", indptr, src[order], features=rng.standard_normal((n, 4)).astype(np.float32))
    ds = oa.open_dataset(oa.split_edges(base, tmp_path / "s", val=0.1, test=0.1))
    with oa.OutreLoader(ds, num_neighbors=[2], batch_size=1000, edge_label_index="val", io=oa.IOOptions(backend="memory")) as loader:
        (b,) = list(loader)
    assert f"edge_label_index='val' ({2 * ds.edge_split('val').shape[1]} pairs, neg_sampling=None)" in repr(loader)
    val, neg = ds.edge_split("val"), ds.edge_split("val_neg")
    got = b.n_id[b.edge_label_index].numpy()
    order = b.input_id.numpy()
    np.testing.assert_array_equal(got, np.concatenate([val, neg], axis=1)[:, order])
    np.testing.assert_array_equal(b.edge_label.numpy(), (order < val.shape[1]).astype(np.float32))
    with oa.OutreLoader(ds, num_neighbors=[2], batch_size=1000, edge_label_index="train", neg_sampling="binary",
                        io=oa.IOOptions(backend="memory")) as loader:
        (b,) = list(loader)
    assert b.edge_label.sum() == ds.edge_split("train").shape[1]


@pytest.mark.parametrize(("kw", "error", "match"), [
    ({"edge_label_index": torch.tensor([[0, 1], [2, 70]])}, oa.ConfigError, r"holds node 70, outside \[0, 70\)"),
    ({"edge_label_index": torch.tensor([[-1], [2]])}, oa.ConfigError, r"holds node -1"),
    ({"edge_label_index": torch.zeros(3, 2, dtype=torch.long)}, oa.ConfigError, r"shape \[2, E\], got int64 \[3, 2\]"),
    ({"edge_label_index": torch.zeros(2, 2)}, oa.ConfigError, r"integer node pairs of shape \[2, E\], got float32"),
    ({"edge_label_index": torch.zeros(2, 0, dtype=torch.long)}, oa.ConfigError, "holds no pairs"),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long), "edge_label": torch.ones(2)}, oa.ConfigError,
     "edge_label has 2 entries for 3 pairs"),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long), "neg_sampling": {"mode": "binary", "amount": 0}},
     oa.ConfigError, r"amount=0 must be a positive number"),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long), "neg_sampling": {"mode": "binary", "amount": -1.5}},
     oa.ConfigError, r"amount=-1.5 must be a positive number"),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long), "neg_sampling": {"mode": "triplet", "amount": 1.5}},
     oa.ConfigError, "must be an integer for 'triplet'"),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long), "neg_sampling": "pairs"}, oa.ConfigError,
     "mode must be one of"),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long), "edge_label": torch.ones(3), "neg_sampling": "triplet"},
     oa.ConfigError, "edge_label must be None with neg_sampling='triplet'"),
    ({"neg_sampling": "binary"}, oa.ConfigError, "go with edge_label_index="),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long), "input_nodes": "train"}, oa.ConfigError,
     "not both"),
    ({"edge_label_index": "train"}, oa.ConfigError, "has no edge split 'train'"),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long), "partitions": "p"}, oa.NotSupportedError,
     r"with partitions= are not supported yet"),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long), "history": oa.HistoryConfig(staleness=2, dim=4)}, oa.NotSupportedError,
     r"with history= are not supported yet"),
    ({"edge_label_index": torch.zeros(2, 3, dtype=torch.long),
      "neg_sampling": NegativeSampling("binary", 1, src_weight=torch.ones(70))}, oa.NotSupportedError,
     "weighted negatives"),
    ({"edge_label_index": torch.cartesian_prod(torch.arange(70), torch.arange(70)).T}, AllPairsError,
     r"holds 4,900 pairs, more than 16 x the graph's 260 edges or nodes: .*oa.evaluate_links\(model, ds"),
    ({"edge_label_index": torch.cartesian_prod(torch.arange(0, 40), torch.arange(30, 70)).T}, AllPairsError,
     r"holds all 1,600 pairs of 40 sources x 40 destinations: an all-pairs candidate set; rank .*oa.evaluate_links"),
])
def test_bad_link_input_is_a_named_one_line_error(case, kw, error, match) -> None:
    data, ds, perm, pairs = case
    with pytest.raises(error, match=match) as err:
        oa.OutreLoader(ds, **group_knobs(dict(num_neighbors=[2, 2], batch_size=4, **kw)))
    assert "\n" not in str(err.value)
