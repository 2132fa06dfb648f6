"""CPU the loader burns besides its work: user and system CPU per epoch of a plain sync ``for`` loop.

    python benchmarks/bench_idle_cpu.py --json idle_cpu.json            # twitch_de-sized graph, 3 epochs
    python benchmarks/bench_idle_cpu.py --epochs 10 --step sage         # as the issue's new user did

What a new user does: a twitch_de-sized graph (9,498 nodes, ~31 in-edges per node, 128-dim float32
features; generated here with the DC-SBM generator, ``--nodes`` / ``--degree`` / ``--dim`` to change),
``OutreLoader(ds, fanouts=[10, 10], batch_size=...)`` with default knobs, and ``for batch in loader``
in the main thread.  The training step is ``--step``: ``none`` (touch the batch only: what is left is
the loader's own CPU), ``sleep`` (``--sleep-ms`` of idle time per batch: a GPU step, during which
the loader should be idle, not spinning), or ``sage`` (a 2-layer PyG GraphSAGE step on the CPU).

Per epoch: wall time, user and system CPU of the whole process (``getrusage(RUSAGE_SELF)``: every
thread), voluntary / involuntary context switches, batches.  Medians over the epochs after the
first (which pays JIT compilation and a cold buffer).  ``--strace`` reruns the same loop under
``strace -c -f`` and keeps its syscall summary (wall time in blocking calls is counted there, so
read it for counts, not CPU).  Nothing here is asserted in CI; compare runs made side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

import outre_async as oa


def _threads() -> dict[str, list[float]]:
    """User and system CPU seconds of every live thread, summed by thread name (``/proc/self/task``)."""
    tick = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}  # the OS keeps only "python" as comm
    out: dict[str, list[float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        # one row per pool ("outre-sampler_0" -> "outre-sampler"); threads Python did not start: "native"
        name = names.get(int(tid), "native (torch, uring)").rstrip("0123456789_-")
        acc = out.setdefault(name, [0.0, 0.0])
        acc[0] += int(fields[11]) / tick
        acc[1] += int(fields[12]) / tick
    return out


def _thread_delta(before: dict[str, list[float]], after: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {name: {"user_s": round(u - before.get(name, [0, 0])[0], 3), "sys_s": round(s - before.get(name, [0, 0])[1], 3)}
            for name, (u, s) in after.items()}


def _usage() -> tuple[float, float, int, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_nvcsw, r.ru_nivcsw


def _step_fn(kind: str, dim: int, num_classes: int, sleep_ms: float) -> Any:
    if kind == "none":
        return lambda batch: float(batch.x[0, 0])
    if kind == "sleep":
        return lambda batch: time.sleep(sleep_ms / 1e3)
    from torch_geometric.nn import GraphSAGE

    model = GraphSAGE(dim, 64, num_layers=2, out_channels=num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def sage(batch: Any) -> float:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        loss = torch.nn.functional.cross_entropy(out, batch.y[: batch.batch_size].long())
        loss.backward()
        opt.step()
        return float(loss.detach())

    return sage


def run_epochs(ds: oa.Dataset, args: argparse.Namespace) -> list[dict[str, Any]]:
    step = _step_fn(args.step, ds.feature_dim, ds.num_classes or 2, args.sleep_ms)
    rows = []
    with oa.OutreLoader(ds, fanouts=args.fanouts, batch_size=args.batch_size, io=oa.IOOptions(backend=args.backend)) as loader:
        for _ in range(args.epochs):
            u0, s0, v0, i0 = _usage()
            th0 = _threads()
            t0 = time.perf_counter()
            batches = 0
            for batch in loader:
                step(batch)
                batches += 1
            wall = time.perf_counter() - t0
            u1, s1, v1, i1 = _usage()
            rows.append({"wall_s": wall, "user_s": u1 - u0, "sys_s": s1 - s0, "vol_csw": v1 - v0,
                         "invol_csw": i1 - i0, "batches": batches, "threads": _thread_delta(th0, _threads())})
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, float]:
    later = rows[1:] or rows
    return {k: statistics.median(r[k] for r in later) for k in later[0] if k != "threads"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, help="an existing store (default: generate a twitch_de-sized one)")
    p.add_argument("--nodes", type=int, default=9_498)
    p.add_argument("--degree", type=float, default=31.0)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--fanouts", type=int, nargs="+", default=[10, 10])
    p.add_argument("--backend", default="auto")
    p.add_argument("--step", choices=["none", "sleep", "sage"], default="none")
    p.add_argument("--sleep-ms", type=float, default=5.0)
    p.add_argument("--strace", action="store_true", help="also run once under strace -c -f")
    p.add_argument("--json", type=Path)
    p.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    tmp = None
    if args.dataset is None:
        tmp = Path(tempfile.mkdtemp(prefix="idle-cpu-"))
        args.dataset = oa.generate(tmp / "ds", "tiny", num_nodes=args.nodes, avg_degree=args.degree,
                                   feature_dim=args.dim, max_degree=min(args.nodes - 1, 2000))
    try:
        rows = run_epochs(oa.open_dataset(args.dataset), args)
        out: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "epochs": rows,
                               "median_after_first": summarize(rows), "torch_threads": torch.get_num_threads()}
        if args.strace and shutil.which("strace") and not args._child:
            out["strace"] = _strace(args)
        text = json.dumps(out, indent=2)
        print(text)
        if args.json:
            args.json.write_text(text)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _strace(args: argparse.Namespace) -> str:
    """The same loop under ``strace -c -f`` (a child process on the same store): syscall counts."""
    argv = [sys.executable, __file__, "--dataset", str(args.dataset), "--epochs", str(args.epochs),
            "--batch-size", str(args.batch_size), "--fanouts", *map(str, args.fanouts), "--backend", args.backend,
            "--step", args.step, "--sleep-ms", str(args.sleep_ms), "--_child"]
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as f:
        subprocess.run(["strace", "-c", "-f", "-o", f.name, *argv], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ})
        return f.read()


if __name__ == "__main__":
    main()
