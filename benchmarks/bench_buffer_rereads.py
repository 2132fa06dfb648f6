"""Rows read from disk per epoch, and reads per unique row, with and without look-ahead pinning.

    python -P benchmarks/bench_buffer_rereads.py --dataset ~/.cache/outre-async/bench/igb-like-s0-g1 \\
        --partitions bench-fennel-256 --json rereads.json [--old-tree /tmp/old] [--epochs 1]

Each variant runs one loader in a fresh child process, on the same dataset, side by side in one
invocation: ``pin`` (this tree), ``ordered`` (``pin`` with ``ordered=True``: plan order through the
reorder buffer and the samplers' out-of-turn gate, whose counters it reports), ``no-pin`` (this tree
with :meth:`FeatureBuffer.pin` made to pin nothing: the same streaming buffer and budget plan, LRU
eviction only) and, with ``--old-tree DIR`` (a ``git archive`` of an older commit), ``old`` (that tree's
loader, imported through ``PYTHONPATH``); ``NAME@Q`` runs variant NAME with an extract queue (look-ahead
depth) of Q batches (without ``@Q``: the loader's default depth, reported as ``extract_queue``).
The loader is configured as the bench's ``outre-part`` system on ``igb-like`` (fanouts 10,5, batch
512, ``memory_budget`` 1.6 GiB, partitions, 8 parts per macro batch, 64 MiB neighbour cache); the
consumer sleeps ``--step-ms`` per batch in place of a training step.  Reported per epoch: rows the
buffer read from disk (its ``reads``), unique rows the batches needed, reads per unique row, the
buffer's size and hit rate, wall seconds.  Nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from outre_async.loader._options import group_knobs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--partitions", default=None)
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--budget", default="1.6GiB")
    p.add_argument("--parts-per-batch", type=int, default=8)
    p.add_argument("--neighbor-cache", default="64MiB")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--step-ms", type=float, default=0.0)
    p.add_argument("--extract-queue", type=int, help="look-ahead depth (default: the loader's)")
    p.add_argument("--old-tree", help="a source tree of an older commit to run as variant 'old'")
    p.add_argument("--variants", default="old,no-pin,pin")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    import outre_async as oa

    variant, _, queue = args.child.partition("@")  # "pin@16": extract queue 16
    if queue:
        args.extract_queue = int(queue)
    if variant == "no-pin":
        from outre_async.features._feature_buffer import FeatureBuffer, Pin

        FeatureBuffer.pin = lambda self, ids: Pin(self, np.asarray(ids, dtype=np.int64)[:0])  # type: ignore[method-assign]
    ds = oa.open_dataset(args.dataset)
    opts: dict[str, Any] = {"memory_budget": args.budget, "seed": 0, "extract_queue": args.extract_queue,
                            "ordered": variant == "ordered"}
    if args.partitions:
        opts |= {"partitions": args.partitions, "parts_per_batch": args.parts_per_batch,
                 "neighbor_cache": oa._units.parse_bytes(args.neighbor_cache)}
    loader = oa.OutreLoader(ds, **group_knobs(dict(split="train", fanouts=[int(f) for f in args.fanouts.split(",")],
                            batch_size=args.batch_size, **opts)))
    epochs = []
    try:
        for _ in range(args.epochs):
            before = loader.stats().get("buffer", {}).get("reads", 0)
            seen = np.zeros(ds.num_nodes, dtype=bool)
            start = time.perf_counter()
            for batch in loader:
                seen[batch.n_id.numpy()] = True
                if args.step_ms:
                    time.sleep(args.step_ms / 1e3)
            wall = time.perf_counter() - start
            s = loader.stats()
            reads, unique = s["buffer"]["reads"] - before, int(seen.sum())
            epochs.append({"rows_read": reads, "unique_rows": unique, "reads_per_unique_row": reads / max(unique, 1),
                           "bytes_read": reads * ds.row_format.stored_row_bytes, "seconds": wall,
                           "buffer_rows": s["buffer_rows"], "hit_rate": s["buffer"]["hit_rate"],
                           "extract_queue": loader.config.extract_capacity,
                           "memory": s["memory"], "batch_matrices": s.get("batch_matrices"),
                           "out_of_turn": s.get("out_of_turn")})
    finally:
        loader.close()
    return {"variant": args.child, "epochs": epochs}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return
    results = []
    for variant in args.variants.split(","):
        env = dict(os.environ)
        if variant.startswith("old"):
            if not args.old_tree:
                continue
            env["PYTHONPATH"] = str(Path(args.old_tree).resolve())
        cmd = [sys.executable, "-P", str(Path(__file__).resolve()), *(argv or sys.argv[1:]), "--child", variant]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode:
            print(out.stderr[-3000:], file=sys.stderr)
            results.append({"variant": variant, "error": out.stderr.strip().splitlines()[-1:]})
            continue
        res = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(res)
        for i, e in enumerate(res["epochs"]):
            print(f"{variant:7s} epoch {i}: {e['rows_read']:>9,} rows read ({e['bytes_read'] / 1e9:.2f} GB), "
                  f"{e['unique_rows']:>9,} unique, {e['reads_per_unique_row']:.2f} reads/unique row, "
                  f"buffer {e['buffer_rows']:,} rows, hit rate {e['hit_rate']:.3f}, extract queue "
                  f"{e.get('extract_queue', '?')}, {e['seconds']:.1f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))


if __name__ == "__main__":
    main()
