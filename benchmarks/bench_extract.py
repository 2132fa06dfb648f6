"""Cold random-row extraction: io_uring and pread sources vs a memmap gather vs fio, same rows.

    python benchmarks/bench_extract.py                          # 4 GB files, 512 B and 4 KiB rows
    python benchmarks/bench_extract.py --dir /data/bench --size-gb 8 --rows 400000 \\
        --depths 32,64,128 --repeats 5 --json extract.json

For each row size (``--row-bytes``: 512 = 128 float32, 4096 = 1024 float32) a dataset of about
``--size-gb`` GB is written once with ``DatasetWriter`` (or reused from ``--dir``).  Before every
run the features file is evicted from the page cache (``POSIX_FADV_DONTNEED``); then ``--rows``
uniformly random rows are read in batches of ``--batch`` ids through each backend at each
``max_in_flight`` depth, with ``--concurrency`` batches in flight at once (like the pipeline's
extractors; ``io_uring+slots`` reads each batch into a page-aligned buffer's slots through
``read_rows_into``, as the loader's feature buffer does, where whole-sector rows need no copy), and
through ``ds.features[ids]`` (the memmap gather every out-of-core GNN loader
starts from).  Reported: rows/s, reads/s (IOPS), MB/s read, mean reads in flight, CPU time per
row (``time.process_time``: user + system, all threads), user CPU per row and kernel CPU per read
(``getrusage``), bytes per read.  When ``fio`` is installed it runs
``--rw=randread --direct=1 --ioengine=io_uring`` on the same file at the same block size and
depths, and the summary gives our IOPS / fio IOPS and our rows/s / memmap rows/s (medians over
``--repeats``; the machine may be shared and noisy).

Files this script creates are deleted at the end unless ``--keep``; a reused ``--dir`` is kept.
Nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import outre_async as oa
from outre_async.features._feature_buffer import page_aligned_zeros

try:  # re-exported at the top level once the sources land in __init__
    from outre_async import detect_io_uring, open_source  # type: ignore[attr-defined]
except ImportError:
    from outre_async.features import detect_io_uring, open_source


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", help="where the datasets live (reused when present); default: a "
                                 "temporary directory under the current one, deleted at the end")
    p.add_argument("--size-gb", type=float, default=4.0, help="feature file size per row size")
    p.add_argument("--row-bytes", default="512,4096", help="row sizes in bytes, comma-separated")
    p.add_argument("--rows", type=int, default=200_000, help="random rows read per run")
    p.add_argument("--batch", type=int, default=10_000, help="ids per read_rows call")
    p.add_argument("--concurrency", type=int, default=2, help="read_rows calls in flight at once")
    p.add_argument("--depths", default="16,32,64,128,256", help="max_in_flight values")
    p.add_argument("--backends", default="io_uring,io_uring+slots,pread",
                   help="feature source backends; NAME+slots reads into a page-aligned buffer's slots "
                        "(read_rows_into, as the loader's feature buffer does) instead of a batch matrix")
    p.add_argument("--repeats", type=int, default=3, help="runs per measurement; medians reported")
    p.add_argument("--fio-runtime", type=int, default=10, help="seconds per fio run (0: no fio)")
    p.add_argument("--memmap-rows", type=int, default=20_000, help="rows of the (slow) memmap runs")
    p.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                   help="event loop of the source runs (uvloop: what the loader's sync bridge uses; "
                        "falls back to asyncio when uvloop is not installed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="keep the datasets this run creates")
    p.add_argument("--json", help="write the results to this file")
    return p.parse_args(argv)


# -- data ---------------------------------------------------------------------------------------
def ensure_dataset(path: Path, row_bytes: int, size_gb: float) -> oa.Dataset:
    """Write (or reuse) a dataset of float32 rows of ``row_bytes`` totalling about ``size_gb``."""
    dim = row_bytes // 4
    n = int(size_gb * 1e9) // row_bytes
    if (path / "manifest.json").exists():
        ds = oa.open_dataset(path)
        if ds.feature_dim == dim and ds.num_nodes == n:
            return ds
        shutil.rmtree(path)
    rng = np.random.default_rng(row_bytes)
    print(f"writing {n:,} rows of {row_bytes} B to {path} ...", file=sys.stderr, flush=True)
    with oa.DatasetWriter(path, num_nodes=n, feature_dim=dim, num_classes=2) as w:
        w.write_csc(np.arange(n + 1, dtype=np.int64), (np.arange(n, dtype=np.int64) + 1) % n)
        block = max(1, (64 << 20) // row_bytes)
        for start in range(0, n, block):
            w.append_features(rng.random((min(block, n - start), dim), dtype=np.float32))
    return oa.open_dataset(path)


def evict(path: Path) -> None:
    """Drop the file's pages from the page cache so that every run starts cold."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class Noise:
    """What the rest of the machine did during a run (it is shared): reads completed by the disk
    holding ``path`` (``/sys/dev/block/M:m/stat``) and CPU seconds busy on all cores
    (``/proc/stat``).  ``foreign(...)`` subtracts the run's own reads and CPU."""

    def __init__(self, path: Path) -> None:
        st = os.stat(path)
        self.stat = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat")
        self.reads0, self.cpu0 = self._reads(), self._cpu()

    def _reads(self) -> int | None:
        try:
            return int(self.stat.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    @staticmethod
    def _cpu() -> float:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait

    def foreign(self, wall: float, own_reads: float | None, own_cpu: float) -> dict[str, Any]:
        reads = self._reads()
        out = {"foreign_cpu_cores": round((self._cpu() - self.cpu0 - own_cpu) / wall, 2)}
        if reads is not None and self.reads0 is not None and own_reads is not None:
            out["foreign_iops"] = round((reads - self.reads0 - own_reads) / wall)
        return out


# -- measurements -------------------------------------------------------------------------------
async def read_all(src: Any, ids: np.ndarray, batch: int, concurrency: int, dim: int,
                   slots: bool = False) -> None:
    """Read ``ids`` in batches, ``concurrency`` calls at a time (each with its own output).
    ``slots``: into a page-aligned buffer's slots (``read_rows_into``, what the loader's feature
    buffer does: whole-sector rows go straight into the slots), else into a batch matrix."""
    starts = list(range(0, len(ids), batch))

    async def worker(k: int) -> None:
        out = page_aligned_zeros(batch, dim) if slots else np.empty((batch, dim), np.float32)
        where = np.random.default_rng(k).permutation(batch)
        for s in starts[k::concurrency]:
            part = ids[s : s + batch]
            if slots:
                await src.read_rows_into(part, out, where[: len(part)])
            else:
                await src.read_rows(part, out[: len(part)])

    async with asyncio.TaskGroup() as tg:
        for k in range(concurrency):
            tg.create_task(worker(k))


def run_loop(coro: Any, loop: str) -> Any:
    if loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(coro)
    return asyncio.run(coro)


def run_source(ds: oa.Dataset, backend: str, depth: int, ids: np.ndarray,
               args: argparse.Namespace) -> dict[str, Any]:
    evict(ds.features_path)

    async def main() -> dict[str, Any]:
        async with open_source(ds, backend.removesuffix("+slots"), max_in_flight=depth) as src:
            noise = Noise(ds.features_path)
            t, c, r = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
            await read_all(src, ids, args.batch, args.concurrency, ds.feature_dim,
                           slots=backend.endswith("+slots"))
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            r2 = resource.getrusage(resource.RUSAGE_SELF)
            s = src.stats()
            return {"wall": wall, "cpu": cpu, "user": r2.ru_utime - r.ru_utime,
                    "sys": r2.ru_stime - r.ru_stime, **s,
                    **noise.foreign(wall, s["reads_submitted"] + s["short_reads_resubmitted"], cpu)}

    s = run_loop(main(), args.loop)
    return {"backend": backend, "depth": depth, "rows": len(ids),
            "foreign_cpu_cores": s["foreign_cpu_cores"], "foreign_iops": s.get("foreign_iops"),
            "rows_per_s": len(ids) / s["wall"], "iops": s["reads_submitted"] / s["wall"],
            "mb_per_s": s["bytes_read"] / s["wall"] / 1e6, "in_flight_mean": s["in_flight_mean"],
            "cpu_us_per_row": s["cpu"] / len(ids) * 1e6, "direct": s["direct"],
            "user_us_per_row": s["user"] / len(ids) * 1e6,
            "sys_us_per_io": s["sys"] / max(1, s["reads_submitted"]) * 1e6,
            "bytes_per_read": s["bytes_read"] / max(1, s["reads_submitted"]),
            "copies_per_row": s.get("copies_per_row"),
            "reads": s["reads_submitted"], "short_reads": s["short_reads_resubmitted"]}


def run_memmap(ds: oa.Dataset, ids: np.ndarray, batch: int) -> dict[str, Any]:
    """A fresh mapping per run: pages still mapped from an earlier run would survive eviction."""
    evict(ds.features_path)
    features = oa.open_dataset(ds.path).features
    noise = Noise(ds.features_path)
    t, c = time.perf_counter(), time.process_time()
    for s in range(0, len(ids), batch):
        np.ascontiguousarray(features[ids[s : s + batch]], dtype=np.float32)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    del features
    return {"backend": "memmap", "depth": None, "rows": len(ids), "rows_per_s": len(ids) / wall,
            "mb_per_s": len(ids) * ds.row_layout.row_bytes / wall / 1e6,
            "cpu_us_per_row": cpu / len(ids) * 1e6, **noise.foreign(wall, None, cpu)}


def run_fio(path: Path, bs: int, depth: int, runtime: int) -> dict[str, Any] | None:
    if runtime <= 0 or shutil.which("fio") is None:
        return None
    cmd = ["fio", "--name=r", f"--filename={path}", "--readonly", "--rw=randread", f"--bs={bs}",
           "--direct=1", "--ioengine=io_uring", f"--iodepth={depth}", f"--runtime={runtime}",
           "--time_based", "--output-format=json"]
    evict(path)
    noise = Noise(path)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    job = json.loads(proc.stdout)["jobs"][0]
    cpu = (job["usr_cpu"] + job["sys_cpu"]) / 100 * runtime
    iops = job["read"]["iops"]
    return {"backend": "fio", "depth": depth, "iops": iops,
            "mb_per_s": job["read"]["bw_bytes"] / 1e6,
            "cpu_us_per_io": cpu / max(1.0, iops * runtime) * 1e6,
            "user_us_per_io": job["usr_cpu"] / 100 * runtime / max(1.0, iops * runtime) * 1e6,
            "sys_us_per_io": job["sys_cpu"] / 100 * runtime / max(1.0, iops * runtime) * 1e6,
            "lat_us": job["read"]["clat_ns"]["mean"] / 1e3,
            **noise.foreign(wall, job["read"]["total_ios"], cpu), "command": " ".join(cmd)}


# -- driver -------------------------------------------------------------------------------------
def measure_row_size(ds: oa.Dataset, row_bytes: int,
                     args: argparse.Namespace) -> list[dict[str, Any]]:
    depths = [int(d) for d in args.depths.split(",")]
    backends = [b for b in args.backends.split(",") if not b.startswith("io_uring") or detect_io_uring()]
    rng = np.random.default_rng(args.seed)
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeats):
        ids = rng.integers(0, ds.num_nodes, args.rows)
        for depth in depths:
            for res in [run_fio(ds.features_path, row_bytes, depth, args.fio_runtime),
                        *(run_source(ds, b, depth, ids, args) for b in backends)]:
                if res is not None:
                    runs.append({"row_bytes": row_bytes, "repeat": rep, **res})
                    print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
        runs.append({"row_bytes": row_bytes, "repeat": rep,
                     **run_memmap(ds, ids[: args.memmap_rows], args.batch)})
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    return runs


