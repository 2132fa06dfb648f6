"""The budget split, measured: OUTRE's α sweep beside the joint knapsack, predicted vs measured epoch time.

    python -P benchmarks/bench_alpha_sweep.py --preset igb-like --alphas 0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1 \\
        --max-batches 40 --out results/alpha-sweep.json

For each split (``auto`` = the knapsack, ``outre`` = OUTRE's α grid, then each fixed α = the share
of the cache budget for embeddings, the rest for static feature rows), the harness profiles the
``outre-auto`` loader setup into ``profile/bench-auto-<split>/`` (the costs are measured once and
shared, so only the split differs), then runs the ``outre-auto`` system in a capped child (the
``outre bench`` machinery: page cache evicted, cgroup cap of the preset) and records the measured
epoch time next to the profile's predicted one, the bytes per cache, rows read and accuracy.  The
profiling time of the ``auto`` split is reported in epochs of its own measured run.
``--max-batches N`` runs the first N batches of the plan (the prediction is scaled to the same N).
Nothing here is asserted in CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from outre_async.bench._cache_systems import OutreAuto
from outre_async.bench._presets import get_preset
from outre_async.bench._run_in_child import run_in_child
from outre_async.bench._runner import ensure_dataset
from outre_async.bench._systems import RunSpec
from outre_async.loader import profile
from outre_async.plan import MissCosts
from outre_async.store._dataset import open_dataset


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="igb-like")
    p.add_argument("--alphas", default="0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1")
    p.add_argument("--splits", default="auto,outre", help="named splits run before the alphas")
    p.add_argument("--max-batches", type=int, default=0, help="0: full epochs")
    p.add_argument("--profile-batches", type=int, default=0, help="batches pre-sampled (0: one epoch)")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--completion-order", action="store_true",
                   help="with --max-batches: the first N batches to complete of a full epoch (ordered mode's "
                        "reorder buffer does not fit igb-like's budget); the default is the plan's first N")
    p.add_argument("--baselines", default="", help="systems run after the sweep with the same spec, e.g. pyg-mmap-random")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--data-dir", type=Path, default=Path.home() / ".cache" / "outre-async" / "bench")
    p.add_argument("--out", type=Path, default=Path("results/alpha-sweep.json"))
    args = p.parse_args()
    preset = get_preset(args.preset)
    path = ensure_dataset(preset, args.data_dir, 0, print)
    ds = open_dataset(path)
    base = RunSpec(dataset=str(path), fanouts=preset.fanouts, batch_size=preset.batch_size, hidden=preset.hidden,
                   lr=preset.lr, seed=0, max_batches=args.max_batches,
                   options={**preset.system_options["outre-auto"],
                            **({"ordered": False} if args.completion_order else {})})
    system = OutreAuto()
    print("partitions:", _partition(system, str(path), base))
    splits: list[str | float] = [s for s in args.splits.split(",") if s] + [float(a) for a in args.alphas.split(",") if a]
    costs: MissCosts | None = None
    rows = []
    for split in splits:
        spec = replace(base, options={**base.options, "cache_split": split})
        start = time.perf_counter()
        meta = profile(ds, name=system._profile_name(spec), cache_split=split, costs=costs,
                       max_batches=args.profile_batches or None, **system._options(spec))
        seconds = time.perf_counter() - start
        if costs is None:
            c = meta["costs"]
            costs = MissCosts(**{f.name: c[f.name] for f in fields(MissCosts) if f.name in c})
        runs = [run_in_child("outre-auto", spec, cap_bytes=preset.cap_bytes, timeout_s=args.timeout, dataset_dir=path)
                for _ in range(args.repeats)]
        rows.append(_row(split, meta, seconds, runs, args.max_batches))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "runs"}), flush=True)
    baselines = {}
    for name in [b for b in args.baselines.split(",") if b]:
        runs = [run_in_child(name, replace(base, options=preset.system_options.get(name, {})), cap_bytes=preset.cap_bytes,
                             timeout_s=args.timeout, dataset_dir=path) for _ in range(args.repeats)]
        ok = [r["metrics"] for r in runs if r.get("outcome") == "ok"]
        baselines[name] = {"outcomes": [r.get("outcome") for r in runs],
                           "measured_seconds": statistics.median(m["epoch_seconds"] for m in ok) if ok else None,
                           "batches": ok[0]["batches"] if ok else None,
                           "val_accuracy": ok[0]["val_accuracy"] if ok else None,
                           "read_bytes": ok[0]["read_bytes_proc"] if ok else None,
                           "messages": [r.get("message") for r in runs]}
        print(name, json.dumps(baselines[name]), flush=True)
    out = {"preset": preset.name, "baselines": baselines, "max_batches": args.max_batches, "profile_batches": args.profile_batches,
           "cap_bytes": preset.cap_bytes, "costs": costs.to_json() if costs else None, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, default=float))
    out["summary"] = _summary(rows)
    args.out.write_text(json.dumps(out, indent=2, default=float))
    print(_table(rows))
    print(json.dumps(out["summary"]))
    _plot(rows, args.out.with_suffix(".png"))
    print("wrote", args.out)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The goal's figures: auto and OUTRE's grid against the best measured fixed alpha, and how well the
    prediction orders the splits (Spearman's rank correlation, predicted vs measured)."""
    done = [r for r in rows if r["measured_seconds"] is not None]
    fixed = [r for r in done if isinstance(r["split"], float)]
    if not fixed:
        return {}
    best = min(fixed, key=lambda r: r["measured_seconds"])
    named = {r["split"]: r["measured_seconds"] for r in done if isinstance(r["split"], str)}
    out: dict[str, Any] = {"best_alpha": best["split"], "best_seconds": best["measured_seconds"]}
    for name, sec in named.items():
        out[f"{name}_over_best"] = sec / best["measured_seconds"]
    if len(done) >= 3:
        out["spearman_predicted_vs_measured"] = _spearman([r["predicted_seconds"] for r in done],
                                                          [r["measured_seconds"] for r in done])
        out["measured_over_predicted_median"] = statistics.median(r["measured_seconds"] / r["predicted_seconds"]
                                                                  for r in done if r["predicted_seconds"] > 0)
    return out


