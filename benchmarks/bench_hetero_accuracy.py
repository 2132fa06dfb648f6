"""Test accuracy of ``to_hetero(GraphSAGE)`` trained on our typed batches vs on PyG's hetero ``NeighborLoader``.

    python benchmarks/bench_hetero_accuracy.py ../shared/data/acm_heco.npz --target paper
    python benchmarks/bench_hetero_accuracy.py ../shared/data/imdb_magnn.npz --target movie \\
        --epochs 50 --seeds 0,1,2 --fanouts 10,10 --batch-size 128

Converts the hetero ``.npz`` into a temporary typed dataset and builds the same graph as a PyG
``HeteroData`` from the store (features read back from the per-type files), then for each seed trains
the same model the same way twice: on batches of ``HeteroNeighborSampler`` + ``to_hetero_batch``, and
on PyG's ``NeighborLoader``.  Featureless types get an ``n_id``-indexed ``torch.nn.Embedding``.  The
model is evaluated after the last epoch on the stored test split, sampled with the same fanouts.
Prints the test accuracy per seed and the mean of each.  Public API only; nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("npz", type=Path)
    p.add_argument("--target", required=True)
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.005)
    args = p.parse_args()
    warnings.simplefilter("ignore")  # PyG warns when it falls back to torch-sparse
    import outre_async as oa

    with tempfile.TemporaryDirectory() as tmp:
        ds = oa.open_dataset(oa.convert(args.npz, Path(tmp) / "ds"))
        data = _hetero_data(ds)
        results: dict[str, list[float]] = {"outre-async": [], "PyG NeighborLoader": []}
        for seed in (int(s) for s in args.seeds.split(",")):
            for name in results:
                acc = _run(name, ds, data, seed, args)
                results[name].append(acc)
                print(f"seed {seed}  {name:20s} test acc {acc * 100:.1f} %")
        for name, accs in results.items():
            print(f"{name:20s} mean {np.mean(accs) * 100:.1f} % (std {np.std(accs) * 100:.1f}) over {len(accs)} seeds")


def _hetero_data(ds: Any) -> Any:
    import torch
    from torch_geometric.data import HeteroData

    data = HeteroData()
    for t, n in ds.num_nodes_by_type.items():
        data[t].num_nodes = n
        if ds.features_of(t) is not None:
            data[t].x = torch.from_numpy(np.array(ds.features_of(t), dtype=np.float32))
    lo, hi = (ds.node_type_offsets[ds.type_index(ds.target_types[0]) + i] for i in (0, 1))
    data[ds.target_types[0]].y = torch.from_numpy(ds.labels[lo:hi])
    dst = np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))
    for r, (s, rel, d) in enumerate(ds.edge_types):
        sel = ds.type_per_edge == r
        data[s, rel, d].edge_index = torch.from_numpy(np.stack([ds.local_ids(s, ds.indices[sel]),
                                                                ds.local_ids(d, dst[sel])]))
    return data


def _batches(name: str, ds: Any, data: Any, ids: np.ndarray, seed: int, epoch: int, args: Any, shuffle: bool) -> Any:
    import torch
    from torch_geometric.loader import NeighborLoader

    import outre_async as oa
    from outre_async.pyg import to_hetero_batch

    fanouts = [int(f) for f in args.fanouts.split(",")]
    if name == "PyG NeighborLoader":
        torch.manual_seed(seed * 100003 + epoch)
        yield from NeighborLoader(data, num_neighbors=fanouts, input_nodes=(args.target, torch.from_numpy(ids)),
                                  batch_size=args.batch_size, shuffle=shuffle)
        return
    sampler = oa.HeteroNeighborSampler(ds, fanouts, seed=seed)
    order = np.random.default_rng([seed, epoch]).permutation(ids) if shuffle else ids
    for i in range(0, len(order), args.batch_size):
        yield to_hetero_batch(sampler.sample(args.target, order[i : i + args.batch_size], stream=epoch * 10**6 + i), ds)


def _run(name: str, ds: Any, data: Any, seed: int, args: Any) -> float:
    import torch
    from torch_geometric.nn import GraphSAGE, to_hetero

    torch.manual_seed(seed)
    sage = GraphSAGE((-1, -1), args.hidden, num_layers=2, out_channels=ds.num_classes)
    model = to_hetero(sage, ds.metadata(), aggr="sum")
    emb = torch.nn.ModuleDict({t: torch.nn.Embedding(n, args.hidden) for t, n in ds.num_nodes_by_type.items()
                               if ds.features_of(t) is None})
    train, test = (ds.local_ids(args.target, ds.split(s)) for s in ("train", "test"))

    def forward(batch: Any) -> torch.Tensor:
        x = {t: batch[t].x if t not in emb else emb[t](batch[t].n_id) for t in ds.node_types}
        return model(x, batch.edge_index_dict)[args.target][: batch[args.target].batch_size]

    with torch.no_grad():  # the lazy (-1) widths are set by a first forward
        forward(next(iter(_batches(name, ds, data, train, seed, 0, args, False))))
    opt = torch.optim.Adam(list(model.parameters()) + list(emb.parameters()), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        for batch in _batches(name, ds, data, train, seed, epoch + 1, args, True):
            opt.zero_grad()
            y = batch[args.target].y[: batch[args.target].batch_size]
            torch.nn.functional.cross_entropy(forward(batch), y).backward()
            opt.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for batch in _batches(name, ds, data, test, seed, 10**6, args, False):
            y = batch[args.target].y[: batch[args.target].batch_size]
            correct += int((forward(batch).argmax(-1) == y).sum())
    return correct / len(test)


if __name__ == "__main__":
    main()