def median(runs: list[dict[str, Any]], key: str, **match: Any) -> float | None:
    vals = [r[key] for r in runs if all(r.get(k) == v for k, v in match.items()) and key in r]
    return statistics.median(vals) if vals else None


def paired(runs: list[dict[str, Any]], rb: int, backend: str, depth: int, key: str, ref: str,
           ref_key: str, ref_depth: int | None) -> float | None:
    """Median over repeats of (ours / reference) where both ran in the same repeat, side by side."""
    ratios = []
    for rep in sorted({r["repeat"] for r in runs}):
        ours = median(runs, key, row_bytes=rb, backend=backend, depth=depth, repeat=rep)
        base = median(runs, ref_key, row_bytes=rb, backend=ref, depth=ref_depth, repeat=rep)
        if ours is not None and base:
            ratios.append(ours / base)
    return statistics.median(ratios) if ratios else None


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for rb in sorted({r["row_bytes"] for r in runs}):
        memmap = median(runs, "rows_per_s", row_bytes=rb, backend="memmap")
        keys = sorted({(r["backend"], r["depth"]) for r in runs
                       if r["row_bytes"] == rb and r["backend"] not in ("fio", "memmap")})
        for backend, depth in keys:
            ours = {k: median(runs, k, row_bytes=rb, backend=backend, depth=depth)
                    for k in ("rows_per_s", "iops", "mb_per_s", "in_flight_mean", "cpu_us_per_row",
                              "user_us_per_row", "sys_us_per_io", "bytes_per_read", "copies_per_row",
                              "foreign_cpu_cores", "foreign_iops")}
            fio = {f"fio_{k}": median(runs, k, row_bytes=rb, backend="fio", depth=depth)
                   for k in ("iops", "lat_us", "cpu_us_per_io", "user_us_per_io", "sys_us_per_io",
                             "foreign_cpu_cores", "foreign_iops")}
            rows.append({"row_bytes": rb, "backend": backend, "depth": depth, **ours, **fio,
                         "memmap_rows_per_s": memmap,
                         "iops_vs_fio": paired(runs, rb, backend, depth, "iops", "fio", "iops", depth),
                         "rows_vs_memmap": paired(runs, rb, backend, depth, "rows_per_s", "memmap",
                                                  "rows_per_s", None)})
    return rows


