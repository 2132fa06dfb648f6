"""``outre bench``: systems side by side on the same graph under a memory cap, against the physical limit.

    from outre_async.bench import SuiteConfig, run_suite
    result = run_suite(SuiteConfig(preset="igb-like", data_dir=Path("~/.cache/outre-async/bench").expanduser()))

Layout (one concern per module):

    _presets         the suites' datasets, model, fanouts, batch size and default memory caps
    _systems         the System plug-in base, the registry and the built-in systems
    _cache_systems   the built-in systems with the historical embedding cache (outre-hist, outre-auto)
    child            one run in its own process: model, timed epoch, I/O counters, evaluation
    _epoch           the instrumented training loop every system goes through
    _physical_limit  compute-only / sampling-only, the limit's terms measured in a child; compute-only-part
    _run_in_child    page-cache eviction, the cgroup, the child process and its outcome
    _cgroup          memory caps (cgroup v1 and v2)
    _measure         /proc/<pid>/io, /proc/diskstats, peak RSS, machine facts
    _probe           the disk's random-read rate (outre probe's io_uring probe at the row's read size)
    _runner          the suite: datasets, interleaved repeats, the result
    _summary         medians, spread, speedups, limit, efficiency
    _schema          the result's shape, validated before writing
    _report          JSON, Markdown table, PNG plots
"""

from __future__ import annotations

from . import _cache_systems  # noqa: F401  (registers outre-hist and outre-auto)
from ._presets import BENCH_PRESETS, BenchPreset
from ._runner import DEFAULT_SYSTEMS, SuiteConfig, run_suite
from ._schema import SchemaError, validate_result
from ._systems import SYSTEMS, RunSpec, System, SystemSkipped, register_system

__all__ = [
    "BENCH_PRESETS",
    "DEFAULT_SYSTEMS",
    "SYSTEMS",
    "BenchPreset",
    "RunSpec",
    "SchemaError",
    "SuiteConfig",
    "System",
    "SystemSkipped",
    "register_system",
    "run_suite",
    "validate_result",
]
