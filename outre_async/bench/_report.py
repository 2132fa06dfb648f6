"""Writing a suite: the JSON, a Markdown table and PNG plots (matplotlib, the optional ``bench`` extra)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .._units import format_bytes
from .child import COMPUTE_ONLY_PART, LIMIT_RUNS

PLOT_HINT = "matplotlib is not installed; for the plots: pip install 'outre-async[bench]'"


def write_outputs(result: dict[str, Any], out_dir: Path, stem: str) -> dict[str, Any]:
    """Write ``stem``.json, .md and .png under ``out_dir`` (atomically: temp name, then rename)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {}
    plot = write_plot(result, out_dir / f"{stem}.png")
    files["png"] = plot
    files["md"] = str(out_dir / f"{stem}.md")
    files["json"] = str(out_dir / f"{stem}.json")
    result["files"] = files
    _atomic_write(Path(files["md"]), markdown(result))
    _atomic_write(Path(files["json"]), json.dumps(result, indent=2, default=str) + "\n")
    return files


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _f(value: Any, fmt: str = ".2f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return format(value, fmt)


def _mib(value: Any) -> str:
    return "—" if value is None else f"{value / 2**20:,.0f}"


def table(result: dict[str, Any]) -> str:
    summary = result["summary"]
    head = ("| system | outcome | epoch s (median; min–max) | sample s | extract s | train s | step % | stall s "
            "| CPU s user/sys | rows req. | rows unique | from cache | from disk | read MiB /proc | read MiB diskstats "
            "| peak RSS MiB | cgroup peak MiB "
            "| redundancy | loss | val acc | speedup | efficiency |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, s in summary["systems"].items():
        if not s["ok_runs"]:
            lines.append(f"| {name} | {s['outcome']} |" + " — |" * (head.count("|") - 3))
            continue
        e = s["epoch_seconds"]
        cells = [name, s["outcome"], f"{e['median']:.2f}; {e['min']:.2f}–{e['max']:.2f}",
                 _f(s["sample_seconds"]), _f(s["extract_seconds"]), _f(s["train_seconds"]),
                 _f(100 * s["train_seconds"] / e["median"] if s["train_seconds"] is not None and e["median"] else None, ".0f"),
                 _f(s["stall_seconds"]),
                 f'{_f(s.get("user_cpu_seconds"), ".1f")} / {_f(s.get("sys_cpu_seconds"), ".1f")}',
                 _f(s["rows_requested"], ",.0f"), _f(s["rows_unique"], ",.0f"), _f(s["rows_from_cache"], ",.0f"),
                 _f(s["rows_from_disk"], ",.0f"), _mib(s["read_bytes_proc"]), _mib(s["read_bytes_diskstats"]),
                 _mib(s["peak_rss_bytes"]), _mib(s["cgroup_peak_bytes"]), _f(s["redundancy"]), _f(s["loss"], ".3f"),
                 _f(s["val_accuracy"], ".3f"), _f(s["speedup_vs_baseline"]) + ("×" if s["speedup_vs_baseline"] else ""),
                 _f(s["efficiency"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def same_batches_table(result: dict[str, Any]) -> str:
    """Each partition system's training step against compute-only on its own batches ("" when none ran)."""
    same = result["summary"].get("same_batches") or {}
    if not same:
        return ""
    head = (f"| system | train s | {COMPUTE_ONLY_PART} train s | train step vs compute-only, same batches "
            f"| batches (system / {COMPUTE_ONLY_PART}) | rows trained (system / {COMPUTE_ONLY_PART}) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, s in same.items():
        ratio = s["train_vs_compute_only"]
        cells = [name, _f(s["train_seconds"]), _f(s["compute_only_train_seconds"]),
                 "—" if ratio is None else f"{ratio:.3f}× ({(ratio - 1) * 100:+.1f} %)",
                 f'{_f(s["batches"], ",.0f")} / {_f(s["compute_only_batches"], ",.0f")}',
                 f'{_f(s["rows_requested"], ",.0f")} / {_f(s["compute_only_rows_requested"], ",.0f")}'
                 + ("" if s["same_batches"] else " (differ)")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def disk_limit_table(result: dict[str, Any]) -> str:
    """One row per run judged against the disk's limit (``_disk_limit``: the probe beside the run, else a
    cached grid); empty when none was."""
    rows = []
    for run in result["runs"]:
        lim = ((run.get("metrics") or {}).get("extra") or {}).get("disk_limit")
        if not lim:
            continue
        ratio = _f(lim["vs_limit"]) if lim.get("vs_limit") is not None else f"flagged: {lim.get('beats_limit', '?')}"
        rows.append(f"| {run['system']} | {run.get('repeat', '')} | {_f(run['metrics'].get('epoch_seconds'))} | "
                    f"{lim['ios']:,} | {lim['bytes'] / 1e9:,.2f} | {lim['bytes_per_io'] / 1e3:,.1f} | {lim['depth']} | "
                    f"{_f(lim['seconds'])} | {ratio} | {lim.get('source', 'cached grid')} |")
    grid = result.get("disk_grid")
    untrusted = (f"the cached grid ({grid['path']}) is {grid['untrusted']}" if grid and grid.get("untrusted")
                 else None)
    if not rows:
        return f"No run judged against the disk's limit: {untrusted}." if untrusted else ""
    if untrusted:
        source = f"\n\nNo run was judged by the cached grid: {untrusted}."
    else:
        source = "" if not grid else (f"\n\nGrid: {grid['path']} ({grid['file_bytes'] / 2**30:.2f} GiB, "
                                      f"{grid['seconds_per_cell']:g} s a cell, {grid['age_seconds'] / 3600:.1f} h old, "
                                      f"load {grid.get('load_per_core')} per core when measured).")
    return "\n".join(["| system | repeat | epoch s | I/Os | GB | KB per I/O | in flight | disk limit s | × limit | limit from |",
                      "|---|---|---|---|---|---|---|---|---|---|", *rows]) + source


def markdown(result: dict[str, Any]) -> str:
    d, p, m, probe = result["dataset"], result["preset"], result["machine"], result["disk_probe"]
    limit = result["summary"]["limit"]
    out = [
        f"# outre bench: {result['suite']} ({result['started']})", "",
        f"`{result['command']}`", "",
        f"- mode: **{result['mode']}**, {result['repeats']} repeats, interleaved; seed {result['seed']}",
        f"- dataset: {d['num_nodes']:,} nodes, {d['num_edges']:,} edges, {d['feature_dim']}-dim {d['feature_dtype']} "
        f"({format_bytes(d['feature_bytes'])} of features), train seeds {d['splits'].get('train', 0):,}",
        f"- model: {p['model']} hidden {p['hidden']}, fanouts {p['fanouts']}, batch {p['batch_size']}, Adam lr {p['lr']}",
        f"- memory cap: {result['cap']['applied']} (compute-only and compute-only-part run uncapped); page cache evicted before every run",
        f"- machine: {m['cpus']} × {m['cpu_model']}, {format_bytes(m['mem_total_bytes'] or 0)} RAM, kernel {m['kernel']}, "
        f"disk {m['disk_device']}; load average {m['loadavg_start']} → {m['loadavg_end']} (shared machine)",
        f"- disk probe ({probe['tool']}): {probe['iops']:,.0f} random {probe['block_bytes']} B reads/s "
        f"({probe['bytes_per_s'] / 1e6:,.0f} MB/s)",
    ]
    if limit:
        out.append(f"- limit: **{limit['limit_seconds']:.2f} s** ({limit['bound_by']}-bound): compute-only "
                   f"{_f(limit['compute_only_seconds'])} s, sampling-only {_f(limit['sampling_only_seconds'])} s, "
                   f"io-bound {_f(limit['io_bound_seconds'])} s ({limit['rows_that_must_come_from_disk']:,} unique rows)")
    out += [f"- baseline for speedup: {result['summary']['baseline'] or 'none ran'}", "", table(result), "",
            "Stage times are busy seconds summed over a stage's workers; in the async loader they overlap each other "
            "and training, so they do not add up to the epoch.  *stall* is the time the training loop waited for its "
            "next batch.  Rows from cache/disk are the feature buffer's counts (with --max-batches they include the "
            "batches the pipeline had prefetched when the run stopped); `—` where a loader reads through "
            "the page cache and cannot tell (its bytes from /proc are the measure); diskstats counts every process "
            "on the device, /proc only the run's own.  Speedup is the median of "
            "per-repeat ratios; efficiency = limit / median epoch time.", ""]
    disk = disk_limit_table(result)
    if disk:
        out += ["## Epochs against the disk's limit", "",
                "The least time the device needs for the reads and bytes each run issued, from a probe of the "
                "device right after the run (else the device's cached probe grid: `outre probe`; `--disk-grid` "
                "measures it if absent and gives it to the loaders too), at the run's reads in flight: reads × the probe's time per read at their mean size, or bytes over its "
                "bandwidth, whichever is more; the closer an epoch comes to it, the less time the loader adds to what the disk needs.",
                "", disk, ""]
    same = same_batches_table(result)
    if same:
        out += ["## Training step vs compute-only on the same batches", "",
                f"`{COMPUTE_ONLY_PART}` trains the batches of `outre-part` (its partition plan and sampled subgraphs "
                "for epoch 0) with their features already in RAM, uncapped, like `compute-only` (whose random "
                "batches stay the limit's compute term).  The ratio is the median of per-repeat ratios of "
                "`train_seconds`; equal batches and rows show the two trained the same batches (`outre-hist` "
                "prunes its sampling, so its rows differ).", "", same, ""]
    if result["files"].get("png", {}).get("skipped"):
        out.append(f"Plots skipped: {result['files']['png']['skipped']}")
    return "\n".join(out) + "\n"


def write_plot(result: dict[str, Any], path: Path) -> dict[str, Any]:
    try:
        import matplotlib
    except ImportError:
        return {"skipped": PLOT_HINT}
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = {k: v for k, v in result["summary"]["systems"].items() if v["ok_runs"]}
    names = list(systems)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    med = [systems[n]["epoch_seconds"]["median"] for n in names]
    err = [[m - systems[n]["epoch_seconds"]["min"] for n, m in zip(names, med, strict=True)],
           [systems[n]["epoch_seconds"]["max"] - m for n, m in zip(names, med, strict=True)]]
    colors = ["0.6" if n in LIMIT_RUNS else f"C{i}" for i, n in enumerate(names)]
    axes[0].bar(names, med, yerr=err, capsize=4, color=colors)
    limit = result["summary"]["limit"]
    if limit:
        axes[0].axhline(limit["limit_seconds"], ls="--", color="k", label=f"limit ({limit['bound_by']})")
        axes[0].legend()
    axes[0].set_ylabel("epoch seconds" + (f" ({result['mode']})" if "max" in result["mode"] else ""))
    axes[0].set_title("epoch time (median, min–max)")
    stages = ["sample_seconds", "extract_seconds", "train_seconds", "stall_seconds"]
    width = 0.8 / len(stages)
    for j, key in enumerate(stages):
        axes[1].bar([i + j * width for i in range(len(names))], [systems[n][key] or 0 for n in names], width,
                    label=key.removesuffix("_seconds"))
    axes[1].set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names)
    axes[1].set_title("stage busy time (s)")
    axes[1].legend()
    for j, key in enumerate(["read_bytes_proc", "read_bytes_diskstats"]):
        axes[2].bar([i + j * 0.4 for i in range(len(names))], [(systems[n][key] or 0) / 2**30 for n in names], 0.4,
                    label=key.removeprefix("read_bytes_"))
    axes[2].set_xticks([i + 0.2 for i in range(len(names))], names)
    axes[2].set_title("GiB read from the device")
    axes[2].legend()
    for ax in axes:
        ax.tick_params(axis="x", rotation=20)
    fig.suptitle(f"outre bench {result['suite']}: {result['mode']}, cap {result['cap']['applied']}")
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}.png")
    try:
        fig.savefig(tmp, dpi=110)
        tmp.replace(path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return {"path": str(path)}
