"""The loader's own CPU per row read: user CPU (getrusage, all threads) per row read from disk, kernel
CPU per I/O, I/Os per row, one epoch with an empty training step; optionally against another source
tree (e.g. main's code) side by side.

    python benchmarks/bench_loader_cpu.py                                 # 300k x 256 float32
    python benchmarks/bench_loader_cpu.py --baseline-src /tmp/main-src --repeats 3 --json cpu.json

The case of issue 15: a generated ``igb-like`` store of ``--nodes`` nodes and ``--dim`` float32
features, fanouts ``--fanouts``, batch ``--batch-size``, ``memory_budget=--budget``, backend
``--backend``, ``for batch in loader: pass``.  Every run is a fresh child process (so ``getrusage``
counts only it): it first runs a short warm-up epoch (numba kernels loaded from the cache, the
dataset opened), then evicts the features file from the page cache (``POSIX_FADV_DONTNEED``),
opens a fresh loader (empty feature buffer) and measures one full epoch: user and system CPU of
the process over all threads, wall time, and the loader's I/O counters.  With ``--baseline-src``
the runs alternate between this tree and that one (``PYTHONPATH``), so before/after ratios come
from runs made side by side.  Reported (medians over ``--repeats``): user µs per row read, system
µs per I/O, I/Os per row read, rows read, wall seconds, and the loader's per-stage CPU seconds
where the code under test reports them.  Each run's ``threads``: user and system CPU seconds over the
measured epoch per thread name (``/proc/self/task/*/stat``, polled every 50 ms so threads that end
inside the epoch count too; pool threads' numbers folded into ``_*``): the stage meters count only
the work they wrap, and CPU moved to a thread they do not wrap (``outre-copy``, foresight's sampling)
shows here.  Nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, os, resource, sys, threading, time
    import numpy as np
    import outre_async as oa
    args = json.loads(sys.argv[1])
    TICK = os.sysconf("SC_CLK_TCK")

    def task_cpu():  # {tid: (comm, user s, system s)} for every live thread of this process (/proc)
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:  # the thread ended between listdir and open
                continue
            comm, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            out[int(tid)] = (comm, int(fields[11]) / TICK, int(fields[12]) / TICK)
        return out

    class ThreadMeter:  # CPU per thread name over the epoch, polled: threads that end inside it count too
        def __init__(self):
            self.names = {threading.main_thread().native_id: "MainThread"}
            self.start, self.last, self.done = task_cpu(), {}, threading.Event()
            self.poller = threading.Thread(target=self.poll, name="bench-thread-meter", daemon=True)
            self.poller.start()
        def sample(self):  # Python's name of a thread once seen alive, else the OS's (numba, torch, io-wq)
            self.names.update((t.native_id, t.name) for t in threading.enumerate() if t.native_id not in self.names)
            self.last.update(task_cpu())
        def poll(self):
            while not self.done.wait(0.05):
                self.sample()
        def stop(self):
            self.done.set()
            self.poller.join()
            self.sample()
            groups = {}
            for tid, (comm, user, sys_) in self.last.items():
                name = self.names.get(tid, comm)
                key = name.rstrip("0123456789").rstrip("_-") + "_*" if name[-1:].isdigit() else name
                _, u0, s0 = self.start.get(tid, (comm, 0.0, 0.0))
                g = groups.setdefault(key, [0.0, 0.0, 0])
                g[0], g[1], g[2] = g[0] + user - u0, g[1] + sys_ - s0, g[2] + 1
            return {k: {"user": round(u, 3), "sys": round(s_, 3), "threads": n}
                    for k, (u, s_, n) in sorted(groups.items(), key=lambda kv: -kv[1][0] - kv[1][1])}

    ds = oa.open_dataset(args["dataset"])
    opts = dict(fanouts=args["fanouts"], batch_size=args["batch_size"], memory_budget=args["budget"],
                io=oa.IOOptions(backend=args["backend"]))
    with oa.OutreLoader(ds, split=np.arange(2048), **opts) as warm:
        for _ in warm:
            pass
    fd = os.open(ds.features_path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    r0, t0, meter = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), ThreadMeter()
    with oa.OutreLoader(ds, **opts) as loader:
        batches = sum(1 for _ in loader)
        stats = loader.stats()
    wall, r1, threads = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF), meter.stop()
    io = stats.get("io", {})
    print(json.dumps({"user": r1.ru_utime - r0.ru_utime, "sys": r1.ru_stime - r0.ru_stime, "wall": wall,
                      "maxrss_kib": r1.ru_maxrss, "feature_rows": stats.get("feature_rows"),
                      "batches": batches, "io": io, "buffer": stats.get("buffer", {}), "threads": threads,
                      "stages": {**{k: v for k, v in stats.items() if k.endswith("cpu_seconds")},
                                 **{k: v for k, v in io.items() if k.endswith("cpu_seconds")}}}))
""")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", help="an existing store (default: generate one under --dir)")
    p.add_argument("--dir", default=".bench_loader_cpu", help="where the generated store lives (kept)")
    p.add_argument("--nodes", type=int, default=300_000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--budget", default="440MiB", help="memory_budget (it covers everything the loader "
                   "allocates: 440 MiB leaves the feature buffer about the 64 MiB of the issue)")
    p.add_argument("--backend", default="io_uring")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--baseline-src", help="a source tree of outre_async to compare with (PYTHONPATH)")
    p.add_argument("--json", help="write the results to this file")
    return p.parse_args(argv)


def dataset(args: argparse.Namespace) -> Path:
    if args.dataset:
        return Path(args.dataset)
    path = Path(args.dir) / f"igb-like-{args.nodes}x{args.dim}"
    if not (path / "manifest.json").exists():
        import outre_async as oa

        oa.generate(path, "igb-like", num_nodes=args.nodes, feature_dim=args.dim, overwrite=True)
    return path


def run_child(src: Path, path: Path, args: argparse.Namespace) -> dict[str, Any]:
    spec = {"dataset": str(path), "fanouts": [int(f) for f in args.fanouts.split(",")],
            "batch_size": args.batch_size, "budget": args.budget, "backend": args.backend}
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-P", "-c", CHILD, json.dumps(spec)], env=env, cwd=src,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise SystemExit(f"the run under {src} failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    io = r["io"]
    rows = max(1, io.get("unique_rows", 0))
    reads = max(1, io.get("reads_submitted", 0))
    return {"rows_read": rows, "reads": reads, "user_us_per_row": r["user"] / rows * 1e6,
            "sys_us_per_io": r["sys"] / reads * 1e6, "ios_per_row": reads / rows,
            "bytes_per_read": io.get("bytes_read", 0) / reads, "wall": r["wall"], "user": r["user"],
            "sys": r["sys"], "batches": r["batches"], "stages": r["stages"],
            "bytes_read": io.get("bytes_read", 0), "peak_rss_mib": r.get("maxrss_kib", 0) / 1024,
            "feature_rows": r.get("feature_rows"),
            # user and system CPU seconds per thread name over the measured epoch (/proc/self/task/*/stat;
            # pool threads' trailing numbers folded into ``_*``; the meter's own poller is listed too)
            "threads": r["threads"],
            # each row read is copied by the source (row_copies: 0 when read into its slot) and once
            # more from its slot into its batch matrix
            "copies_per_row_read": (io["row_copies"] + rows) / rows if "row_copies" in io else None}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = dataset(args)
    trees = {"this": ROOT, **({"baseline": Path(args.baseline_src)} if args.baseline_src else {})}
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeats):
        for name, src in trees.items():
            runs.append({"tree": name, "repeat": rep, **run_child(src, path, args)})
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    keys = ("user_us_per_row", "sys_us_per_io", "ios_per_row", "bytes_per_read", "rows_read", "wall")
    summary = {name: {k: statistics.median(r[k] for r in runs if r["tree"] == name) for k in keys}
               for name in trees}
    if "baseline" in trees:
        summary["ratio_this_over_baseline"] = {
            k: statistics.median(a[k] / b[k] for a, b in zip(
                [r for r in runs if r["tree"] == "this"], [r for r in runs if r["tree"] == "baseline"],
                strict=True)) for k in keys}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "summary": summary, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
