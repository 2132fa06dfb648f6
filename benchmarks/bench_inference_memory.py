"""Peak RSS of ``oa.inference`` by ``memory_budget`` (issue 40: 3.9 GB on Facebook Page-Page).

    python benchmarks/bench_inference_memory.py DATASET                      # fixed 8192-node chunks vs budgets
    python benchmarks/bench_inference_memory.py DATASET --budgets 512MiB,2GiB --hidden 128

Each setting runs in a fresh child process: a GraphSAGE of ``--layers`` layers (``--hidden`` wide,
seeded) and ``oa.inference`` over every node; the child reports its RSS after the model is built
(``before``), its peak RSS (``ru_maxrss``) after inference, the seconds inference took and the chunks
of the first layer.  The
``unbounded`` row passes a budget so large that the caller's chunk sizes (8192 nodes, 1 Mi edges)
stand, the chunking before ``memory_budget`` existed.  Facebook Page-Page (22,470 nodes, 4,714
features) on a 2-core machine, hidden 128: peak 4.2 GB unbounded (the first layer's x[src] messages, ~125 k
edges x 4,714 floats), 1.4 GB at 1.6 GiB, 0.9 GB at 512 MiB (the same checksum), from 0.4 GB before.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

_CHILD = r"""
import json, resource, sys, time
import numpy as np, torch
import outre_async as oa
from outre_async.layerwise._chunk_budget import chunk_limits
path, budget, hidden, layers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ds = oa.open_dataset(path)
torch.manual_seed(0)
model = oa.GraphSAGE(ds.feature_dim, hidden, layers, max(ds.num_classes, 2))
before = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
start = time.perf_counter()
out = oa.inference(model, ds, memory_budget=budget)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"before": before, "peak": peak, "seconds": seconds, "chunks": chunk_limits(ds.feature_dim, budget, 8192, 1 << 20),
                  "checksum": float(out.double().sum())}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset")
    p.add_argument("--budgets", default="unbounded,1.6GiB,512MiB")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    from outre_async._units import parse_bytes

    rows = []
    for name in args.budgets.split(","):
        budget = 1 << 60 if name == "unbounded" else parse_bytes(name)
        done = subprocess.run([sys.executable, "-c", _CHILD, args.dataset, str(budget), str(args.hidden), str(args.layers)],
                              capture_output=True, text=True, check=True)
        row = {"budget": name, **json.loads(done.stdout.strip().splitlines()[-1])}
        rows.append(row)
        print(f"{name:>10}  before {row['before'] / 1e9:5.2f} GB  peak {row['peak'] / 1e9:5.2f} GB  "
              f"{row['seconds']:6.1f} s  first-layer chunks (nodes, edges) {tuple(row['chunks'])}  checksum {row['checksum']:.6g}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
