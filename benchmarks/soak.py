"""Soak under load (issue 34, item 4): many epochs with partitions + history + profile, two training
processes on one disk at once, a third process reading the disk hard.

    python benchmarks/soak.py --epochs 50 --json soak.json
    python benchmarks/soak.py --epochs 5 --nodes 50000 --budget 64MiB   # a quick try

A dataset of ``--nodes`` nodes with ``--dim`` float32 features is generated once (or reused from
``--dir``), partitioned (``--partitions`` FENNEL parts) and profiled (fixed miss costs) at ``--budget``.
Then ``--trainers`` children start at once, each in a cgroup of its own (``outre_async.bench._cgroup``;
the cap set by the child after its warm-up to its baseline + 1.1 x budget + the model's working set,
as in ``bench_memory_budget.py``), each training a GraphSAGE model with the history cache for
``--epochs`` epochs over the io_uring backend, while a hammer process reads a file of its own on the
same disk with O_DIRECT random 4 KiB reads from ``--hammer-threads`` threads.  The page cache of the
feature file is evicted (``posix_fadvise(DONTNEED)``) before the children start.

Per epoch each child records its seconds, its RSS and VmHWM, its open descriptors and its threads, and
checks the rows of every ``--check-every``-th batch against ``np.memmap`` of the features (exact
equality).  Reported per child: OOM kills, epochs done, the RSS and fd slopes after epoch 2 (least
squares, bytes / descriptors per epoch), the epoch time's median and spread (max/min, p90/median over
epochs after the first), rows checked and rows wrong.  Nothing is asserted: this prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_memory_budget as mb  # noqa: E402  (the capped child's warm-up, cap and model allowance)

import outre_async as oa  # noqa: E402
from outre_async._units import parse_bytes  # noqa: E402
from outre_async.bench._cgroup import MemoryCap, open_cap  # noqa: E402
from outre_async.loader._options import group_knobs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", help="dataset directory (reused when present); default: a temporary one in .")
    p.add_argument("--nodes", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--budget", default="128MiB")
    p.add_argument("--partitions", type=int, default=64)
    p.add_argument("--staleness", type=int, default=8)
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--trainers", type=int, default=2)
    p.add_argument("--hammer-threads", type=int, default=4, help="0: no third process reading the disk")
    p.add_argument("--hammer-bytes", default="1GiB", help="size of the hammer's own file")
    p.add_argument("--check-every", type=int, default=7, help="check every k-th batch's rows against the memmap")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--hammer", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# -- a trainer child -------------------------------------------------------------------------------
def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _slope(values: list[float]) -> float | None:
    """Least-squares slope per epoch (None under three points)."""
    if len(values) < 3:
        return None
    x = np.arange(len(values), dtype=float)
    return float(np.polyfit(x, np.asarray(values, dtype=float), 1)[0])


async def _train(ds: oa.Dataset, spec: dict[str, Any], record: list[dict[str, Any]]) -> dict[str, Any]:
    import torch

    opts = mb.loader_options(spec, ds)
    loader = oa.OutreLoader(ds, **group_knobs(dict(memory_budget=spec["budget"], profile=spec["profile"], **opts)))
    model = oa.GraphSAGE(ds.feature_dim, mb.HIDDEN, 2, max(ds.num_classes, 2))
    optim = torch.optim.Adam(model.parameters(), lr=0.01)
    feats = ds.features  # the dataset's own memmap of the file: the reference the rows are checked against
    checked = wrong = 0
    async with loader:
        for epoch in range(spec["epochs"]):
            t = time.perf_counter()
            i = 0
            async for batch in loader:
                if i % spec["check_every"] == 0:
                    ids = batch.n_id.numpy()
                    want = np.asarray(feats[ids], dtype=np.float32)
                    checked += len(ids)
                    wrong += int((batch.x.numpy() != want).any(axis=1).sum())
                out = model(batch.x, batch.edge_index, history=batch.history)[: batch.batch_size]
                loss = torch.nn.functional.cross_entropy(out, batch.y[: batch.batch_size].long())
                optim.zero_grad()
                loss.backward()
                optim.step()
                i += 1
            gc.collect()
            record.append({"epoch": epoch, "seconds": round(time.perf_counter() - t, 3), "batches": i,
                           "rss": mb._status("VmRSS"), "hwm": mb._status("VmHWM"), "fds": _fds(),
                           "threads": threading.active_count(), "loss": round(float(loss), 4)})
            print(json.dumps({"progress": record[-1]}), flush=True)
        stats = loader.stats()
        return {"rows_checked": checked, "rows_wrong": wrong, "plan": stats["memory"],
                "history_on": "history" in stats, "profile": stats.get("profile", {}).get("name")}


def child(spec_json: str) -> None:
    spec = json.loads(spec_json)
    mb.pin_mmap_threshold()
    ds = oa.open_dataset(spec["dataset"])
    int(np.asarray(ds.indices).sum()) + int(np.asarray(ds.indptr).sum())  # topology pages in the baseline
    warm = dict(spec, budget=None, batch=8, seeds=16, partitions=None, history=0, profile=None)
    asyncio.run(mb._epochs(ds, warm, 1))
    allowance = mb._model_allowance(ds, spec)
    gc.collect()
    group = Path(spec["cgroup"]) if spec["cgroup"] else None
    cap = None
    if group is not None:
        v1 = (group / "memory.limit_in_bytes").exists()
        base = mb._read(group / ("memory.usage_in_bytes" if v1 else "memory.current"))
        cap = base + int(mb.CAP_FACTOR * spec["budget"]) + allowance
        (group / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(str(cap))
    record: list[dict[str, Any]] = []
    try:
        out = asyncio.run(_train(ds, spec, record))
    except BaseException as exc:  # a soak reports what ended it, whatever it was
        out = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    print(json.dumps({"result": {**out, "cap": cap, "model_allowance": allowance, "epochs": record}}), flush=True)


# -- the hammer: a third process reading the same disk hard ------------------------------------------
def hammer(spec_json: str) -> None:
    spec = json.loads(spec_json)
    path, size, threads = spec["path"], spec["bytes"], spec["threads"]
    stop = time.monotonic() + spec["seconds"]
    counts = [0] * threads

    def report() -> None:
        while time.monotonic() < stop:
            time.sleep(5)
            print(json.dumps({"hammer_reads": sum(counts), "at": time.monotonic()}), flush=True)

    threading.Thread(target=report, daemon=True).start()
    start = time.monotonic()
    print(json.dumps({"hammer_reads": 0, "at": start}), flush=True)

    def worker(k: int) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        buf = __import__("mmap").mmap(-1, 4096)
        rng = random.Random(k)
        try:
            while time.monotonic() < stop:
                os.preadv(fd, [buf], rng.randrange(size // 4096) * 4096)
                counts[k] += 1
        finally:
            os.close(fd)

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    print(json.dumps({"hammer_reads": sum(counts), "seconds": spec["seconds"]}), flush=True)


# -- the parent ---------------------------------------------------------------------------------------
def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _hammer_file(root: Path, size: int) -> Path:
    path = root / "hammer.bin"
    if not path.exists() or path.stat().st_size != size:
        with open(path, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(size >> 20):
                f.write(chunk)
    return path


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    after = rows[2:]
    secs = [r["seconds"] for r in rows[1:]]
    out: dict[str, Any] = {"epochs_done": len(rows)}
    if after:
        out["rss_slope_bytes_per_epoch"] = _slope([r["rss"] for r in after])
        out["fd_slope_per_epoch"] = _slope([r["fds"] for r in after])
        out["fds"] = sorted({r["fds"] for r in after})
        out["threads"] = sorted({r["threads"] for r in after})
        out["rss_mib_first_last"] = [round(after[0]["rss"] / 2**20, 1), round(after[-1]["rss"] / 2**20, 1)]
        out["hwm_mib"] = round(rows[-1]["hwm"] / 2**20, 1)
    if secs:
        med = statistics.median(secs)
        out["epoch_s_median"] = round(med, 2)
        out["epoch_s_max_over_min"] = round(max(secs) / min(secs), 2)
        out["epoch_s_p90_over_median"] = round(float(np.percentile(secs, 90)) / med, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    if args.hammer:
        hammer(args.hammer)
        return 0
    tmp = None if args.dir else Path(tempfile.mkdtemp(prefix="soak-", dir="."))
    root = Path(args.dir) if args.dir else tmp
    assert root is not None
    root.mkdir(parents=True, exist_ok=True)
    budget = parse_bytes(args.budget)
    try:
        ds = mb.ensure_dataset(argparse.Namespace(nodes=args.nodes, dim=args.dim), root)
        from outre_async.partition import partition

        part = f"soak-{args.partitions}"
        if not (ds.path / "partitions" / part).exists():
            partition(ds, args.partitions, name=part)
        spec: dict[str, Any] = {"dataset": str(ds.path), "backend": "io_uring", "batch": args.batch, "budget": budget,
                                "fanouts": [int(f) for f in args.fanouts.split(",")], "seeds": 0, "ordered": False,
                                "partitions": part, "history": args.staleness, "epochs": args.epochs,
                                "check_every": args.check_every}
        spec["profile"] = mb.make_profile(ds, spec)
        _evict(ds.path / "features.bin")
        procs, caps = [], []
        hammer_proc = None
        if args.hammer_threads:
            hpath = _hammer_file(root, parse_bytes(args.hammer_bytes))
            hammer_proc = subprocess.Popen(
                [sys.executable, __file__, "--hammer", json.dumps({"path": str(hpath), "bytes": hpath.stat().st_size,
                                                                   "threads": args.hammer_threads,
                                                                   "seconds": 60 * 60 * 3})],
                stdout=subprocess.PIPE, text=True)
        t0 = time.perf_counter()
        for _ in range(args.trainers):
            cap = open_cap(mb._OPEN_CAP)
            capped = isinstance(cap, MemoryCap)
            caps.append(cap)
            child_spec = dict(spec, cgroup=str(cap.path) if capped else None)  # type: ignore[union-attr]
            procs.append(subprocess.Popen([sys.executable, __file__, "--child", json.dumps(child_spec)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          preexec_fn=cap.attach if capped else None))  # type: ignore[union-attr]
        results = []
        for proc, cap in zip(procs, caps):
            stdout, stderr = proc.communicate()
            capped = isinstance(cap, MemoryCap)
            row: dict[str, Any] = {"returncode": proc.returncode,  # the cap itself is the child's "cap"
                                   "capped": " ".join(cap.describe().split(" ")[:2]) if capped else cap.describe(),
                                   "oom_kills": cap.oom_kills() if capped else None}  # type: ignore[union-attr]
            if capped:
                cap.remove()  # type: ignore[union-attr]
            found = [json.loads(ln)["result"] for ln in stdout.splitlines() if ln.startswith('{"result"')]
            if found:
                res = found[-1]
                row.update({k: v for k, v in res.items() if k != "epochs"}, **summarize(res["epochs"]))
                row["epoch_seconds"] = [r["seconds"] for r in res["epochs"]]
            else:
                row["stderr_tail"] = stderr[-800:]
            results.append(row)
        wall = time.perf_counter() - t0
        hammer_out = None
        if hammer_proc is not None:
            hammer_proc.terminate()
            lines = [json.loads(ln) for ln in hammer_proc.communicate()[0].splitlines() if ln.startswith("{")]
            if len(lines) >= 2:
                span = lines[-1]["at"] - lines[0]["at"]
                hammer_out = {"reads": lines[-1]["hammer_reads"], "reads_per_s": round(lines[-1]["hammer_reads"] / span)}
        report = {"args": vars(args), "wall_seconds": round(wall, 1), "trainers": results, "hammer": hammer_out}
        print(json.dumps(report, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
