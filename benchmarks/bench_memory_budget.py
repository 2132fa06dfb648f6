"""Does ``memory_budget`` hold?  Two epochs under a cgroup cap of warm baseline + 1.1 x budget.

    python benchmarks/bench_memory_budget.py                       # 200k nodes, batch 256 and 1024
    python benchmarks/bench_memory_budget.py --budgets 256MiB,1GiB --backends io_uring --json mem.json
    python benchmarks/bench_memory_budget.py --partitions 64 --history 8 --profile   # issue 27: all three on

A dataset of ``--nodes`` nodes with ``--dim`` float32 features is generated once (or reused from
``--dir``).  Every (backend, batch size, budget) runs in a fresh child process inside its own cgroup
(``outre_async.bench._cgroup``; cgroup v1 ``memory.limit_in_bytes`` or v2 ``memory.max``).  The
child warms up first (imports, numba kernels, one tiny loader, every page of ``indptr`` and
``indices``), takes the group's usage as its *baseline*, sets the cap to baseline + 1.1 x budget,
resets the peaks, then runs two epochs over ``--seeds`` random training nodes with
``OutreLoader(memory_budget=budget)`` (with ``--history``, a GraphSAGE model pulls and pushes through
the cache; its own working set, measured by forwards over a worst-case synthetic batch through the
history hook, is added to the cap and reported as ``model``) and reports: the group's peak over the baseline (anonymous
memory plus page cache charged to it), the process's peak RSS over its warm RSS, and the loader's
own plan (``stats()["memory"]``).  A child killed by the cap counts as an OOM kill.  Budgets below
the loader's floor are reported with the ConfigError (and its minimum) instead of a run.

The allocator (``--malloc``).  glibc raises its mmap threshold to the size of the largest mapped block
freed (up to 32 MiB) and then keeps up to twice that much free heap untrimmed.  Once the model's
forward (``--history``) has freed its MiB-sized temporaries, they and the loader's per-batch arrays
come from the heap instead, and the heap's free part grows over an epoch while the bytes in use stay
flat (``mallinfo2``, 48 MiB budget: free 15 -> 25 MiB, in use 164 MiB throughout; ``malloc_trim`` at
the end gave all of it back; the model alone or the loader alone does not grow so): with
``--partitions 64 --profile --history 8`` at 32 MiB, 4 of 14 runs reached the cap that way (2 of 10
killed, 2 of 4 stopped with the group's OOM killer off: its memory all anonymous, no page cache left,
the process's heap 163 MiB), none of 10 at 48 MiB.  So by default the child
holds the threshold at glibc's own default of 128 KiB (``mallopt``, as ``MALLOC_MMAP_THRESHOLD_=131072``
does; ``malloc: "pinned"`` in the results): the cap then checks what the loader and the model hold,
not what the allocator keeps for later.  ``--malloc glibc`` leaves the threshold dynamic.  A
training process under a hard cap can pin it the same way.

Needs root and a cgroup memory controller; otherwise runs uncapped and says so.  Nothing here is
asserted in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import outre_async as oa
from outre_async._units import format_bytes, parse_bytes
from outre_async.bench._cgroup import MemoryCap, open_cap
from outre_async.machine._allocator import pin_mmap_threshold, trim_heap
from outre_async.loader._options import group_knobs

CAP_FACTOR = 1.1
_OPEN_CAP = 64 << 30  # the group's limit until the child sets its own


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", help="dataset directory (reused when present); default: a temporary one")
    p.add_argument("--nodes", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--seeds", type=int, default=20_000, help="training nodes per epoch")
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batches", default="256,1024", help="batch sizes")
    p.add_argument("--budgets", default="128MiB,256MiB,512MiB,1GiB")
    p.add_argument("--backends", default="io_uring,pread")
    p.add_argument("--repeats", type=int, default=1, help="runs per setting; medians reported")
    p.add_argument("--ordered", action="store_true", help="plan order (ordered=True: the reorder buffer's part)")
    p.add_argument("--partitions", type=int, default=0,
                   help="K > 0: partition-mode batches from K FENNEL partitions (split 'train'), made once")
    p.add_argument("--history", type=int, default=0, help="staleness > 1: the history cache on, a GraphSAGE model "
                                                          "pulling and pushing through it")
    p.add_argument("--profile", action="store_true",
                   help="profile each setting first (fixed miss costs) and let its plan split the budget")
    p.add_argument("--malloc", choices=("pinned", "glibc"), default="pinned",
                   help="pinned: glibc's mmap threshold held at its 128 KiB default in the child (module "
                        "docstring); glibc: its dynamic threshold")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# -- the child: one capped run -------------------------------------------------------------------
def _read(path: Path) -> int:
    return int(path.read_text().split()[0])


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


HIDDEN = 32  # the history's width (the GraphSAGE model's hidden size) with --history


def loader_options(spec: dict[str, Any], ds: oa.Dataset) -> dict[str, Any]:
    """The loader's options of ``spec`` (what ``--profile`` profiles and the child then runs)."""
    opts: dict[str, Any] = {"fanouts": spec["fanouts"], "batch_size": spec["batch"], "backend": spec["backend"],
                            "ordered": bool(spec.get("ordered"))}
    if spec.get("partitions"):
        opts.update(split="train", partitions=spec["partitions"])
    else:
        opts["split"] = np.random.default_rng(0).choice(ds.num_nodes, min(spec["seeds"], ds.num_nodes), replace=False)
    if spec.get("history"):
        opts["history"] = oa.HistoryConfig(staleness=spec["history"], dim=HIDDEN)
    return opts


