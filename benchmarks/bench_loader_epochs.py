"""The loader's own CPU epoch by epoch, over one loader's life: what the first epoch pays once.

    python benchmarks/bench_loader_epochs.py ~/.cache/outre-async/bench/igb-like-s0-g1 \\
        --partitions bench-fennel-256 --epochs 3 --json loader_epochs.json

``outre bench`` times the first epoch of a fresh loader, which also pays one-time costs: the kernel
zeroes the feature buffer's pages as the first O_DIRECT reads pin them, and the batch-matrix pool
maps its first matrices.  A training run of tens of epochs pays them once.  This runs ``--epochs``
epochs of one ``OutreLoader`` with an empty training step (``outre-part``'s loader when
``--partitions`` is given, with the igb-like preset's settings by default) after evicting the
dataset's files from the page cache (as ``outre bench`` does), and reports per epoch: wall time,
user and system CPU of the process (``getrusage``, all threads), each stage's thread CPU (sample,
extract, io), reads submitted, and the batch-matrix pool's new and resized maps.  Nothing here is asserted in CI;
the machine may be shared, so compare epochs of one run.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from typing import Any
from outre_async.loader._options import group_knobs


def _stage_cpu(stats: dict[str, Any]) -> dict[str, float]:
    """Cumulative counters of one loader (the deltas between epochs are what one epoch cost)."""
    io, maps = stats.get("io", {}), stats.get("batch_matrices", {})
    return {"sample_cpu_s": stats.get("sample_cpu_seconds", 0.0), "extract_cpu_s": stats.get("extract_cpu_seconds", 0.0),
            "io_cpu_s": io.get("io_cpu_seconds", 0.0), "reads": io.get("reads_submitted", 0),
            "maps_new": maps.get("maps_new", 0), "maps_resized": maps.get("maps_resized", 0)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="an existing store")
    p.add_argument("--partitions", help="a partitioning of the store (partition batches, as outre-part)")
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--budget", default="1.6GiB", help="memory_budget")
    p.add_argument("--parts-per-batch", type=int, default=8)
    p.add_argument("--neighbor-cache", default="64MiB")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--json", help="write the epochs here")
    args = p.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.parts_per_batch < 1:
        p.error("--epochs, --batch-size and --parts-per-batch must be at least 1")

    import outre_async as oa
    from outre_async.errors import OutreError
    from outre_async._units import parse_bytes
    from outre_async.bench._measure import evict_from_page_cache

    try:
        ds = oa.open_dataset(args.dataset)
        neighbor_cache = parse_bytes(args.neighbor_cache)
    except OutreError as exc:
        p.error(str(exc))
    try:
        fanouts = [int(f) for f in args.fanouts.split(",")]
    except ValueError:
        p.error(f"--fanouts {args.fanouts!r}: write comma-separated integers, e.g. 10,5")
    opts: dict[str, Any] = dict(split="train", fanouts=fanouts, batch_size=args.batch_size,
                                memory_budget=args.budget, seed=0)
    if args.partitions:
        opts.update(partitions=args.partitions, parts_per_batch=args.parts_per_batch, neighbor_cache=neighbor_cache)
    evict_from_page_cache(ds.path)  # as outre bench does before every run: a cold start
    epochs: list[dict[str, Any]] = []
    with oa.OutreLoader(ds, **group_knobs(opts)) as loader:
        before = _stage_cpu(loader.stats())
        for epoch in range(args.epochs):
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            batches = sum(1 for _ in loader)
            wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
            after = _stage_cpu(loader.stats())
            row = {"epoch": epoch, "batches": batches, "wall_s": wall, "user_s": r1.ru_utime - r0.ru_utime,
                   "sys_s": r1.ru_stime - r0.ru_stime, **{k: after[k] - before[k] for k in after}}
            before = after
            epochs.append(row)
            print(" ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "epochs": epochs}, f, indent=1)


if __name__ == "__main__":
    main()
