"""Does the profile predict the epoch?  Profile, then run the epoch it planned, N times (issue 25 item 7).

    nice python -P benchmarks/bench_profile_prediction.py --dataset /tmp/mid --parts 64 --parts-per-batch 4 \\
        --memory-budget 256MiB --repeats 5 --out results/profile-prediction.json

Each repeat profiles the ``outre-auto`` loader setup afresh (``OutreAuto.prepare``: the costs are
measured again, so the spread of the predictions across repeats is part of what is measured), then
runs the epoch it planned through the ``outre bench`` machinery (a child process, the dataset evicted
from the page cache first, the cap given) and prints the predicted epoch beside the measured one, and
each component beside what the epoch measured of it:

* ``sample``: the profile's ``sample_seconds`` vs the loader's ``sample_seconds`` (sampler busy time,
  summed over samplers);
* ``compute``: the profile's ``compute_seconds`` vs the epoch's ``train_seconds`` (the trainer's steps);
* ``reads``: the profile's ``read_seconds`` vs the loader's ``extract_seconds`` (extractor busy time,
  summed over extractors: wall time of the reads in flight, not the disk's own);
* ``stall``: what the trainer waited for batches (the part of the loader the overlap did not hide).

* ``loader_cpu``: the profile's ``loader_cpu_seconds`` vs the epoch's sampling, extraction and I/O
  thread CPU.

``--compare-with REV`` profiles with the code of git revision ``REV`` too (its tree exported to a
temp folder and put first on ``sys.path`` of a child that profiles), each repeat running both
profiles and the epoch each planned, alternately, so that the two predictions meet the same load:
the before and after of a change to the profile, side by side.  The epochs run this checkout's loader.

Profiling and epochs alternate, so a burst of load on the shared machine falls on both alike; the
load average is recorded around every repeat.  The summary is the median ratio predicted / measured
and its range, per variant.  Nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from outre_async.bench._cache_systems import OutreAuto
from outre_async.bench._run_in_child import run_in_child
from outre_async.bench._systems import OutrePart, RunSpec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", type=Path, required=True, help="a dataset folder (`outre generate`)")
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--parts", type=int, default=64)
    p.add_argument("--parts-per-batch", type=int, default=4)
    p.add_argument("--memory-budget", default="256MiB")
    p.add_argument("--staleness", type=int, default=100)
    p.add_argument("--max-batches", type=int, default=0, help="0: full epochs (the prediction is scaled to N)")
    p.add_argument("--step-ms", type=float, default=0.0, help="the training step replaced by a wait (outre bench --step-ms)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cap", default="", help="memory cap of the epoch's child, e.g. 2.5GiB (default: none)")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--compare-with", default="", metavar="REV", help="also profile with this git revision's code")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    from outre_async._units import parse_bytes

    spec = RunSpec(dataset=str(args.dataset), fanouts=tuple(int(f) for f in args.fanouts.split(",")),
                   batch_size=args.batch_size, hidden=args.hidden, lr=0.01, seed=0, max_batches=args.max_batches,
                   step_ms=args.step_ms,
                   options={"parts": args.parts, "parts_per_batch": args.parts_per_batch,
                            "memory_budget": args.memory_budget, "staleness": args.staleness, "warmup": 0})
    OutrePart.prepare(OutreAuto(), str(args.dataset), spec)  # the partitions, once (untimed)
    cap = parse_bytes(args.cap) if args.cap else None
    with tempfile.TemporaryDirectory(prefix="outre-predict-") as tmp:
        variants = {"this": str(Path(__file__).resolve().parents[1])}
        if args.compare_with:
            variants = {args.compare_with: _export(args.compare_with, Path(tmp)), **variants}
        rows = []
        for i in range(args.repeats):
            for name, root in variants.items():
                rows.append({"variant": name, **_repeat(i, root, spec, args, cap)})
                print(json.dumps({"variant": name, **_short(rows[-1])}), flush=True)
    summary = {name: _summary([r for r in rows if r["variant"] == name]) for name in variants}
    print(json.dumps(summary, indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": rows,
                                        "summary": summary}, indent=1))


def _export(rev: str, tmp: Path) -> str:
    """The tree of ``rev`` (the repository this script is in) under ``tmp``; its root."""
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    return str(tmp)


_PROFILE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from outre_async.bench._cache_systems import OutreAuto
from outre_async.bench._systems import RunSpec
spec = json.loads(sys.argv[2])
spec = RunSpec(**{**spec, "fanouts": tuple(spec["fanouts"])})
print("PROFILE " + OutreAuto().prepare(spec.dataset, spec)["profile"])
"""


def _profile(root: str, spec: RunSpec) -> Path:
    """Profile ``spec`` with the code under ``root`` in a child (``OutreAuto.prepare``); the profile's folder."""
    from dataclasses import asdict

    done = subprocess.run([sys.executable, "-P", "-c", _PROFILE, root, json.dumps(asdict(spec))],
                          capture_output=True, text=True, check=True)
    line = [x for x in done.stdout.splitlines() if x.startswith("PROFILE ")][-1]
    return Path(line.removeprefix("PROFILE "))


