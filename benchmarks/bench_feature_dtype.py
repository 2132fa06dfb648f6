"""One epoch over the same graph stored as float32 and as float16, at the same ``memory_budget``:
rows read from disk, bytes read, peak RSS and user CPU per row read, side by side.

    python benchmarks/bench_feature_dtype.py --dataset fp32=/path/qs300 --dataset fp16=/path/qs300-fp16 \\
        --budget 128MiB --repeats 2 --json dtype.json

Each run is :mod:`bench_loader_cpu`'s child (a fresh process: a warm-up epoch, the features evicted
from the page cache, one measured epoch with an empty step), alternating between the stores so each
pair is measured side by side.  A float16 store is held as stored (``RowFormat``): its buffer slots
take half the bytes, so the same budget holds about twice the rows and the epoch reads fewer of
them, each half the bytes.  Nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_loader_cpu import ROOT, run_child  # noqa: E402

KEYS = ("rows_read", "bytes_read", "peak_rss_mib", "user_us_per_row", "wall")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", action="append", required=True, help="NAME=PATH, one per store (two or more)")
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--budget", default="128MiB")
    p.add_argument("--backend", default="io_uring")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--json")
    args = p.parse_args(argv)
    stores = dict(item.split("=", 1) for item in args.dataset)
    runs = []
    for rep in range(args.repeats):
        for name, path in stores.items():
            runs.append({"store": name, "repeat": rep, **run_child(ROOT, Path(path), args)})
            print(json.dumps({k: runs[-1][k] for k in ("store", "repeat", *KEYS)}), file=sys.stderr, flush=True)
    summary = {name: {k: statistics.median(r[k] for r in runs if r["store"] == name) for k in KEYS}
               for name in stores}
    print(f"{'store':8} {'rows read':>12} {'bytes read':>14} {'peak RSS MiB':>13} {'user µs/row':>12} {'wall s':>8}")
    for name, s in summary.items():
        print(f"{name:8} {s['rows_read']:>12,.0f} {s['bytes_read']:>14,.0f} {s['peak_rss_mib']:>13.0f} "
              f"{s['user_us_per_row']:>12.2f} {s['wall']:>8.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "summary": summary, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
