"""``outre reorder`` under a cgroup memory cap: time, peak memory (cgroup, page cache included, and
RSS), outcome; writes JSON.  The output copy is deleted afterwards unless ``--keep``.

    python -P benchmarks/bench_reorder.py DATASET --partitions NAME --cap 512MiB --memory 64MiB \
        --out-json results/reorder.json

Run as root for the cap (else it runs uncapped and says so), on a dataset whose features are larger
than the cap to show that the regrouping is out of core.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from outre_async._units import parse_bytes
from outre_async.bench._cgroup import MemoryCap, open_cap
from outre_async.store._dataset import open_dataset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--partitions", required=True)
    ap.add_argument("--cap", default="512MiB")
    ap.add_argument("--memory", default="64MiB")
    ap.add_argument("--out", type=Path, help="where the copy goes (default: DATASET-bench-reorder)")
    ap.add_argument("--out-json", type=Path, default=Path("results/bench_reorder.json"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    ds = open_dataset(args.dataset)
    out = args.out or args.dataset.with_name(args.dataset.name + "-bench-reorder")
    cap = open_cap(parse_bytes(args.cap))
    cmd = [sys.executable, "-P", "-m", "outre_async.cli", "reorder", str(args.dataset), str(out), "--partitions",
           args.partitions, "--memory", args.memory, "--overwrite", "--json", "--no-progress"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                          preexec_fn=cap.attach if isinstance(cap, MemoryCap) else None)
    seconds = time.perf_counter() - start
    result = {
        "command": " ".join(sys.argv), "dataset": str(args.dataset), "num_nodes": ds.num_nodes,
        "num_edges": ds.num_edges, "feature_bytes": 0 if ds.manifest.features is None else ds.manifest.features.nbytes,
        "cap": cap.describe(), "memory": args.memory, "returncode": done.returncode, "wall_seconds": seconds,
        "cgroup_peak_bytes": cap.peak_bytes() if isinstance(cap, MemoryCap) else None,
        "oom_kills": cap.oom_kills() if isinstance(cap, MemoryCap) else None,
        "cli": json.loads(done.stdout) if done.returncode == 0 else done.stderr[-2000:],
    }
    if isinstance(cap, MemoryCap):
        cap.remove()
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    args.out_json.parent.mkdir(parents=True, exist_ok=True)
    args.out_json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
