"""``outre bench``'s arguments and handler (registered by ``outre_async.cli``)."""

from __future__ import annotations

import argparse
import math
import shlex
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import _cli_checks as checks
from ..errors import ConfigError
from .._units import format_bytes, parse_bytes
from ._presets import BENCH_PRESETS

DEFAULT_DATA_DIR = Path("~/.cache/outre-async/bench")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true",
                   help="2 repeats of 10 batches per run, 90 s per run at most, a 3 s probe: under 10 minutes")
    p.add_argument("--preset", default="igb-like", choices=list(BENCH_PRESETS), help="dataset + setup")
    p.add_argument("--systems", help="comma-separated systems (default: pyg-mmap,pyg-mmap-random,sync,outre,outre-part,outre-hist; "
                                     "--quick: without pyg-mmap); "
                                     "a plug-in outside the package as module:Class")
    p.add_argument("--repeats", type=checks.count(), help="runs per system (default 3; --quick 2)")
    p.add_argument("--max-batches", type=checks.count(), help="batches per run instead of full epochs (labelled in the results)")
    p.add_argument("--cap", type=_cap, help="memory cap of every child, e.g. 1.5GiB, or 'none' (default: the preset's)")
    p.add_argument("--out", type=Path, default=Path("results"), help="where the JSON/Markdown/PNG go")
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                   help="generated datasets, reused between runs")
    p.add_argument("--timeout", type=checks.finite(positive=True), help="seconds per run before it is killed and recorded as a timeout")
    p.add_argument("--no-compute-only", dest="compute_only", action="store_false",
                   help="skip the compute-only/sampling-only limit runs (and compute-only-part, compute-only on "
                        "the partition systems' own batches, run when one is among --systems)")
    p.add_argument("--probe-seconds", type=checks.finite(positive=True), help="length of the disk probe (default 4; --quick 3)")
    p.add_argument("--probe-beside", type=checks.finite(nonnegative=True), metavar="SECONDS",
                   help="after each outre run, probe the device for SECONDS at that run's mean read size and reads "
                        "in flight, and judge the run's epoch against that limit (default 1; 0: off, the cached grid "
                        "alone)")
    p.add_argument("--seed", type=checks.seed, default=0)
    p.add_argument("--step-ms", type=checks.finite(nonnegative=True), default=0.0, metavar="MS",
                   help="replace the training step by a fixed wait of MS milliseconds (e.g. 8: a GPU's step on "
                        "igb-like), so this machine measures the loader-bound regime a GPU creates (default 0: train)")
    p.add_argument("--device", type=checks.device, default="auto",
                   help="training device: auto (CUDA when present, the default), cpu, cuda or cuda:N; the "
                        "loaders copy their batches there")
    p.add_argument("--disk-grid", action="store_true",
                   help="give the outre systems the device's probe grid (outre probe's, cached per device; measured "
                        "once, ~10 s, untimed): reads in flight and merge holes from it, and each run reports the "
                        "disk's limit for the reads it issued (epoch_io limit_seconds, vs_limit)")
    p.add_argument("--probe-cache-dir", type=Path, help="where --disk-grid's probe is cached "
                   "(default: $XDG_CACHE_HOME/outre/probe or ~/.cache/outre/probe)")
    p.add_argument("--set", dest="set_options", action="append", type=_system_option, default=[],
                   metavar="SYSTEM.KEY=VALUE",
                   help="change one option of one system for this run, e.g. outre-hist.admission=grad or "
                        "outre-hist.staleness=10 (repeatable; the preset's options are the defaults)")


