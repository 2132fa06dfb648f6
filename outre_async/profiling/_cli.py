"""The ``outre profile`` verb: arguments and the run (``cli`` keeps a thin wrapper).

    outre profile DATASET --fanouts 10,5 --batch-size 512 --memory-budget 1.6GiB
                  [--partitions NAME --parts-per-batch P] [--staleness S --hidden H]
                  [--split auto|outre|ALPHA] [--batches N] [--backend B] [--seed S] [--name N]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import _cli_checks as checks
from .._units import format_bytes

Say = Callable[[str], None]


def add_arguments(p: argparse.ArgumentParser, parse_fanouts: Callable[[str], Any]) -> None:
    p.add_argument("dataset", type=Path)
    p.add_argument("--fanouts", type=parse_fanouts, required=True, help="e.g. 10,5 (the loader's)")
    p.add_argument("--batch-size", type=checks.count(), required=True)
    p.add_argument("--memory-budget", type=checks.byte_size(allocated=False), required=True,
                   help="the loader's whole memory, e.g. 1.6GiB (what the plan splits)")
    p.add_argument("--partitions", help="partitions/<name>/ of the dataset: partition-ordered batches")
    p.add_argument("--parts-per-batch", type=checks.count())
    p.add_argument("--staleness", type=checks.count(), help="history staleness (steps); history slots compete too")
    p.add_argument("--hidden", type=checks.count(), help="width of h^(L-1) (with --staleness)")
    p.add_argument("--split", default="auto", help="auto (joint knapsack), outre (OUTRE's alpha grid) or an alpha")
    p.add_argument("--batches", type=checks.count(), help="batches to pre-sample (default: one epoch)")
    p.add_argument("--backend", default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="default", help="folder under profile/")
    p.add_argument("--probe", action=argparse.BooleanOptionalAction, default=True,
                   help="probe the disk (cached per device, as `outre probe`) and record the reads in flight "
                        "it gives (Little's law) in the profile (off with --backend memory)")
    p.add_argument("--probe-cache-dir", type=Path, help="default: $XDG_CACHE_HOME/outre/probe or ~/.cache/outre/probe")
    p.add_argument("--device", type=checks.device, default="auto",
                   help="the training device the profile is for: auto (CUDA when present), cpu, cuda "
                        "or cuda:N (checked to exist; the loader it profiles copies batches there)")
    p.add_argument("--step-ms", type=checks.finite(nonnegative=True), metavar="MS",
                   help="price the training step as a fixed wait of MS milliseconds, as `outre bench --step-ms` "
                        "runs it, instead of timing the model's step (default: timed)")


def run(args: argparse.Namespace, *, progress: bool, say: Say) -> dict[str, Any]:
    from ..errors import ConfigError
    from ..cache._history_config import history_for
    from ..machine._device import resolve_device
    from ..loader._options import group_knobs
    from ._api import profile

    if (args.staleness is None) != (args.hidden is None):
        raise ConfigError("--staleness and --hidden go together (the history's staleness and row width)")
    history = None if args.staleness is None else history_for(args.staleness, args.hidden)
    split: str | float = args.split
    if split not in ("auto", "outre"):
        try:
            split = float(split)
        except ValueError:
            raise ConfigError(f"--split must be auto, outre or an alpha in [0, 1], got {args.split!r}") from None
    options: dict[str, Any] = {"backend": args.backend, "seed": args.seed,
                               "device": str(resolve_device(args.device, "--device"))}
    if args.partitions is not None:
        options["partitions"] = args.partitions
    if args.parts_per_batch is not None:
        options["parts_per_batch"] = args.parts_per_batch
    if args.probe and args.backend != "memory":
        from ._probe_cli import default_cache_dir, probe_for_loader, target_of

        features, _ = target_of(args.dataset)
        options["disk_probe"] = probe_for_loader(features, args.probe_cache_dir or default_cache_dir(), say)
    meta = profile(args.dataset, fanouts=list(args.fanouts), batch_size=args.batch_size,
                   memory_budget=args.memory_budget, name=args.name, history=history, cache_split=split,
                   max_batches=args.batches, progress=progress,
                   step_seconds=None if args.step_ms is None else args.step_ms / 1e3, **group_knobs(options))
    _summary(meta, say)
    return meta


def _summary(meta: dict[str, Any], say: Say) -> None:
    mem, costs, pred, sec = meta["memory"], meta["costs"], meta["predicted"], meta["seconds"]
    say(f"profile written to {meta['path']} ({meta['counts']['batches']} of {meta['counts']['epoch_batches']} "
        f"batches in {sec['total']:.1f} s)")
    say(f"costs: {costs['row_us']:.2f} us/feature row ({costs['backend']}), {costs['list_us']:.3f} us/list, "
        f"{costs['recompute_us']:.2f} us/row recomputed on {costs.get('device', 'cpu')} ({costs.get('threads', '?')} threads)")
    spread = costs.get("spread") or {}
    if spread:  # IQR / median of each figure's repeated timings: a large one is an unsteady machine
        say("spread (IQR/median): " + ", ".join(f"{k} {v:.0%}" for k, v in spread.items())
            + f", sampling {costs.get('sample_spread', 0.0):.0%}")
    split = ", ".join(f"{k} {format_bytes(v)}" for k, v in mem["split"].items())
    say(f"budget {format_bytes(mem['budget'])}: fixed {format_bytes(mem['fixed'])}, feature buffer "
        f"{format_bytes(mem['feature_buffer'])}, caches {format_bytes(mem['cache_budget'])} -> {split}"
        + (f" (alpha {meta['alpha']})" if meta.get("alpha") is not None else ""))
    say(f"predicted epoch: {pred['epoch_seconds']:.2f} s (no caches: {pred['epoch_seconds_no_cache']:.2f} s): "
        f"compute {pred['compute_seconds']:.2f} s, reads {pred['read_seconds']:.2f} s, "
        f"loader CPU {pred.get('loader_cpu_seconds', 0.0):.2f} s")
    tier = meta.get("gpu_tier")
    if tier and "hit_us" in tier:  # the GPU tier's own measured costs
        say(f"GPU tier: {tier['rows']} rows, {tier['hit_us']:.3f} us/hit, {tier['miss_us']:.3f} us/miss, "
            f"assembly {tier['assembly_seconds']:.2f} s per epoch")
    io = meta.get("io") or {}
    if io.get("max_in_flight"):
        say(f"reads in flight: {io['max_in_flight']} (Little's law on the disk probe, {io['read_bytes']} B reads"
            f"{'' if io['direct'] else ', BUFFERED probe: O_DIRECT refused'})")
