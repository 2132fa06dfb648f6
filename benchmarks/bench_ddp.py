"""Data-parallel training on torch.distributed: equal accuracy (1 vs 2 ranks) and loader scaling.

    python benchmarks/bench_ddp.py accuracy --out ddp_acc.json [--graphs cora,facebook_pagepage] [--seeds 3]
    python benchmarks/bench_ddp.py throughput --out ddp_tp.json [--batches 30] [--sleep 0.05] [--repeats 2]

``accuracy``: GraphSAGE (2 layers, as ``bench_partition_accuracy.py``) trained with the same *global*
batch and the same number of steps by 1 rank (batch B) and by 2 ranks (B/2 each, DDP averaging the
gradients), launched through ``outre_async.distributed.launch`` (torchrun, gloo); rank 0 then scores
the test split with an unsharded loader (``rank=0, world_size=1``).  Per seed and mean, and the
difference 2 ranks − 1 rank paired by seed (same initialisation and permutation).

``throughput``: each rank iterates its ``OutreLoader`` on the ``igb-like`` bench dataset (the cached
copy under ~/.cache/outre-async/bench, pread/io_uring from disk), training replaced by a fixed
``--sleep`` per batch, for ``--batches`` batches after ``--warmup``; the host's ``memory_budget``
(1.6 GiB, as the bench preset) is split over the ranks and the whole run (torchrun, every rank, their
page cache) runs under the preset's 2.5 GiB cgroup cap.  Reported: batches/s per rank and summed,
1 vs 2 ranks alternated ``--repeats`` times (medians), and the machine load.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import outre_async as oa
from outre_async.distributed import init_distributed, launch
from outre_async.nn import seed_logits, seed_targets
from outre_async.loader._options import group_knobs

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
GIB = 1 << 30
GRAPHS = {"cora": (32, 30), "facebook_pagepage": (512, 10)}  # global batch, epochs (bench_partition_accuracy)


# -- the rank programs (run by torchrun) ----------------------------------------------------------
def rank_accuracy(path: str, batch: int, epochs: int, seeds: int, out: str) -> None:
    ds = oa.open_dataset(path)
    rows = []
    with init_distributed(timeout=900) as ctx:
        for seed in range(seeds):
            torch.manual_seed(seed)
            model = ctx.wrap(oa.GraphSAGE(ds.feature_dim, 64, 2, ds.num_classes))
            opt = torch.optim.Adam(model.parameters(), lr=0.01)
            common = {"fanouts": [10, 10], "backend": "memory", "num_samplers": 1, "num_extractors": 1}
            steps = 0
            with oa.OutreLoader(ds, **group_knobs(dict(split="train", batch_size=batch // ctx.world_size, seed=seed, ordered=True,
                                **common, **ctx.loader_options()))) as train:
                for _ in range(epochs):
                    model.train()
                    for b in train:  # every batch, on every rank: equal step counts
                        opt.zero_grad()
                        F.cross_entropy(seed_logits(model, b), seed_targets(b)).backward()
                        opt.step()
                        steps += 1
            if ctx.rank == 0:
                from outre_async._train import evaluate

                with oa.OutreLoader(ds, **group_knobs(dict(split="test", batch_size=batch, shuffle=False, seed=12345, rank=0,
                                    world_size=1, **common))) as test:
                    acc = evaluate(model.module, test).accuracy
                rows.append({"seed": seed, "test_accuracy": acc, "steps": steps})
    if rows:
        Path(out).write_text(json.dumps(rows))


def rank_throughput(path: str, batches: int, warmup: int, sleep: float, budget: int, out: str) -> None:
    ds = oa.open_dataset(path)
    with init_distributed(timeout=900) as ctx:
        loader = oa.OutreLoader(ds, **group_knobs(dict(split="train", fanouts=[10, 5], batch_size=512, seed=0, memory_budget=budget,
                                **ctx.loader_options())))
        with loader:
            it = iter(loader)
            for _ in range(warmup):
                next(it)
            torch.distributed.barrier()
            start = time.perf_counter()
            for _ in range(batches):
                b = next(it)
                b.release()
                time.sleep(sleep)  # the training step, replaced
                torch.distributed.barrier()  # DDP's all-reduce: the ranks step together
            seconds = time.perf_counter() - start
            it.close()
            stats = loader.stats()
        Path(out, f"rank{ctx.rank}.json").write_text(json.dumps({
            "rank": ctx.rank, "batches": batches, "seconds": seconds, "batches_per_s": batches / seconds,
            "budget": stats["memory"]["budget"], "io": {k: v for k, v in stats.items() if k in ("io", "buffer")}}))


# -- the drivers ----------------------------------------------------------------------------------
def accuracy(args: argparse.Namespace) -> dict[str, Any]:
    from bench_partition_accuracy import prepare

    out: dict[str, Any] = {}
    for graph in args.graphs.split(","):
        batch, epochs = GRAPHS[graph]
        ds = prepare(graph, args.data, 128)
        res = {}
        for world in (1, 2):
            with tempfile.TemporaryDirectory() as tmp:
                f = Path(tmp, "acc.json")
                launch(str(HERE), ["_rank_accuracy", str(ds.path), str(batch), str(epochs), str(args.seeds), str(f)],
                       nproc=world, timeout=1800)
                res[world] = json.loads(f.read_text())
        a1 = np.array([r["test_accuracy"] for r in res[1]])
        a2 = np.array([r["test_accuracy"] for r in res[2]])
        out[graph] = {"global_batch": batch, "epochs": epochs, "one_rank": res[1], "two_ranks": res[2],
                      "mean_1": float(a1.mean()), "mean_2": float(a2.mean()),
                      "diff_pt_mean": float(100 * (a2 - a1).mean()), "diff_pt_std": float(100 * (a2 - a1).std(ddof=1))}
        print(f"{graph}: 1 rank {100 * a1.mean():.2f}, 2 ranks {100 * a2.mean():.2f} "
              f"(2 - 1: {out[graph]['diff_pt_mean']:+.2f} ± {out[graph]['diff_pt_std']:.2f} pt, {args.seeds} seeds)",
              flush=True)
    return out


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    from outre_async.bench._cgroup import open_cap

    path = Path.home() / ".cache" / "outre-async" / "bench" / "igb-like-s0-g1"
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for _ in range(args.repeats):
        for world in (1, 2):
            cap = open_cap(int(2.5 * GIB))
            with tempfile.TemporaryDirectory() as tmp:
                load = os.getloadavg()[0]
                cmd = [sys.executable, str(HERE), "_launch_throughput", str(path), str(world), str(args.batches),
                       str(args.warmup), str(args.sleep), str(int(args.host_budget_gib * GIB)), tmp]
                subprocess.run(cmd, check=True, timeout=1200, preexec_fn=getattr(cap, "attach", None))
                ranks = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(world)]
            peak = cap.peak_bytes() if hasattr(cap, "peak_bytes") else None
            oom = cap.oom_kills() if hasattr(cap, "oom_kills") else 0
            if hasattr(cap, "remove"):
                cap.remove()
            row = {"world": world, "per_rank": [r["batches_per_s"] for r in ranks],
                   "total_batches_per_s": sum(r["batches_per_s"] for r in ranks), "rank_budget": ranks[0]["budget"],
                   "cap": cap.describe(), "cgroup_peak_bytes": peak, "oom_kills": oom, "load_before": load}
            runs[world].append(row)
            print(json.dumps(row), flush=True)
    m1 = float(np.median([r["total_batches_per_s"] for r in runs[1]]))
    m2 = float(np.median([r["total_batches_per_s"] for r in runs[2]]))
    print(f"median batches/s: 1 rank {m1:.2f}, 2 ranks {m2:.2f} summed: {m2 / m1:.2f}x", flush=True)
    return {"runs": runs, "median_1": m1, "median_2": m2, "ratio": m2 / m1, "sleep_s": args.sleep,
            "batches": args.batches}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_rank_accuracy":
        p, b, e, s, o = sys.argv[2:7]
        return rank_accuracy(p, int(b), int(e), int(s), o)
    if len(sys.argv) > 1 and sys.argv[1] == "_rank_throughput":
        p, n, w, s, bud, o = sys.argv[2:8]
        return rank_throughput(p, int(n), int(w), float(s), int(bud), o)
    if len(sys.argv) > 1 and sys.argv[1] == "_launch_throughput":  # inside the cap: torchrun and its ranks
        p, world, *rest = sys.argv[2:]
        return launch(str(HERE), ["_rank_throughput", p, *rest], nproc=int(world), timeout=1100)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["accuracy", "throughput"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "outre-partacc-data")
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--sleep", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=2)
    # the loader's budget for the whole host (split by the ranks); the 2.5 GiB cap must also hold one
    # torch runtime per rank (~220 MiB each) and torchrun's agent: at 1.6 GiB two ranks meet the cap
    ap.add_argument("--host-budget-gib", type=float, default=1.3)
    args = ap.parse_args()
    started = time.time()
    result = accuracy(args) if args.what == "accuracy" else throughput(args)
    meta = {"host": platform.node(), "cpus": os.cpu_count(), "loadavg_end": os.getloadavg(),
            "seconds": time.time() - started, "command": " ".join(sys.argv)}
    args.out.write_text(json.dumps({"benchmark": f"ddp-{args.what}", "meta": meta, "result": result}, indent=1))


if __name__ == "__main__":
    main()