def print_table(summary: list[dict[str, Any]]) -> None:
    def f(v: float | None, fmt: str) -> str:
        return format(v, fmt) if v is not None else "-"

    print(f"{'row B':>6} {'backend':>8} {'depth':>5} {'rows/s':>9} {'IOPS':>9} {'MB/s':>6} "
          f"{'fio IOPS':>9} {'vs fio':>7} {'memmap/s':>9} {'vs mmap':>8} {'in-flt':>6} "
          f"{'us/row':>6} {'fio us':>6} {'usr/row':>7} {'fio usr':>7} {'sys/io':>6} {'fio sys':>7} "
          f"{'oth cpu':>7} {'oth IOPS':>8}")
    for r in summary:
        print(f"{r['row_bytes']:>6} {r['backend']:>8} {r['depth']:>5} "
              f"{f(r['rows_per_s'], ',.0f'):>9} {f(r['iops'], ',.0f'):>9} {f(r['mb_per_s'], '.0f'):>6} "
              f"{f(r['fio_iops'], ',.0f'):>9} {f(r['iops_vs_fio'], '.0%'):>7} "
              f"{f(r['memmap_rows_per_s'], ',.0f'):>9} {f(r['rows_vs_memmap'], '.1f'):>8} "
              f"{f(r['in_flight_mean'], '.1f'):>6} {f(r['cpu_us_per_row'], '.2f'):>6} "
              f"{f(r['fio_cpu_us_per_io'], '.2f'):>6} {f(r['user_us_per_row'], '.2f'):>7} "
              f"{f(r['fio_user_us_per_io'], '.2f'):>7} {f(r['sys_us_per_io'], '.2f'):>6} "
              f"{f(r['fio_sys_us_per_io'], '.2f'):>7} {f(r['foreign_cpu_cores'], '.2f'):>7} "
              f"{f(r['foreign_iops'], ',.0f'):>8}")
    print("us/row: our CPU time per row (user+sys, all threads); fio us: fio's per I/O; "
          "usr/row: our user CPU per row (getrusage); sys/io: our kernel CPU per read; fio usr / "
          "fio sys: fio's per I/O; "
          "oth cpu / oth IOPS: median CPU cores and disk reads/s used by other processes during "
          "our runs (the machine is shared)")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(args.dir) if args.dir else Path.cwd() / f".bench_extract-{os.getpid()}"
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    try:
        for rb in (int(x) for x in args.row_bytes.split(",")):
            ds = ensure_dataset(root / f"rows{rb}", rb, args.size_gb)
            runs += measure_row_size(ds, rb, args)
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    summary = summarize(runs)
    print_table(summary)
    if args.json:
        meta = {"python": sys.version.split()[0], "platform": platform.platform(),
                "cpus": os.cpu_count(), "args": vars(args), "io_uring": detect_io_uring()}
        doc = {"meta": meta, "summary": summary, "runs": runs}
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
