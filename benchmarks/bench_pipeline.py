"""Pipelining and per-batch overhead of OutreLoader, with SyncLoader side by side; JSON output.

    python benchmarks/bench_pipeline.py                        # generates a 2 GB igb-like store
    python benchmarks/bench_pipeline.py --dataset /data/igb --seeds 20000 --train-ms auto \\
        --repeats 3 --json pipeline.json

(a) Pipelining.  An epoch over ``--seeds`` training seeds of a store whose features file is evicted
from the page cache before every epoch (``POSIX_FADV_DONTNEED``; a fresh loader, so its feature
buffer starts empty too), with a consumer that "trains" by sleeping a fixed time per batch
(``time.sleep`` in the caller's thread through the sync bridge, ``for batch in loader``, as a PyG
loop would; ``--consumer async`` sleeps with ``await asyncio.sleep`` inside ``async for``).
Stage totals come from ``loader.stats()``: sampling = ``sample_seconds / num_samplers``,
extraction = ``extract_seconds / num_extractors`` (each is the summed busy time of the stage's
workers, divided by how many run at once: the least time the stage needs), training = batches x
sleep.  Reported: epoch time, each stage total, ``epoch / max(stage totals)`` (goal <= 1.1),
``sum(stages) / epoch`` (how much overlapped), and the consumer's stall (time it spent blocked in
``next()``: in total, for the first batch, which includes opening the loader and filling the
pipeline, and the median per later batch), and ``(epoch - first batch wait) / max(stage totals)``.
``--train-ms auto`` first runs one epoch with no training to measure the I/O-bound time per batch,
then uses 2x that (training dominant) and 0.3x (I/O dominant).  SyncLoader (PyG +
memmap, nothing overlapped) runs the same epoch on the same evicted file for context.

(b) Asyncio overhead per batch.  Empty-work stages: a tiny in-memory store, ``--tiny-batch`` seeds
per batch, fanout 1, memory backend, a consumer that does nothing.  Reported as µs per batch for
``async for``, for the sync bridge, for the same loader with trivial samplers (a precomputed
subgraph: no numba call, only the executor hop, channels, buffer bookkeeping and batch wrapping),
and for SyncLoader.  Goal: < 1 ms per batch.

Nothing here is asserted in CI.  Medians over ``--repeats``; the machine may be shared and noisy,
so every ratio is computed from runs made side by side in this one invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import outre_async as oa
from outre_async.loader._options import group_knobs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", help="an existing store (default: generate --preset into a temporary "
                                     "directory under the current one, deleted at the end)")
    p.add_argument("--preset", default="igb-like", help="generator preset of the default store")
    p.add_argument("--nodes", type=int, default=500_000, help="nodes of the generated store")
    p.add_argument("--seeds", type=int, default=20_000, help="training seeds per epoch")
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--backend", default="auto")
    p.add_argument("--num-samplers", type=int, default=2)
    p.add_argument("--num-extractors", type=int, default=2)
    p.add_argument("--train-ms", default="auto",
                   help="comma-separated sleep per batch in ms, or 'auto' (2x and 0.3x the I/O time)")
    p.add_argument("--consumer", choices=("sync", "async"), default="sync")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-sync-baseline", action="store_true", help="skip SyncLoader in (a)")
    p.add_argument("--tiny-batches", type=int, default=2000, help="(b): batches per measurement")
    p.add_argument("--tiny-batch", type=int, default=4, help="(b): seeds per batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="keep a generated store")
    p.add_argument("--json", help="write the results to this file")
    return p.parse_args(argv)


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def busy_cpu_seconds() -> float:
    """CPU seconds all cores spent busy (``/proc/stat``: everything but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


class OtherCPU:
    """CPU cores used by other processes while a run lasts (the machine is shared)."""

    def __enter__(self) -> OtherCPU:
        self.busy, self.own, self.t = busy_cpu_seconds(), time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.t
        other = busy_cpu_seconds() - self.busy - (time.process_time() - self.own)
        self.cores = round(max(other, 0.0) / wall, 2)


def log(rec: dict[str, Any]) -> None:
    print(json.dumps(rec), file=sys.stderr, flush=True)


# -- (a) pipelining ------------------------------------------------------------------------------
def loader_opts(args: argparse.Namespace) -> dict[str, Any]:
    return {"fanouts": [int(f) for f in args.fanouts.split(",")], "batch_size": args.batch_size,
            "backend": args.backend, "num_samplers": args.num_samplers,
            "num_extractors": args.num_extractors, "seed": args.seed}


def epoch_sync(ds: oa.Dataset, seeds: np.ndarray, train_s: float, args: argparse.Namespace) -> dict[str, Any]:
    """One cold epoch through the sync bridge; the consumer sleeps ``train_s`` per batch."""
    evict(ds.features_path)
    with oa.OutreLoader(ds, **group_knobs(dict(split=seeds, **loader_opts(args)))) as loader:
        waits: list[float] = []
        t0 = t = time.perf_counter()
        for _batch in loader:
            waits.append(time.perf_counter() - t)
            if train_s:
                time.sleep(train_s)
            t = time.perf_counter()
        wall = time.perf_counter() - t0
        stats = loader.stats()
    return summarize_epoch(stats, wall, waits, train_s, args)


def epoch_async(ds: oa.Dataset, seeds: np.ndarray, train_s: float, args: argparse.Namespace) -> dict[str, Any]:
    evict(ds.features_path)

    async def main() -> dict[str, Any]:
        async with oa.OutreLoader(ds, **group_knobs(dict(split=seeds, **loader_opts(args)))) as loader:
            waits: list[float] = []
            t0 = t = time.perf_counter()
            async for _batch in loader:
                waits.append(time.perf_counter() - t)
                if train_s:
                    await asyncio.sleep(train_s)
                t = time.perf_counter()
            wall = time.perf_counter() - t0
            return summarize_epoch(loader.stats(), wall, waits, train_s, args)

    return asyncio.run(main())


def summarize_epoch(stats: dict[str, Any], wall: float, waits: list[float], train_s: float,
                    args: argparse.Namespace) -> dict[str, Any]:
    """``waits``: the consumer's time blocked in ``next()`` for each batch (its stall); the first
    includes opening the loader (source, buffer, executor, loading the compiled kernels) and filling
    the pipeline, which no overlap can hide."""
    n = len(waits)
    sample = stats["sample_seconds"] / args.num_samplers
    extract = stats["extract_seconds"] / args.num_extractors
    train = n * train_s
    stages = {"sample": sample, "extract": extract, "train": train}
    bound = max(stages.values())
    io = stats.get("io", {})
    return {"epoch_s": wall, "batches": n, "train_ms": train_s * 1e3, "sample_s": sample,
            "extract_s": extract, "train_s": train, "io_busy_s": io.get("busy_seconds"),
            "stall_s": sum(waits), "first_batch_s": waits[0] if waits else None,
            "stall_after_first_ms": 1e3 * float(np.median(waits[1:])) if n > 1 else None,
            "loop_stall_s": stats.get("stall_seconds", 0.0), "dominant": max(stages, key=stages.get),
            "epoch_vs_max_stage": wall / bound if bound else None,
            "after_first_vs_max_stage": (wall - waits[0]) / bound if bound and waits else None,
            "overlap": (sample + extract + train) / wall, "backend": stats.get("backend"),
            "rows_read": io.get("unique_rows"), "reads": io.get("reads_submitted"),
            "in_flight_mean": io.get("in_flight_mean"),
            "buffer_hit_rate": stats.get("buffer", {}).get("hit_rate")}


def epoch_syncloader(ds: oa.Dataset, seeds: np.ndarray, train_s: float,
                     args: argparse.Namespace) -> dict[str, Any]:
    """SyncLoader (sample, memmap gather, train, one after the other) on the evicted file."""
    evict(ds.features_path)
    fresh = oa.open_dataset(ds.path)  # a fresh mapping: pages mapped earlier would survive eviction
    loader = oa.SyncLoader(fresh, split=seeds, fanouts=[int(f) for f in args.fanouts.split(",")],
                           batch_size=args.batch_size, seed=args.seed)
    t0 = time.perf_counter()
    n = 0
    for _batch in loader:
        n += 1
        if train_s:
            time.sleep(train_s)
    wall = time.perf_counter() - t0
    s = loader.stats()
    return {"epoch_s": wall, "batches": n, "train_ms": train_s * 1e3,
            "sample_s": s["sample_seconds"], "extract_s": s["gather_seconds"], "train_s": n * train_s}


def run_pipelining(ds: oa.Dataset, args: argparse.Namespace) -> list[dict[str, Any]]:
    rng = np.random.default_rng(args.seed)
    train = ds.split("train")
    seeds = np.sort(rng.choice(train, size=min(args.seeds, len(train)), replace=False))
    epoch = epoch_sync if args.consumer == "sync" else epoch_async
    if args.train_ms == "auto":
        calib = epoch(ds, seeds, 0.0, args)
        log({"part": "a", "calibration": True, **calib})
        per_batch = max(calib["extract_s"], calib["sample_s"]) / calib["batches"]
        sleeps = [2.0 * per_batch, 0.3 * per_batch]
    else:
        sleeps = [float(x) / 1e3 for x in args.train_ms.split(",")]
    runs = []
    for rep in range(args.repeats):
        for train_s in sleeps:
            with OtherCPU() as other:
                res = epoch(ds, seeds, train_s, args)
            rec = {"part": "a", "loader": f"outre-{args.consumer}", "repeat": rep, **res,
                   "other_cpu_cores": other.cores}
            runs.append(rec)
            log(rec)
            if not args.no_sync_baseline:
                with OtherCPU() as other:
                    res = epoch_syncloader(ds, seeds, train_s, args)
                rec = {"part": "a", "loader": "sync", "repeat": rep, **res, "other_cpu_cores": other.cores}
                runs.append(rec)
                log(rec)
    return runs


# -- (b) per-batch overhead ----------------------------------------------------------------------
class FixedSampler:
    """A sampler that does no work: returns one precomputed subgraph (same shape every batch)."""

    def __init__(self, inner: Any, seeds: np.ndarray) -> None:
        self.subgraph = inner.sample(seeds, 0)

    def sample(self, seeds: np.ndarray, stream: int) -> Any:
        return self.subgraph


def tiny_store(root: Path) -> oa.Dataset:
    return oa.open_dataset(oa.generate(root / "tiny", "tiny", overwrite=True))


def overhead_async(ds: oa.Dataset, seeds: np.ndarray, args: argparse.Namespace, trivial: bool) -> float:
    opts = {"fanouts": [1], "batch_size": args.tiny_batch, "backend": "memory", "shuffle": False}

    async def main() -> float:
        async with oa.OutreLoader(ds, **group_knobs(dict(split=seeds, **opts))) as loader:
            if trivial:
                res = loader._res  # the benchmark swaps in no-work samplers (as the tests do)
                res.samplers[:] = [FixedSampler(s, seeds[: args.tiny_batch]) for s in res.samplers]
            async for _ in loader:  # warm-up epoch: numba compiled, buffer and executor started
                pass
            t0 = time.perf_counter()
            n = sum([1 async for _ in loader])
            return (time.perf_counter() - t0) / n

    return asyncio.run(main())


def overhead_bridge(ds: oa.Dataset, seeds: np.ndarray, args: argparse.Namespace) -> float:
    opts = {"fanouts": [1], "batch_size": args.tiny_batch, "backend": "memory", "shuffle": False}
    with oa.OutreLoader(ds, **group_knobs(dict(split=seeds, **opts))) as loader:
        for _ in loader:
            pass
        t0 = time.perf_counter()
        n = sum(1 for _ in loader)
        return (time.perf_counter() - t0) / n


def overhead_syncloader(ds: oa.Dataset, seeds: np.ndarray, args: argparse.Namespace) -> float:
    loader = oa.SyncLoader(ds, split=seeds, fanouts=[1], batch_size=args.tiny_batch, shuffle=False)
    for _ in loader:
        pass
    t0 = time.perf_counter()
    n = sum(1 for _ in loader)
    return (time.perf_counter() - t0) / n


def run_overhead(root: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    ds = tiny_store(root)
    n = min(args.tiny_batches * args.tiny_batch, ds.num_nodes)
    seeds = np.arange(n, dtype=np.int64)
    runs = []
    for rep in range(args.repeats):
        for name, fn in [("outre-async-for", lambda: overhead_async(ds, seeds, args, False)),
                         ("outre-async-for-trivial-stages", lambda: overhead_async(ds, seeds, args, True)),
                         ("outre-sync-bridge", lambda: overhead_bridge(ds, seeds, args)),
                         ("sync", lambda: overhead_syncloader(ds, seeds, args))]:
            rec = {"part": "b", "loader": name, "repeat": rep, "us_per_batch": fn() * 1e6,
                   "batches": -(-n // args.tiny_batch)}
            runs.append(rec)
            log(rec)
    return runs


# -- summary -------------------------------------------------------------------------------------
def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    keys = sorted({(r["part"], r["loader"], round(r.get("train_ms", -1), 3)) for r in runs
                   if not r.get("calibration")})
    for part, loader, train_ms in keys:
        group = [r for r in runs if (r["part"], r["loader"], round(r.get("train_ms", -1), 3))
                 == (part, loader, train_ms) and not r.get("calibration")]
        row: dict[str, Any] = {"part": part, "loader": loader, "runs": len(group)}
        if part == "a":
            row["train_ms"] = train_ms
        for k in group[0]:
            vals = [r[k] for r in group if isinstance(r.get(k), int | float) and not isinstance(r[k], bool)]
            if vals and k not in ("repeat", "train_ms"):
                row[k] = statistics.median(vals)
        if "dominant" in group[0]:
            row["dominant"] = statistics.mode(r["dominant"] for r in group)
        out.append(row)
    return out


def print_table(summary: list[dict[str, Any]]) -> None:
    def f(v: Any, fmt: str) -> str:
        return format(v, fmt) if isinstance(v, int | float) else "-"

    print(f"{'loader':>14} {'train ms':>8} {'epoch s':>8} {'sample s':>8} {'extract s':>9} "
          f"{'train s':>8} {'stall s':>8} {'1st s':>6} {'stall/b ms':>10} {'ep/max':>7} "
          f"{'-1st/max':>8} {'overlap':>7} {'dominant':>8} {'oth cpu':>7}")
    for r in (r for r in summary if r["part"] == "a"):
        print(f"{r['loader']:>14} {f(r['train_ms'], '.1f'):>8} {f(r.get('epoch_s'), '.2f'):>8} "
              f"{f(r.get('sample_s'), '.2f'):>8} {f(r.get('extract_s'), '.2f'):>9} "
              f"{f(r.get('train_s'), '.2f'):>8} {f(r.get('stall_s'), '.2f'):>8} "
              f"{f(r.get('first_batch_s'), '.2f'):>6} {f(r.get('stall_after_first_ms'), '.1f'):>10} "
              f"{f(r.get('epoch_vs_max_stage'), '.2f'):>7} {f(r.get('after_first_vs_max_stage'), '.2f'):>8} "
              f"{f(r.get('overlap'), '.2f'):>7} "
              f"{r.get('dominant', '-'):>8} {f(r.get('other_cpu_cores'), '.2f'):>7}")
    print("oth cpu: CPU cores used by other processes during the epoch (the machine may be shared)")
    print()
    print(f"{'loader (empty-work stages)':>32} {'us/batch':>9}")
    for r in (r for r in summary if r["part"] == "b"):
        print(f"{r['loader']:>32} {f(r.get('us_per_batch'), ',.0f'):>9}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path.cwd() / f".bench_pipeline-{os.getpid()}"
    root.mkdir(parents=True)
    runs: list[dict[str, Any]] = []
    try:
        if args.dataset:
            ds = oa.open_dataset(args.dataset)
        else:
            print(f"generating {args.preset} with {args.nodes:,} nodes ...", file=sys.stderr, flush=True)
            ds = oa.open_dataset(oa.generate(root / "store", args.preset, num_nodes=args.nodes))
        runs += run_overhead(root, args)
        runs += run_pipelining(ds, args)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    summary = summarize(runs)
    print_table(summary)
    if args.json:
        meta = {"python": sys.version.split()[0], "platform": platform.platform(),
                "cpus": os.cpu_count(), "args": vars(args)}
        Path(args.json).write_text(json.dumps({"meta": meta, "summary": summary, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
