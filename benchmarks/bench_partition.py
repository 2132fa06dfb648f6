"""Partition quality, memory and speed: streaming FENNEL vs hash, LDG and METIS; redundancy ratio.

    python benchmarks/bench_partition.py --out partition.json [--nodes 1000000] [--ks 16,64,256]

Graphs: the planted-community generator with ids randomly relabelled (``shuffle_ids``, the default),
and the real topologies in ``../shared/data`` (ego-twitter, soc-slashdot0902, law_dblp-2010).  Every
(graph, k, method) runs in a child process, so its peak RSS (the child's own ``ru_maxrss``, reported at exit) is its own:
FENNEL/LDG through the public ``outre_async.partition.partition`` (streaming passes *and* the output
files), hash as a streamed cut count, METIS (``pymetis``, if importable; never a dependency) on the
symmetrised CSR it needs in RAM.  Also: single-level FENNEL throughput at k=1024, and the redundancy
ratio (OUTRE eq. 2) of random vs FENNEL batches at fanouts [10, 10, 10].  Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import outre_async as oa

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
REAL = ("ego-twitter", "soc-slashdot0902", "law_dblp-2010")


def _edges(ds: oa.Dataset, chunk: int = 1 << 24):
    """(src, dst) chunks, streamed."""
    indptr = ds.indptr
    for lo in range(0, ds.num_edges, chunk):
        hi = min(lo + chunk, ds.num_edges)
        dst = np.searchsorted(indptr, np.arange(lo, hi), side="right") - 1
        yield np.asarray(ds.indices[lo:hi]).astype(np.int64), dst


def _cut(ds: oa.Dataset, assign: np.ndarray) -> float:
    cut = sum(int((assign[s] != assign[d]).sum()) for s, d in _edges(ds))
    return cut / ds.num_edges


def child(args: argparse.Namespace) -> dict:
    ds = oa.open_dataset(args.dataset)
    start = time.perf_counter()
    if args.method == "noop":  # the baseline RSS of a child that imports what the partitioner does
        import outre_async.partition  # noqa: F401

        return {"seconds": 0.0}
    if args.method == "hash":
        v = np.arange(ds.num_nodes, dtype=np.uint64)
        assign = ((v * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)) % np.uint64(args.k)
        return {"edge_cut_fraction": _cut(ds, assign.astype(np.int64)), "seconds": time.perf_counter() - start}
    if args.method == "metis":
        import pymetis

        src = np.asarray(ds.indices).astype(np.int64)
        dst = np.repeat(np.arange(ds.num_nodes), np.diff(ds.indptr))
        keep = src != dst
        a, b = np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])
        key = np.unique(a * ds.num_nodes + b)
        a, b = key // ds.num_nodes, key % ds.num_nodes
        del src, dst, keep, key
        xadj = np.concatenate([[0], np.cumsum(np.bincount(a, minlength=ds.num_nodes))]).astype(np.int64)
        _, parts = pymetis.part_graph(args.k, xadj=xadj, adjncy=b.astype(np.int64))
        assign = np.asarray(parts, dtype=np.int64)
        seconds = time.perf_counter() - start
        return {"edge_cut_fraction": _cut(ds, assign), "seconds": seconds,
                "node_balance": float(np.bincount(assign, minlength=args.k).max() * args.k / ds.num_nodes)}
    from outre_async.partition import partition

    objective, passes = ("ldg", 1) if args.method == "ldg" else ("fennel", args.passes)
    p = partition(ds, args.k, name=f"bench-{args.method}-{args.k}-{passes}", overwrite=True, objective=objective,
                  passes=passes)
    q = p.meta["quality"]
    return {"edge_cut_fraction": q["edge_cut_fraction"], "seconds": p.meta["seconds"],
            "partition_seconds": p.meta["partition_seconds"], "edges_per_second": p.meta["edges_per_second"],
            "node_balance": q["node_balance"], "train_balance": q["train_balance"], "passes": passes}


def run_child(dataset: Path, method: str, k: int, passes: int = 1) -> dict:
    cmd = [sys.executable, __file__, "--child", method, "--dataset", str(dataset), "--k", str(k),
           "--passes", str(passes)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    if proc.returncode != 0:
        return {"method": method, "k": k, "error": err.strip().splitlines()[-1] if err.strip() else "failed"}
    result = json.loads(out.strip().splitlines()[-1])
    return {"method": method, "k": k, **result}


def datasets(work: Path, nodes: int) -> dict[str, Path]:
    out = {}
    comm = work / f"community-{nodes}"
    if not comm.exists():
        oa.generate(comm, "tiny", seed=0, num_nodes=nodes, avg_degree=10.0, max_degree=1000,
                    num_communities=max(32, nodes // 2000), num_classes=16, feature_dim=0)
    out["community"] = comm
    for name in REAL:
        path = work / name
        if not path.exists() and (DATA / f"{name}.npz").exists():
            oa.convert(DATA / f"{name}.npz", path)
        if path.exists():
            out[name] = path
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("bench_partition.json"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/outre-bench-partition"))
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--ks", default="16,64,256")
    ap.add_argument("--restream", type=int, default=3, help="FENNEL passes of the restreamed variant")
    ap.add_argument("--methods", default="hash,ldg,fennel,fennel-r,metis")
    ap.add_argument("--graphs", default="")
    ap.add_argument("--rr-batches", type=int, default=20)
    ap.add_argument("--child")
    ap.add_argument("--dataset", type=Path)
    ap.add_argument("--k", type=int)
    ap.add_argument("--passes", type=int, default=1)
    args = ap.parse_args()
    if args.child:
        args.method = args.child
        result = child(args)
        import resource

        result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps(result))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    graphs = datasets(args.work, args.nodes)
    if args.graphs:
        graphs = {k: v for k, v in graphs.items() if k in args.graphs.split(",")}
    methods = args.methods.split(",")
    try:
        import pymetis  # noqa: F401
    except ImportError:
        methods = [m for m in methods if m != "metis"]
    report: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                    "restream_passes": args.restream, "quality": [], "throughput": None, "redundancy": []}
    report["baseline_child"] = run_child(next(iter(graphs.values())), "noop", 1)
    for gname, path in graphs.items():
        ds = oa.open_dataset(path)
        for k in [int(x) for x in args.ks.split(",")]:
            for m in methods:
                r = run_child(path, "fennel" if m == "fennel-r" else m, k, args.restream if m == "fennel-r" else 1)
                r.update(graph=gname, nodes=ds.num_nodes, edges=ds.num_edges, method=m)
                print(json.dumps(r), flush=True)
                report["quality"].append(r)
    comm = graphs.get("community")
    if comm is not None:
        r = run_child(comm, "fennel", 1024, 1)
        report["throughput"] = {"graph": "community", "k": 1024, **r}
        print(json.dumps(report["throughput"]), flush=True)
    report["redundancy"] = redundancy(graphs, args.rr_batches)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


def redundancy(graphs: dict[str, Path], max_batches: int) -> list[dict]:
    from outre_async.partition import open_partitions, partition, redundancy_ratio

    out = []
    for gname, path in graphs.items():
        ds = oa.open_dataset(path)
        seeds = ds.split("train") if "train" in ds.split_names else \
            np.random.default_rng(0).choice(ds.num_nodes, size=ds.num_nodes // 2, replace=False)
        k = max(2, len(seeds) // 2048)  # ~2 micro-batches of 1024 per partition, as OUTRE's sizing
        name = f"rr-fennel-{k}"
        try:
            parts = open_partitions(ds, name)
        except oa.errors.PartitionError:
            parts = partition(ds, k, name=name, passes=3, overwrite=True)
        rr = redundancy_ratio(ds, fanouts=[10, 10, 10], batch_size=1024, partitions=parts, parts_per_batch=1,
                              split=seeds, max_batches=max_batches)
        rr.update(graph=gname, k=k)
        print(json.dumps({"graph": gname, "k": k, "random": rr["random"]["rr"], "fennel": rr["partition"]["rr"],
                          "reduction": rr["reduction"]}), flush=True)
        out.append(rr)
    return out


if __name__ == "__main__":
    main()
