"""Per-edge-type sampling time: outre-async's ``HeteroNeighborSampler`` vs PyG's hetero sampler, same seeds.

    python benchmarks/bench_hetero_sampler.py ../shared/data/acm_heco.npz --target paper
    python benchmarks/bench_hetero_sampler.py ../shared/data/imdb_magnn.npz --target movie \\
        --fanouts 10,10 --batch-size 1024 --batches 30 --repeats 3

Converts the hetero ``.npz`` into a temporary typed dataset, builds the same graph as a PyG
``HeteroData`` from the store's CSC (so both sample one graph), and times ``--batches`` batches of
``--batch-size`` random target seeds: our sampler (topology split per type included) and PyG's raw
``torch_geometric.sampler.NeighborSampler.sample_from_nodes`` (pyg-lib or torch-sparse), one thread
each; the best of ``--repeats`` passes, in ms per batch, with the mean sampled node count as a check
that both sample the same amount.  Public API only; nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("npz", type=Path)
    p.add_argument("--target", required=True, help="the input node type")
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    import torch
    from torch_geometric.data import HeteroData
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    import outre_async as oa

    fanouts = [int(f) for f in args.fanouts.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        ds = oa.open_dataset(oa.convert(args.npz, Path(tmp) / "ds"))
        data = HeteroData()
        for t, n in ds.num_nodes_by_type.items():
            data[t].num_nodes = n
        dst = np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))
        for r, (s, rel, d) in enumerate(ds.edge_types):
            sel = ds.type_per_edge == r
            data[s, rel, d].edge_index = torch.from_numpy(np.stack([ds.local_ids(s, ds.indices[sel]),
                                                                    ds.local_ids(d, dst[sel])]))
        rng = np.random.default_rng(0)
        n = ds.num_nodes_by_type[args.target]
        seeds = [rng.choice(n, min(args.batch_size, n), replace=False) for _ in range(args.batches)]
        ours = oa.HeteroNeighborSampler(ds, fanouts, seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyG warns when it falls back to torch-sparse
            theirs = NeighborSampler(data, num_neighbors=fanouts)

        def run_ours() -> float:
            return float(np.mean([sum(len(v) for v in ours.sample(args.target, b, stream=i).node.values())
                                  for i, b in enumerate(seeds)]))

        def run_pyg() -> float:
            return float(np.mean([sum(len(v) for v in theirs.sample_from_nodes(NodeSamplerInput(
                input_id=None, node=torch.from_numpy(b), input_type=args.target)).node.values()) for b in seeds]))

        for name, fn in (("outre-async HeteroNeighborSampler", run_ours), ("PyG NeighborSampler (hetero)", run_pyg)):
            fn()  # warm-up: numba compiles, PyG builds its CSC
            best, nodes = float("inf"), 0.0
            for _ in range(args.repeats):
                start = time.perf_counter()
                nodes = fn()
                best = min(best, time.perf_counter() - start)
            print(f"{name:36s} {best / args.batches * 1e3:8.2f} ms/batch   {nodes:,.0f} nodes/batch")


if __name__ == "__main__":
    main()
