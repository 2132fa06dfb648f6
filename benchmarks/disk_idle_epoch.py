"""One loader epoch with a fixed wait per batch, and what the device itself did meanwhile (issue 26).

    python -P benchmarks/disk_idle_epoch.py --dataset /work/data-cache/igb-like-s0-g1 \\
        --partitions bench-fennel-256 --parts-per-batch 8 --neighbor-cache 64MiB --memory-budget 1.6GiB \\
        --fanouts 10,5 --batch-size 512 --step-ms 8 [--grid] [--max-in-flight N]

The loader's own counters say how many reads it had in flight; ``/proc/diskstats`` says whether the
device had any: ``idle_s`` is the epoch's seconds minus the device's ``io_ticks`` (time with at least
one request), ``dev_reads`` its completed reads (more than the loader's when another process reads the
same disk: then the figures are not the loader's alone).  This is how the idle disk between windows was
found (3.6-3.9 s of an 18-20 s igb-like epoch with 256 reads "in flight").  ``limit_s`` / ``x_limit``:
the disk's limit for the reads and bytes issued, from the device's cached probe grid
(``stats()["epoch_io"]``).  The page cache of the dataset is evicted first.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import outre_async as oa
from outre_async._units import parse_bytes
from outre_async.bench._disk_limit import cached_grid
from outre_async.bench._measure import evict_from_page_cache
from outre_async.features._disk_probe import device_of
from outre_async.loader._epoch_io import disk_limit_seconds, known_rate
from outre_async.profiling._probe_cli import default_cache_dir
from outre_async.loader._options import group_knobs


class Timeline:
    """A thread that samples, every ``period`` s: the device's completed reads, sectors, busy ms and requests
    in flight (``/proc/diskstats``), the loader's reads in flight and queued requests (its io_uring
    source's), and its extract and ready queues.  Reads the loader's objects without locks: figures, not
    decisions.  :meth:`summary` says where the epoch's time went: seconds with the device's queue below
    a quarter of the loader's depth, with the extract or ready queue empty, and throughput by second."""

    def __init__(self, loader: oa.OutreLoader, block: str, period: float) -> None:
        import threading

        self.loader, self.block, self.period = loader, block, period
        self.rows: list[list[float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        while not self._stop.wait(self.period):
            d = diskstats(self.block)
            res = self.loader._box.res
            src = res.source if res is not None else None
            flight = getattr(getattr(src, "_flight", None), "now", 0)
            queued = len(getattr(src, "_queue", ()))
            extract, ready = self.loader._channels
            self.rows.append([time.perf_counter() - t0, d[0], d[2], d[9], d[8], flight, queued, len(extract), len(ready)])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, object]:
        import numpy as np

        r = np.asarray(self.rows)
        if len(r) < 2:
            return {}
        dt = np.diff(r[:, 0])
        depth = int(self.loader.stats()["io"].get("max_in_flight") or 256)
        low = r[1:, 4] < depth / 4
        per_s = np.diff(r[:, 2]) * 512 / dt / 1e9
        return {"samples": len(r), "s_device_below_quarter_depth": round(float(dt[low].sum()), 2),
                "device_in_flight_mean": round(float(r[:, 4].mean()), 1),
                "loader_in_flight_mean": round(float(r[:, 5].mean()), 1),
                "s_loader_requests_queued_zero": round(float(dt[r[1:, 6] == 0].sum()), 2),
                "s_extract_queue_empty": round(float(dt[r[1:, 7] == 0].sum()), 2),
                "s_ready_queue_empty": round(float(dt[r[1:, 8] == 0].sum()), 2),
                "GBps_quartiles": [round(float(x), 2) for x in np.percentile(per_s, [10, 25, 50, 75, 90])],
                "device_busy_share": round(float(np.diff(r[:, 3]).sum() / 1e3 / dt.sum()), 3)}


def diskstats(block: str) -> list[int]:
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2] == block:
            return [int(x) for x in f[3:]]
    raise SystemExit(f"no block device {block!r} in /proc/diskstats")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--partitions")
    p.add_argument("--parts-per-batch", type=int, default=8)
    p.add_argument("--neighbor-cache", default="64MiB")
    p.add_argument("--memory-budget", default="1.6GiB")
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--step-ms", type=float, default=8.0)
    p.add_argument("--max-in-flight", type=int)
    p.add_argument("--grid", action="store_true", help="read with the device's cached probe grid (disk_probe=)")
    p.add_argument("--probe-cache-dir", type=Path, default=default_cache_dir())
    p.add_argument("--read-ahead", type=int, help="the feature buffer's read_ahead (default: READ_AHEAD)")
    p.add_argument("--bounce-bytes", help="the io_uring source's bounce slots (default: the plan's; 0: none)")
    p.add_argument("--foresight", type=int, help="the loader's foresight (default: the plan's; 0: off)")
    p.add_argument("--timeline-ms", type=float, default=0.0,
                   help="sample the device and the loader's queues every this many ms (0: off)")
    p.add_argument("--timeline-out", help="write the timeline's samples (JSON) here")
    args = p.parse_args()
    ds = oa.open_dataset(args.dataset)
    grid = cached_grid(ds.features_path, args.probe_cache_dir)
    opts: dict = {"fanouts": [int(f) for f in args.fanouts.split(",")], "batch_size": args.batch_size,
                  "memory_budget": args.memory_budget}
    if args.partitions:
        opts.update(partitions=args.partitions, parts_per_batch=args.parts_per_batch,
                    neighbor_cache=parse_bytes(args.neighbor_cache))
    if args.max_in_flight:
        opts["max_in_flight"] = args.max_in_flight
    if args.grid:
        if grid is None:
            raise SystemExit(f"no probe grid of {ds.features_path}'s device in {args.probe_cache_dir}: run outre probe")
        opts["disk_probe"] = grid
    if args.foresight is not None:
        opts["foresight"] = args.foresight
    if args.read_ahead is not None:  # the buffer reads READ_AHEAD when it is built (the loader has no option for it)
        from outre_async.features import _feature_buffer

        _feature_buffer.READ_AHEAD = args.read_ahead
    if args.bounce_bytes is not None:
        opts["source_options"] = {"bounce_bytes": 0 if args.bounce_bytes == "0" else parse_bytes(args.bounce_bytes)}
    loader = oa.OutreLoader(ds, **group_knobs(opts))
    block = device_of(ds.features_path)["block"]
    evict_from_page_cache(args.dataset)
    timeline = Timeline(loader, block, args.timeline_ms / 1e3) if args.timeline_ms else None
    d0, t0 = diskstats(block), time.perf_counter()
    for _ in loader:
        time.sleep(args.step_ms / 1e3)
    t1, d1 = time.perf_counter(), diskstats(block)
    if timeline is not None:
        timeline.stop()
    s = loader.stats()
    io = s["io"]
    out = {"epoch_s": round(t1 - t0, 2), "ios": io["reads_submitted"], "GB": round(io["bytes_read"] / 1e9, 2),
           "rows_from_disk": s["epoch_io"]["rows_from_disk"], "in_flight": io["max_in_flight"],
           "dev_reads": d1[0] - d0[0], "idle_s": round(t1 - t0 - (d1[9] - d0[9]) / 1e3, 2)}
    rate = known_rate(grid, None, ds.row_layout.stride, io["max_in_flight"]) if grid is not None else None
    limit = disk_limit_seconds(rate, io["reads_submitted"], io["bytes_read"]) if rate is not None else None
    if limit:
        out.update(limit_s=round(limit, 2), x_limit=round((t1 - t0) / limit, 3))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out.update(user_s=round(ru.ru_utime, 2), sys_s=round(ru.ru_stime, 2), io_cpu_s=round(io["io_cpu_seconds"], 2))
    loader.close()
    print(json.dumps(out))
    if timeline is not None:
        print(json.dumps(timeline.summary()))
        if args.timeline_out:
            Path(args.timeline_out).write_text(json.dumps(timeline.rows))


if __name__ == "__main__":
    main()
