"""Each outre run against the disk's limit for the reads it issued (the goal: an epoch close to it),
from the probe taken beside the run (``_beside_probe``: the device at the run's read size and depth,
seconds after its epoch), else from the device's probe grid when one is cached (``outre probe``;
``--disk-grid`` measures it if absent and also gives it to the loaders).  Read-only here: every run is
judged the same way whether or not its loader read with the grid.

The limit is :func:`outre_async.loader._epoch_io.disk_limit_seconds`: reads times the probe's time per
read at their mean size (interpolated between its sizes, at the run's reads in flight), or bytes over
its bandwidth, whichever is more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..features._disk_probe import DiskProbe, read_cached
from ..loader._epoch_io import disk_limit_seconds, known_rate
from ._beside_probe import beside_probe, run_reads

BESIDE, GRID = "probe beside the run", "cached grid"  # where a run's limit came from (``disk_limit["source"]``)


def cached_grid(features: Path, cache_dir: Path) -> DiskProbe | None:
    """The cached grid of ``features``' device (O_DIRECT's, else the buffered one), or None."""
    return read_cached(features, cache_dir) or read_cached(features, cache_dir, direct=False)


def annotate(runs: list[dict[str, Any]], grid: DiskProbe | None, stride: int) -> dict[str, Any] | None:
    """Add ``extra["disk_limit"]`` = {seconds, vs_limit, ios, bytes, bytes_per_io, depth, source} to every
    run whose loader reports its reads (``extra["io"]``), from its own probe (``disk_probe_beside``,
    when trusted) else the grid; return the grid's source (``DiskProbe.source``) for the report, with
    ``untrusted`` (why) when the grid may not judge (then only runs with a probe of their own are).

    A run faster than its own limit is impossible: it is flagged (``beats_limit``, ``vs_limit`` None),
    not reported, since it says the probe is wrong, not that the run is fast."""
    source = grid.source() if grid is not None else None
    why = grid.untrusted() if grid is not None else None
    if source is not None and why is not None:
        source = {**source, "untrusted": why}
    for run in runs:
        _judge(run, beside_probe(run), None if why is not None else grid, stride)
    return source


def _judge(run: dict[str, Any], own: DiskProbe | None, grid: DiskProbe | None, stride: int) -> None:
    reads, epoch = run_reads(run), (run.get("metrics") or {}).get("epoch_seconds")
    probe, where = (own, BESIDE) if own is not None else (grid, GRID)
    if reads is None or not epoch or probe is None:
        return
    ios, nbytes, depth = reads
    rate = known_rate(probe, None, stride, depth)
    limit = disk_limit_seconds(rate, ios, nbytes) if rate is not None else None
    if not limit:
        return
    ratio = float(epoch) / limit
    extra = run["metrics"]["extra"]
    extra["disk_limit"] = {"seconds": round(limit, 3), "vs_limit": round(ratio, 3) if ratio >= 1.0 else None,
                           "ios": ios, "bytes": nbytes, "bytes_per_io": round(nbytes / ios, 1), "depth": depth,
                           "source": where}
    if ratio < 1.0:
        fix = "the probe beside it is wrong" if where == BESIDE else "the grid is wrong (run `outre probe --refresh`)"
        extra["disk_limit"]["beats_limit"] = f"{ratio:.2f} x the limit: faster than the {where} allows, so {fix}"
