"""Rows per second of a loader-only epoch against the cores it may use (issue 25: the loader scales with cores).

    python benchmarks/bench_loader_cores.py ~/.cache/outre-async/bench/igb-like-s0-g1 \\
        --partitions bench-fennel-256 --cores 0 0,1 --max-batches 80 --json loader_cores.json

For each core set, a fresh process pinned with ``taskset -c SET`` evicts the dataset from the page
cache (as ``outre bench`` does), opens ``outre-part``'s loader (igb-like's settings by default; the
thread counts left to their defaults, which ``_cores`` sizes from ``os.sched_getaffinity``), and runs
one epoch (or its first ``--max-batches``) with an empty training step.  Reported per core set: wall
seconds, rows delivered per second, the process's user/system CPU, and what the loader chose
(``stats()["workers"]``).  Nothing here is asserted in CI; on a shared machine, repeat and compare
runs made back to back.

Measured on the 2-core box (igb-like, bench-fennel-256, first 120 batches, load average ~12 from other
work, so a pinned process gets a share of its cores, not the cores): ``-c 0`` 19.8k and 26.2k rows/s,
``-c 0,1`` 44.7k and 31.9k rows/s (runs interleaved 0, 0-1, 0, 0-1); both chose 2 samplers, 2
extractors, io_uring depth 256 (the defaults are the same below 4 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any
from outre_async.loader._options import group_knobs


def _child(args: argparse.Namespace) -> dict[str, Any]:
    import outre_async as oa
    from outre_async._units import parse_bytes
    from outre_async.bench._measure import evict_from_page_cache

    ds = oa.open_dataset(args.dataset)
    evict_from_page_cache(ds.path)
    options: dict[str, Any] = {"split": "train", "fanouts": [int(f) for f in args.fanouts.split(",")],
                               "batch_size": args.batch_size, "memory_budget": args.budget, "ordered": True}
    if args.partitions:
        options.update(partitions=args.partitions, parts_per_batch=args.parts_per_batch,
                       neighbor_cache=parse_bytes(args.neighbor_cache))
    rows = batches = 0
    with oa.OutreLoader(ds, **group_knobs(options)) as loader:
        loader.start()
        t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        for batch in loader:
            rows += len(batch.n_id)
            batches += 1
            if args.max_batches and batches >= args.max_batches:
                break
        wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        stats = loader.stats()
    return {"cores": sorted(os.sched_getaffinity(0)), "batches": batches, "rows": rows, "wall_s": wall,
            "rows_per_s": rows / wall if wall else 0.0, "user_s": r1.ru_utime - r0.ru_utime,
            "sys_s": r1.ru_stime - r0.ru_stime, "workers": stats["workers"],
            "stall_s": stats.get("stall_seconds"), "loadavg": os.getloadavg()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--partitions", help="a partitioning of the store (outre-part's batches)")
    p.add_argument("--cores", nargs="+", default=["0", "0,1"], help="taskset core lists, one run each")
    p.add_argument("--max-batches", type=int, default=0, help="0: the whole epoch")
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--budget", default="1.6GiB")
    p.add_argument("--parts-per-batch", type=int, default=8)
    p.add_argument("--neighbor-cache", default="64MiB")
    p.add_argument("--json", help="write the runs here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(_child(args)))
        return
    runs = []
    forward = [a for a in sys.argv[1:] if a not in args.cores and a != "--cores"]
    for cores in args.cores:
        out = subprocess.run(["taskset", "-c", cores, sys.executable, __file__, *forward, "--child"],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(f"cores {cores}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
            continue
        run = json.loads(out.stdout.strip().splitlines()[-1])
        runs.append(run)
        print(f"cores {cores}: {run['batches']} batches, {run['rows_per_s']:,.0f} rows/s, wall {run['wall_s']:.1f} s, "
              f"CPU {run['user_s']:.1f} user / {run['sys_s']:.1f} sys, chose {run['workers']}, "
              f"load {run['loadavg'][0]:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