def _repeat(i: int, root: str, spec: RunSpec, args: argparse.Namespace, cap: int | None) -> dict[str, Any]:
    load0 = os.getloadavg()[0]
    start = time.perf_counter()
    folder = _profile(root, spec)
    profile_s = time.perf_counter() - start
    meta = json.loads((folder / "meta.json").read_text())
    run = run_in_child("outre-auto", spec, cap_bytes=cap, timeout_s=args.timeout, dataset_dir=args.dataset)
    if run.get("outcome") != "ok":
        raise SystemExit(f"repeat {i}: {run.get('outcome')}: {run.get('message')}")
    m = run["metrics"]
    batches = meta["counts"]["epoch_batches"]
    share = min(args.max_batches, batches) / batches if args.max_batches else 1.0
    pred = {k: v * share for k, v in meta["predicted"].items() if k.endswith("seconds")}
    measured = {"epoch": m["epoch_seconds"], "compute": m["train_seconds"], "stall": m["stall_seconds"],
                "sample": m["sample_seconds"], "reads": m["extract_seconds"]}
    return {"repeat": i, "load_before": load0, "load_after": os.getloadavg()[0], "profile_seconds": profile_s,
            "costs": meta["costs"], "predicted": pred, "measured": measured,
            "ratio": pred["epoch_seconds"] / m["epoch_seconds"],
            "model_check": _model_check(pred, meta, m),
            "components": {"sample": _ratio(pred["sample_seconds"], m["sample_seconds"]),
                           "compute": _ratio(pred["compute_seconds"], m["train_seconds"]),
                           "reads": _ratio(pred["read_seconds"], m["extract_seconds"]),
                           "loader_cpu": _ratio(pred.get("loader_cpu_seconds", 0.0), _loader_cpu(m))},
            "rows_from_disk": m.get("rows_from_disk"), "rows_requested": m["rows_requested"], "batches": m["batches"],
            "cpu_seconds": {**(m.get("extra", {}).get("cpu_seconds") or {}), "process_user": m["user_cpu_seconds"],
                            "process_sys": m["sys_cpu_seconds"]},
            "plan": meta["plan"], "gpu_tier": meta.get("gpu_tier")}


def _model_check(pred: dict[str, float], meta: dict[str, Any], m: dict[str, Any]) -> float | None:
    """The epoch the profile's formula gives from what the epoch itself measured of compute (its
    steps) and of the loader's CPU, with the profile's reads, over the measured epoch: the model's
    error apart from the costs' (a machine's load moves between the profile and the epoch; this does
    not).  None for a profile without the loader's CPU (before it was modelled)."""
    if "loader_cpu_seconds" not in pred:
        return None
    from outre_async.plan._budget_plan import epoch_seconds

    costs = meta["costs"]
    on_cores = costs.get("device", "cpu").split(":")[0] == "cpu" and not costs.get("step_us")
    got = epoch_seconds(m["train_seconds"], pred["read_seconds"], _loader_cpu(m), on_cores)
    return round(got / m["epoch_seconds"], 3)


def _loader_cpu(m: dict[str, Any]) -> float:
    cpu = m.get("extra", {}).get("cpu_seconds") or {}
    return sum(float(v) for v in cpu.values() if v is not None)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b > 0 else None


def _short(row: dict[str, Any]) -> dict[str, Any]:
    return {"repeat": row["repeat"], "predicted_s": round(row["predicted"]["epoch_seconds"], 2),
            "measured_s": round(row["measured"]["epoch"], 2), "ratio": round(row["ratio"], 3),
            "components_pred_over_measured": row["components"],
            "measured": {k: round(v, 2) for k, v in row["measured"].items()},
            "predicted": {k: round(row["predicted"][k], 2) for k in ("sample_seconds", "compute_seconds",
                                                                     "read_seconds")},
            "costs": {k: round(row["costs"][k], 3) for k in ("row_us", "list_us", "recompute_us")},
            "model_check": row["model_check"], "measured_us_per_row": round(row["measured"]["compute"] * 1e6 /
                                                                          max(row["rows_requested"], 1), 2),
            "load": [round(row["load_before"], 2), round(row["load_after"], 2)]}


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["ratio"] for r in rows]
    checks = [r["model_check"] for r in rows if r["model_check"] is not None]
    return {"ratios": [round(r, 3) for r in ratios], "median_ratio": round(statistics.median(ratios), 3),
            "model_checks": checks,
            "max_over_min": round(max(ratios) / min(ratios), 3),
            "predicted_s": [round(r["predicted"]["epoch_seconds"], 2) for r in rows],
            "measured_s": [round(r["measured"]["epoch"], 2) for r in rows],
            "load": [[round(r["load_before"], 2), round(r["load_after"], 2)] for r in rows]}


if __name__ == "__main__":
    main()