def run_command(args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    from ._runner import SuiteConfig, run_suite

    cap: int | str | None = "default" if args.cap is None else (args.cap or None)  # 0: uncapped
    checks.check_output_dir("--out", args.out)
    checks.check_output_dir("--data-dir", args.data_dir.expanduser())
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip()) if args.systems else None
    if systems is not None:
        if not systems:
            raise ConfigError(f"--systems {args.systems!r} names no system")
        from ._systems import resolve_system

        for name in systems:  # an unknown name is refused now, not after the dataset is generated
            resolve_system(name)
    options: dict[str, Any] = {
        "preset": args.preset, "repeats": args.repeats, "max_batches": args.max_batches, "cap": cap,
        "seed": args.seed, "out_dir": args.out, "data_dir": args.data_dir.expanduser(), "timeout_s": args.timeout,
        "compute_only": args.compute_only, "probe_seconds": args.probe_seconds, "command": _command_line(args),
        "systems": systems, "set_options": _merge_set_options(args.set_options),
        "step_ms": args.step_ms, "device": args.device, "disk_grid": args.disk_grid,
        "probe_cache_dir": args.probe_cache_dir, "beside_seconds": args.probe_beside,
    }
    options = {k: v for k, v in options.items() if v is not None or k == "cap"}
    config = SuiteConfig.quick_of(**options) if args.quick else SuiteConfig(**options)
    # SIGTERM unwinds like Ctrl-C, so the running child is killed and its cgroup removed
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = run_suite(config, say)
    finally:
        signal.signal(signal.SIGTERM, previous)
    say(_summary_text(result))
    return result


def _cap(text: str) -> int:
    """``--cap``: a byte size, or none/uncapped/0 for no cap (returned as 0)."""
    if text.lower() in ("none", "uncapped", "0"):
        return 0
    try:
        return parse_bytes(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or 'none'") from None


def _system_option(text: str) -> tuple[str, str, Any]:
    """``--set SYSTEM.KEY=VALUE``: the value as an int, a float, a bool (true/false) or else the text."""
    target, sep, raw = text.partition("=")
    system, dot, key = target.rpartition(".")
    if not sep or not dot or not system or not key or not raw:
        raise argparse.ArgumentTypeError(f"{text!r} is not SYSTEM.KEY=VALUE (e.g. outre-hist.admission=grad)")
    value: Any = raw
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        for kind in (int, float):
            try:
                value = kind(raw)
                break
            except ValueError:
                continue
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: the value must be a finite number or a word, not {raw!r}")
    return system, key, value


def _merge_set_options(items: list[tuple[str, str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for system, key, value in items:
        out.setdefault(system, {})[key] = value
    return out


def _command_line(args: argparse.Namespace) -> str:
    """The invocation, rebuilt from the parsed options (what to type to run the same suite)."""
    words = ["outre", "bench"] + (["--quick"] if args.quick else []) + ["--preset", args.preset]
    for flag in ("systems", "repeats", "max_batches", "cap", "timeout", "probe_seconds", "probe_beside"):
        value = getattr(args, flag)
        if value is not None:
            words += ["--" + flag.replace("_", "-"), str(value)]
    if args.step_ms:
        words += ["--step-ms", f"{args.step_ms:g}"]
    if args.disk_grid:
        words += ["--disk-grid"]
    if args.device != "auto":
        words += ["--device", args.device]
    words += ["--out", str(args.out), "--seed", str(args.seed)] + ([] if args.compute_only else ["--no-compute-only"])
    for system, key, value in args.set_options:
        words += ["--set", f"{system}.{key}={str(value).lower() if isinstance(value, bool) else value}"]
    return shlex.join(words)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _summary_text(result: dict[str, Any]) -> str:
    from ._report import same_batches_table, table

    files = result["files"]
    png = files["png"].get("path") or f"skipped ({files['png']['skipped']})"
    cap = result["cap"]["applied"]
    same = same_batches_table(result)
    return (f"\n{result['suite']} ({result['mode']}, cap {cap})\n\n{table(result)}\n\n"
            + (f"training step vs compute-only on the same batches:\n{same}\n\n" if same else "")
            + f"wrote {files['json']}\n      {files['md']}\nplot  {png}\n"
            + (f"(requested cap {format_bytes(result['cap']['requested_bytes'])})" if result["cap"]["requested_bytes"] else ""))