def _spearman(a: list[float], b: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for rank, i in enumerate(order):
            r[i] = float(rank)
        return r

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True)) / (n * (n * n - 1))


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped (pip install matplotlib)")
        return
    fixed = sorted((r for r in rows if isinstance(r["split"], float) and r["measured_seconds"]), key=lambda r: r["split"])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["split"] for r in fixed], [r["measured_seconds"] for r in fixed], "o-", label="measured")
    ax.plot([r["split"] for r in fixed], [r["predicted_seconds"] for r in fixed], "s--", label="predicted")
    for r in rows:
        if isinstance(r["split"], str) and r["measured_seconds"]:
            alpha = r["alpha"] if r["alpha"] is not None else (r["bytes"]["history"] / max(r["cache_budget"], 1))
            ax.plot([alpha], [r["measured_seconds"]], "*", markersize=12, label=f"{r['split']} (measured)")
    ax.set_xlabel("alpha: share of the cache budget for embeddings")
    ax.set_ylabel("epoch seconds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("plot", path)


def _partition(system: OutreAuto, path: str, spec: RunSpec) -> dict[str, Any]:
    from outre_async.bench._systems import OutrePart

    return OutrePart.prepare(system, path, spec)


def _row(split: str | float, meta: dict[str, Any], seconds: float, runs: list[dict[str, Any]],
         max_batches: int) -> dict[str, Any]:
    ok = [r for r in runs if r.get("outcome") == "ok"]
    epoch = statistics.median(r["metrics"]["epoch_seconds"] for r in ok) if ok else None
    batches = meta["counts"]["epoch_batches"]
    share = min(max_batches, batches) / batches if max_batches else 1.0
    first = ok[0]["metrics"] if ok else {}
    return {"split": split, "alpha": meta.get("alpha"), "bytes": meta["memory"]["split"],
            "cache_budget": meta["memory"]["cache_budget"], "profile_seconds": seconds,
            "predicted_seconds": meta["predicted"]["epoch_seconds"] * share,
            "predicted_no_cache_seconds": meta["predicted"]["epoch_seconds_no_cache"] * share,
            "measured_seconds": epoch, "batches": first.get("batches"), "outcomes": [r.get("outcome") for r in runs],
            "train_seconds": first.get("train_seconds"), "rows_from_disk": first.get("rows_from_disk"),
            "read_bytes": first.get("read_bytes_proc"), "val_accuracy": first.get("val_accuracy"),
            "cgroup_peak_bytes": [r.get("cgroup_peak_bytes") for r in runs],
            "runs": [{k: r.get(k) for k in ("outcome", "message", "wall_seconds", "cap")} for r in runs]}


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| split | alpha | features MiB | history MiB | neighbours MiB | predicted s | measured s | read GiB | val acc |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r["bytes"]
        lines.append(f"| {r['split']} | {r['alpha']} | {b['features'] / 2**20:.0f} | {b['history'] / 2**20:.0f} | "
                     f"{b['neighbors'] / 2**20:.0f} | {r['predicted_seconds']:.1f} | "
                     f"{r['measured_seconds'] if r['measured_seconds'] is None else round(r['measured_seconds'], 1)} | "
                     f"{(r['read_bytes'] or 0) / 2**30:.2f} | {r['val_accuracy']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
