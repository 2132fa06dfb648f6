"""Neighbour-sampling throughput: outre-async's numba kernel vs PyG's NeighborLoader, same seeds.

    python benchmarks/bench_sampler.py                       # synthetic 2M-node / ~20M-edge CSC
    python benchmarks/bench_sampler.py --dataset data/ds --fanouts 15,10,5 --batch-size 1024 \\
        --batches 50 --json out.json

Reports sampled edges/s and batches/s for our ``NeighborSampler`` on one thread and on
``--threads`` threads of a ``ThreadPoolExecutor`` sharing one sampler (the kernels are ``nogil``, so
this shows whether sampling scales outside the GIL), then PyG's sampler on the same graph, seeds and
fanouts: the raw ``torch_geometric.sampler.NeighborSampler`` (one thread and ``--threads`` threads)
and the full ``NeighborLoader`` iteration.  PyG needs ``pyg-lib`` or ``torch-sparse``; when neither
imports, its rows are skipped with a message (the project itself never depends on them).

Public API only; nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit

import outre_async as oa


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", help="path of an outre-async store (default: synthetic CSC)")
    p.add_argument("--nodes", type=int, default=2_000_000, help="synthetic graph: node count")
    p.add_argument("--avg-degree", type=float, default=10.0, help="synthetic graph: mean in-degree")
    p.add_argument("--fanouts", default="15,10,5", help="comma-separated, -1 = all neighbours")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--batches", type=int, default=50, help="timed batches per measurement")
    p.add_argument("--threads", type=int, default=2, help="threads of the parallel measurement")
    p.add_argument("--repeats", type=int, default=3, help="runs per measurement; the best counts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-pyg", action="store_true", help="skip the PyG baseline")
    p.add_argument("--json", help="write the results to this file")
    return p.parse_args(argv)


def synthetic_csc(num_nodes: int, avg_degree: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A skewed random CSC: log-normal in-degrees (mean ``avg_degree``, a long tail of hubs);
    half the sources uniform, half drawn from a power law over a random node order (popular
    nodes), so that neighbourhoods overlap somewhat, as in real graphs."""
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(mean=0.0, sigma=1.0, size=num_nodes)
    deg = np.rint(raw * (avg_degree / raw.mean())).astype(np.int64)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    num_edges = int(indptr[-1])
    indices = rng.integers(0, num_nodes, size=num_edges, dtype=np.int32)
    popular = rng.random(num_edges) < 0.5
    ranks = (rng.pareto(1.0, size=int(popular.sum())) * (num_nodes / 100)).astype(np.int64)
    indices[popular] = rng.permutation(num_nodes)[np.minimum(ranks, num_nodes - 1)]
    return indptr, indices


def load_graph(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, str]:
    if args.dataset:
        ds = oa.open_dataset(args.dataset)
        return ds.indptr, ds.indices, str(args.dataset)
    start = time.perf_counter()
    indptr, indices = synthetic_csc(args.nodes, args.avg_degree, args.seed)
    print(f"synthetic CSC: {len(indptr) - 1:,} nodes, {len(indices):,} edges "
          f"({time.perf_counter() - start:.1f}s)")
    return indptr, indices, "synthetic"


def seed_batches(num_nodes: int, batch_size: int, count: int, seed: int) -> list[np.ndarray]:
    order = np.random.default_rng(seed + 1).permutation(num_nodes)
    return [order[i * batch_size : (i + 1) * batch_size] for i in range(count)]


def timed(run: Callable[[], list[int]], repeats: int) -> dict[str, Any]:
    """Best of ``repeats`` runs (the least disturbed by other load, as ``timeit`` reports);
    ``run`` returns the sampled edge count of every batch."""
    seconds: list[float] = []
    edges: list[int] = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        edges = run()
        seconds.append(time.perf_counter() - start)
    best = min(seconds)
    return {"seconds": best, "all_seconds": seconds, "batches": len(edges),
            "edges": int(sum(edges)), "batches_per_s": len(edges) / best,
            "edges_per_s": sum(edges) / best}


# -- outre-async ---------------------------------------------------------------------------------
def bench_ours(indptr, indices, batches, fanouts, threads: int, seed: int,
               repeats: int) -> dict[str, Any]:
    sampler = oa.NeighborSampler((indptr, indices), fanouts, seed=seed)
    streams = range(len(batches))

    def sequential() -> list[int]:
        return [sampler.sample(b, s).num_edges for s, b in zip(streams, batches, strict=True)]

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(sampler.sample, batches[:threads], streams))  # compile; a scratch per thread
        one = timed(sequential, repeats)
        par = timed(lambda: [o.num_edges for o in pool.map(sampler.sample, batches, streams)],
                    repeats)
    return {"single_thread": one, f"{threads}_threads": par,
            "speedup": par["edges_per_s"] / one["edges_per_s"]}


@njit(nogil=True)
def _spin(n: int) -> float:
    x = 1.0
    for _ in range(n):
        x = np.sqrt(x * 1.000001 + 1.0)
    return x