async def _epochs(ds: oa.Dataset, spec: dict[str, Any], epochs: int) -> dict[str, Any]:
    import torch

    opts = loader_options(spec, ds)
    if spec.get("profile") and spec["budget"] is not None:
        opts["profile"] = spec["profile"]
    loader = oa.OutreLoader(ds, **group_knobs(dict(memory_budget=spec["budget"], **opts)))
    model = oa.GraphSAGE(ds.feature_dim, HIDDEN, 2, max(ds.num_classes, 2)) if spec.get("history") else None
    batches = 0
    async with loader:
        for _ in range(epochs):
            async for batch in loader:
                batches += 1
                if model is not None:
                    with torch.no_grad():
                        model(batch.x, batch.edge_index, history=batch.history)
                float(batch.x[:1].sum())
        return {"batches": batches, "plan": loader.stats()["memory"]}


def child(spec_json: str) -> None:
    spec = json.loads(spec_json)
    if spec.get("malloc", "pinned") == "pinned" and not pin_mmap_threshold():
        spec["malloc"] = "glibc (mallopt not available)"
    ds = oa.open_dataset(spec["dataset"])
    int(np.asarray(ds.indices).sum()) + int(np.asarray(ds.indptr).sum())  # every topology page, in the baseline
    warm = dict(spec, budget=None, batch=8, seeds=16, partitions=None, history=0, profile=None)
    asyncio.run(_epochs(ds, warm, 1))  # kernels compiled / loaded, ring and threads made once
    allowance = _model_allowance(ds, spec) if spec.get("history") else 0
    gc.collect()
    group = Path(spec["cgroup"]) if spec["cgroup"] else None
    v1 = group is not None and (group / "memory.limit_in_bytes").exists()
    usage = (group / ("memory.usage_in_bytes" if v1 else "memory.current")) if group else None
    base = _read(usage) if usage else 0
    if group is not None:
        cap = base + int(CAP_FACTOR * spec["budget"]) + allowance
        (group / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(str(cap))
        if v1:
            (group / "memory.max_usage_in_bytes").write_text("0")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    rss0 = _status("VmRSS")
    t = time.perf_counter()
    try:
        out = asyncio.run(_epochs(ds, spec, 2))
    except oa.ConfigError as exc:
        print(json.dumps({"config_error": str(exc)}))
        return
    peak = None
    if group is not None:
        peak = _read(group / ("memory.max_usage_in_bytes" if v1 else "memory.peak")) - base
    print(json.dumps({**out, "seconds": round(time.perf_counter() - t, 2), "baseline_bytes": base,
                      "malloc": spec.get("malloc", "pinned"),
                      "model_allowance": allowance,
                      "cgroup_peak_over_baseline": peak, "rss_peak_over_warm": _status("VmHWM") - rss0}))


def _model_allowance(ds: oa.Dataset, spec: dict[str, Any]) -> int:
    """The model's own working set (not the loader's, so not in ``memory_budget``): the GraphSAGE model's
    forward over a synthetic batch of the largest size the fanouts allow, through the history hook as
    the loop runs it (every row but one pushed, one pulled: the hook's two copies of h^(L-1) at their
    largest), RSS peak over RSS before, the largest of ``ALLOWANCE_FORWARDS`` forwards.  Freed heap
    that glibc keeps resident would serve part of a forward without raising RSS (the measure drifted
    12-22 MiB from run to run that way), so it is trimmed first.  It warms torch's kernels too; the
    cap is then baseline + 1.1 x budget + this."""
    import torch

    from outre_async.loader._history_record import HistoryRecord

    fan = [max(f, 1) for f in spec["fanouts"]]
    nodes, edges, frontier = spec["batch"], 0, spec["batch"]
    for f in fan:
        frontier *= f
        nodes, edges = nodes + frontier, edges + frontier
    nodes = min(nodes, ds.num_nodes)
    model = oa.GraphSAGE(ds.feature_dim, HIDDEN, 2, max(ds.num_classes, 2))
    x = torch.randn(nodes, ds.feature_dim)
    edge_index = torch.randint(0, nodes, (2, edges))
    pushes: list[Any] = []
    peak = 0
    for _ in range(ALLOWANCE_FORWARDS):
        record = HistoryRecord(pushes.append, 0, HIDDEN, "all", torch.tensor([nodes - 1]), torch.zeros(1, HIDDEN),
                               torch.arange(nodes - 1), np.arange(nodes - 1))
        trim_heap()
        Path("/proc/self/clear_refs").write_text("5")
        rss0 = _status("VmRSS")
        with torch.no_grad():
            model(x, edge_index, history=record)
        peak = max(peak, _status("VmHWM") - rss0)
        pushes.clear()
    del x, edge_index
    return peak


ALLOWANCE_FORWARDS = 3


# -- the parent ----------------------------------------------------------------------------------
def ensure_dataset(args: argparse.Namespace, root: Path) -> oa.Dataset:
    path = root / f"mem-{args.nodes}-{args.dim}"
    if not (path / "manifest.json").exists():
        oa.generate(path, "tiny", num_nodes=args.nodes, feature_dim=args.dim, avg_degree=10.0, seed=0)
    return oa.open_dataset(path)


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    cap = open_cap(_OPEN_CAP)
    capped = isinstance(cap, MemoryCap)
    spec = dict(spec, cgroup=str(cap.path) if capped else None)  # type: ignore[union-attr]
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                              text=True, preexec_fn=cap.attach if capped else None,  # type: ignore[union-attr]
                              timeout=1800)
        kills = cap.oom_kills() if capped else 0  # type: ignore[union-attr]
    finally:
        if capped:
            cap.remove()  # type: ignore[union-attr]
    row: dict[str, Any] = {"capped": cap.describe().split(" ")[0] if capped else cap.describe(),
                           "returncode": proc.returncode, "oom_kills": kills, "malloc": spec.get("malloc")}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if lines:
        row.update(json.loads(lines[-1]))
    elif proc.returncode:
        row["stderr_tail"] = proc.stderr[-600:]
    return row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    tmp = None if args.dir else Path(tempfile.mkdtemp(prefix="bench-mem-", dir="."))
    root = Path(args.dir) if args.dir else tmp
    assert root is not None
    root.mkdir(parents=True, exist_ok=True)
    try:
        ds = ensure_dataset(args, root)
        part_name = None
        if args.partitions:
            from outre_async.partition import partition

            part_name = f"bench-{args.partitions}"
            if not (ds.path / "partitions" / part_name).exists():
                partition(ds, args.partitions, name=part_name)
        results = []
        for backend in args.backends.split(","):
            for batch in map(int, args.batches.split(",")):
                for budget in (parse_bytes(b) for b in args.budgets.split(",")):
                    spec = {"dataset": str(ds.path), "backend": backend, "batch": batch, "budget": budget,
                            "fanouts": [int(f) for f in args.fanouts.split(",")], "seeds": args.seeds,
                            "ordered": args.ordered, "partitions": part_name, "history": args.history,
                            "malloc": args.malloc}
                    if args.profile:
                        spec["profile"] = make_profile(ds, spec)
                    runs = [run_one(spec) for _ in range(args.repeats)]
                    results.append(summarize(backend, batch, budget, runs))
                    print(json.dumps(results[-1]), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def make_profile(ds: oa.Dataset, spec: dict[str, Any]) -> str:
    """Profile the setting of ``spec`` (fixed miss costs: the bench measures memory, not speed)."""
    from outre_async.plan import MissCosts

    name = f"bench-{spec['backend']}-{spec['batch']}-{spec['budget']}"
    costs = MissCosts(row_us=20.0, list_us=2.0, recompute_us=1.0, backend="fixed")
    oa.profile(ds, memory_budget=spec["budget"], name=name, costs=costs, **group_knobs(dict(**loader_options(spec, ds))))
    return name


def summarize(backend: str, batch: int, budget: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str) -> float | None:
        vals = [r[key] for r in runs if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    allow = runs[0].get("model_allowance") or 0
    out: dict[str, Any] = {"backend": backend, "batch": batch, "budget": format_bytes(budget),
                           "cap": f"baseline + {CAP_FACTOR} x budget" + (f" + model {format_bytes(allow)}" if allow else ""),
                           "runs": len(runs),
                           "finished": sum(r.get("batches", 0) > 0 and r["returncode"] == 0 for r in runs),
                           "oom_kills": sum(r["oom_kills"] for r in runs)}
    if any("config_error" in r for r in runs):
        out["config_error"] = next(r["config_error"] for r in runs if "config_error" in r)
        return out
    cg, rss = med("cgroup_peak_over_baseline"), med("rss_peak_over_warm")
    out.update(cgroup_peak_over_baseline=None if cg is None else format_bytes(int(cg)),
               cgroup_peak_vs_budget=None if cg is None else round(cg / budget, 3),
               rss_peak_over_warm=None if rss is None else format_bytes(int(rss)),
               rss_peak_vs_budget=None if rss is None else round(rss / budget, 3),
               planned=format_bytes(runs[0]["plan"]["planned"]) if "plan" in runs[0] else None,
               seconds=med("seconds"), batches=med("batches"), capped=runs[0]["capped"],
               malloc=runs[0].get("malloc"))
    if "stderr_tail" in runs[0]:
        out["stderr_tail"] = runs[0]["stderr_tail"]
    return out


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
