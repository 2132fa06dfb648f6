"""Feature I/O of partition-based batches on a dataset and on its partition-ordered copy (``outre reorder``).

Both runs load the same seeds (the training nodes of the first ``--parts`` partitions, renumbered for
the copy) with the same loader settings and an empty training step, so they plan the same batches and
sample the same sub-graphs (renumbered); only where the rows sit on disk differs.  Per run: reads
submitted, bytes read, rows read from disk, bytes per read, rows per read, epoch seconds; repeats are
interleaved (original, copy, original, copy, ...) and the medians and ratios are written as JSON.

    python -P benchmarks/bench_reorder_io.py ~/.cache/outre-async/bench/igb-like-s0-g1 \
        ~/.cache/outre-async/bench/igb-like-s0-g1-ordered-bench-fennel-256 --partitions bench-fennel-256 \
        --parts 32 --repeats 3 --out results/bench_reorder_io.json

The datasets' feature files are evicted from the page cache before every run (the disk sources read
with O_DIRECT anyway).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from outre_async.partition import open_partitions

import outre_async as oa
from outre_async.bench._measure import evict_from_page_cache


def one_epoch(ds: oa.Dataset, seeds: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    evict_from_page_cache(ds.path)
    loader = oa.OutreLoader(ds, split=seeds, fanouts=args.fanouts, batch_size=args.batch_size, seed=args.seed,
                            partitions=oa.PartitionOptions(name=args.partitions, parts_per_batch=args.parts_per_batch), 
                            memory_budget=args.memory_budget, cache=oa.CacheOptions(neighbor_cache=64 << 20), io=oa.IOOptions(backend=args.backend))
    try:
        start = time.perf_counter()
        batches = sum(1 for _ in loader)
        seconds = time.perf_counter() - start
        s = loader.stats()
    finally:
        loader.close()
    io, buf = s.get("io", {}), s.get("buffer", {})
    reads, nbytes, rows = int(io.get("reads_submitted", 0)), int(io.get("bytes_read", 0)), int(buf.get("reads", 0))
    return {"batches": batches, "epoch_seconds": seconds, "reads": reads, "bytes_read": nbytes, "rows_from_disk": rows,
            "bytes_per_read": nbytes / max(reads, 1), "rows_per_read": rows / max(reads, 1), "backend": s.get("backend")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("ordered", type=Path, help="the copy written by `outre reorder DATASET ORDERED --partitions NAME`")
    ap.add_argument("--partitions", required=True)
    ap.add_argument("--parts", type=int, default=32, help="load the training nodes of the first P partitions")
    ap.add_argument("--parts-per-batch", type=int, default=8)
    ap.add_argument("--fanouts", type=lambda s: [int(x) for x in s.split(",")], default=[10, 5])
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--memory-budget", default="1.6GiB")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ordered-first", action="store_true", help="run the copy first in each repeat")
    ap.add_argument("--out", type=Path, default=Path("results/bench_reorder_io.json"))
    args = ap.parse_args()
    original, ordered = oa.open_dataset(args.dataset), oa.open_dataset(args.ordered)
    with open_partitions(original, args.partitions) as parts:
        seeds = np.concatenate([parts.train_nodes(p) for p in range(min(args.parts, parts.num_parts))])
    runs: dict[str, list[dict[str, Any]]] = {"original": [], "ordered": []}
    for repeat in range(args.repeats):
        pair = [("original", original, seeds), ("ordered", ordered, ordered.ids_of_original(seeds))]
        for name, ds, ids in pair[::-1] if args.ordered_first else pair:
            run = one_epoch(ds, ids, args)
            runs[name].append(run)
            print(f"[{repeat + 1}/{args.repeats}] {name}: {json.dumps(run)}", file=sys.stderr, flush=True)
    keys = ("epoch_seconds", "reads", "bytes_read", "rows_from_disk", "bytes_per_read", "rows_per_read")
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in keys} for name, rs in runs.items()}
    result = {"command": " ".join(sys.argv), "seeds": len(seeds), "settings": {k: str(v) for k, v in vars(args).items()},
              "runs": runs, "medians": medians,
              "ratios_ordered_over_original": {k: medians["ordered"][k] / max(medians["original"][k], 1e-12)
                                               for k in keys}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"medians": medians, "ratios": result["ratios_ordered_over_original"]}, indent=2))


if __name__ == "__main__":
    main()
