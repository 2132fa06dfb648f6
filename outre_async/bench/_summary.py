"""From the run records to per-system figures: medians and spread, speedup, the limit, efficiency.

* epoch time: median, mean, standard deviation, min and max over the repeats that finished;
* stage busy times, rows, bytes, peak memory, loss and accuracy: medians over those repeats;
* speedup over the baseline (the first of ``pyg-mmap``, ``pyg-mmap-random``, ``sync`` that ran): the median of per-repeat
  ratios, each taken between runs of the same repeat (side by side, same background load);
* the limit: ``max(compute-only, sampling-only, io-bound)``, with io-bound = unique rows of the epoch
  ÷ the probe's random reads per second (each unique row must be read once after the eviction);
* efficiency = limit ÷ the system's median epoch time;
* same batches: each partition system's training step against ``compute-only-part`` (compute-only on
  that system's own batches): the median of per-repeat ratios of ``train_seconds``, with both runs'
  batches and rows trained, so a reader sees they are the same batches.
"""

from __future__ import annotations

import statistics
from typing import Any

from .child import COMPUTE_ONLY, COMPUTE_ONLY_PART, LIMIT_RUNS

BASELINES = ("pyg-mmap", "pyg-mmap-random", "sync")
_MEDIAN_KEYS = ("sample_seconds", "extract_seconds", "train_seconds", "stall_seconds", "batches", "rows_requested",
                "rows_unique", "rows_from_cache", "rows_from_disk", "read_bytes_proc", "read_bytes_diskstats",
                "peak_rss_bytes", "cgroup_peak_bytes", "redundancy", "loss", "train_accuracy", "val_accuracy",
                "setup_seconds", "planned_batches", "user_cpu_seconds", "sys_cpu_seconds")


def summarize(runs: list[dict[str, Any]], probe: dict[str, Any], systems: list[str],
              partitioned: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """``partitioned``: the systems among ``systems`` that train partition batches (``System.partitioned``)."""
    names = systems + [name for name in LIMIT_RUNS if any(r["system"] == name for r in runs)]
    per = {name: _system(name, [r for r in runs if r["system"] == name]) for name in names}
    limit = _limit(per.get(COMPUTE_ONLY), probe)
    baseline = next((b for b in BASELINES if per.get(b, {}).get("ok_runs")), None)
    for name, s in per.items():
        s["speedup_vs_baseline"] = _speedup(runs, baseline, name) if baseline and name not in LIMIT_RUNS else None
        med = s.get("epoch_seconds", {}).get("median") if s["ok_runs"] else None
        s["efficiency"] = (limit["limit_seconds"] / med) if (limit and med and name not in LIMIT_RUNS) else None
    same = {name: _same_batches(runs, per, name) for name in partitioned if name in per}
    return {"baseline": baseline, "limit": limit, "systems": per, "same_batches": same}


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


def _same_batches(runs: list[dict[str, Any]], per: dict[str, Any], name: str) -> dict[str, Any]:
    """``name``'s training step against compute-only on the same batches (``compute-only-part``)."""
    ratios = []
    for repeat in sorted({r["repeat"] for r in runs}):
        pair = {r["system"]: r for r in runs if r["repeat"] == repeat and r["outcome"] == "ok"}
        if name in pair and COMPUTE_ONLY_PART in pair:
            reference = pair[COMPUTE_ONLY_PART]["metrics"]["train_seconds"]
            ratios.append(pair[name]["metrics"]["train_seconds"] / reference if reference > 0 else float("inf"))
    s, ref = per[name], per.get(COMPUTE_ONLY_PART, {})
    keys = ("train_seconds", "batches", "rows_requested")
    out: dict[str, Any] = {"train_vs_compute_only": statistics.median(ratios) if ratios else None}
    out.update({key: s.get(key) for key in keys})
    out.update({f"compute_only_{key}": ref.get(key) for key in keys})
    out["same_batches"] = (bool(ratios) and s.get("batches") == ref.get("batches")
                           and s.get("rows_requested") == ref.get("rows_requested"))
    return out


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