def machine_parallelism(threads: int, n: int = 30_000_000) -> float:
    """Speedup of ``threads`` copies of a pure-compute nogil loop over one: the ceiling for any
    thread-scaling figure here (a VM's vCPUs may share one physical core)."""
    _spin(10)
    start = time.perf_counter()
    _spin(n)
    one = time.perf_counter() - start
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(_spin, [n] * threads))
        many = time.perf_counter() - start
    return threads * one / many


# -- PyG baseline --------------------------------------------------------------------------------
def pyg_available() -> str | None:
    """Why PyG's sampler cannot run here, or None when it can."""
    try:
        import torch_geometric.typing as t
    except ImportError as exc:
        return f"torch_geometric does not import: {exc}"
    if not (t.WITH_PYG_LIB or t.WITH_TORCH_SPARSE):
        from outre_async.bench._systems import WHEELS_HINT

        return f"neither pyg-lib nor torch-sparse imports; {WHEELS_HINT}"
    return None


def bench_pyg(indptr, indices, batches, fanouts, threads: int, repeats: int) -> dict[str, Any]:
    import warnings

    import torch
    import torch_geometric.typing as t
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    n = len(indptr) - 1
    # torch-sparse sampling is "deprecated" in favour of pyg-lib, which has no wheel for this torch
    warnings.filterwarnings("ignore", ".*without a 'pyg-lib' installation.*", UserWarning)
    data = Data(num_nodes=n, adj_t=_sparse_tensor(indptr, indices, n))
    sampler = NeighborSampler(data, num_neighbors=list(fanouts))
    seeds = [torch.from_numpy(b) for b in batches]

    def sample(s: torch.Tensor) -> int:
        return int(sampler.sample_from_nodes(NodeSamplerInput(None, s)).row.numel())

    sample(seeds[0])
    with ThreadPoolExecutor(threads) as pool:
        one = timed(lambda: [sample(s) for s in seeds], repeats)
        par = timed(lambda: list(pool.map(sample, seeds)), repeats)
    # the full loop a PyG user runs: sampling, relabelling and building each ``Data``
    loader = NeighborLoader(_edge_index_data(indptr, indices, n), num_neighbors=list(fanouts),
                            input_nodes=torch.cat(seeds), batch_size=len(batches[0]))
    full = timed(lambda: [int(b.edge_index.size(1)) for b in loader], repeats)
    backend = "pyg-lib" if t.WITH_PYG_LIB else "torch-sparse"
    return {"backend": backend, "sampler_single_thread": one, f"sampler_{threads}_threads": par,
            "speedup": par["edges_per_s"] / one["edges_per_s"], "neighbor_loader": full}


def _edge_index_data(indptr, indices, n):
    """The usual way a PyG user holds the graph (``edge_index``); the loader sorts it once."""
    import torch
    from torch_geometric.data import Data

    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    edge_index = torch.from_numpy(np.stack([indices.astype(np.int64), dst]))
    return Data(edge_index=edge_index, num_nodes=n)


def _sparse_tensor(indptr, indices, n):
    """The CSC as PyG's ``adj_t`` (its CSR rows are our in-neighbour lists): no re-sort needed."""
    import torch
    from torch_sparse import SparseTensor

    col = torch.from_numpy(indices.astype(np.int64))
    return SparseTensor(rowptr=torch.from_numpy(indptr), col=col, sparse_sizes=(n, n),
                        is_sorted=True, trust_data=True)


# -- report --------------------------------------------------------------------------------------
def row(name: str, r: dict[str, float]) -> str:
    return (f"{name:<40} {r['batches_per_s']:>8.1f} batches/s {r['edges_per_s'] / 1e6:>7.2f} "
            f"M edges/s  ({r['edges'] / r['batches']:,.0f} edges/batch)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    indptr, indices, source = load_graph(args)
    batches = seed_batches(len(indptr) - 1, args.batch_size, args.batches, args.seed)
    result: dict[str, Any] = {
        "graph": {"source": source, "num_nodes": len(indptr) - 1, "num_edges": len(indices)},
        "fanouts": fanouts, "batch_size": args.batch_size, "batches": args.batches,
        "threads": args.threads, "repeats": args.repeats, "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(), "machine_parallelism": machine_parallelism(args.threads),
        "outre_async": bench_ours(indptr, indices, batches, fanouts, args.threads, args.seed,
                                  args.repeats),
    }
    ours = result["outre_async"]
    print(f"machine parallelism ({args.threads} threads of a pure-compute nogil loop): "
          f"{result['machine_parallelism']:.2f}x of {args.threads}x")
    print(row("outre-async kernel, 1 thread", ours["single_thread"]))
    print(row(f"outre-async kernel, {args.threads} threads", ours[f"{args.threads}_threads"]))
    why = "--no-pyg given" if args.no_pyg else pyg_available()
    if why is None:
        result["pyg"] = pyg = bench_pyg(indptr, indices, batches, fanouts, args.threads,
                                           args.repeats)
        print(row(f"PyG sampler ({pyg['backend']}), 1 thread", pyg["sampler_single_thread"]))
        print(row(f"PyG sampler, {args.threads} threads", pyg[f"sampler_{args.threads}_threads"]))
        print(row("PyG NeighborLoader, 1 thread", pyg["neighbor_loader"]))
    else:
        result["pyg"] = {"skipped": why}
        print(f"PyG baseline skipped: {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
