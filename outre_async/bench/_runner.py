"""The suite: every system on the same dataset and setup, one child each, round-robin over repeats.

Repeats are interleaved (repeat 1: every system, then repeat 2: every system, ...) so that the
systems see the same background load on a shared machine; ratios are taken per repeat and their
median reported.  ``compute-only`` runs in every repeat too, and with the disk probe it gives the
physical limit of the same run (see ``_physical_limit``); with a partition system among the systems
(``System.partitioned``), so does ``compute-only-part``, compute-only on that system's batches.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..machine._device import check_device_name, resolve_device
from ._beside_probe import BESIDE_SECONDS, probe_beside
from ._presets import SYSTEM_OPTION_KEYS, BenchPreset, get_preset
from ._run_in_child import run_in_child
from ._summary import summarize
from ._systems import RunSpec, System, resolve_system
from .child import COMPUTE_ONLY, COMPUTE_ONLY_PART, LIMIT_RUNS

DEFAULT_SYSTEMS = ("pyg-mmap", "pyg-mmap-random", "sync", "outre", "outre-part", "outre-hist")
# --quick leaves out pyg-mmap with the kernel's default read-around: with this machine's read_ahead_kb=8192 a
# batch costs it about a minute (GBs of read-around per batch); `--systems` brings it back
QUICK_SYSTEMS = ("pyg-mmap-random", "sync", "outre", "outre-part", "outre-hist")
SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class SuiteConfig:
    """One ``outre bench`` invocation.  ``cap``: "default" (the preset's), None (uncapped) or bytes."""

    preset: str = "igb-like"
    systems: tuple[str, ...] = DEFAULT_SYSTEMS
    repeats: int = 3
    max_batches: int = 0
    cap: int | str | None = "default"
    seed: int = 0
    out_dir: Path = Path("results")
    data_dir: Path
    timeout_s: float | None = None
    probe_seconds: float = 4.0
    val_nodes: int = 2048
    compute_only: bool = True
    quick: bool = False
    command: str = ""
    set_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # --set: system -> {key: value}
    step_ms: float = 0.0   # --step-ms: > 0 replaces the training step by a wait of this many ms
    device: str = "auto"   # --device: auto, cpu, cuda or cuda:N (resolved once, by the harness)
    disk_grid: bool = False  # --disk-grid: the outre systems read with the device's probe grid (cached)
    probe_cache_dir: Path | None = None  # --probe-cache-dir: where that grid is cached (None: the CLI's default)
    beside_seconds: float = BESIDE_SECONDS  # --probe-beside: the probe after each outre run (_beside_probe; 0: off)

    def __post_init__(self) -> None:
        get_preset(self.preset)
        for system, values in self.set_options.items():
            if system not in self.systems:
                raise ConfigError(f"--set names system {system!r}, which is not among the systems run "
                                  f"({', '.join(self.systems)}); add it to --systems or drop the --set")
            unknown = sorted(set(values) - set(SYSTEM_OPTION_KEYS))
            if unknown:
                raise ConfigError(f"--set {system}.{unknown[0]}: unknown option; choose one of: "
                                  f"{', '.join(SYSTEM_OPTION_KEYS)}")
        if not (self.step_ms >= 0 and self.step_ms < float("inf")):
            raise ConfigError(f"step_ms={self.step_ms!r} must be a finite number of milliseconds >= 0 (0: train)")
        check_device_name(self.device, "--device")
        if not 0.0 <= self.beside_seconds <= 60.0:
            raise ConfigError(f"beside_seconds={self.beside_seconds!r} must be in [0, 60] seconds (0: no probe beside "
                              "each run)")
        if self.repeats < 1:
            raise ConfigError(f"repeats={self.repeats} must be >= 1")
        if self.max_batches < 0:
            raise ConfigError(f"max_batches={self.max_batches} must be >= 0 (0 = full epochs)")
        if not self.systems:
            raise ConfigError("systems must name at least one system")
        if self.cap != "default" and self.cap is not None and (not isinstance(self.cap, int) or self.cap < 1):
            raise ConfigError(f"cap={self.cap!r} must be 'default', None (uncapped) or a byte count")

    @classmethod
    def quick_of(cls, **kwargs: Any) -> SuiteConfig:
        """``--quick``: 2 repeats of the preset's quick batch count, a short probe."""
        preset = get_preset(kwargs.get("preset", "igb-like"))
        defaults = {"repeats": 2, "max_batches": preset.quick_max_batches, "probe_seconds": 3.0, "val_nodes": 1024,
                    "systems": QUICK_SYSTEMS, "timeout_s": 90.0 if preset.name != "tiny" else None}
        return cls(**{**defaults, **{k: v for k, v in kwargs.items() if v is not None}, "quick": True})


def ensure_dataset(preset: BenchPreset, data_dir: Path, seed: int, say: Callable[[str], None]) -> Path:
    """The preset's dataset under ``data_dir`` (generated once, then reused)."""
    from ..ingest._generate import GENERATOR_VERSION, generate

    path = data_dir / f"{preset.dataset}-s{seed}-g{GENERATOR_VERSION}"
    if not (path / "manifest.json").exists():
        say(f"generating {preset.dataset} (seed {seed}) into {path} ...")
        data_dir.mkdir(parents=True, exist_ok=True)
        generate(path, preset.dataset, seed=seed, overwrite=True, **preset.overrides)
    return path


def run_suite(config: SuiteConfig, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the suite; write ``<out>/<suite>-<timestamp>.json`` (+ ``.md``, ``.png``); return the result."""
    from ..store._dataset import open_dataset
    from ._measure import machine_facts
    from ._probe import probe_random_reads
    from ._report import write_outputs
    from ._schema import validate_result

    preset = get_preset(config.preset)
    path = ensure_dataset(preset, config.data_dir, config.seed, say)
    ds = open_dataset(path)
    cap_bytes = preset.cap_bytes if config.cap == "default" else config.cap
    assert not isinstance(cap_bytes, str), "SuiteConfig parses every other cap string"
    device = str(resolve_device(config.device, "--device"))
    spec = RunSpec(dataset=str(path), fanouts=preset.fanouts, batch_size=preset.batch_size, hidden=preset.hidden,
                   lr=preset.lr, seed=config.seed, max_batches=config.max_batches, val_nodes=config.val_nodes,
                   step_ms=config.step_ms, device=device)
    if config.disk_grid:  # measured once per device (untimed), read again by each outre child
        from ..profiling._probe_cli import default_cache_dir, probe_for_loader

        cache_dir = config.probe_cache_dir or default_cache_dir()
        probe_for_loader(ds.features_path, cache_dir, say)
        spec = replace(spec, probe_cache_dir=str(cache_dir))
    started = dt.datetime.now().astimezone()
    machine = machine_facts(path)
    say(f"probing random {ds.row_layout.stride}-byte reads on {ds.features_path.name} for {config.probe_seconds:.0f} s ...")
    probe = probe_random_reads(ds.features_path, ds.row_layout.stride, seconds=config.probe_seconds)
    runs = _run_all(config, spec, cap_bytes, preset, path, say, features=ds.features_path)
    from ..profiling._probe_cli import default_cache_dir
    from ._disk_limit import annotate, cached_grid

    grid_source = annotate(runs, cached_grid(ds.features_path, config.probe_cache_dir or default_cache_dir()),
                           ds.row_layout.stride)
    machine["loadavg_start"] = machine.pop("loadavg")
    machine["loadavg_end"] = [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]
    suite = f"{preset.name}{'-quick' if config.quick else ''}"
    result = {
        "schema_version": SCHEMA_VERSION,
        "suite": suite,
        "command": config.command,
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "mode": f"max-batches {config.max_batches}" if config.max_batches else "full epochs",
        "step_ms": config.step_ms,
        "device": device,
        "preset": {"name": preset.name, "dataset": preset.dataset, "note": preset.note, "fanouts": list(preset.fanouts),
                   "batch_size": preset.batch_size, "hidden": preset.hidden, "lr": preset.lr, "model": "GraphSAGE",
                   "set_options": config.set_options},
        "dataset": _dataset_facts(ds),
        "cap": {"requested_bytes": cap_bytes, "applied": _applied_cap(runs)},
        "repeats": config.repeats,
        "seed": config.seed,
        "machine": machine,
        "disk_probe": probe,
        "disk_grid": grid_source,  # the cached grid the "x limit" table judged by (None: none; "untrusted": why not)
        "runs": runs,
    }
    partitioned = [name for name in config.systems if resolve_system(name).partitioned]
    result["summary"] = summarize(runs, probe, list(config.systems), partitioned=partitioned)
    validate_result(result)
    stamp = started.strftime("%Y%m%d-%H%M%S")
    result["files"] = write_outputs(result, config.out_dir, f"{suite}-{stamp}")
    return result


def _run_all(config: SuiteConfig, spec: RunSpec, cap_bytes: int | None, preset: BenchPreset, path: Path,
             say: Callable[[str], None], *, features: Path) -> list[dict[str, Any]]:
    timeout = config.timeout_s or preset.timeout_s
    plugins = {name: resolve_system(name) for name in config.systems}  # unknown names fail here, early
    skip = {name: p.skip_reason() for name, p in plugins.items()}
    specs = {name: replace(spec, options={**preset.system_options.get(name, {}), **config.set_options.get(name, {})})
             for name in config.systems}
    for name, plugin in plugins.items():
        if not skip[name]:
            try:
                prepared = plugin.prepare(str(path), specs[name])
            except Exception as exc:  # noqa: BLE001 - recorded like a failing run
                skip[name] = f"prepare failed: {type(exc).__name__}: {exc}"
                prepared = {}
            if prepared:
                say(f"prepared {name}: {prepared}")
    limits = limit_runs(plugins, skip, specs, replace(spec, ram_budget=_ram_budget())) if config.compute_only else {}
    for name, (limit_spec, why) in limits.items():
        specs[name], skip[name] = limit_spec, why
    names = list(config.systems) + list(limits)
    runs: list[dict[str, Any]] = []
    for repeat in range(config.repeats):
        for name in names:
            if skip.get(name):
                record = {"system": name, "outcome": "skipped", "message": skip[name], "cap": "not run",
                          "cap_bytes": None, "wall_seconds": 0.0}
            else:
                say(f"[{repeat + 1}/{config.repeats}] {name} ...")
                # compute-only(-part) holds feature windows in RAM, so it runs uncapped
                record = run_in_child(name, specs[name], cap_bytes=None if name in LIMIT_RUNS else cap_bytes,
                                      timeout_s=timeout, dataset_dir=path)
                if config.beside_seconds > 0 and record["outcome"] == "ok":  # untimed: the epoch is over
                    probe_beside(features, record, config.beside_seconds)
            record["repeat"] = repeat
            say(f"    {_one_line(record)}")
            runs.append(record)
    return runs


def limit_runs(plugins: dict[str, System], skip: dict[str, str | None], specs: dict[str, RunSpec],
               base: RunSpec) -> dict[str, tuple[RunSpec, str | None]]:
    """The harness's own runs after the systems, each with why it is skipped (None: it runs):
    ``compute-only``, and ``compute-only-part`` when a partition system is among ``plugins``, on the
    options (partitions, plan) of the first one that prepared them."""
    out: dict[str, tuple[RunSpec, str | None]] = {COMPUTE_ONLY: (base, None)}
    partitioned = [name for name, plugin in plugins.items() if plugin.partitioned]
    if partitioned:
        ready = [name for name in partitioned if not skip.get(name)]
        out[COMPUTE_ONLY_PART] = ((replace(base, options=specs[ready[0]].options), None) if ready else
                                  (base, f"no partition system ran ({partitioned[0]}: {skip[partitioned[0]]})"))
    return out


def _applied_cap(runs: list[dict[str, Any]]) -> str:
    """How the systems' children were capped (compute-only and compute-only-part always run uncapped)."""
    capped = [r["cap"] for r in runs if r["system"] not in LIMIT_RUNS and r["outcome"] != "skipped"]
    return capped[0] if capped else "no system ran"


def _ram_budget() -> int:
    """Feature bytes compute-only may hold at once: a quarter of the available memory, at most 4 GiB."""
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        avail = 4 << 30
    return int(min(avail // 4, 4 << 30))


def _one_line(record: dict[str, Any]) -> str:
    m = record.get("metrics")
    if record["outcome"] != "ok" or not m:
        return f"{record['outcome']}: {record.get('message', '')}"
    gpu = m.get("gpu_utilisation") or {}
    util = f", GPU {gpu['mean_percent']:.0f} %" if "mean_percent" in gpu else ""
    share = f" ({100 * m['step_share']:.0f} % of the epoch{util})" if "step_share" in m else ""
    return (f"ok: epoch {m['epoch_seconds']:.2f} s over {m['batches']} batches, train {m['train_seconds']:.2f} s{share}, "
            f"stall {m['stall_seconds']:.2f} s, read {m['read_bytes_proc'] / 2**20:.0f} MiB, val acc {m['val_accuracy']:.3f}")


def _dataset_facts(ds: Any) -> dict[str, Any]:
    s = ds.summary()
    return {"path": s["path"], "num_nodes": s["num_nodes"], "num_edges": s["num_edges"],
            "feature_dim": s["feature_dim"], "feature_dtype": s["feature_dtype"], "row_stride": ds.row_layout.stride,
            "feature_bytes": ds.row_layout.stride * ds.num_nodes, "total_bytes": s["total_bytes"],
            "splits": s["splits"], "num_classes": s["num_classes"], "generator": s["meta"].get("generator")}
