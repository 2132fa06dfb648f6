"""From the run records to per-system figures: medians and spread, speedup, the limit, efficiency.

* epoch time: median, mean, standard deviation, min and max over the repeats that finished;
* stage busy times, rows, bytes, peak memory, loss and accuracy: medians over those repeats;
* speedup over the baseline (the first of ``pyg-mmap``, ``pyg-mmap-random``, ``sync`` that ran): the median of per-repeat
  ratios, each taken between runs of the same repeat (side by side, same background load);
* the limit: ``max(compute-only, sampling-only, io-bound)``, with io-bound = unique rows of the epoch
  ÷ the probe's random reads per second (each unique row must be read once after the eviction);
* efficiency = limit ÷ the system's median epoch time.
"""

from __future__ import annotations

import statistics
from typing import Any

from .child import COMPUTE_ONLY

BASELINES = ("pyg-mmap", "pyg-mmap-random", "sync")
_MEDIAN_KEYS = ("sample_seconds", "extract_seconds", "train_seconds", "stall_seconds", "batches", "rows_requested",
                "rows_unique", "rows_from_cache", "rows_from_disk", "read_bytes_proc", "read_bytes_diskstats",
                "peak_rss_bytes", "cgroup_peak_bytes", "redundancy", "loss", "train_accuracy", "val_accuracy",
                "setup_seconds", "planned_batches", "user_cpu_seconds", "sys_cpu_seconds")


def summarize(runs: list[dict[str, Any]], probe: dict[str, Any], systems: list[str]) -> dict[str, Any]:
    names = systems + ([COMPUTE_ONLY] if any(r["system"] == COMPUTE_ONLY for r in runs) else [])
    per = {name: _system(name, [r for r in runs if r["system"] == name]) for name in names}
    limit = _limit(per.get(COMPUTE_ONLY), probe)
    baseline = next((b for b in BASELINES if per.get(b, {}).get("ok_runs")), None)
    for name, s in per.items():
        s["speedup_vs_baseline"] = _speedup(runs, baseline, name) if baseline and name != COMPUTE_ONLY else None
        med = s.get("epoch_seconds", {}).get("median") if s["ok_runs"] else None
        s["efficiency"] = (limit["limit_seconds"] / med) if (limit and med and name != COMPUTE_ONLY) else None
    return {"baseline": baseline, "limit": limit, "systems": per}


def _system(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r["outcome"] == "ok"]
    out: dict[str, Any] = {"runs": len(runs), "ok_runs": len(ok), "outcome": _outcome(runs)}
    if not ok:
        return out
    times = [r["metrics"]["epoch_seconds"] for r in ok]
    out["epoch_seconds"] = {"median": statistics.median(times), "mean": statistics.fmean(times),
                            "stdev": statistics.stdev(times) if len(times) > 1 else 0.0,
                            "min": min(times), "max": max(times), "values": times}
    for key in _MEDIAN_KEYS:
        values = [(r["metrics"] | r).get(key) for r in ok]
        values = [v for v in values if v is not None]
        out[key] = statistics.median(values) if values else None
    return out


def _outcome(runs: list[dict[str, Any]]) -> str:
    """``ok``, or what went wrong (the first message of each kind), e.g. ``ok 2/3; oom: OOM at 1.5 GiB``."""
    ok = sum(r["outcome"] == "ok" for r in runs)
    if ok == len(runs):
        return "ok"
    seen: dict[str, str] = {}
    for r in runs:
        if r["outcome"] != "ok":
            seen.setdefault(r["outcome"], r.get("message", ""))
    text = "; ".join(f"{k}: {v}" if v else k for k, v in seen.items())
    return f"ok {ok}/{len(runs)}; {text}" if ok else text


def _speedup(runs: list[dict[str, Any]], baseline: str, name: str) -> float | None:
    ratios = []
    for repeat in sorted({r["repeat"] for r in runs}):
        pair = {r["system"]: r for r in runs if r["repeat"] == repeat and r["outcome"] == "ok"}
        if baseline in pair and name in pair:
            ratios.append(pair[baseline]["metrics"]["epoch_seconds"] / pair[name]["metrics"]["epoch_seconds"])
    return statistics.median(ratios) if ratios else None


def _limit(compute: dict[str, Any] | None, probe: dict[str, Any]) -> dict[str, Any] | None:
    if not compute or not compute.get("ok_runs"):
        return None
    iops = probe.get("iops") or 0.0
    rows = int(compute["rows_unique"])
    terms = {"compute_only_seconds": compute["train_seconds"], "sampling_only_seconds": compute["sample_seconds"],
             "io_bound_seconds": rows / iops if iops else None}
    present = {k: v for k, v in terms.items() if v is not None}
    bound = max(present, key=present.__getitem__)
    return {**terms, "rows_that_must_come_from_disk": rows, "random_reads_per_s": iops,
            "limit_seconds": present[bound], "bound_by": bound.removesuffix("_seconds")}
